"""Reconciliation with an acquirer: what it says happened in a day (its
listings of Pix received and sent) against our charges and payouts.

The run fetches first, every page of every listing, each page one guarded
call (:func:`acquirers.calls.call`: deadline, breaker, metrics) with no
database connection, transaction or lock held while it waits. Only a
complete fetch is matched: a listing that fails midway leaves the run
failed and nothing applied (a partial listing would read as "unknown
there"). A page fails only when the page itself cannot be read (not a
list, no page count); an entry of it that cannot be read comes as an
unreadable record, an item of its own
(:func:`reconciliation.findings.unreadable_finding`), never judged. Matching
then runs through the matchers (:data:`MATCHERS`: charges for the received
listing, payouts for the sent one), one record at a time, each in its own short
transaction: they heal "paid there, pending here" through the records' own
transition services and report everything else, stored as it is found as
:class:`~reconciliation.models.ReconciliationItem` rows (one per acquirer, kind
and key: a rerun adds none). A record that cannot be judged is an item of
its own; the rest of the day is still judged. Nothing is debited or
credited otherwise.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
from dataclasses import dataclass

from django.core.cache import cache
from django.db.models import F
from django.utils import timezone

from acquirers import adapters, calls
from acquirers.adapters.base import (
    AcquirerAdapter,
    Capability,
    InvalidOptions,
    ProviderListing,
    ProviderPixRecord,
    ProviderRecordStatus,
)
from acquirers.models import Acquirer
from reconciliation.charges import charges_match
from reconciliation.findings import DIRECTIONS, Direction, Matcher, Matching, unreadable_finding
from reconciliation.items import reconciliation_item_store
from reconciliation.models import ReconciliationRun
from reconciliation.payouts import payouts_match

logger = logging.getLogger(__name__)

#: Pages fetched at most per listing (a runaway cursor is a failed run).
MAX_PAGES = 1000
#: How long one acquirer's day is reserved for the run holding it.
LOCK_SECONDS = 30 * 60


_CAPABILITY: dict[Direction, Capability] = {"received": "list_received", "sent": "list_sent"}
#: Who judges each listing: the Pix received against our charges, the Pix sent against our payouts.
MATCHERS: dict[Direction, Matcher] = {"received": charges_match, "sent": payouts_match}


class ListingFailed(Exception):
    """A page of a listing could not be read: the run fails, nothing is matched."""


class AlreadyRunning(Exception):
    """Another process is reconciling this acquirer's day right now."""


def local_day_window(day: dt.date) -> tuple[dt.datetime, dt.datetime]:
    """``[midnight, next midnight)`` of ``day`` in America/Sao_Paulo (UTC-3)."""
    zone = timezone.get_default_timezone()
    start = dt.datetime.combine(day, dt.time(), tzinfo=zone)
    return start, dt.datetime.combine(day + dt.timedelta(days=1), dt.time(), tzinfo=zone)


def yesterday(now: dt.datetime | None = None) -> dt.date:
    """The last complete day in America/Sao_Paulo."""
    return timezone.localdate(now or timezone.now(), timezone.get_default_timezone()) - dt.timedelta(days=1)


def directions_of(acquirer: Acquirer) -> list[Direction]:
    """The listings the acquirer's adapter offers (none: reconciliation skips it)."""
    try:
        cls = adapters.adapter_class(acquirer.adapter)
    except InvalidOptions:
        return []
    return [d for d in DIRECTIONS if cls.supports(_CAPABILITY[d])]


def fetch(acquirer: Acquirer, direction: Direction, start: dt.datetime, end: dt.datetime) -> list[ProviderPixRecord]:
    """Every page of one listing, each one guarded call; :class:`ListingFailed` on any failure."""
    operation = _CAPABILITY[direction]
    records: list[ProviderPixRecord] = []
    page: str | None = None

    def one_page(adapter: AcquirerAdapter) -> ProviderListing:
        listing = adapter.list_received if direction == "received" else adapter.list_sent
        return listing(start, end, page)

    for _ in range(MAX_PAGES):
        call = calls.call(acquirer, operation, one_page)
        if call.result is None:
            where = f"página {page}" if page else "primeira página"
            raise ListingFailed(f"{operation}, {where}: {call.error_class or call.outcome}: {call.error_message}")
        records += call.result.records
        page = call.result.next_page
        if page is None:
            return records
    raise ListingFailed(f"{operation}: mais de {MAX_PAGES} páginas")


@dataclass
class _Totals:
    matched_count: int = 0
    matched_amount: int = 0
    unmatched_count: int = 0
    unmatched_amount: int = 0
    healed_count: int = 0


