"""The ``bacen_pix`` acquirer: cash-in through any PSP that implements Banco
Central's API Pix (v2), immediate charges (``cob``) with our own txid.

Options (see docs/operations/acquirers.md, "bacen_pix: receiving through API
Pix"): the connection options of :mod:`acquirers.adapters.apipix.options` (base and token URLs, client id,
environment variable names of the client secret and of the mTLS certificate
and key, CA bundle, scopes) plus ``chave``, the receiving account's Pix key,
and ``notification_token_env``, the variable holding the secret segment of the
notification URL registered with the PSP.

- ``create_charge``: ``PUT /cob/{txid}``; the txid is derived from our charge
  id, so a retried PUT names the same charge. A PSP that refuses a txid in
  use gets a ``GET /cob/{txid}`` and the charge is adopted when it is ours
  (same value and key, still active).
- ``cancel_charge``: ``PATCH /cob/{txid}`` to ``REMOVIDA_PELO_USUARIO_RECEBEDOR``.
- ``charge_status``: ``GET /cob/{txid}``; ``CONCLUIDA`` with its ``pix[]``
  entries is paid with their ``endToEndId``.
- ``refund_charge``: ``PUT /pix/{e2eid}/devolucao/{id}``; ``DEVOLVIDO`` is done.
- ``refund_status``: ``GET /pix/{e2eid}/devolucao/{id}``; a 404 is "not found".
- ``list_received``: ``GET /pix?inicio&fim`` (the Pix received), then
  ``GET /cob?inicio&fim`` (the charges created), page by page
  (:mod:`acquirers.adapters.apipix.listing`), for reconciliation.
- ``parse_notification``: the ``{webhookUrl}/pix`` callback. The URL's secret
  segment is compared in constant time (mTLS is checked at the edge), then
  every Pix it names is confirmed with ``GET /pix/{e2eid}``; the events come
  from the PSP's answer, never from the callback body, so a forged or replayed
  callback cannot move money.

Due-date charges (``cobv``): :mod:`.cobv`; Pix Automático (``rec``, ``locrec``,
``solicrec``, ``cobr``): :mod:`.rec`, whose cycles name the receiving account
of options ``receiver_account``, ``receiver_account_type`` and ``receiver_branch``.

No payouts (``supports_payout`` is off): the API Pix standard has none (each
PSP has its own API), so the selectors never put a ``bacen_pix`` acquirer in a
payout chain.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
from collections.abc import Mapping
from typing import Any

from acquirers.adapters.apipix.callbacks import callback_entries, verify_notification_token
from acquirers.adapters.apipix.client import ApiClient, client_for
from acquirers.adapters.apipix.cobv import BacenCobvMixin, adopt_existing
from acquirers.adapters.apipix.formats import E2E_ID, centavos, parse_moment, valor
from acquirers.adapters.apipix.listing import cob_records, listing_page, pix_records
from acquirers.adapters.apipix.options import (
    RECEIVER_ACCOUNT_OPTIONS,
    clean_connection_options,
    clean_notification_token_env,
    clean_pix_key,
    clean_receiver_account,
)
from acquirers.adapters.apipix.problems import HttpDeclined, HttpNotFound
from acquirers.adapters.apipix.rec import BacenRecMixin
from acquirers.adapters.base import (
    AcquirerAdapter,
    CancelResult,
    ChargeRequest,
    ChargeResult,
    ChargeStatusResult,
    InvalidNotification,
    InvalidResponse,
    Notification,
    NotificationEvent,
    ProviderChargeState,
    ProviderListing,
    RefundRequest,
    RefundResult,
    RefundStatus,
    UnreadableNotification,
)
from acquirers.adapters.registry import register

logger = logging.getLogger(__name__)

#: What the adapter calls: immediate charges and received Pix (refunds are ``pix.write``). Due-date
#: charges need ``cobv.*`` (and ``lotecobv.*``) added to the acquirer's ``scopes``, Pix Automático
#: :data:`~acquirers.adapters.apipix.rec.REC_SCOPES`: not asked by default, so credentials without
#: them keep working.
DEFAULT_SCOPES = ("cob.write", "cob.read", "pix.write", "pix.read")
REMOVED_BY_US = "REMOVIDA_PELO_USUARIO_RECEBEDOR"
_REMOVED = frozenset({REMOVED_BY_US, "REMOVIDA_PELO_PSP"})
_TXID = re.compile(r"^[a-zA-Z0-9]{26,35}$")
_REFUND_ID = re.compile(r"^[a-zA-Z0-9]{1,35}$")
_CPF = re.compile(r"^[0-9]{11}$")
_CNPJ = re.compile(r"^[0-9A-Z]{14}$")
#: At most this many Pix are confirmed per callback (each is a GET to the PSP).
MAX_PIX_PER_NOTIFICATION = 50


@register
class BacenPixAdapter(BacenCobvMixin, BacenRecMixin, AcquirerAdapter):
    name = "bacen_pix"
    supports_payout = False
    supports_charge_status = True
    supports_refund = True
    supports_cancel = True
    supports_list_received = True
    supports_due_charge = True
    supports_due_charge_batch = True
    supports_recurrence = True

    @classmethod
    def validate_options(cls, options: Mapping[str, Any]) -> dict[str, Any]:
        clean = clean_connection_options(
            options, default_scopes=DEFAULT_SCOPES, own=("chave", "notification_token_env", *RECEIVER_ACCOUNT_OPTIONS)
        )
        clean["chave"] = clean_pix_key(options, what="the receiving account's Pix key")
        clean |= clean_notification_token_env(options)
        clean |= clean_receiver_account(options)
        return clean

    def _client(self) -> ApiClient:
        return client_for(self.config, self.options)

    # ------------------------------------------------------------------ charges

    def create_charge(self, request: ChargeRequest) -> ChargeResult:
        if not _TXID.match(request.txid):
            raise ValueError(f"txid {request.txid!r} is not 26-35 alphanumerics")
        body: dict[str, Any] = {
            "calendario": {"expiracao": request.expires_in},
            "valor": {"original": valor(request.amount)},
            "chave": self.options["chave"],
        }
        devedor = _devedor(request.payer_document, request.payer_name)
        if devedor:
            body["devedor"] = devedor
        if request.description:
            body["solicitacaoPagador"] = request.description[:140]
        client = self._client()
        path = f"/cob/{request.txid}"
        try:
            cob = client.request("PUT", path, json_body=body, idempotent=True).data
        except HttpDeclined as refused:
            if isinstance(refused, HttpNotFound):
                raise
            # Some PSPs refuse a PUT for a txid already in use: after a retry
            # whose first answer was lost, that charge is ours.
            existing = adopt_existing(client, path, body)
            if existing is None:
                raise
            cob = existing
        return self._charge_result(cob, request)

    @staticmethod
    def _charge_result(cob: Mapping[str, Any], request: ChargeRequest) -> ChargeResult:
        if cob.get("txid") != request.txid:
            raise InvalidResponse(f"cob answer names txid {cob.get('txid')!r}, not ours")
        if cob.get("status") != "ATIVA":
            raise InvalidResponse(f"cob {request.txid} is {cob.get('status')!r}, not ATIVA")
        amount = cob.get("valor", {}).get("original") if isinstance(cob.get("valor"), dict) else None
        if centavos(amount) != request.amount:
            raise InvalidResponse(f"cob {request.txid} is for {amount}, not {valor(request.amount)}")
        emv = cob.get("pixCopiaECola")
        if not isinstance(emv, str) or not emv:
            raise InvalidResponse(f"cob {request.txid} has no pixCopiaECola")
        # The chain checks the EMV itself (CRC, GUI, amount) like every acquirer's.
        return ChargeResult(provider_charge_id=request.txid, emv=emv)

    def cancel_charge(self, txid: str) -> CancelResult:
        """PATCH to REMOVIDA_PELO_USUARIO_RECEBEDOR. A 404 raises (the late
        create may not have landed yet: the caller asks again); a refusal is
        read against the cob's status: removed already is done, concluded
        (paid there first) is :attr:`CancelResult.PAID`, anything else raises."""
        client = self._client()
        path = f"/cob/{txid}"
        try:
            client.request("PATCH", path, json_body={"status": REMOVED_BY_US}, idempotent=True)
            return CancelResult.REMOVED
        except HttpDeclined as refused:
            if isinstance(refused, HttpNotFound):
                raise
            current = client.request("GET", path, idempotent=True).data.get("status")
            if current in _REMOVED:
                return CancelResult.REMOVED
            if current == "CONCLUIDA":
                logger.warning(
                    "acquirer %s: charge %s was paid there before it could be withdrawn", self.config.key, txid
                )
                return CancelResult.PAID
            raise

    def charge_status(self, txid: str) -> ChargeStatusResult:
        try:
            cob = self._client().request("GET", f"/cob/{txid}", idempotent=True).data
        except HttpNotFound:
            return ChargeStatusResult(ProviderChargeState.NOT_FOUND)
        status = cob.get("status")
        if status == "ATIVA":
            return ChargeStatusResult(ProviderChargeState.ACTIVE)
        if status in _REMOVED:
            return ChargeStatusResult(ProviderChargeState.REMOVED)
        if status != "CONCLUIDA":
            raise InvalidResponse(f"cob {txid}: unknown status {status!r}")
        received = cob.get("pix") or []
        if not isinstance(received, list):
            raise InvalidResponse(f"cob {txid}: pix is not a list")
        events: list[Notification] = []
        for pix in received:
            if not isinstance(pix, dict):
                raise InvalidResponse(f"cob {txid}: pix entry is not an object")
            # Entries inside a cob may omit the txid: it is this cob's.
            events += _events({"txid": txid, **pix})
        return ChargeStatusResult(ProviderChargeState.COMPLETED, tuple(events))

    # ------------------------------------------------------------------ refunds

    def refund_charge(self, request: RefundRequest) -> RefundResult:
        if not E2E_ID.match(request.e2e_id) or not _REFUND_ID.match(request.refund_id):
            raise ValueError("refund: malformed e2e id or refund id")
        body: dict[str, Any] = {"valor": valor(request.amount), "natureza": "ORIGINAL"}
        if request.reason:
            body["descricao"] = request.reason[:140]
        client = self._client()
        path = f"/pix/{request.e2e_id}/devolucao/{request.refund_id}"
        try:
            devolucao = client.request("PUT", path, json_body=body, idempotent=True).data
        except HttpDeclined as refused:
            if isinstance(refused, HttpNotFound):
                raise
            # Asked before with this id (the id is ours and stable): its state is the answer.
            try:
                devolucao = client.request("GET", path, idempotent=True).data
            except HttpNotFound:
                raise refused from None
            if devolucao.get("valor") != body["valor"]:
                raise
        return _refund_result(devolucao, request.refund_id)

    def refund_status(self, request: RefundRequest) -> RefundResult:
        if not E2E_ID.match(request.e2e_id) or not _REFUND_ID.match(request.refund_id):
            raise ValueError("refund: malformed e2e id or refund id")
        try:
            devolucao = (
                self._client()
                .request("GET", f"/pix/{request.e2e_id}/devolucao/{request.refund_id}", idempotent=True)
                .data
            )
        except HttpNotFound:
            return RefundResult(status=RefundStatus.NOT_FOUND)
        return _refund_result(devolucao, request.refund_id)

    # ------------------------------------------------------------------ reconciliation

    def list_received(self, start: dt.datetime, end: dt.datetime, page: str | None = None) -> ProviderListing:
        return listing_page(
            self._client(),
            listings=(("pix", "/pix", "pix", pix_records), ("cob", "/cob", "cobs", cob_records)),
            start=start,
            end=end,
            page=page,
        )

    # ------------------------------------------------------------------ notifications

    def authenticate_notification(self, headers: Mapping[str, str], body: bytes) -> None:
        """The URL's secret segment only: the lookups at the PSP come after the request is stored."""
        verify_notification_token(self.config, self.options, headers)

    def parse_notification(self, headers: Mapping[str, str], body: bytes) -> list[Notification]:
        """The ``{webhookUrl}/pix`` callback: ``{"pix": [{endToEndId, txid,
        valor, horario, devolucoes?}, ...]}``. Authenticated by the URL's secret
        segment (the view hands it over in :data:`NOTIFICATION_TOKEN_HEADER`),
        then confirmed Pix by Pix with ``GET /pix/{e2eid}``."""
        verify_notification_token(self.config, self.options, headers)
        entries = callback_entries(body, most=MAX_PIX_PER_NOTIFICATION)
        if entries is None:
            return []  # e.g. the test call some PSPs make when the webhook is registered
        client = self._client()
        events: list[Notification] = []
        for entry in entries:
            e2e_id = entry.get("endToEndId")
            if not isinstance(e2e_id, str) or not E2E_ID.match(e2e_id):
                raise UnreadableNotification(f"malformed endToEndId {e2e_id!r}")
            try:
                pix = client.request("GET", f"/pix/{e2e_id}", idempotent=True).data
            except HttpNotFound as exc:
                raise InvalidNotification(f"Pix {e2e_id} is unknown to the acquirer") from exc
            if pix.get("endToEndId") != e2e_id:
                raise InvalidResponse(f"GET /pix/{e2e_id} answered another Pix")
            if entry.get("txid") and entry.get("txid") != pix.get("txid"):
                raise InvalidNotification(f"Pix {e2e_id}: the callback's txid differs from the acquirer's")
            events += _events(pix)
        return events


