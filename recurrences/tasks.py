"""Background work of Pix Automático: each task takes ids, calls one
service, and is idempotent (the beat's round finds whatever a lost task
left: ``recurrences.schedule``)."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

from celery import Task, shared_task

from payments.due_payments import now_in_brazil
from recurrences import authorisations
from recurrences.cycles import cycle_send
from recurrences.schedule import recurrences_tick


@shared_task(acks_late=True, ignore_result=True)
def tick() -> dict[str, int]:
    """Beat: one round over authorisations and cycles, on the real clock."""
    done = recurrences_tick()
    return {"synced": done.synced, "opened": done.opened, "sent": done.sent, "read": done.read}


@shared_task(acks_late=True, ignore_result=True)
def send_push(recurrence_id: str) -> bool:
    """The push journey's request to the payer's bank; unsent, the round's sync finds it."""
    return authorisations.push_send(recurrence_id=uuid.UUID(recurrence_id))


@shared_task(acks_late=True, ignore_result=True)
def cancel_at_acquirer(recurrence_id: str) -> bool:
    """A recurrence cancelled here, cancelled at its acquirer (the round asks again until it answers)."""
    return authorisations.recurrence_cancel_there(recurrence_id=uuid.UUID(recurrence_id))


@shared_task(bind=True, acks_late=True, ignore_result=True, max_retries=10)
def cancel_orphan(
    self: Task[Any, Any], acquirer_id: int, debtor_document: str, contract: str, since: str, id_rec: str = ""
) -> bool:
    """Find and cancel a recurrence an acquirer may hold though we stored none;
    asked again with back-off while its answer is unclear."""
    done = authorisations.orphan_cancel(
        acquirer_id=acquirer_id,
        debtor_document=debtor_document,
        contract=contract,
        since=dt.datetime.fromisoformat(since),
        id_rec=id_rec,
    )
    if not done:
        raise self.retry(countdown=min(3600, 30 * 2 ** int(self.request.retries or 0)))
    return done


@shared_task(acks_late=True, ignore_result=True)
def send_cycle(cycle_id: str) -> str:
    """Send a cycle whose amount just came (its window may close before the next round)."""
    return cycle_send(cycle_id=uuid.UUID(cycle_id), today=now_in_brazil())
