"""Due-date charges of the API Pix standard (``cobv``, ``lotecobv``) for the
``bacen_pix`` adapter; a mixin so :mod:`.bacen` stays one screenful.

Errors and idempotency as for the immediate ``cob``: ``PUT /cobv/{txid}`` is
idempotent on our txid (retried by the client on 5xx and timeouts); a 4xx is
:class:`AcquirerDeclined`, but a refusal because the txid is in use reads the
cobv back and takes it when it is ours (same value, same key); a timeout is
an unknown outcome that :meth:`due_charge_status` settles (never a second
create under another txid). The cancel is a PATCH, read back when refused.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from acquirers.adapters.apipix.client import ApiClient
from acquirers.adapters.apipix.formats import E2E_ID, centavos, parse_moment
from acquirers.adapters.apipix.problems import HttpDeclined, HttpNotFound
from acquirers.adapters.base import (
    AcquirerDeclined,
    AcquirerUnavailable,
    DueBatchRequest,
    DueBatchStatus,
    DueChargeRequest,
    DueChargeResult,
    DueChargeStatus,
    InvalidResponse,
)
from acquirers.adapters.due import DueBatchItem, DuePix

REMOVED_BY_US = "REMOVIDA_PELO_USUARIO_RECEBEDOR"
STATUSES = frozenset({"ATIVA", "CONCLUIDA", REMOVED_BY_US, "REMOVIDA_PELO_PSP"})
_TXID = re.compile(r"^[a-zA-Z0-9]{26,35}$")
_CPF = re.compile(r"^[0-9]{11}$")
_CNPJ = re.compile(r"^[0-9A-Z]{14}$")
#: ``DadosComplementaresPessoa`` fields the schema allows on a debtor, with their limits.
_ADDRESS = (("logradouro", 200), ("cidade", 200), ("uf", 2), ("cep", 8), ("email", 200))
_BATCH_ITEM_STATUSES = frozenset({"EM_PROCESSAMENTO", "CRIADA", "NEGADA"})


class BacenCobvMixin:
    """``create_due_charge``, ``due_charge_status``, ``cancel_due_charge`` and
    the ``lotecobv`` pair, for an adapter with ``_client()`` and a ``chave``."""

    options: dict[str, Any]

    def _client(self) -> ApiClient:
        raise NotImplementedError

    def create_due_charge(self, request: DueChargeRequest) -> DueChargeResult:
        body = self._cobv_body(request)
        client = self._client()
        path = f"/cobv/{request.txid}"
        try:
            cobv = client.request("PUT", path, json_body=body, idempotent=True).data
        except HttpDeclined as refused:
            if isinstance(refused, HttpNotFound):
                raise
            # A txid in use after a retry whose first answer was lost: ours if it matches.
            existing = adopt_existing(client, path, body)
            if existing is None:
                raise
            cobv = existing
        return _due_result(cobv, request)

    def due_charge_status(self, txid: str) -> DueChargeStatus:
        """The cobv read back; :class:`HttpNotFound` (a decline) when the PSP has none."""
        return _due_status(self._client().request("GET", f"/cobv/{txid}", idempotent=True).data, txid)

    def cancel_due_charge(self, txid: str) -> DueChargeStatus:
        """PATCH to REMOVIDA_PELO_USUARIO_RECEBEDOR. A 404 raises (the create
        may not have landed: ask again); a refusal is read back: removed
        already or CONCLUIDA (paid first) is answered as read, anything else raises."""
        client = self._client()
        path = f"/cobv/{txid}"
        try:
            cobv = client.request("PATCH", path, json_body={"status": REMOVED_BY_US}, idempotent=True).data
        except HttpDeclined as refused:
            if isinstance(refused, HttpNotFound):
                raise
            current = _due_status(client.request("GET", path, idempotent=True).data, txid)
            if current.status == "ATIVA":
                raise
            return current
        return _due_status(cobv, txid)

    def create_due_charge_batch(self, request: DueBatchRequest) -> None:
        """PUT /lotecobv/{id} (202, no body): idempotent on our lote id; the
        items' fate is read with :meth:`due_charge_batch_status`."""
        items = [{"txid": charge.txid, **self._cobv_body(charge)} for charge in request.charges]
        body = {"descricao": request.description[:140], "cobsv": items}
        self._client().request("PUT", f"/lotecobv/{request.batch_id}", json_body=body, idempotent=True)

    def due_charge_batch_status(self, batch_id: int) -> DueBatchStatus:
        lote = self._client().request("GET", f"/lotecobv/{batch_id}", idempotent=True).data
        if lote.get("id") != batch_id or not isinstance(lote.get("cobsv"), list):
            raise InvalidResponse(f"lotecobv {batch_id}: not the lote asked for")
        items = []
        for item in lote["cobsv"]:
            if not isinstance(item, dict) or item.get("status") not in _BATCH_ITEM_STATUSES:
                raise InvalidResponse(f"lotecobv {batch_id}: unreadable item {item!r}"[:300])
            given = item.get("problema")
            problem: dict[str, Any] = given if isinstance(given, dict) else {}
            why = " - ".join(str(problem[k])[:200] for k in ("title", "detail") if problem.get(k))
            items.append(DueBatchItem(txid=str(item.get("txid")), status=item["status"], problem=why))
        return DueBatchStatus(batch_id=batch_id, items=tuple(items))

    def _cobv_body(self, request: DueChargeRequest) -> dict[str, Any]:
        if not _TXID.match(request.txid):
            raise ValueError(f"txid {request.txid!r} is not 26-35 alphanumerics")
        if request.validity_after_due < 0:
            raise ValueError("validity_after_due is negative")
        original = request.valor.get("original")
        centavos(original)  # the one field every cobv needs, in the API's format
        body: dict[str, Any] = {
            "calendario": {
                "dataDeVencimento": request.due_date.isoformat(),
                "validadeAposVencimento": request.validity_after_due,
            },
            "devedor": _devedor(request),
            "valor": dict(request.valor),
            "chave": self.options["chave"],
        }
        if request.description:
            body["solicitacaoPagador"] = request.description[:140]
        return body


