"""The ``efi_pix`` acquirer: cash-out through Efí's (formerly Gerencianet)
"send Pix" API, an Efí extension of the API Pix (``/gn/...``), built on
:mod:`acquirers.adapters.apipix` (mTLS, OAuth2 client credentials).

Implemented from Efí's public documentation, not against the live API:
see docs/operations/acquirers.md, "efi_pix: payouts through Efí", for what
is assumed. Options: the connection options of :mod:`acquirers.adapters.apipix.options`
(``base_url`` ``https://pix.api.efipay.com.br``, homologação
``https://pix-h.api.efipay.com.br``; ``token_url`` defaults to
``{base_url}/oauth/token``; the token request is HTTP Basic with a JSON body,
Efí's form), plus ``chave``, the paying account's Pix key at Efí,
``notification_token_env`` and ``info_pagador``.

- ``create_payout``: ``PUT /v3/gn/pix/{idEnvio}`` with our idempotency id as
  ``idEnvio``. Never retried by the client: Efí refuses a reused ``idEnvio``
  (409 ``id_envio_duplicado``) instead of answering the first send again, and
  after an unclear answer the withdrawal service asks the status anyway
  (decisions §5). Any 4xx is checked against the status lookup before it is
  reported as a refusal: a refusal of a send Efí already holds (a retried
  send whose first answer was lost) must never let the chain pay elsewhere,
  and a 409 is never one (Efí has the id even if its lookup lags).
- ``get_payout_status``: ``GET /v2/gn/pix/enviados/id-envio/{idEnvio}``.
  ``NOT_FOUND`` only for Efí's documented 404 problem
  ``PixEnviadoNaoEncontrado`` (after an unclear send the withdrawal service
  still waits and asks again: Efí may record a send after answering 404);
  any other 404, 4xx, 5xx, timeout or garbage is "unknown" (an
  :class:`AcquirerUnavailable`), so the payout waits rather than risk a second send.
- ``lookup_key`` (the payee check) and the send's ``favorecido.cpf``/``cnpj``:
  :mod:`.efi_keys` (the lookup's route is assumed).
- ``list_sent``: ``GET /v2/gn/pix/enviados?inicio&fim``, page by page
  (``paginacao.paginaAtual``, as the API Pix's listings), for reconciliation.
- ``list_infractions`` / ``defend_infraction``: MED infractions on the Pix
  the account received, ``GET /v2/gn/infracoes`` and ``POST
  /v2/gn/infracoes/{idInfracao}/defesa`` (:mod:`.efi_med`).
- ``parse_notification``: the ``{webhookUrl}/pix`` callback of the paying
  key. The URL's secret segment is compared in constant time, then every sent
  Pix it names (``gnExtras.idEnvio``) is looked up; events come from Efí's
  answer, never from the body, so a forged or replayed callback moves no money.

No charges (``supports_charge`` is off): cash-out only, so the selectors never
put an ``efi_pix`` acquirer in a charge's chain nor offer it for selection
(cash-in at Efí is a ``bacen_pix`` acquirer on another key: see
docs/operations/acquirers.md, "efi_pix: payouts through Efí").
"""

from __future__ import annotations

import datetime as dt
import logging
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from acquirers.adapters.apipix import efi_keys, efi_med
from acquirers.adapters.apipix.callbacks import callback_entries, verify_notification_token
from acquirers.adapters.apipix.client import ApiClient, client_for
from acquirers.adapters.apipix.formats import E2E_ID, centavos, parse_moment, valor
from acquirers.adapters.apipix.listing import listing_page
from acquirers.adapters.apipix.options import clean_connection_options, clean_notification_token_env, clean_pix_key
from acquirers.adapters.apipix.problems import HttpDeclined, HttpNotFound
from acquirers.adapters.base import (
    AcquirerAdapter,
    AcquirerUnavailable,
    AdapterError,
    InfractionDefense,
    InfractionPage,
    InvalidNotification,
    InvalidOptions,
    InvalidResponse,
    KeyOwner,
    Notification,
    NotificationEvent,
    PayoutRequest,
    PayoutResult,
    PayoutStatus,
    ProviderListing,
    ProviderPixRecord,
    ProviderRecordStatus,
    UnreadableNotification,
)
from acquirers.adapters.registry import register

logger = logging.getLogger(__name__)

