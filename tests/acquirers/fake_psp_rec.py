"""The fake PSP's Pix Automático: recurrences (``rec``), their locations
(``locrec``), push requests (``solicrec``) and cycles (``cobr``), with the
shapes of the API Pix 2.9.0 (requests and answers are validated against it
by :mod:`tests.acquirers.fake_psp` like every other).

A mixin of the fake's handler; the state lives on the :class:`FakePsp`
(``recs``, ``locrecs``, ``solicrecs``, ``cobrs``). What the payer's PSP does
(approve or reject a recurrence, cancel it from the payer's side, schedule,
settle or reject a cycle's attempt) is done by the functions at the end,
which tests call as that PSP would act.

Lifecycle kept here, as the standard describes it: a rec is CRIADA (its
``ativacao.tipoJornada`` AGUARDANDO_DEFINICAO) until the payer answers; a
cobr can only be made for an APROVADA rec, is CRIADA with its first attempt
(AGND, on the due date) SOLICITADA until the payer's PSP schedules it
(ATIVA, AGENDADA); a retry (RIFL) needs the rec's PERMITE_3R_7D, an attempt
that failed and a day not tried yet.
"""

from __future__ import annotations

import datetime as dt
import json
import secrets
import string
from typing import Any

from acquirers import brcode
from tests.acquirers.fake_server import new_e2e_id, now_iso

ERROR_TYPE = "https://pix.bcb.gov.br/api/v2/error/"
PSP_ISPB = "12345678"
PAYER_ISPB = "87654321"
RECEBEDOR = {"cnpj": "56989000019533", "nome": "FAKE PSP RECEBEDOR"}
REC_SCOPES = frozenset(
    {
        "rec.write",
        "rec.read",
        "solicrec.write",
        "solicrec.read",
        "cobr.write",
        "cobr.read",
        "payloadlocationrec.write",
        "payloadlocationrec.read",
    }
)
#: Attempt rejections that end the cobr itself (CobRTentativas' own list).
ENDING_REJECTIONS = frozenset({"AC05", "AM09", "DENC", "DS27", "DTED", "MIDI", "MSUC", "NITX", "RC09"})
_ALNUM = string.ascii_letters + string.digits
_LIVE = frozenset({"CRIADA", "APROVADA"})
_COBR_ENDED = frozenset({"CONCLUIDA", "EXPIRADA", "REJEITADA", "CANCELADA"})


def rec_problem(status: int, kind: str, title: str, detail: str = "", **extra: Any) -> dict[str, Any]:
    body = {"type": ERROR_TYPE + kind, "title": title, "status": status, **extra}
    if detail:
        body["detail"] = detail
    return body


def _not_found(what: str) -> tuple[int, dict[str, Any]]:
    return 404, rec_problem(404, "NaoEncontrado", "Não Encontrado", f"{what} não encontrada.")


def _copy(value: Any) -> Any:
    return json.loads(json.dumps(value))


def _sequence(prefix: str) -> str:
    """``RecId``/``SolicRecId`` shape: prefix (2), ISPB, yyyyMMdd, 11 alphanumerics."""
    return f"{prefix}{PSP_ISPB}{dt.datetime.now(dt.UTC):%Y%m%d}" + "".join(secrets.choice(_ALNUM) for _ in range(11))


def _field(field_id: str, value: str) -> str:
    return f"{field_id}{len(value):02d}{value}"


def rec_code(location: str) -> str:
    """The JORNADA_2 "QR composto" as the standard's ``recResponse3`` shows it: a
    Pix GUI in 26 with nothing else, the recurrence's location in 80."""
    payload = (
        _field("00", "01")
        + _field("26", _field("00", brcode.PIX_GUI))
        + _field("52", "0000")
        + _field("53", "986")
        + _field("58", "BR")
        + _field("59", "FAKE PSP RECEBEDOR")
        + _field("60", "SAO PAULO")
        + _field("62", _field("05", "***"))
        + _field("80", _field("00", brcode.PIX_GUI) + _field("25", location))
        + "6304"
    )
    return payload + brcode.crc16(payload)


