"""The beat's round over Pix Automático, with the clock given (``now``): the
beat passes the real one, tests a simulated one (a year of monthly cycles
in seconds, no sleeping).

One round, each step bounded and idempotent, safe with two beats at once
(rows are claimed or locked with ``skip_locked``, cycles are unique):

1. authorisations read back: waiting ones every few minutes, approved ones
   a few times a day (a payer may cancel at their bank), our own cancels
   asked again until the acquirer confirms;
2. cycles opened whose window has come (``recurrences.cycles.cycles_open``);
3. scheduled cycles sent (``PUT /cobr``), variable ones still without an
   amount at the window's end missed;
4. cycles that ended while a send's answer was unclear read back (a cobr
   there is cancelled), cycles whose settlement day has come read back,
   their retries sent;
5. approved recurrences past their last cycle, all cycles ended, completed.
"""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from dataclasses import dataclass, field

from django.db.models import Q
from django.utils import timezone

from payments.due_payments import day_in_brazil
from payments.recurrence_schedule import MAX_LEAD_DAYS
from recurrences import authorisations
from recurrences.cycle_base import OPEN
from recurrences.cycles import cycle_send, cycle_send_settle, cycles_miss_unpriced, cycles_open
from recurrences.models import CYCLE_ENDED, Cycle, CycleStatus, Journey, Recurrence, RecurrenceStatus
from recurrences.outcomes import cycle_sync
from recurrences.services import recurrence_complete

logger = logging.getLogger(__name__)

#: How often a recurrence waiting for the payer is read back, and an approved one.
WAITING_EVERY = dt.timedelta(minutes=5)
APPROVED_EVERY = dt.timedelta(hours=6)
#: How often a cycle whose settlement day has come is read back until it ends.
CYCLE_EVERY = dt.timedelta(minutes=30)


@dataclass
class Round:
    synced: int = 0
    opened: int = 0
    sent: int = 0
    read: int = 0
    errors: list[str] = field(default_factory=list)


def recurrences_tick(*, now: dt.datetime | None = None, limit: int = 500) -> Round:
    """One round (see the module's docstring); ``limit`` bounds each step."""
    moment = now or timezone.now()
    today = day_in_brazil(moment)
    done = Round()
    for recurrence_id in _to_sync(moment, limit):
        done.synced += authorisations.recurrence_sync(recurrence_id=recurrence_id, now=moment)
    for recurrence_id in _to_cancel(limit):
        authorisations.recurrence_cancel_there(recurrence_id=recurrence_id)
    unsent = Recurrence.objects.filter(status=RecurrenceStatus.CREATED, journey=Journey.PUSH, push_status="")
    for recurrence_id in unsent.values_list("pk", flat=True)[:limit]:
        authorisations.push_send(recurrence_id=recurrence_id, now=moment)
    opening = Recurrence.objects.filter(status=RecurrenceStatus.APPROVED, next_open_on__lte=today)
    for recurrence_id in opening.order_by("next_open_on").values_list("pk", flat=True)[:limit]:
        done.opened += len(cycles_open(recurrence_id=recurrence_id, today=today))
    cycles_miss_unpriced(today=today)
    # Window opened (due within 10 days); past it, cycle_send settles an unclear send or misses the cycle.
    sendable = Cycle.objects.filter(
        status=CycleStatus.SCHEDULED, amount__isnull=False, due_date__lte=today + dt.timedelta(days=MAX_LEAD_DAYS)
    )
    for cycle_id in sendable.order_by("due_date").values_list("pk", flat=True)[:limit]:
        done.sent += cycle_send(cycle_id=cycle_id, today=today) != CycleStatus.SCHEDULED
    # Cycles that ended while a send's answer was unclear: the acquirer may hold their cobr.
    unsettled = Cycle.objects.filter(send_unclear=True, status__in=CYCLE_ENDED).values_list("pk", flat=True)
    for cycle_id in unsettled[:limit]:
        cycle_send_settle(cycle_id=cycle_id, today=today)
    cutoff = moment - CYCLE_EVERY
    settling = Cycle.objects.filter(
        Q(status=CycleStatus.ACTIVE, due_date__lte=today) | Q(status=CycleStatus.RETRYING),
    ).filter(Q(synced_at__isnull=True) | Q(synced_at__lte=cutoff))
    for cycle_id in settling.order_by("due_date").values_list("pk", flat=True)[:limit]:
        cycle_sync(cycle_id=cycle_id, today=today, now=moment)
        done.read += 1
    finished = Recurrence.objects.filter(
        status=RecurrenceStatus.APPROVED, next_index__isnull=False, next_open_on=None
    ).exclude(cycles__status__in=OPEN)
    for recurrence_id in finished.values_list("pk", flat=True)[:limit]:
        recurrence_complete(recurrence_id=recurrence_id, now=moment)
    return done


def _to_sync(moment: dt.datetime, limit: int) -> list[uuid.UUID]:
    waiting = Q(status=RecurrenceStatus.CREATED) & (
        Q(synced_at__isnull=True) | Q(synced_at__lte=moment - WAITING_EVERY)
    )
    approved = Q(status=RecurrenceStatus.APPROVED) & (
        Q(synced_at__isnull=True) | Q(synced_at__lte=moment - APPROVED_EVERY)
    )
    rows = Recurrence.objects.filter(waiting | approved).order_by("synced_at")
    return list(rows.values_list("pk", flat=True)[:limit])


def _to_cancel(limit: int) -> list[uuid.UUID]:
    return list(Recurrence.objects.filter(cancel_pending=True).values_list("pk", flat=True)[:limit])