SEND_PATH = "/v3/gn/pix/{id_envio}"
STATUS_PATH = "/v2/gn/pix/enviados/id-envio/{id_envio}"
LIST_PATH = "/v2/gn/pix/enviados"
#: The last segment of the ``type`` of Efí's 404 problem for an unknown send.
NOT_FOUND_KIND = "PixEnviadoNaoEncontrado"
STATES = {
    "EM_PROCESSAMENTO": PayoutStatus.PROCESSING,
    "REALIZADO": PayoutStatus.PAID,
    "NAO_REALIZADO": PayoutStatus.FAILED,
}
_ID_ENVIO = re.compile(r"^[a-zA-Z0-9]{1,35}$")
#: At most this many sent Pix are confirmed per callback (each is a GET to Efí).
MAX_PIX_PER_NOTIFICATION = 50
#: Efí's limit for ``pagador.infoPagador``.
MAX_INFO_PAGADOR = 140


@register
class EfiPixAdapter(AcquirerAdapter):
    name = "efi_pix"
    supports_charge = False
    supports_list_sent = True
    supports_infractions = True
    supports_key_lookup = True  # the payee check (efi_keys: the route is assumed)

    @classmethod
    def validate_options(cls, options: Mapping[str, Any]) -> dict[str, Any]:
        given = dict(options)
        # Efí's token endpoint takes JSON (HTTP Basic for the client), and lives on the API's host.
        given.setdefault("token_body", "json")
        base_url = given.get("base_url")
        if "token_url" not in given and isinstance(base_url, str) and base_url:
            given["token_url"] = base_url.rstrip("/") + "/oauth/token"
        # No scopes in the token request: Efí grants those enabled on the application
        # (pix.send and gn.pix.send.read here).
        clean = clean_connection_options(
            given, default_scopes=(), own=("chave", "notification_token_env", "info_pagador")
        )
        if urlsplit(clean["base_url"]).path not in ("", "/"):
            # The paths (/v3/gn/..., /v2/gn/...) are the adapter's: a base URL with a
            # path (e.g. the /v2 of a bacen_pix acquirer at Efí) would miss every route.
            raise InvalidOptions("base_url must be Efí's API origin without a path (https://pix.api.efipay.com.br)")
        clean["chave"] = clean_pix_key(given, what="the paying account's Pix key at Efí")
        info = given.get("info_pagador", "")
        if not isinstance(info, str) or len(info) > MAX_INFO_PAGADOR:
            raise InvalidOptions(f"info_pagador must be text of at most {MAX_INFO_PAGADOR} characters")
        if info:
            clean["info_pagador"] = info
        clean |= clean_notification_token_env(given)
        return clean

    def _client(self) -> ApiClient:
        return client_for(self.config, self.options)

    # ------------------------------------------------------------------ payouts

    def create_payout(self, request: PayoutRequest) -> PayoutResult:
        if not _ID_ENVIO.match(request.idempotency_id):
            raise ValueError(f"idEnvio {request.idempotency_id!r} is not 1-35 alphanumerics")
        pagador: dict[str, str] = {"chave": self.options["chave"]}
        if self.options.get("info_pagador"):
            pagador["infoPagador"] = self.options["info_pagador"]
        # With the payee's document, Efí itself refuses a key of another owner (efi_keys).
        favorecido = efi_keys.favorecido(request.key_value, request.payee_document)
        body = {"valor": valor(request.amount), "pagador": pagador, "favorecido": favorecido}
        client = self._client()
        path = SEND_PATH.format(id_envio=request.idempotency_id)
        try:
            # Not retried here (idempotent=False): see the module docstring.
            sent = client.request("PUT", path, json_body=body, idempotent=False).data
        except HttpDeclined as refused:
            return self._after_refusal(client, request, refused)
        return _result(sent, request.idempotency_id, amount=request.amount)

    def _after_refusal(self, client: ApiClient, request: PayoutRequest, refused: HttpDeclined) -> PayoutResult:
        """A 4xx to our send: 409 ``id_envio_duplicado`` after a lost answer,
        or a refusal Efí may still have recorded. What Efí holds under our
        ``idEnvio`` decides; only "never received" makes it a refusal."""
        try:
            held = _lookup(client, request.idempotency_id)
        except AdapterError as exc:
            raise AcquirerUnavailable(f"{refused}; then the status lookup failed: {exc}") from exc
        if held is None:
            if refused.status == 409:
                # "idEnvio already used" says Efí has this send, whatever the
                # lookup says a moment later: never a refusal.
                raise AcquirerUnavailable(f"{refused}; Efí has this idEnvio but its lookup does not show it yet")
            raise efi_keys.send_refusal(refused)  # the owner check of favorecido: PayeeRefused
        logger.info(
            "acquirer %s: send %s refused (%s) but Efí holds it", self.config.key, request.idempotency_id, refused
        )
        return _result(held, request.idempotency_id, amount=request.amount)

    def get_payout_status(self, idempotency_id: str) -> PayoutResult:
        if not _ID_ENVIO.match(idempotency_id):
            raise ValueError(f"idEnvio {idempotency_id!r} is not 1-35 alphanumerics")
        held = _lookup(self._client(), idempotency_id)
        if held is None:
            return PayoutResult(status=PayoutStatus.NOT_FOUND)
        return _result(held, idempotency_id)

    # ------------------------------------------------------------------ the payee check

    def lookup_key(self, key_type: str, key_value: str) -> KeyOwner:
        return efi_keys.lookup_key(self._client(), key_value)

    # ------------------------------------------------------------------ reconciliation

    def list_sent(self, start: dt.datetime, end: dt.datetime, page: str | None = None) -> ProviderListing:
        return listing_page(
            self._client(), listings=(("enviados", LIST_PATH, "pix", _sent_records),), start=start, end=end, page=page
        )

    # ------------------------------------------------------------------ MED infractions

    def list_infractions(self, since: dt.datetime, page: str | None = None) -> InfractionPage:
        return efi_med.infractions_page(self._client(), since=since, page=page)

    def defend_infraction(self, defense: InfractionDefense) -> None:
        efi_med.defense_submit(self._client(), defense)

    # ------------------------------------------------------------------ notifications

    def authenticate_notification(self, headers: Mapping[str, str], body: bytes) -> None:
        """The URL's secret segment only: the lookups at the PSP come after the request is stored."""
        verify_notification_token(self.config, self.options, headers)

    def parse_notification(self, headers: Mapping[str, str], body: bytes) -> list[Notification]:
        """``{"pix": [{endToEndId, valor, horario, status, tipo, gnExtras:
        {idEnvio}}, ...]}`` on the paying key's webhook. Entries without
        ``gnExtras.idEnvio`` (Pix received, devoluções) are not payouts and
        are ignored; each payout is confirmed with the status lookup."""
        verify_notification_token(self.config, self.options, headers)
        entries = callback_entries(body, most=MAX_PIX_PER_NOTIFICATION)
        if entries is None:
            return []  # the test call Efí makes when the webhook is registered
        client = self._client()
        events: list[Notification] = []
        confirmed: set[str] = set()
        for entry in entries:
            extras = entry.get("gnExtras")
            id_envio = extras.get("idEnvio") if isinstance(extras, dict) else None
            if id_envio is None:
                continue
            if not isinstance(id_envio, str) or not _ID_ENVIO.match(id_envio):
                raise UnreadableNotification(f"malformed gnExtras.idEnvio {id_envio!r}")
            if id_envio in confirmed:
                continue
            confirmed.add(id_envio)
            held = _lookup(client, id_envio)
            if held is None:
                raise InvalidNotification(f"sent Pix {id_envio} is unknown to Efí")
            result = _result(held, id_envio)
            claimed_e2e = entry.get("endToEndId")
            if claimed_e2e and result.e2e_id and claimed_e2e != result.e2e_id:
                raise InvalidNotification(f"sent Pix {id_envio}: the callback's endToEndId differs from Efí's")
            event = {
                PayoutStatus.PAID: NotificationEvent.PAYOUT_PAID,
                PayoutStatus.FAILED: NotificationEvent.PAYOUT_FAILED,
            }.get(result.status)
            if event is None:
                # Still EM_PROCESSAMENTO at Efí whatever the body says: nothing to apply yet.
                logger.info("acquirer %s: sent Pix %s is still %s", self.config.key, id_envio, result.status)
                continue
            events.append(
                Notification(
                    event=event,
                    reference=id_envio,
                    e2e_id=result.e2e_id,
                    occurred_at=result.paid_at,
                    amount=centavos(held.get("valor")),
                    raw=held,
                )
            )
        return events