def _devedor(document: str, name: str) -> dict[str, str] | None:
    """CPF or CNPJ (alphanumeric CNPJs included) with the name; none when
    either is missing (``devedor`` is optional, but never half filled)."""
    name = name.strip()[:200]
    if not name:
        return None
    if _CPF.match(document):
        return {"cpf": document, "nome": name}
    if _CNPJ.match(document):
        return {"cnpj": document, "nome": name}
    return None


def _refund_result(devolucao: Mapping[str, Any], refund_id: str) -> RefundResult:
    """A devolução's answer (``PUT`` or ``GET``) as a :class:`RefundResult`."""
    status = devolucao.get("status")
    if devolucao.get("id") not in (None, refund_id):
        raise InvalidResponse(f"devolução answer names id {devolucao.get('id')!r}, not ours")
    mapped = {
        "EM_PROCESSAMENTO": RefundStatus.PROCESSING,
        "DEVOLVIDO": RefundStatus.DONE,
        "NAO_REALIZADO": RefundStatus.FAILED,
    }.get(str(status))
    if mapped is None:
        raise InvalidResponse(f"devolução {refund_id}: unknown status {status!r}")
    return RefundResult(
        status=mapped,
        provider_refund_id=str(devolucao.get("rtrId", ""))[:100],
        reason=str(devolucao.get("motivo", ""))[:500],
    )