def _devedor(request: DueChargeRequest) -> dict[str, str]:
    """The cobv's debtor is required: CPF or CNPJ, the name, the address fields given."""
    name = request.debtor_name.strip()[:200]
    document = request.debtor_document
    if not name:
        raise ValueError("a due-date charge needs the debtor's name")
    if _CPF.match(document):
        devedor = {"cpf": document, "nome": name}
    elif _CNPJ.match(document):
        devedor = {"cnpj": document, "nome": name}
    else:
        raise ValueError("a due-date charge needs the debtor's CPF or CNPJ")
    for key, most in _ADDRESS:
        value = str(getattr(request, key)).strip()
        if value:
            devedor[key] = value[:most]
    return devedor


def adopt_existing(client: ApiClient, path: str, body: Mapping[str, Any]) -> dict[str, Any] | None:
    """The charge (``cob`` or ``cobv``) at ``path`` when it is the one ``body``
    asked for and still active: a PUT refused because its txid is in use,
    after a retry whose first answer was lost, found our own charge."""
    try:
        cobv = client.request("GET", path, idempotent=True).data
    except (AcquirerUnavailable, AcquirerDeclined):
        return None
    same = (
        cobv.get("status") == "ATIVA"
        and isinstance(cobv.get("valor"), dict)
        and cobv["valor"].get("original") == body["valor"]["original"]
        and cobv.get("chave") == body["chave"]
    )
    return cobv if same else None


def _due_result(cobv: Mapping[str, Any], request: DueChargeRequest) -> DueChargeResult:
    status = _due_status(cobv, request.txid)
    if status.status != "ATIVA":
        raise InvalidResponse(f"cobv {request.txid} is {status.status!r}, not ATIVA")
    if status.original != centavos(request.valor.get("original")):
        raise InvalidResponse(f"cobv {request.txid} is for another amount")
    emv = cobv.get("pixCopiaECola")
    location = cobv.get("location") or (cobv.get("loc") or {}).get("location")
    if not isinstance(emv, str) or not emv or not isinstance(location, str):
        raise InvalidResponse(f"cobv {request.txid} has no pixCopiaECola or location")
    return DueChargeResult(provider_charge_id=request.txid, emv=emv, location=location, status=status.status)


def _due_status(cobv: Mapping[str, Any], txid: str) -> DueChargeStatus:
    if cobv.get("txid") != txid:
        raise InvalidResponse(f"cobv answer names txid {cobv.get('txid')!r}, not ours")
    status = cobv.get("status")
    if status not in STATUSES:
        raise InvalidResponse(f"cobv {txid}: unknown status {status!r}")
    valor = cobv.get("valor")
    original = centavos(valor.get("original") if isinstance(valor, dict) else None)
    received = cobv.get("pix") or []
    if not isinstance(received, list):
        raise InvalidResponse(f"cobv {txid}: pix is not a list")
    return DueChargeStatus(
        txid=txid,
        status=str(status),
        original=original,
        pix=tuple(received_pix(p, f"cobv {txid}") for p in received),
        raw=dict(cobv),
    )


def received_pix(pix: object, where: str) -> DuePix:
    """A Pix of a charge's ``pix[]`` (a ``cobv``'s, a ``cobr``'s: ``where`` names it for errors)."""
    if not isinstance(pix, dict) or not isinstance(pix.get("endToEndId"), str) or not E2E_ID.match(pix["endToEndId"]):
        raise InvalidResponse(f"{where}: a Pix without a valid endToEndId")
    components: dict[str, int] = {}
    given = pix.get("componentesValor")
    for name, part in given.items() if isinstance(given, dict) else ():
        if isinstance(part, dict):
            components[str(name)] = centavos(part.get("valor"))
    returned, returned_at = 0, None
    for devolucao in pix.get("devolucoes") or []:
        if isinstance(devolucao, dict) and devolucao.get("status") == "DEVOLVIDO":
            returned += centavos(devolucao.get("valor"))
            horario = devolucao.get("horario")
            returned_at = parse_moment(horario.get("liquidacao")) if isinstance(horario, dict) else returned_at
    return DuePix(
        e2e_id=pix["endToEndId"],
        amount=centavos(pix.get("valor")),
        paid_at=parse_moment(pix.get("horario")),
        components=components,
        returned=returned,
        returned_at=returned_at,
    )
