"""Listings of the API Pix for reconciliation: ``GET /pix?inicio&fim`` (Pix
received) and ``GET /cob?inicio&fim`` (immediate charges), and Efí's
``GET /v2/gn/pix/enviados?inicio&fim`` (Pix sent), one page per call.

Pages are numbered from 0 (``paginacao.paginaAtual``); an answer says how
many there are in ``parametros.paginacao.quantidadeDePaginas``. A cursor is
``"<listing>:<page>"`` so one adapter can chain two listings (``pix`` then
``cob``) behind the single ``page`` argument of the adapter interface.

A page is unusable only as a whole (its list of entries, its page count);
an entry that cannot be read becomes an unreadable record carrying it
(:func:`read_entry`), reported by reconciliation as an item of its own.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlencode

from acquirers.adapters.apipix.client import ApiClient
from acquirers.adapters.apipix.formats import E2E_ID, centavos, parse_moment
from acquirers.adapters.base import InvalidResponse, ProviderListing, ProviderPixRecord, ProviderRecordStatus

#: Records asked for per page (the API's maximum is 1000).
PAGE_SIZE = 100
#: Pages read at most per listing: past this the window is too wide to trust.
MAX_PAGES = 1000

#: A cob's statuses for "withdrawn, can no longer be paid".
REMOVED_STATUSES = frozenset({"REMOVIDA_PELO_USUARIO_RECEBEDOR", "REMOVIDA_PELO_PSP"})

Reader = Callable[[Mapping[str, Any]], list[ProviderPixRecord]]


def moment(value: dt.datetime) -> str:
    """RFC 3339 in UTC, as the API's ``inicio`` and ``fim``."""
    return value.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_cursor(page: str | None, listings: tuple[str, ...]) -> tuple[str, int]:
    """(listing, page number) of a cursor; the first page of the first listing for None."""
    if page is None:
        return listings[0], 0
    name, _, number = page.partition(":")
    if name not in listings or not number.isdigit() or int(number) >= MAX_PAGES:
        raise ValueError(f"not a listing cursor: {page!r}")
    return name, int(number)


def read_page(
    client: ApiClient,
    *,
    path: str,
    key: str,
    start: dt.datetime,
    end: dt.datetime,
    number: int,
    reader: Reader,
) -> tuple[list[ProviderPixRecord], bool]:
    """One page: its records (each entry of ``key`` through ``reader``) and
    whether another page follows."""
    query = urlencode(
        {
            "inicio": moment(start),
            "fim": moment(end),
            "paginacao.paginaAtual": number,
            "paginacao.itensPorPagina": PAGE_SIZE,
        }
    )
    data = client.request("GET", f"{path}?{query}", idempotent=True).data
    entries = data.get(key, [])
    if not isinstance(entries, list):
        raise InvalidResponse(f"GET {path}: {key} is not a list")
    records: list[ProviderPixRecord] = []
    for entry in entries:
        records += read_entry(entry, reader)
    parametros = data.get("parametros")
    paginacao = parametros.get("paginacao") if isinstance(parametros, dict) else None
    pages = paginacao.get("quantidadeDePaginas") if isinstance(paginacao, dict) else None
    if not isinstance(pages, int) or pages < 0:
        # Without the page count the listing may be partial: unusable.
        raise InvalidResponse(f"GET {path}: no parametros.paginacao.quantidadeDePaginas")
    return records, number + 1 < min(pages, MAX_PAGES)


#: What a malformed entry makes a reader raise (a value it cannot parse, a
#: field of the wrong type). Anything else is a bug, and fails the page.
_ENTRY_ERRORS = (InvalidResponse, ValueError, TypeError, KeyError, AttributeError)


def read_entry(entry: object, reader: Reader) -> list[ProviderPixRecord]:
    """One entry of a page through ``reader``, or, when it cannot be read,
    one :attr:`~ProviderRecordStatus.UNREADABLE` record carrying it: a
    malformed entry is that entry's problem (reconciliation reports it),
    never the page's, or one bad record would stop the whole day at every
    rerun. Only what makes the page itself unusable (its list, its page
    count) fails it."""
    if not isinstance(entry, dict):
        return [unreadable({"entrada": entry}, "the entry is not an object")]
    try:
        return reader(entry)
    except _ENTRY_ERRORS as exc:
        return [unreadable(entry, f"{type(exc).__name__}: {exc}")]