def _events(pix: Mapping[str, Any]) -> list[Notification]:
    """What one confirmed Pix means for our charge: paid, and refunded once
    devoluções returned all of it. A Pix without txid is not a charge of ours."""
    txid = pix.get("txid")
    if not txid:
        return []
    e2e_id = pix.get("endToEndId")
    if not isinstance(txid, str) or not isinstance(e2e_id, str) or not E2E_ID.match(e2e_id):
        raise InvalidResponse("Pix without a valid txid or endToEndId")
    amount = centavos(pix.get("valor"))
    raw = dict(pix)
    events = [
        Notification(
            event=NotificationEvent.CHARGE_PAID,
            reference=txid,
            e2e_id=e2e_id,
            occurred_at=parse_moment(pix.get("horario")),
            amount=amount,
            raw=raw,
        )
    ]
    returned = 0
    settled_at: dt.datetime | None = None
    for devolucao in pix.get("devolucoes") or []:
        if isinstance(devolucao, dict) and devolucao.get("status") == "DEVOLVIDO":
            returned += centavos(devolucao.get("valor"))
            horario = devolucao.get("horario")
            settled_at = parse_moment(horario.get("liquidacao")) if isinstance(horario, dict) else settled_at
    if returned >= amount:
        events.append(
            Notification(
                event=NotificationEvent.CHARGE_REFUNDED,
                reference=txid,
                e2e_id=e2e_id,
                occurred_at=settled_at,
                amount=returned,
                raw=raw,
            )
        )
    elif returned:
        # Partial returns are not a state of our charges: staff see them in the stored body.
        logger.warning("Pix %s: %d of %d centavos returned (partial refund)", e2e_id, returned, amount)
    return events
