"""The fake PSP's due-date charges (``cobv``) and their batches
(``lotecobv``), with the shapes of the API Pix 2.9.0 (the answers are
validated against it by :mod:`tests.acquirers.fake_psp` like every other).

A mixin of the fake's handler; the state lives on the :class:`FakePsp`
(``cobvs``, ``lotes``). A lote is processed when it is PUT: each item is
CRIADA (and its cobv exists) or NEGADA with the problem the spec's own
example shows, for a debtor without a CPF/CNPJ.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

from acquirers import brcode
from tests.acquirers.fake_server import new_e2e_id, now_iso

ERROR_TYPE = "https://pix.bcb.gov.br/api/v2/error/"
RECEBEDOR = {"cnpj": "56989000019533", "nome": "FAKE PSP RECEBEDOR", "cidade": "SAO PAULO", "uf": "SP"}
RECEBEDOR |= {"logradouro": "Rua do Fake, 1", "cep": "01001000"}


def cobv_problem(status: int, kind: str, title: str, detail: str = "", **extra: Any) -> dict[str, Any]:
    body = {"type": ERROR_TYPE + kind, "title": title, "status": status, **extra}
    if detail:
        body["detail"] = detail
    return body


NOT_ACTIVE = "Cobrança não encontra-se mais com o status ATIVA, somente cobranças ativas podem ser revisadas."


class CobvHandlerMixin:
    """``_cobv_put``/``_cobv_get``/``_cobv_patch``/``_lotecobv_put``/``_lotecobv_get``."""

    psp: Any  # the FakePsp (typed there)

    def _make_cobv(self, txid: str, body: dict[str, Any]) -> dict[str, Any]:
        psp = self.psp
        psp._next_loc += 1
        location = f"pix.fakepsp.test/qr/v2/cobv/{secrets.token_hex(16)}"
        created = now_iso()
        amount = int(body["valor"]["original"].replace(".", ""))
        emv = brcode.encode_dynamic(
            location=location, amount=amount, merchant_name="FAKE PSP RECEBEDOR", merchant_city="SAO PAULO"
        )
        cobv = {
            "calendario": {"criacao": created, **body["calendario"]},
            "txid": txid,
            "revisao": 0,
            "loc": {"id": psp._next_loc, "location": location, "tipoCob": "cobv", "criacao": created, "txid": txid},
            "location": location,
            "status": "ATIVA",
            "devedor": body["devedor"],
            "recebedor": RECEBEDOR,
            "valor": body["valor"],
            "chave": body["chave"],
            "pixCopiaECola": emv,
        }
        if "solicitacaoPagador" in body:
            cobv["solicitacaoPagador"] = body["solicitacaoPagador"]
        psp.cobvs[txid] = cobv
        return cobv

    def _cobv_put(self, request: Any, body: dict[str, Any], fault: Any) -> tuple[int, Any]:
        txid = request.path.rsplit("/", 1)[1]
        with self.psp.lock:
            if txid in self.psp.cobvs:
                return 400, cobv_problem(
                    400,
                    "CobVOperacaoInvalida",
                    "Cobrança inválida.",
                    "O txid informado já está em uso.",
                    violacoes=[{"razao": "txid em uso", "propriedade": "txid", "valor": txid}],
                )
            return 201, self._make_cobv(txid, body)

    def _cobv_get(self, request: Any, body: Any, fault: Any) -> tuple[int, Any]:
        txid = request.path.rsplit("/", 1)[1]
        with self.psp.lock:
            cobv = self.psp.cobvs.get(txid)
            if cobv is None:
                return 404, cobv_problem(404, "CobVNaoEncontrada", "Cobrança não encontrada.")
            return 200, json.loads(json.dumps(cobv))

    def _cobv_patch(self, request: Any, body: dict[str, Any], fault: Any) -> tuple[int, Any]:
        txid = request.path.rsplit("/", 1)[1]
        with self.psp.lock:
            cobv = self.psp.cobvs.get(txid)
            if cobv is None:
                return 404, cobv_problem(404, "CobVNaoEncontrada", "Cobrança não encontrada.")
            if cobv["status"] != "ATIVA":
                return 400, cobv_problem(400, "CobVOperacaoInvalida", "Operação inválida.", NOT_ACTIVE)
            if body.get("status") == "REMOVIDA_PELO_USUARIO_RECEBEDOR":
                cobv["status"] = "REMOVIDA_PELO_USUARIO_RECEBEDOR"
                cobv["revisao"] += 1
            return 200, {k: v for k, v in cobv.items() if k != "pix"}

    def _lotecobv_put(self, request: Any, body: dict[str, Any], fault: Any) -> tuple[int, Any]:
        lote_id = int(request.path.rsplit("/", 1)[1])
        with self.psp.lock:
            if lote_id in self.psp.lotes:
                return 202, None  # the same lote again: nothing new (the PSP's idempotency)
            items = []
            for item in body["cobsv"]:
                entry: dict[str, Any] = {"txid": item["txid"], "criacao": now_iso()}
                if not ({"cpf", "cnpj"} & item["devedor"].keys()) or item["txid"] in self.psp.cobvs:
                    entry["status"] = "NEGADA"
                    entry["problema"] = cobv_problem(
                        400,
                        "CobVOperacaoInvalida",
                        "Cobrança inválida.",
                        "A requisição que busca alterar ou criar uma cobrança com vencimento não respeita o "
                        "_schema_ ou está semanticamente errada.",
                        violacoes=[
                            {"razao": "O objeto cobv.devedor não respeita o _schema_.", "propriedade": "cobv.devedor"}
                        ],
                    )
                else:
                    self._make_cobv(item["txid"], {k: v for k, v in item.items() if k != "txid"})
                    entry["status"] = "CRIADA"
                items.append(entry)
            self.psp.lotes[lote_id] = {
                "id": lote_id,
                "descricao": body["descricao"],
                "criacao": now_iso(),
                "cobsv": items,
            }
            return 202, None

    def _lotecobv_get(self, request: Any, body: Any, fault: Any) -> tuple[int, Any]:
        lote_id = int(request.path.rsplit("/", 1)[1])
        with self.psp.lock:
            lote = self.psp.lotes.get(lote_id)
            if lote is None:
                return 404, cobv_problem(404, "LoteCobVNaoEncontrado", "Lote não encontrado.")
            return 200, json.loads(json.dumps(lote))


def pay_cobv(psp: Any, txid: str, *, components: dict[str, str], amount: str) -> str:
    """A payer pays a due-date charge (with interest, fine, discount as
    ``components``, each ``{"name": "12.34"}``): its Pix, CONCLUIDA."""
    with psp.lock:
        cobv = psp.cobvs[txid]
        assert cobv["status"] == "ATIVA", cobv["status"]
        e2e_id = new_e2e_id("12345678")
        pix = {
            "endToEndId": e2e_id,
            "txid": txid,
            "valor": amount,
            "componentesValor": {name: {"valor": value} for name, value in components.items()},
            "chave": cobv["chave"],
            "horario": now_iso(),
        }
        cobv["status"] = "CONCLUIDA"
        cobv["pix"] = [pix]
        return e2e_id
