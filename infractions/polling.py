"""Reading acquirers' MED infractions: the listing is the evidence every
hold, release and return rests on (a notification only wakes this up).

:func:`infractions_poll` reads every page of an acquirer's listing of the
infractions changed since its cursor, then applies each record with
:func:`infractions.services.infraction_apply` (idempotent: an infraction
seen twice, by two polls at once or by a poll and a notification's poll, is
one infraction and one hold). The cursor, kept in Redis per acquirer, is the
moment the last complete listing started; the next one starts
:data:`CURSOR_OVERLAP` before it (an acquirer's clock, or a change recorded
while we read, must not fall between two listings), or
:data:`FIRST_LOOKBACK` back the first time. It moves only once a whole
listing was read and applied: a page that cannot be read leaves it where it
was, and the next poll reads the same window again.

Every page is one guarded call (:func:`acquirers.calls.call`, operation
``list_infractions``): deadline, breaker, bulkhead, metrics, and no database
connection or transaction held while the acquirer answers (every function
here runs outside a transaction; each record is applied in its own).
"""

from __future__ import annotations

import datetime as dt
import logging

from django.core.cache import cache
from django.utils import timezone

from acquirers import adapters, calls
from acquirers.adapters.base import AcquirerAdapter, InfractionPage, InfractionRecord, InvalidOptions
from acquirers.models import Acquirer
from infractions.services import infraction_apply

logger = logging.getLogger(__name__)

#: How far before the last listing's start the next one reads.
CURSOR_OVERLAP = dt.timedelta(minutes=10)
#: How far back an acquirer never read before is listed.
FIRST_LOOKBACK = dt.timedelta(days=7)
#: Pages read at most per listing: past this the window is not trusted whole.
MAX_PAGES = 1000
#: The operation's name for acquirers.calls and acquirers.capacity.
OPERATION = "list_infractions"


class ListingFailed(Exception):
    """A page of an acquirer's infractions could not be read: nothing of the
    listing is applied and the cursor stays (the next poll reads it again)."""


def infractions_supported(acquirer: Acquirer) -> bool:
    """Whether ``acquirer``'s adapter lists infractions (an adapter this
    process does not have lists nothing)."""
    try:
        return adapters.adapter_class(acquirer.adapter).supports("infractions")
    except InvalidOptions:
        return False


def _cursor_key(acquirer: Acquirer) -> str:
    # The row's creation in the key: a row re-created with the same id (a
    # restored database, a test database) never inherits another's cursor.
    return f"infractions:cursor:{acquirer.pk}:{int(acquirer.created_at.timestamp())}"


def cursor_get(acquirer: Acquirer) -> dt.datetime | None:
    """Where the last complete listing of ``acquirer`` started, if any."""
    value = cache.get(_cursor_key(acquirer))
    return dt.datetime.fromisoformat(value) if isinstance(value, str) else None


def _cursor_set(acquirer: Acquirer, moment: dt.datetime) -> None:
    cache.set(_cursor_key(acquirer), moment.isoformat(), timeout=None)


def listing_read(*, acquirer: Acquirer, since: dt.datetime) -> list[InfractionRecord]:
    """Every page of ``acquirer``'s infractions changed since ``since``, each
    page one guarded call. Raises :class:`ListingFailed` when a page cannot be
    read (a partial listing is never used)."""
    records: list[InfractionRecord] = []
    page: str | None = None
    for _ in range(MAX_PAGES):

        def one_page(adapter: AcquirerAdapter, cursor: str | None = page) -> InfractionPage:
            return adapter.list_infractions(since, cursor)

        call = calls.call(acquirer, OPERATION, one_page)
        if call.result is None:
            where = f"página {page}" if page else "primeira página"
            raise ListingFailed(
                f"{acquirer.key}: infrações, {where}: {call.error_class or call.outcome}: {call.error_message}"
            )
        records += call.result.records
        page = call.result.next_page
        if page is None:
            return records
    raise ListingFailed(f"{acquirer.key}: infrações: mais de {MAX_PAGES} páginas")


def records_apply(*, acquirer: Acquirer, records: list[InfractionRecord]) -> int:
    """Apply each record (its own transaction); how many were applied. One
    that cannot be applied is logged and skipped: it never stops the others."""
    return _apply_each(acquirer, records)[0]


def _apply_each(acquirer: Acquirer, records: list[InfractionRecord]) -> tuple[int, bool]:
    """(how many were applied, whether one may apply on a later try): an
    unusable record (``ValueError``) never will; one the database refused
    (a deadlock, a lost connection) may, so the cursor must not pass it."""
    applied, retry = 0, False
    for record in records:
        try:
            infraction_apply(acquirer=acquirer, record=record)
        except ValueError:
            logger.exception("acquirer %s: infraction %r not applied (unusable)", acquirer.key, record.external_id)
            continue
        except Exception:  # one bad record must not cost the others
            logger.exception("acquirer %s: infraction %r not applied", acquirer.key, record.external_id)
            retry = True
            continue
        applied += 1
    return applied, retry


def infractions_poll(*, acquirer: Acquirer) -> int:
    """Read ``acquirer``'s infractions changed since its cursor and apply
    them; how many records were applied. Raises :class:`ListingFailed` (the
    cursor stays) when the listing could not be read whole."""
    started = timezone.now()
    cursor = cursor_get(acquirer)
    since = cursor - CURSOR_OVERLAP if cursor is not None else started - FIRST_LOOKBACK
    records = listing_read(acquirer=acquirer, since=since)
    applied, retry = _apply_each(acquirer, records)
    if not retry:
        # Only past a listing applied whole: an adapter that honours ``since``
        # would not list a record that failed again once the cursor passed it.
        _cursor_set(acquirer, started)
    return applied


def infractions_poll_all(*, acquirer_id: int | None = None) -> int:
    """Poll every acquirer whose adapter lists infractions (disabled ones
    too: an infraction comes on a Pix received long before), or only
    ``acquirer_id``. An acquirer that cannot be read is logged; the others
    are polled all the same. How many records were applied."""
    found = Acquirer.objects.all() if acquirer_id is None else Acquirer.objects.filter(pk=acquirer_id)
    applied = 0
    for acquirer in found.order_by("pk"):
        if not infractions_supported(acquirer):
            continue
        try:
            applied += infractions_poll(acquirer=acquirer)
        except ListingFailed as exc:
            logger.warning("infractions not polled: %s", exc)
    return applied