def _today() -> str:
    return dt.datetime.now(dt.UTC).date().isoformat()


class RecHandlerMixin:
    """``_locrec_post``, ``_rec_post/get/patch/list``, ``_solicrec_post``,
    ``_cobr_put/get/patch``, ``_cobr_retentativa``."""

    psp: Any  # the FakePsp (typed there)

    def _page(self, request: Any, key: str, records: list[dict[str, Any]]) -> tuple[int, Any]:
        raise NotImplementedError  # the handler's

    # ------------------------------------------------------------------ locrec

    def _locrec_post(self, request: Any, body: Any, fault: Any) -> tuple[int, Any]:
        psp = self.psp
        with psp.lock:
            psp._next_loc += 1
            loc = {
                "id": psp._next_loc,
                "location": f"pix.fakepsp.test/qr/v2/rec/{secrets.token_hex(16)}",
                "criacao": now_iso(),
            }
            psp.locrecs[loc["id"]] = loc
            return 201, _copy(loc)

    # ------------------------------------------------------------------ rec

    def _rec_post(self, request: Any, body: dict[str, Any], fault: Any) -> tuple[int, Any]:
        psp = self.psp
        with psp.lock:
            loc = None
            if "loc" in body:
                loc = psp.locrecs.get(body["loc"])
                if loc is None or "idRec" in loc:
                    return 400, rec_problem(
                        400,
                        "RecOperacaoInvalida",
                        "Operação inválida.",
                        "A location informada não existe ou já está vinculada a outra recorrência.",
                    )
            retries = body["politicaRetentativa"] == "PERMITE_3R_7D"
            id_rec = _sequence("RR" if retries else "RN")
            rec: dict[str, Any] = {
                "idRec": id_rec,
                "vinculo": body["vinculo"],
                "calendario": body["calendario"],
                "politicaRetentativa": body["politicaRetentativa"],
                "recebedor": RECEBEDOR,
                "status": "CRIADA",
                "atualizacao": [{"status": "CRIADA", "data": now_iso()}],
                "ativacao": {"tipoJornada": "AGUARDANDO_DEFINICAO"},
            }
            if "valor" in body:
                rec["valor"] = body["valor"]
            if loc is not None:
                loc["idRec"] = id_rec
                rec["loc"] = loc
            psp.recs[id_rec] = rec
            return 201, _gerada(rec)

    def _rec_get(self, request: Any, body: Any, fault: Any) -> tuple[int, Any]:
        id_rec = request.path.rsplit("/", 1)[1]
        with self.psp.lock:
            rec = self.psp.recs.get(id_rec)
            if rec is None:
                return _not_found("Recorrência")
            answer = _copy(rec)
            if "loc" in rec:
                code = rec_code(rec["loc"]["location"])
                if fault == "invalid_emv":  # Fault.INVALID_EMV: a code whose CRC is broken
                    code = code[:-4] + ("0000" if code[-4:] != "0000" else "FFFF")
                answer["dadosQR"] = {"jornada": "JORNADA_2", "pixCopiaECola": code}
            return 200, answer

    def _rec_patch(self, request: Any, body: dict[str, Any], fault: Any) -> tuple[int, Any]:
        id_rec = request.path.rsplit("/", 1)[1]
        with self.psp.lock:
            rec = self.psp.recs.get(id_rec)
            if rec is None:
                return _not_found("Recorrência")
            if rec["status"] not in _LIVE:
                return 400, rec_problem(
                    400, "RecOperacaoInvalida", "Operação inválida.", f"A recorrência está {rec['status']}."
                )
            if body.get("status") == "CANCELADA":
                _end_rec(rec, "CANCELADA", cancelamento=("USUARIO_RECEBEDOR", "SLCR", "Cancelada pelo recebedor"))
            return 200, _gerada(rec)

    def _rec_list(self, request: Any, body: Any, fault: Any) -> tuple[int, Any]:
        args = request.parameters.query
        start, end = (dt.datetime.fromisoformat(args[k].replace("Z", "+00:00")) for k in ("inicio", "fim"))
        with self.psp.lock:
            found = []
            for rec in self.psp.recs.values():
                created = dt.datetime.fromisoformat(rec["atualizacao"][0]["data"].replace("Z", "+00:00"))
                devedor = rec["vinculo"]["devedor"]
                if not start <= created <= end:
                    continue
                if any(k in args and devedor.get(k) != args[k] for k in ("cpf", "cnpj")):
                    continue
                found.append({k: v for k, v in _copy(rec).items() if k != "dadosQR"})
        status, page = self._page(request, "recs", found)
        page["parametros"].update({k: args[k] for k in ("cpf", "cnpj") if k in args})
        return status, page

    # ------------------------------------------------------------------ solicrec

    def _solicrec_post(self, request: Any, body: dict[str, Any], fault: Any) -> tuple[int, Any]:
        psp = self.psp
        with psp.lock:
            rec = psp.recs.get(body["idRec"])
            if rec is None:
                return _not_found("Recorrência")
            if rec["status"] != "CRIADA":
                return 400, rec_problem(
                    400,
                    "SolicRecOperacaoInvalida",
                    "Operação inválida.",
                    "A recorrência em questão encontra-se aprovada, expirada, cancelada ou rejeitada.",
                )
            payload = {k: rec[k] for k in ("idRec", "vinculo", "calendario", "politicaRetentativa") if k in rec}
            payload |= {"recebedor": RECEBEDOR | {"ispbParticipante": PSP_ISPB}, "atualizacao": rec["atualizacao"]}
            if "valor" in rec:
                payload["valor"] = rec["valor"]
            solic = {
                "idSolicRec": _sequence("SC"),
                "idRec": body["idRec"],
                "calendario": body["calendario"],
                "destinatario": body["destinatario"],
                "status": "CRIADA",
                "atualizacao": [{"status": "CRIADA", "data": now_iso()}],
                "recPayload": _copy(payload),
            }
            psp.solicrecs[solic["idSolicRec"]] = solic
            rec.setdefault("solicitacao", []).append(solic)
            return 201, _copy(solic)

    # ------------------------------------------------------------------ cobr

    def _cobr_put(self, request: Any, body: dict[str, Any], fault: Any) -> tuple[int, Any]:
        psp = self.psp
        txid = request.path.rsplit("/", 1)[1]
        with psp.lock:
            if txid in psp.cobrs:
                return 400, rec_problem(
                    400,
                    "CobROperacaoInvalida",
                    "Operação inválida.",
                    "O txid informado já está em uso.",
                    violacoes=[{"razao": "txid em uso", "propriedade": "cobr.txid"}],
                )
            rec = psp.recs.get(body["idRec"])
            if rec is None:
                return _not_found("Recorrência")
            if rec["status"] != "APROVADA":
                return 400, rec_problem(
                    400,
                    "CobROperacaoInvalida",
                    "Operação inválida.",
                    "A recorrência associada não se encontra aprovada.",
                    violacoes=[{"razao": f"recorrência {rec['status']}", "propriedade": "cobr.idRec"}],
                )
            due = body["calendario"]["dataDeVencimento"]
            cobr: dict[str, Any] = {
                "idRec": body["idRec"],
                "txid": txid,
                "calendario": {"criacao": _today(), "dataDeVencimento": due},
                "valor": body["valor"],
                "ajusteDiaUtil": body["ajusteDiaUtil"],
                "recebedor": RECEBEDOR | body["recebedor"],
                "status": "CRIADA",
                "politicaRetentativa": rec["politicaRetentativa"],
                "atualizacao": [{"status": "CRIADA", "data": now_iso()}],
                "tentativas": [_attempt(due, "AGND")],
            }
            if "infoAdicional" in body:
                cobr["infoAdicional"] = body["infoAdicional"]
            psp.cobrs[txid] = cobr
            return 201, _cobr_view(psp, cobr)

    def _cobr_get(self, request: Any, body: Any, fault: Any) -> tuple[int, Any]:
        txid = request.path.rsplit("/", 1)[1]
        with self.psp.lock:
            cobr = self.psp.cobrs.get(txid)
            if cobr is None:
                return _not_found("Cobrança")
            return 200, _cobr_view(self.psp, cobr)

    def _cobr_patch(self, request: Any, body: dict[str, Any], fault: Any) -> tuple[int, Any]:
        txid = request.path.rsplit("/", 1)[1]
        with self.psp.lock:
            cobr = self.psp.cobrs.get(txid)
            if cobr is None:
                return _not_found("Cobrança")
            if cobr["status"] in _COBR_ENDED:
                return 400, rec_problem(
                    400, "CobROperacaoInvalida", "Operação inválida.", f"A cobrança está {cobr['status']}."
                )
            if body.get("status") == "CANCELADA":
                for attempt in cobr["tentativas"]:
                    if attempt["status"] in ("SOLICITADA", "AGENDADA"):
                        _attempt_status(attempt, "CANCELADA")
                _cobr_status(cobr, "CANCELADA")
                cobr["encerramento"] = {
                    "cancelamento": {
                        "solicitante": "USUARIO_RECEBEDOR",
                        "codigo": "SLCR",
                        "descricao": "Cancelamento de agendamento solicitado pelo usuário recebedor",
                    }
                }
            return 200, _cobr_view(self.psp, cobr)

    def _cobr_retentativa(self, request: Any, body: Any, fault: Any) -> tuple[int, Any]:
        *_, txid, _, data = request.path.split("/")
        with self.psp.lock:
            cobr = self.psp.cobrs.get(txid)
            if cobr is None:
                return _not_found("Cobrança")
            why = ""
            if cobr["politicaRetentativa"] != "PERMITE_3R_7D":
                why = "A política configurada na recorrência não permite retentativa de cobrança."
            elif cobr["status"] != "ATIVA" or cobr["tentativas"][-1]["status"] not in ("REJEITADA", "EXPIRADA"):
                why = "A cobrança não tem tentativa frustrada a repetir."
            elif any(a["dataLiquidacao"] == data for a in cobr["tentativas"]):
                why = "Já houve tentativa de liquidação nesta data."
            if why:
                return 400, rec_problem(400, "CobROperacaoInvalida", "Operação inválida.", why)
            cobr["tentativas"].append(_attempt(data, "RIFL"))
            return 201, _cobr_view(self.psp, cobr)


