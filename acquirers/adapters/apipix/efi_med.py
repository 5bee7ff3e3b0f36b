"""Efí's MED infractions (``efi_pix``): the listing the service polls and the
defence it delivers, an Efí extension of the API Pix (``/v2/gn/infracoes``;
scopes ``gn.infractions.read`` and ``gn.infractions.write`` enabled on the
application). Shapes as Efí's SDKs document them (sdk-node-apis-efi,
``medList`` / ``medDefense``): docs/operations/acquirers.md lists what is
assumed beyond them.

- ``GET /v2/gn/infracoes?inicio&fim`` (RFC 3339; ``paginacao.paginaAtual``
  from 0, ``paginacao.itensPorPagina``): ``{"parametros": {..., "paginacao":
  {"quantidadeDePaginas", ...}}, "infracoes": [{idInfracao, endToEndId,
  valor ("12.34"), status, razao, dadosAnalise: {abertura,
  prazoFinalizacao, finalizacao?}, criadoEm, atualizadoEm}]}``. Which moment
  ``inicio``/``fim`` filter on is not documented: the window always reaches
  :data:`LOOKBACK` back, so an infraction opened weeks ago and decided now
  is still listed (the service applies a record it already has as a no-op).
- ``POST /v2/gn/infracoes/{idInfracao}/defesa`` with ``{"analise":
  "rejeitado", "justificativa": <the defence>}`` (the receiver disagrees
  with the claim). Efí's body has no attachments: they stay with the
  service, for staff.

Efí's listing gives no blocked or returned amount: an open infraction is
taken as blocking its whole value (the MED's cautionary block), an accepted
one as having returned it all.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, urlencode

from django.utils import timezone

from acquirers.adapters.apipix.client import ApiClient
from acquirers.adapters.apipix.formats import E2E_ID, centavos, parse_moment
from acquirers.adapters.apipix.listing import MAX_PAGES, PAGE_SIZE, moment
from acquirers.adapters.apipix.problems import HttpDeclined
from acquirers.adapters.base import (
    AcquirerUnavailable,
    InfractionDefense,
    InfractionPage,
    InfractionRecord,
    InfractionStatus,
    InvalidResponse,
)

logger = logging.getLogger(__name__)

LIST_PATH = "/v2/gn/infracoes"
DEFENSE_PATH = "/v2/gn/infracoes/{id_infracao}/defesa"
#: Efí's statuses (``CANCELADA_EFI`` as the SDK names it; ``CANCELADA`` read the same).
STATUSES = {
    "ABERTA": InfractionStatus.OPEN,
    "EM_DEFESA": InfractionStatus.IN_DEFENSE,
    "ACEITA": InfractionStatus.ACCEPTED,
    "REJEITADA": InfractionStatus.REJECTED,
    "CANCELADA": InfractionStatus.CANCELED,
    "CANCELADA_EFI": InfractionStatus.CANCELED,
}
_CLOSED = frozenset({InfractionStatus.ACCEPTED, InfractionStatus.REJECTED, InfractionStatus.CANCELED})
#: How far back every listing reaches, whatever ``since`` asks (see the module docstring).
LOOKBACK = dt.timedelta(days=30)
#: The defence's ``analise``: the receiver disagrees with the payer's claim.
DEFENSE_ANALYSIS = "rejeitado"
#: A refusal saying the defence is there already (a delivery asked again after an unclear answer).
_ALREADY_ANSWER = re.compile(
    r"j[aá] (possui|tem|existe|foi|recebeu).{0,40}defesa|defesa.{0,40}j[aá] (foi|existe|enviad|registrad)"
)


def infractions_page(client: ApiClient, *, since: dt.datetime, page: str | None) -> InfractionPage:
    """One page of Efí's infractions (see the module docstring); an entry that
    cannot be read is logged and left out (listed again at the next poll),
    never the page's failure."""
    if page is not None and (not page.isdigit() or int(page) >= MAX_PAGES):
        raise ValueError(f"not an infractions page: {page!r}")
    number = int(page or 0)
    now = timezone.now()
    query = urlencode(
        {
            "inicio": moment(min(since, now - LOOKBACK)),
            # ``moment`` drops the fraction: a second on, so nothing of the current second is cut off.
            "fim": moment(now + dt.timedelta(seconds=1)),
            "paginacao.paginaAtual": number,
            "paginacao.itensPorPagina": PAGE_SIZE,
        }
    )
    data = client.request("GET", f"{LIST_PATH}?{query}", idempotent=True).data
    entries = data.get("infracoes", [])
    if not isinstance(entries, list):
        raise InvalidResponse(f"GET {LIST_PATH}: infracoes is not a list")
    parametros = data.get("parametros")
    paginacao = parametros.get("paginacao") if isinstance(parametros, dict) else None
    pages = paginacao.get("quantidadeDePaginas") if isinstance(paginacao, dict) else None
    if not isinstance(pages, int) or pages < 0:
        # Without the page count the listing may be partial: unusable.
        raise InvalidResponse(f"GET {LIST_PATH}: no parametros.paginacao.quantidadeDePaginas")
    records = [r for entry in entries if (r := _readable(entry)) is not None]
    more = number + 1 < min(pages, MAX_PAGES)
    return InfractionPage(records=tuple(records), next_page=str(number + 1) if more else None)