_RECORD_STATES = {
    PayoutStatus.PAID: ProviderRecordStatus.PAID,
    PayoutStatus.PROCESSING: ProviderRecordStatus.PROCESSING,
    PayoutStatus.FAILED: ProviderRecordStatus.FAILED,
}


def _sent_records(sent: Mapping[str, Any]) -> list[ProviderPixRecord]:
    """A sent Pix of the listing as a record; ``reference`` is its ``idEnvio``
    (empty for a Pix sent outside the API, e.g. from Efí's app)."""
    id_envio = sent.get("idEnvio")
    status = sent.get("status")
    mapped = STATES.get(status) if isinstance(status, str) else None
    if mapped is None:
        raise InvalidResponse(f"listed sent Pix {id_envio!r}: unknown status {status!r}")
    e2e = sent.get("endToEndId")
    horario = sent.get("horario")
    when = horario.get("liquidacao") or horario.get("solicitacao") if isinstance(horario, dict) else None
    return [
        ProviderPixRecord(
            reference=id_envio if isinstance(id_envio, str) else "",
            status=_RECORD_STATES[mapped],
            amount=centavos(sent.get("valor")),
            e2e_id=e2e if isinstance(e2e, str) and E2E_ID.match(e2e) else None,
            occurred_at=parse_moment(when),
            raw=dict(sent),
        )
    ]