# --------------------------------------------------------------------------- shapes


def _gerada(rec: dict[str, Any]) -> dict[str, Any]:
    """``RecGerada``: the rec without what only ``GET /rec/{idRec}`` shows."""
    return {k: v for k, v in _copy(rec).items() if k not in ("solicitacao", "pagador", "dadosQR")}


def _cobr_view(psp: Any, cobr: dict[str, Any]) -> dict[str, Any]:
    """The cobr as answered; without ``pix`` when the fake plays a PSP that leaves it out."""
    view = _copy(cobr)
    if not psp.cobr_pix:
        view.pop("pix", None)
    return view


def _attempt(on: str, kind: str) -> dict[str, Any]:
    return {
        "dataLiquidacao": on,
        "tipo": kind,
        "endToEndId": new_e2e_id(PAYER_ISPB),
        "status": "SOLICITADA",
        "atualizacao": [{"status": "SOLICITADA", "data": now_iso()}],
    }


def _attempt_status(attempt: dict[str, Any], status: str) -> None:
    attempt["status"] = status
    attempt["atualizacao"].append({"status": status, "data": now_iso()})


def _cobr_status(cobr: dict[str, Any], status: str) -> None:
    cobr["status"] = status
    cobr["atualizacao"].append({"status": status, "data": now_iso()})