def _readable(entry: object) -> InfractionRecord | None:
    try:
        if not isinstance(entry, dict):
            raise InvalidResponse("the entry is not an object")
        return infraction_record(entry)
    except (InvalidResponse, ValueError, TypeError, KeyError) as exc:
        named = entry.get("idInfracao") if isinstance(entry, dict) else None
        logger.warning("efi_pix: infraction %r left out, unreadable: %s", named, exc)
        return None


def infraction_record(entry: Mapping[str, Any]) -> InfractionRecord:
    """One entry of the listing as the adapter interface's record."""
    external_id = entry.get("idInfracao")
    if not isinstance(external_id, str | int) or not str(external_id).strip():
        raise InvalidResponse("infraction without an idInfracao")
    e2e_id = entry.get("endToEndId")
    if not isinstance(e2e_id, str) or not E2E_ID.match(e2e_id):
        raise InvalidResponse(f"infraction {external_id}: malformed endToEndId {e2e_id!r}")
    status = STATUSES.get(str(entry.get("status")))
    if status is None:
        raise InvalidResponse(f"infraction {external_id}: unknown status {entry.get('status')!r}")
    amount = centavos(entry.get("valor"))
    given = entry.get("dadosAnalise")
    analysis: Mapping[str, Any] = given if isinstance(given, dict) else {}
    reason = " - ".join(str(entry[k]) for k in ("razao", "tipoSituacao") if entry.get(k))
    return InfractionRecord(
        external_id=str(external_id),
        e2e_id=e2e_id,
        status=status,
        amount=amount,
        blocked_amount=amount,
        returned_amount=amount if status is InfractionStatus.ACCEPTED else 0,
        reason=reason[:500],
        opened_at=parse_moment(analysis.get("abertura")) or parse_moment(entry.get("criadoEm")),
        defense_deadline=parse_moment(analysis.get("prazoFinalizacao")),
        closed_at=(parse_moment(analysis.get("finalizacao")) or parse_moment(entry.get("atualizadoEm")))
        if status in _CLOSED
        else None,
        raw=dict(entry),
    )


def defense_submit(client: ApiClient, defense: InfractionDefense) -> None:
    """Deliver the defence. Efí's answers: 2xx taken; "already has a defence"
    taken too; a refusal of a closed infraction or one past its deadline (and
    any other 4xx) is :class:`~acquirers.adapters.base.AcquirerDeclined`; a
    timeout, a 5xx or a 403 (the scope not enabled yet: staff can fix it) is
    unknown, asked again later. Never retried inside the call (a POST)."""
    if defense.attachments:
        logger.info(
            "efi_pix: infraction %s: attachments kept here: %d (Efí's defence takes text only)",
            defense.external_id,
            len(defense.attachments),
        )
    path = DEFENSE_PATH.format(id_infracao=quote(defense.external_id, safe=""))
    body = {"analise": DEFENSE_ANALYSIS, "justificativa": defense.text}
    try:
        client.request("POST", path, json_body=body, idempotent=False)
    except HttpDeclined as refused:
        text = str(refused).lower()
        if refused.status == 403:
            raise AcquirerUnavailable(f"{refused}; the defence is asked again once the scope is enabled") from refused
        # "Already has a defence" first: its wording may name the deadline too
        # ("já possui defesa dentro do prazo"), which the closed pattern matches.
        if refused.status == 409 or _ALREADY_ANSWER.search(text):
            logger.info("efi_pix: infraction %s already has a defence (%s)", defense.external_id, refused)
            return
        raise
