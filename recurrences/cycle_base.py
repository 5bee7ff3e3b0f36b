"""What the cycle modules share: the txid, the terms, the next due date,
the cycle's webhook, and which cycles are open."""

from __future__ import annotations

import datetime as dt
import uuid

from django.db.models import QuerySet

from payments.recurrence_schedule import creation_window, due_date
from payments.recurrence_terms import RecurrenceTerms
from recurrences.models import Cycle, CycleStatus, Recurrence
from recurrences.payloads import cycle_event
from webhooks.services import event_emit

#: Cycles the schedule still works on.
OPEN = (CycleStatus.SCHEDULED, CycleStatus.AWAITING_AMOUNT, CycleStatus.ACTIVE, CycleStatus.RETRYING)


def cycles_locked() -> QuerySet[Cycle]:
    """Cycles read ``FOR UPDATE`` of their own rows only: the related rows
    joined in (a nullable charge) are not locked here, each has its own order."""
    return Cycle.objects.select_for_update(of=("self",))


def cycle_txid(recurrence_id: uuid.UUID, index: int) -> str:
    """The cobr's txid: the recurrence's 32 hex digits and the index in base
    36 on 3 (35 characters, API Pix's maximum): the same every time the
    cycle is sent."""
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    tail = ""
    n = index
    for _ in range(3):
        n, r = divmod(n, 36)
        tail = digits[r] + tail
    if n:
        raise ValueError(f"cycle index {index} beyond the txid's room")
    return recurrence_id.hex + tail


def terms_of(recurrence: Recurrence) -> RecurrenceTerms:
    return RecurrenceTerms.from_api(recurrence.terms)


def next_due(recurrence: Recurrence, index: int) -> dt.date | None:
    calendario = terms_of(recurrence).calendario
    following = due_date(calendario, index + 1)
    if calendario.data_final is not None and following > calendario.data_final:
        return None
    return following


def cycle_changed(cycle: Cycle, recurrence: Recurrence) -> None:
    """The cycle's webhook, in the caller's transaction."""
    event = cycle_event(cycle, recurrence)
    event_emit(
        account_id=recurrence.account_id,
        event_type=event.event_type,
        record_id=event.record_id,
        status=event.status,
        data=event.data,
        postback_url=recurrence.postback_url,
    )


def opens_on(recurrence: Recurrence, index: int) -> dt.date | None:
    """The day cycle ``index``'s window opens; None past the recurrence's end."""
    calendario = terms_of(recurrence).calendario
    due = due_date(calendario, index)
    if calendario.data_final is not None and due > calendario.data_final:
        return None
    return creation_window(due).opens