def _end_rec(
    rec: dict[str, Any],
    status: str,
    *,
    cancelamento: tuple[str, str, str] | None = None,
    rejeicao: tuple[str, str] | None = None,
) -> None:
    rec["status"] = status
    rec["atualizacao"].append({"status": status, "data": now_iso()})
    if cancelamento:
        solicitante, codigo, descricao = cancelamento
        rec["encerramento"] = {"cancelamento": {"solicitante": solicitante, "codigo": codigo, "descricao": descricao}}
    if rejeicao:
        rec["encerramento"] = {"rejeicao": {"codigo": rejeicao[0], "descricao": rejeicao[1]}}


# --------------------------------------------------------------------------- the payer's PSP


def approve_rec(psp: Any, id_rec: str, *, journey: str = "JORNADA_2", ispb: str = PAYER_ISPB) -> None:
    """The payer authorised it (scanning the QR, or accepting the push)."""
    with psp.lock:
        rec = psp.recs[id_rec]
        assert rec["status"] == "CRIADA", rec["status"]
        rec["status"] = "APROVADA"
        rec["atualizacao"].append({"status": "APROVADA", "data": now_iso()})
        rec["ativacao"] = {"tipoJornada": journey}
        rec["pagador"] = {**rec["vinculo"]["devedor"], "ispbParticipante": ispb, "codMun": "3550308"}
        del rec["pagador"]["nome"]
        for solic in rec.get("solicitacao", []):
            solic["status"] = "ACEITA"
            solic["atualizacao"].append({"status": "ACEITA", "data": now_iso()})


