"""Asking acquirers where charges stand (status polling), for charges whose
notification may have been lost; the answer is applied as the same events
an inbound notification carries (:mod:`payments.events`)."""

from __future__ import annotations

import datetime as dt
import logging
import time
import uuid

from django.db import DatabaseError
from django.db.models import F, Q
from django.utils import timezone

from acquirers import calls
from acquirers.adapters.base import (
    AcquirerUnavailable,
    AdapterError,
    Notification,
    NotificationEvent,
    ProviderChargeState,
)
from acquirers.inbound import ApplyResult
from acquirers.models import Acquirer
from core.exceptions import PixServiceError
from payments.choices import ChargeKind
from payments.due_acquirer import REMOVED_PREFIX, can_read, due_paid_news, due_read, is_due
from payments.events import charge_event_apply
from payments.models import Charge, ChargeStatus

logger = logging.getLogger(__name__)


def charge_status_poll(*, charge_id: uuid.UUID | str) -> list[ApplyResult]:
    """Ask the charge's acquirer where a pending charge stands and apply what
    it says: paid (and refunded), or removed there (failed here). Raises
    :class:`AdapterError` when the acquirer cannot answer."""
    charge = Charge.objects.select_related("acquirer").get(pk=charge_id)
    acquirer = charge.acquirer
    due = is_due(charge)
    if not can_read(acquirer, due=due):
        return []
    events = _due_news(charge) if due else _news(charge)
    return [charge_event_apply(acquirer=acquirer, notification=event, source="acquirer") for event in events]


def _news(charge: Charge) -> list[Notification]:
    # The one guarded call: deadline, outcome, latency metric and breaker as
    # for a charge or a payout. Its failure is this function's (the caller
    # counts the acquirer down for the rest of its run).
    call = calls.call(charge.acquirer, "charge_status", lambda adapter: adapter.charge_status(charge.txid))
    if call.result is None:
        raise call.error if call.error is not None else AcquirerUnavailable("no answer")
    status = call.result
    if status.state is ProviderChargeState.REMOVED and charge.status == ChargeStatus.PENDING:
        return [_removed(charge)]
    if status.state is ProviderChargeState.NOT_FOUND:
        logger.warning("acquirer %s does not know charge %s", charge.acquirer.key, charge.txid)
    return list(status.events)


def _due_news(charge: Charge) -> list[Notification]:
    """A cobv read back: its Pix (what was paid, with its parts) or, removed
    there while pending here, the charge fails as a removed cob's does."""
    call = due_read(charge)
    if call.result is None:
        raise call.error if call.error is not None else AcquirerUnavailable("no answer")
    if call.result.status.startswith(REMOVED_PREFIX) and charge.status == ChargeStatus.PENDING:
        return [_removed(charge)]
    return due_paid_news(call.result)


def _removed(charge: Charge) -> Notification:
    return Notification(event=NotificationEvent.CHARGE_FAILED, reference=charge.txid)


def charges_status_poll(
    *,
    older_than: dt.timedelta = dt.timedelta(minutes=2),
    every: dt.timedelta = dt.timedelta(minutes=5),
    limit: int = 100,
    time_budget: float = 120.0,
) -> int:
    """Poll the acquirers of charges pending for longer than ``older_than``
    (their notification may have been lost), each charge at most once per
    ``every`` whichever process runs this, at most ``limit`` charges within
    ``time_budget`` seconds (well under the task time limit, whatever the
    acquirers do). Returns how many charges changed.

    Only charges not read for ``every`` are selected, never read first, then
    the least recently read: due-date charges pending for weeks take their
    turn with the others instead of filling every run."""
    now = timezone.now()
    due_for_poll = Charge.objects.filter(
        _pollable(), status=ChargeStatus.PENDING, created_at__lte=now - older_than
    ).filter(_not_polled_since(now - every))
    changed = polled = 0
    down: set[int] = set()
    stop_at = time.monotonic() + time_budget
    while polled < limit and time.monotonic() <= stop_at:
        # Each row read is polled now, or left for another process that just
        # did, or its acquirer is down: none comes back in the next read.
        rows = list(
            due_for_poll.exclude(acquirer_id__in=down)
            .order_by(F("polled_at").asc(nulls_first=True), "created_at")
            .values_list("pk", "acquirer_id")[: limit - polled]
        )
        if not rows:
            break
        for charge_id, acquirer_id in rows:
            if time.monotonic() > stop_at:
                break
            if acquirer_id in down:
                continue  # an acquirer that failed once this run is not asked again until the next
            if not _claim(charge_id, every):
                continue  # polled just now by another process
            polled += 1
            changed += _poll_one(charge_id, acquirer_id, down)
    return changed


def _pollable() -> Q:
    """Immediate charges where the adapter reads a cob, due-date ones where it reads a cobv."""
    pollable = Q(pk__in=[])
    for acquirer in Acquirer.objects.all():
        for due in (False, True):
            if can_read(acquirer, due=due):
                kind = ChargeKind.DUE if due else ChargeKind.IMMEDIATE
                pollable |= Q(acquirer_id=acquirer.pk, kind=kind)
    return pollable


def _not_polled_since(cutoff: dt.datetime) -> Q:
    return Q(polled_at__isnull=True) | Q(polled_at__lte=cutoff)


def _claim(charge_id: uuid.UUID, every: dt.timedelta) -> bool:
    """Stamp the charge as read now unless another process did within
    ``every``: one conditional UPDATE, so two runs never read the same charge."""
    now = timezone.now()
    return bool(Charge.objects.filter(_not_polled_since(now - every), pk=charge_id).update(polled_at=now))


def _poll_one(charge_id: uuid.UUID, acquirer_id: int, down: set[int]) -> int:
    try:
        return sum(r.changed for r in charge_status_poll(charge_id=charge_id))
    except AdapterError as exc:
        down.add(acquirer_id)
        logger.warning("reconciling charge %s: %s: %s", charge_id, type(exc).__name__, exc)
    except PixServiceError as exc:  # a refused transition, an amount that differs: staff's
        logger.warning("reconciling charge %s: %s", charge_id, exc.message)
    except DatabaseError:
        # A Pix the database refuses for this charge (its e2e id held by
        # another charge): this charge's alone. Letting it escape would stop
        # every poll behind it; it was stamped as read, so it waits its turn
        # again, and the daily reconciliation reports it to staff.
        logger.exception("reconciling charge %s: not applied", charge_id)
    return 0