def _lookup(client: ApiClient, id_envio: str) -> dict[str, Any] | None:
    """Efí's record of our send, or None when Efí says it never received it.
    Anything short of that definitive answer raises :class:`AcquirerUnavailable`
    (never :class:`AcquirerDeclined`, which would let the chain move on)."""
    path = STATUS_PATH.format(id_envio=id_envio)
    try:
        return client.request("GET", path, idempotent=True).data
    except HttpNotFound as exc:
        if exc.problem is not None and exc.problem.kind == NOT_FOUND_KIND:
            return None
        # A 404 from a proxy, a retired route or an unknown dialect says nothing about our send.
        raise InvalidResponse(f"{exc}: not Efí's {NOT_FOUND_KIND}, so the payout's state is unknown") from exc
    except HttpDeclined as exc:
        raise AcquirerUnavailable(f"status lookup refused, the payout's state is unknown: {exc}") from exc


def _result(data: Mapping[str, Any], id_envio: str, *, amount: int | None = None) -> PayoutResult:
    """A send answer (``e2eId``) or a lookup (``endToEndId``) as our result."""
    if data.get("idEnvio") != id_envio:
        raise InvalidResponse(f"Efí's answer names idEnvio {data.get('idEnvio')!r}, not {id_envio}")
    status = data.get("status")
    mapped = STATES.get(status) if isinstance(status, str) else None
    if mapped is None:
        raise InvalidResponse(f"sent Pix {id_envio}: unknown status {status!r}")
    if amount is not None and centavos(data.get("valor")) != amount:
        # Our idEnvio is derived from the withdrawal: another value there is for staff.
        raise InvalidResponse(f"sent Pix {id_envio} is for {data.get('valor')}, not {valor(amount)}")
    e2e = data.get("endToEndId") or data.get("e2eId")
    e2e_id = e2e if isinstance(e2e, str) and E2E_ID.match(e2e) else None
    horario = data.get("horario")
    settled_at = parse_moment(horario.get("liquidacao")) if isinstance(horario, dict) else None
    if mapped is PayoutStatus.PAID:
        if e2e_id is None:
            raise InvalidResponse(f"sent Pix {id_envio} is REALIZADO without a valid endToEndId ({e2e!r})")
        return PayoutResult(status=mapped, provider_payout_id=e2e_id, e2e_id=e2e_id, paid_at=settled_at)
    reason = ""
    if mapped is PayoutStatus.FAILED:
        extras = data.get("gnExtras")
        erro = extras.get("erro") if isinstance(extras, dict) else None
        if isinstance(erro, dict):
            reason = " - ".join(str(erro[k])[:200] for k in ("codigo", "motivo") if erro.get(k))
        reason = reason or "NAO_REALIZADO"
    return PayoutResult(status=mapped, provider_payout_id=e2e_id or id_envio, e2e_id=e2e_id, reason=reason)