def reject_rec(psp: Any, id_rec: str, *, code: str = "AP13", text: str = "Rejeitada pelo usuário pagador") -> None:
    with psp.lock:
        rec = psp.recs[id_rec]
        assert rec["status"] == "CRIADA", rec["status"]
        _end_rec(rec, "REJEITADA", rejeicao=(code, text))
        for solic in rec.get("solicitacao", []):
            solic["status"] = "REJEITADA"
            solic["atualizacao"].append({"status": "REJEITADA", "data": now_iso()})


def cancel_rec_by_payer(psp: Any, id_rec: str) -> None:
    """The payer revoked the authorisation in their bank's app."""
    with psp.lock:
        rec = psp.recs[id_rec]
        assert rec["status"] in _LIVE, rec["status"]
        _end_rec(rec, "CANCELADA", cancelamento=("USUARIO_PAGADOR", "SLDB", "Cancelada pelo usuário pagador"))


def schedule_cobr(psp: Any, txid: str) -> None:
    """The payer's PSP took the cycle: ATIVA, its attempt AGENDADA."""
    with psp.lock:
        cobr = psp.cobrs[txid]
        _attempt_status(cobr["tentativas"][-1], "AGENDADA")
        if cobr["status"] == "CRIADA":
            _cobr_status(cobr, "ATIVA")


def pay_cobr(psp: Any, txid: str) -> str:
    """The current attempt settled: PAGA, the cobr CONCLUIDA with its Pix; its e2e id."""
    with psp.lock:
        cobr = psp.cobrs[txid]
        attempt = cobr["tentativas"][-1]
        assert attempt["status"] in ("SOLICITADA", "AGENDADA"), attempt["status"]
        _attempt_status(attempt, "PAGA")
        _cobr_status(cobr, "CONCLUIDA")
        cobr["pix"] = [
            {
                "endToEndId": attempt["endToEndId"],
                "txid": txid,
                "valor": cobr["valor"]["original"],
                "horario": now_iso(),
            }
        ]
        return str(attempt["endToEndId"])


def reject_cobr_attempt(psp: Any, txid: str, *, code: str = "AC06", text: str = "Conta bloqueada") -> None:
    """The current attempt failed with ``code``; the codes that end a cobr end it (REJEITADA)."""
    with psp.lock:
        cobr = psp.cobrs[txid]
        attempt = cobr["tentativas"][-1]
        _attempt_status(attempt, "REJEITADA")
        attempt["rejeicao"] = {"codigo": code, "descricao": text}
        if cobr["status"] == "CRIADA":
            _cobr_status(cobr, "ATIVA")
        if code in ENDING_REJECTIONS:
            _cobr_status(cobr, "REJEITADA")
            cobr["encerramento"] = {"rejeicao": {"codigo": code, "descricao": text}}