def _match(run: ReconciliationRun, listings: dict[Direction, list[ProviderPixRecord]]) -> _Totals:
    totals = _Totals()
    acquirer = run.acquirer
    for direction, records in listings.items():
        matcher = MATCHERS[direction]
        # Each finding is stored as its record is judged (Matching.judge), not at the end.
        matching = Matching(
            store=functools.partial(reconciliation_item_store, acquirer_id=acquirer.pk, run=run, direction=direction)
        )
        # An entry the adapter could not read is that entry's item, never the
        # day's failure; the matcher judges the rest.
        readable = [r for r in records if r.status is not ProviderRecordStatus.UNREADABLE]
        for record in records:
            if record.status is ProviderRecordStatus.UNREADABLE:
                matching.findings.append(unreadable_finding(record))
        matching.flush()
        matcher(acquirer, readable, run.window_start, run.window_end, matching)
        matching.flush()
        totals.matched_count += matching.matched_count
        totals.matched_amount += matching.matched_amount
        for finding in matching.findings:
            if finding.healed:
                totals.healed_count += 1
            else:
                totals.unmatched_count += 1
                totals.unmatched_amount += finding.amount
    return totals


def _begin(acquirer: Acquirer, day: dt.date) -> ReconciliationRun:
    start, end = local_day_window(day)
    run, _ = ReconciliationRun.objects.update_or_create(
        acquirer=acquirer,
        day=day,
        defaults={
            "window_start": start,
            "window_end": end,
            "status": ReconciliationRun.Status.RUNNING,
            "started_at": timezone.now(),
            "finished_at": None,
            "error": "",
        },
        create_defaults={"window_start": start, "window_end": end, "started_at": timezone.now()},
    )
    ReconciliationRun.objects.filter(pk=run.pk).update(executions=F("executions") + 1)
    run.refresh_from_db()
    return run


def _finish(run: ReconciliationRun, status: str, *, error: str = "", totals: _Totals | None = None) -> None:
    run.status = status
    run.error = error[:500]
    run.finished_at = timezone.now()
    fields = ["status", "error", "finished_at"]
    if totals is not None:
        for name, value in vars(totals).items():
            setattr(run, name, value)
        fields += list(vars(totals))
    run.save(update_fields=fields)


def acquirer_reconcile(*, acquirer_id: int, day: dt.date) -> ReconciliationRun:
    """Reconcile one acquirer's ``day`` (America/Sao_Paulo). Idempotent: a
    rerun recomputes the day's run, heals nothing twice and adds no item
    twice. Raises :class:`AlreadyRunning` while another process holds the day."""
    acquirer = Acquirer.objects.get(pk=acquirer_id)
    lock = f"reconcile-acquirer:{acquirer.pk}:{day.isoformat()}"
    if not cache.add(lock, "1", LOCK_SECONDS):
        raise AlreadyRunning(f"{acquirer.key} {day}")
    try:
        run = _begin(acquirer, day)
        try:
            return _run(run, acquirer, day)
        except BaseException as exc:
            # A bug, the database gone, the task's time limit: what was healed stays
            # healed (each in its own transaction); the run says it did not finish.
            _finish(run, ReconciliationRun.Status.FAILED, error=f"{type(exc).__name__}: {exc}")
            raise
    finally:
        cache.delete(lock)


def _run(run: ReconciliationRun, acquirer: Acquirer, day: dt.date) -> ReconciliationRun:
    directions = directions_of(acquirer)
    if not directions:
        reason = f"O adaptador {acquirer.adapter!r} não lista Pix recebidos nem enviados."
        _finish(run, ReconciliationRun.Status.SKIPPED, error=reason, totals=_Totals())
        return run
    try:
        # Everything fetched before anything is matched (see the module docstring).
        listings = {d: fetch(acquirer, d, run.window_start, run.window_end) for d in directions}
    except ListingFailed as exc:
        logger.warning("reconciliation of %s on %s failed: %s", acquirer.key, day, exc)
        _finish(run, ReconciliationRun.Status.FAILED, error=str(exc))
        return run
    totals = _match(run, listings)
    _finish(run, ReconciliationRun.Status.DONE, totals=totals)
    logger.info(
        "reconciliation of %s on %s: %d matched, %d unmatched, %d healed",
        acquirer.key,
        day,
        totals.matched_count,
        totals.unmatched_count,
        totals.healed_count,
    )
    return run


def reconcilable_acquirers() -> list[Acquirer]:
    """Enabled acquirers whose adapter offers at least one listing."""
    return [a for a in Acquirer.objects.filter(enabled=True).order_by("key") if directions_of(a)]