def unreadable(entry: Mapping[str, Any], problem: str) -> ProviderPixRecord:
    """An entry that could not be read, whole, as evidence. Its reference is
    the txid or idEnvio it names, if any, only to help staff find it: never
    matched on."""
    reference = next((v for k in ("txid", "idEnvio") if isinstance(v := entry.get(k), str)), "")
    return ProviderPixRecord(
        reference=reference[:64],
        status=ProviderRecordStatus.UNREADABLE,
        amount=0,
        raw=dict(entry),
        problem=problem[:300],
    )


def listing_page(
    client: ApiClient,
    *,
    listings: tuple[tuple[str, str, str, Reader], ...],
    start: dt.datetime,
    end: dt.datetime,
    page: str | None,
) -> ProviderListing:
    """One page of a chain of listings ``(name, path, key, reader)``: the
    cursor moves through each listing's pages, then to the next listing."""
    names = tuple(name for name, *_ in listings)
    name, number = parse_cursor(page, names)
    index = names.index(name)
    _, path, key, reader = listings[index]
    records, more = read_page(client, path=path, key=key, start=start, end=end, number=number, reader=reader)
    if more:
        following: str | None = f"{name}:{number + 1}"
    elif index + 1 < len(listings):
        following = f"{names[index + 1]}:0"
    else:
        following = None
    return ProviderListing(records=tuple(records), next_page=following)


# --------------------------------------------------------------------------- API Pix records


def returned_amount(pix: Mapping[str, Any], *, med_only: bool = False) -> int:
    """Centavos of the Pix returned to the payer (devoluções DEVOLVIDO);
    ``med_only``: by MED only (natureza ``MED_*``; absent is ``ORIGINAL``)."""
    return sum(
        centavos(d.get("valor"))
        for d in pix.get("devolucoes") or []
        if isinstance(d, dict)
        and d.get("status") == "DEVOLVIDO"
        and (not med_only or str(d.get("natureza", "")).startswith("MED_"))
    )


def pix_records(pix: Mapping[str, Any]) -> list[ProviderPixRecord]:
    """A received Pix of ``GET /pix`` (or of a cob's ``pix[]``) as a listing record."""
    e2e_id = pix.get("endToEndId")
    if not isinstance(e2e_id, str) or not E2E_ID.match(e2e_id):
        raise InvalidResponse(f"listed Pix with a malformed endToEndId {e2e_id!r}")
    txid = pix.get("txid")
    amount = centavos(pix.get("valor"))
    returned = returned_amount(pix)
    devolucoes = pix.get("devolucoes")
    return [
        ProviderPixRecord(
            reference=txid if isinstance(txid, str) else "",
            status=ProviderRecordStatus.REFUNDED if returned and returned >= amount else ProviderRecordStatus.PAID,
            amount=amount,
            e2e_id=e2e_id,
            occurred_at=parse_moment(pix.get("horario")),
            returned=returned,
            returns=len(devolucoes) if isinstance(devolucoes, list) else 0,
            returned_by_med=returned_amount(pix, med_only=True),
            raw=dict(pix),
        )
    ]


def cob_records(cob: Mapping[str, Any]) -> list[ProviderPixRecord]:
    """A charge of ``GET /cob``: its Pix when paid, else the charge itself
    (active or removed there, nothing received)."""
    txid = cob.get("txid")
    if not isinstance(txid, str) or not txid:
        raise InvalidResponse("listed cob without a txid")
    status = cob.get("status")
    raw = {k: v for k, v in cob.items() if k not in ("pix", "pixCopiaECola")}
    if status == "CONCLUIDA" and cob.get("pix"):
        received = cob["pix"]
        if not isinstance(received, list) or not all(isinstance(p, dict) for p in received):
            raise InvalidResponse(f"cob {txid}: pix is not a list of objects")
        return [r for p in received for r in pix_records({"txid": txid, **p})]
    original = cob.get("valor", {}).get("original") if isinstance(cob.get("valor"), dict) else None
    state = {
        "ATIVA": ProviderRecordStatus.ACTIVE,
        "CONCLUIDA": ProviderRecordStatus.PAID,  # paid, but the PSP listed no Pix with it
    }.get(str(status), ProviderRecordStatus.REMOVED if status in REMOVED_STATUSES else None)
    if state is None:
        raise InvalidResponse(f"cob {txid}: unknown status {status!r}")
    return [ProviderPixRecord(reference=txid, status=state, amount=centavos(original), raw=raw)]
