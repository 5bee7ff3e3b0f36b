"""Pix Automático of the API Pix standard (``rec``, ``locrec``, ``solicrec``,
``cobr``) for the ``bacen_pix`` adapter; a mixin so :mod:`.bacen` stays one
screenful, as :mod:`.cobv` is for due-date charges.

Errors as for every API Pix call (:mod:`.problems`): a 4xx is
:class:`AcquirerDeclined` (404 :class:`HttpNotFound`, the not-found every
read raises), 5xx and 429 :class:`AcquirerUnavailable`, timeouts
:class:`AcquirerTimeout`, an unreadable answer :class:`InvalidResponse`.

- **A recurrence is not idempotent at the PSP** (``POST /rec``: the PSP names
  it): a create whose answer is lost is settled by :meth:`find_recurrence`,
  never by a second POST. For the QR journey the location (``POST /locrec``)
  is made *first* and given in the ``POST /rec`` itself (``loc``, as the
  standard's ``recBody1``), not PATCHed in afterwards: the recurrence then
  exists with its location or not at all, so a timeout has one unknown to
  settle, and a refused PATCH can never leave a recurrence behind that the
  caller believes was not created. An orphan location (the POST /rec failed)
  costs nothing: it serves no payload.
- **A cycle (``cobr``) is ours by txid**: ``PUT /cobr/{txid}`` is retried on
  5xx and timeouts, and a refusal after a retry whose first answer was lost
  reads the cobr back and takes it when it is the same (idRec, amount).
- **Cancels are PATCHes to CANCELADA**, repeated safely; a refusal is read
  back, and an end reached first (cancelled, paid, rejected, expired) is the answer.

Scopes: ``rec.write rec.read solicrec.write solicrec.read cobr.write
cobr.read payloadlocationrec.write`` (:data:`REC_SCOPES`), added to the
acquirer's ``scopes`` like cobv's: not asked by default, so credentials
without them keep working for cob and cobv.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

from acquirers import brcode
from acquirers.adapters.apipix.client import ApiClient
from acquirers.adapters.apipix.cobv import received_pix
from acquirers.adapters.apipix.formats import E2E_ID, centavos, parse_moment, valor
from acquirers.adapters.apipix.listing import MAX_PAGES, PAGE_SIZE, moment
from acquirers.adapters.apipix.problems import HttpDeclined, HttpNotFound
from acquirers.adapters.base import (
    AcquirerDeclined,
    AcquirerUnavailable,
    CycleAttempt,
    CycleChargeRequest,
    CycleChargeState,
    InvalidOptions,
    InvalidResponse,
    PushRequest,
    PushSent,
    RecurrenceCreated,
    RecurrenceRequest,
    RecurrenceState,
)
from acquirers.adapters.due import DuePix
from acquirers.adapters.recurrence import JOURNEY_PUSH, JOURNEY_QR

#: What Pix Automático needs besides the cob scopes (``payloadlocationrec.write``: the QR journey's ``POST /locrec``).
REC_SCOPES = (
    "rec.write",
    "rec.read",
    "solicrec.write",
    "solicrec.read",
    "cobr.write",
    "cobr.read",
    "payloadlocationrec.write",
)
CANCELLED = "CANCELADA"
REC_STATUSES = frozenset({"CRIADA", "APROVADA", "REJEITADA", "EXPIRADA", CANCELLED})
#: A recurrence that can still be (or is) in force: what a lost create left behind.
LIVE_REC = frozenset({"CRIADA", "APROVADA"})
SOLICREC_STATUSES = frozenset({"CRIADA", "ENVIADA", "RECEBIDA", "REJEITADA", "ACEITA", "EXPIRADA", CANCELLED})
COBR_STATUSES = frozenset({"CRIADA", "ATIVA", "CONCLUIDA", "EXPIRADA", "REJEITADA", CANCELLED})
#: A cobr past which a cancel has nothing to do: its state is the answer.
COBR_ENDED = frozenset({"CONCLUIDA", "EXPIRADA", "REJEITADA", CANCELLED})
ATTEMPT_KINDS = frozenset({"AGND", "NTAG", "RIFL"})
ATTEMPT_STATUSES = frozenset({"SOLICITADA", "AGENDADA", "PAGA", CANCELLED, "REJEITADA", "EXPIRADA"})
JOURNEYS = frozenset({"JORNADA_1", "JORNADA_2", "JORNADA_3", "JORNADA_4", "AGUARDANDO_DEFINICAO"})
#: The terms' fields ``POST /rec`` takes from :mod:`payments.recurrence_terms` (anything else is not ours to send).
TERMS_FIELDS = ("vinculo", "calendario", "valor", "politicaRetentativa")
_ID_REC = re.compile(r"^[a-zA-Z0-9]{29}$")
_TXID = re.compile(r"^[a-zA-Z0-9]{26,35}$")
_ISPB = re.compile(r"^[0-9A-Z]{8}$")
_CPF = re.compile(r"^[0-9]{11}$")
_CNPJ = re.compile(r"^[0-9A-Z]{14}$")
#: Clocks differ: ``GET /rec``'s window is widened by this on both sides (the contract picks ours).
CLOCK_SKEW = dt.timedelta(minutes=10)


class BacenRecMixin:
    """The nine Pix Automático methods, for an adapter with ``_client()`` and options cleaned by
    :func:`~acquirers.adapters.apipix.options.clean_receiver_account`."""

    options: dict[str, Any]

    def _client(self) -> ApiClient:
        raise NotImplementedError

    # ------------------------------------------------------------------ recurrences

    def create_recurrence(self, request: RecurrenceRequest) -> RecurrenceCreated:
        if request.journey not in (JOURNEY_PUSH, JOURNEY_QR):
            raise ValueError(f"journey {request.journey!r} is neither the push nor the QR journey")
        body = {key: request.terms[key] for key in TERMS_FIELDS if key in request.terms}
        contract = _contract(body)
        client = self._client()
        location = ""
        if request.journey == JOURNEY_QR:
            # POST /locrec takes no body in the standard (the operation declares none).
            loc = client.request("POST", "/locrec", idempotent=False).data
            if not isinstance(loc.get("id"), int) or not isinstance(loc.get("location"), str) or not loc["location"]:
                raise InvalidResponse("POST /locrec: no id or location")
            body["loc"] = loc["id"]
            location = loc["location"]
        created = client.request("POST", "/rec", json_body=body, idempotent=False).data
        state = recurrence_state(created, None)
        if _contract(created, strict=False) != contract or state.status != "CRIADA":
            raise InvalidResponse(f"rec {state.id_rec}: not the CRIADA recurrence of contract {contract!r}")
        if request.journey == JOURNEY_PUSH:
            return RecurrenceCreated(id_rec=state.id_rec, status=state.status)
        # The code is only in GET /rec/{idRec} (dadosQR; RecGerada has none). Lost here, the
        # recurrence exists: the caller's find_recurrence / recurrence_status settles it.
        rec = client.request("GET", f"/rec/{state.id_rec}", idempotent=True).data
        read = recurrence_state(rec, state.id_rec)
        given = rec.get("loc")
        if not isinstance(given, dict) or given.get("location") != location:
            raise InvalidResponse(f"rec {state.id_rec}: not linked to location {location!r}")
        dados = rec.get("dadosQR")
        emv = dados.get("pixCopiaECola") if isinstance(dados, dict) else None
        if not isinstance(emv, str) or not emv:
            raise InvalidResponse(f"rec {state.id_rec}: no dadosQR.pixCopiaECola")
        check_rec_code(emv, location)
        return RecurrenceCreated(id_rec=read.id_rec, status=read.status, location=location, emv=emv)

    def find_recurrence(self, *, debtor_document: str, contract: str, since: dt.datetime) -> RecurrenceState | None:
        """``GET /rec?inicio&fim&cpf|cnpj``, page by page, kept to ``vinculo.contrato``.
        Several live ones (CRIADA, APROVADA) mean earlier creates landed too:
        the newest (its CRIADA moment) is the one the last, unsettled create
        made, which the caller was waiting for; the others are leftovers for
        it to cancel. None live: the newest of any status (its end tells the
        caller what became of it); none at all: None."""
        if _CPF.match(debtor_document):
            document = {"cpf": debtor_document}
        elif _CNPJ.match(debtor_document):
            document = {"cnpj": debtor_document}
        else:
            raise ValueError("find_recurrence needs the debtor's CPF or CNPJ")
        window = {
            "inicio": moment(since - CLOCK_SKEW),
            "fim": moment(dt.datetime.now(dt.UTC) + CLOCK_SKEW),
        }
        client = self._client()
        found: list[tuple[dt.datetime, RecurrenceState]] = []
        number = 0
        while True:
            query = urlencode(
                window | document | {"paginacao.paginaAtual": number, "paginacao.itensPorPagina": PAGE_SIZE}
            )
            page = client.request("GET", f"/rec?{query}", idempotent=True).data
            recs = page.get("recs")
            if not isinstance(recs, list):
                raise InvalidResponse("GET /rec: recs is not a list")
            for rec in recs:
                if isinstance(rec, dict) and _contract(rec, strict=False) == contract:
                    state = recurrence_state(rec, None)
                    found.append((_created_at(rec), state))
            parametros = page.get("parametros")
            paginacao = parametros.get("paginacao") if isinstance(parametros, dict) else None
            pages = paginacao.get("quantidadeDePaginas") if isinstance(paginacao, dict) else None
            if not isinstance(pages, int) or pages < 0:
                raise InvalidResponse("GET /rec: no parametros.paginacao.quantidadeDePaginas")
            number += 1
            if number >= min(pages, MAX_PAGES):
                break
        if not found:
            return None
        live = [entry for entry in found if entry[1].status in LIVE_REC]
        return max(live or found, key=lambda entry: entry[0])[1]

    def recurrence_status(self, id_rec: str) -> RecurrenceState:
        """``GET /rec/{idRec}``; :class:`HttpNotFound` when the PSP has none."""
        _check_id_rec(id_rec)
        return recurrence_state(self._client().request("GET", f"/rec/{id_rec}", idempotent=True).data, id_rec)

    def request_authorisation(self, request: PushRequest) -> PushSent:
        """``POST /solicrec``. Not idempotent either: a lost answer is settled by
        :meth:`recurrence_status` (its ``solicitacao``, ``push_status``)."""
        _check_id_rec(request.id_rec)
        if not _ISPB.match(request.payer_ispb):
            raise ValueError("payer_ispb is not an ISPB (8 characters)")
        if not 1 <= len(request.payer_account) <= 20 or len(request.payer_branch) > 4:
            raise ValueError("payer_account is 1-20 characters, payer_branch at most 4")
        if _CPF.match(request.payer_document):
            destinatario: dict[str, str] = {"cpf": request.payer_document}
        elif _CNPJ.match(request.payer_document):
            destinatario = {"cnpj": request.payer_document}
        else:
            raise ValueError("a push needs the payer's CPF or CNPJ")
        destinatario |= {"conta": request.payer_account, "ispbParticipante": request.payer_ispb}
        if request.payer_branch:
            destinatario["agencia"] = request.payer_branch
        if request.expires_at.tzinfo is None:
            raise ValueError("expires_at must be aware")
        body = {
            "idRec": request.id_rec,
            "calendario": {"dataExpiracaoSolicitacao": moment(request.expires_at)},
            "destinatario": destinatario,
        }
        solic = self._client().request("POST", "/solicrec", json_body=body, idempotent=False).data
        id_solic = solic.get("idSolicRec")
        if not isinstance(id_solic, str) or not _ID_REC.match(id_solic) or solic.get("idRec") != request.id_rec:
            raise InvalidResponse("POST /solicrec: no idSolicRec, or another recurrence's")
        status = solic.get("status")
        if status not in SOLICREC_STATUSES:
            raise InvalidResponse(f"solicrec {id_solic}: unknown status {status!r}")
        return PushSent(id_solic_rec=id_solic, status=str(status))

    def cancel_recurrence(self, id_rec: str) -> RecurrenceState:
        """PATCH to CANCELADA. A 404 raises; a refusal is read back: a
        recurrence already ended (cancelled, by either side, rejected,
        expired) is answered as read; still live, the refusal stands."""
        _check_id_rec(id_rec)
        client = self._client()
        path = f"/rec/{id_rec}"
        try:
            rec = client.request("PATCH", path, json_body={"status": CANCELLED}, idempotent=True).data
        except HttpDeclined as refused:
            if isinstance(refused, HttpNotFound):
                raise
            current = recurrence_state(client.request("GET", path, idempotent=True).data, id_rec)
            if current.status in LIVE_REC:
                raise
            return current
        return recurrence_state(rec, id_rec)

    # ------------------------------------------------------------------ cycles

    def create_cycle_charge(self, request: CycleChargeRequest) -> CycleChargeState:
        body = self._cobr_body(request)
        client = self._client()
        path = f"/cobr/{request.txid}"
        try:
            cobr = client.request("PUT", path, json_body=body, idempotent=True).data
        except HttpDeclined as refused:
            if isinstance(refused, HttpNotFound):
                raise
            # A txid in use after a retry whose first answer was lost: ours if it matches.
            try:
                cobr = client.request("GET", path, idempotent=True).data
            except (AcquirerUnavailable, AcquirerDeclined):
                raise refused from None
        state = cycle_state(cobr, request.txid)
        if cobr.get("idRec") != request.id_rec or state.amount != request.amount:
            raise InvalidResponse(f"cobr {request.txid} is another recurrence's or another amount")
        return state

    def cycle_charge_status(self, txid: str) -> CycleChargeState:
        """``GET /cobr/{txid}``; :class:`HttpNotFound` when the PSP has none."""
        _check_txid(txid)
        return cycle_state(self._client().request("GET", f"/cobr/{txid}", idempotent=True).data, txid)

    def cancel_cycle_charge(self, txid: str) -> CycleChargeState:
        """PATCH to CANCELADA. A 404 raises (the create may not have landed:
        ask again); a refusal is read back: ended already (paid first:
        CONCLUIDA) is answered as read, still open the refusal stands (the
        standard refuses a cancel on or after the first attempt's date)."""
        _check_txid(txid)
        client = self._client()
        path = f"/cobr/{txid}"
        try:
            cobr = client.request("PATCH", path, json_body={"status": CANCELLED}, idempotent=True).data
        except HttpDeclined as refused:
            if isinstance(refused, HttpNotFound):
                raise
            current = cycle_state(client.request("GET", path, idempotent=True).data, txid)
            if current.status not in COBR_ENDED:
                raise
            return current
        return cycle_state(cobr, txid)

    def retry_cycle_charge(self, txid: str, on: dt.date) -> CycleChargeState:
        """``POST /cobr/{txid}/retentativa/{data}``: a POST, never repeated by
        the client; a lost answer is settled by reading the attempts."""
        _check_txid(txid)
        path = f"/cobr/{txid}/retentativa/{on.isoformat()}"
        return cycle_state(self._client().request("POST", path, idempotent=False).data, txid)

    def _cobr_body(self, request: CycleChargeRequest) -> dict[str, Any]:
        _check_txid(request.txid)
        _check_id_rec(request.id_rec)
        if request.amount <= 0:
            raise ValueError("a cycle's amount must be positive")
        account = self.options.get("receiver_account")
        if not account:
            raise InvalidOptions("Pix Automático cycles need the receiver_account option (the cobr's recebedor)")
        recebedor = {"conta": account, "tipoConta": self.options.get("receiver_account_type", "CORRENTE")}
        if self.options.get("receiver_branch"):
            recebedor["agencia"] = self.options["receiver_branch"]
        body: dict[str, Any] = {
            "idRec": request.id_rec,
            "calendario": {"dataDeVencimento": request.due_date.isoformat()},
            "valor": {"original": valor(request.amount)},
            "ajusteDiaUtil": request.adjust_to_business_day,
            "recebedor": recebedor,
        }
        if request.description:
            body["infoAdicional"] = request.description[:140]
        return body


# --------------------------------------------------------------------------- reading answers


def check_rec_code(emv: str, location: str) -> None:
    """What can be checked of a recurrence's code (the JORNADA_2 "QR
    composto"): a well-formed BR Code (CRC, TLV, currency, country), with a
    Pix template among ids 80-99 whose location (25) is the recurrence's. Its
    amount cannot be (the code carries none: the terms live in the payload
    at the location), nor a txid (62.05 is ``***``)."""
    try:
        parsed = brcode.parse(emv)
    except brcode.InvalidBRCode as exc:
        raise InvalidResponse(f"recurrence code: {exc}") from None
    for field_id in (f"{n}" for n in range(80, 100)):
        template = parsed.fields.get(field_id)
        if (
            isinstance(template, dict)
            and str(template.get("00", "")).lower() == brcode.PIX_GUI
            and template.get("25") == location
        ):
            return
    raise InvalidResponse("recurrence code: no Pix template (80-99) with the recurrence's location")


def _check_id_rec(id_rec: str) -> None:
    if not _ID_REC.match(id_rec):
        raise ValueError(f"idRec {id_rec!r} is not 29 alphanumerics")


def _check_txid(txid: str) -> None:
    if not _TXID.match(txid):
        raise ValueError(f"txid {txid!r} is not 26-35 alphanumerics")


def _contract(rec: Mapping[str, Any], *, strict: bool = True) -> str | None:
    vinculo = rec.get("vinculo")
    contract = vinculo.get("contrato") if isinstance(vinculo, dict) else None
    if not isinstance(contract, str) or not contract:
        if strict:
            raise ValueError("the terms name no vinculo.contrato")
        return None
    return contract


def _created_at(rec: Mapping[str, Any]) -> dt.datetime:
    """When the PSP created it: its CRIADA entry in ``atualizacao`` (the
    first entry when none says so); the epoch when unreadable, so it sorts first."""
    history = [h for h in rec.get("atualizacao") or [] if isinstance(h, dict)]
    entry = next((h for h in history if h.get("status") == "CRIADA"), history[0] if history else {})
    return parse_moment(entry.get("data")) or dt.datetime.min.replace(tzinfo=dt.UTC)


def _reason(encerramento: object) -> tuple[str, str]:
    """``(who, "CODE: text")`` of an ``encerramento`` (cancelamento or rejeicao)."""
    if not isinstance(encerramento, dict):
        return "", ""
    for kind in ("cancelamento", "rejeicao"):
        detail = encerramento.get(kind)
        if isinstance(detail, dict):
            code, text = str(detail.get("codigo", ""))[:4], str(detail.get("descricao", ""))[:400]
            who = str(detail.get("solicitante", "")) if kind == "cancelamento" else ""
            return who[:20], f"{code}: {text}" if text else code
    return "", ""


def recurrence_state(rec: Mapping[str, Any], id_rec: str | None) -> RecurrenceState:
    """A ``rec`` answer (``RecGerada``, ``RecCompleta``, a listing's entry);
    ``id_rec``: the one asked for, when one was."""
    found = rec.get("idRec")
    if not isinstance(found, str) or not _ID_REC.match(found) or (id_rec is not None and found != id_rec):
        raise InvalidResponse(f"rec answer names idRec {found!r}, not {id_rec or 'a valid one'}")
    status = rec.get("status")
    if status not in REC_STATUSES:
        raise InvalidResponse(f"rec {found}: unknown status {status!r}")
    ativacao = rec.get("ativacao")
    journey = ativacao.get("tipoJornada") if isinstance(ativacao, dict) else None
    if journey is not None and journey not in JOURNEYS:
        raise InvalidResponse(f"rec {found}: unknown tipoJornada {journey!r}")
    pagador = rec.get("pagador")
    ispb = pagador.get("ispbParticipante") if isinstance(pagador, dict) else None
    if ispb is not None and (not isinstance(ispb, str) or not _ISPB.match(ispb)):
        raise InvalidResponse(f"rec {found}: pagador.ispbParticipante is not an ISPB")
    cancelled_by, reason = _reason(rec.get("encerramento"))
    requests = [s for s in rec.get("solicitacao") or [] if isinstance(s, dict)]
    push_status = str(requests[-1].get("status", "")) if requests else ""
    return RecurrenceState(
        id_rec=found,
        status=str(status),
        journey=journey or "",
        payer_ispb=ispb or "",
        cancelled_by=cancelled_by,
        reason=reason,
        push_status=push_status[:20],
        raw=dict(rec),
    )


def cycle_state(cobr: Mapping[str, Any], txid: str) -> CycleChargeState:
    """A ``cobr`` answer (``CobRGerada``, ``CobRCompleta``)."""
    if cobr.get("txid") != txid:
        raise InvalidResponse(f"cobr answer names txid {cobr.get('txid')!r}, not ours")
    status = cobr.get("status")
    if status not in COBR_STATUSES:
        raise InvalidResponse(f"cobr {txid}: unknown status {status!r}")
    given = cobr.get("valor")
    amount = centavos(given.get("original") if isinstance(given, dict) else None)
    attempts = tuple(_attempt(t, txid) for t in cobr.get("tentativas") or [])
    received = cobr.get("pix") or []
    if not isinstance(received, list):
        raise InvalidResponse(f"cobr {txid}: pix is not a list")
    pix = tuple(received_pix(p, f"cobr {txid}") for p in received)
    if status == "CONCLUIDA" and not pix:
        # A PSP that leaves pix[] out of a paid cobr: the PAGA attempt names the Pix (its
        # endToEndId) and the amount is valor.original (a cobr's Pix is never of another).
        pix = tuple(
            DuePix(e2e_id=a.e2e_id, amount=amount, paid_at=_paid_at(cobr, a.e2e_id))
            for a in attempts
            if a.status == "PAGA" and a.e2e_id
        )
    _, reason = _reason(cobr.get("encerramento"))
    return CycleChargeState(
        txid=txid, status=str(status), amount=amount, attempts=attempts, pix=pix, reason=reason, raw=dict(cobr)
    )


def _attempt(tentativa: object, txid: str) -> CycleAttempt:
    if not isinstance(tentativa, dict):
        raise InvalidResponse(f"cobr {txid}: a tentativa is not an object")
    try:
        settles_on = dt.date.fromisoformat(str(tentativa.get("dataLiquidacao")))
    except ValueError:
        raise InvalidResponse(f"cobr {txid}: a tentativa without a dataLiquidacao") from None
    kind, status, e2e_id = tentativa.get("tipo"), tentativa.get("status"), tentativa.get("endToEndId")
    if kind not in ATTEMPT_KINDS or status not in ATTEMPT_STATUSES:
        raise InvalidResponse(f"cobr {txid}: a tentativa of unknown tipo {kind!r} or status {status!r}")
    if e2e_id is not None and (not isinstance(e2e_id, str) or not E2E_ID.match(e2e_id)):
        raise InvalidResponse(f"cobr {txid}: a tentativa with a malformed endToEndId")
    _, reason = _reason({"rejeicao": tentativa["rejeicao"]} if isinstance(tentativa.get("rejeicao"), dict) else None)
    return CycleAttempt(settles_on=settles_on, kind=str(kind), status=str(status), e2e_id=e2e_id or "", reason=reason)


def _paid_at(cobr: Mapping[str, Any], e2e_id: str) -> dt.datetime | None:
    """When the PAGA attempt was paid (its own history), else when the cobr was CONCLUIDA."""
    for tentativa in cobr.get("tentativas") or []:
        if isinstance(tentativa, dict) and tentativa.get("endToEndId") == e2e_id:
            for entry in tentativa.get("atualizacao") or []:
                if isinstance(entry, dict) and entry.get("status") == "PAGA":
                    return parse_moment(entry.get("data"))
    for entry in cobr.get("atualizacao") or []:
        if isinstance(entry, dict) and entry.get("status") == "CONCLUIDA":
            return parse_moment(entry.get("data"))
    return None
