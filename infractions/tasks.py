"""Background work on MED infractions: reading acquirers' listings (beat,
and on an acquirer's ``infraction.changed`` notification), delivering
defences, and the deadline notices."""

from __future__ import annotations

from typing import Any

from celery import Task, shared_task

from infractions.deadlines import deadline_notices_send
from infractions.defense_delivery import Delivery, defense_send, defense_sweep_skip, defenses_sweep
from infractions.polling import infractions_poll_all

#: Seconds before the first retry of a defence without a definitive answer;
#: doubled each time up to DEFENSE_RETRY_MAX_SECONDS, for DEFENSE_MAX_RETRIES
#: tries; past them beat's sweep (defenses_sweep) keeps asking.
DEFENSE_RETRY_FIRST_SECONDS = 10
DEFENSE_RETRY_MAX_SECONDS = 600
DEFENSE_MAX_RETRIES = 20


@shared_task(acks_late=True, ignore_result=True)
def poll_infractions(acquirer_id: int | None = None) -> int:
    """Beat (every acquirer whose adapter lists infractions), or one acquirer
    woken by its notification: read the infractions changed since its cursor
    and apply them. Idempotent."""
    return infractions_poll_all(acquirer_id=acquirer_id)


@shared_task(bind=True, acks_late=True, ignore_result=True, max_retries=DEFENSE_MAX_RETRIES)
def send_defense(self: Task[Any, Any], infraction_id: str) -> str:
    """Deliver a submitted defence to the acquirer. Idempotent (a delivered
    or refused defence is left alone; the acquirer answers "already
    defended" to a second delivery). No definitive answer: asked again with
    growing backoff."""
    outcome = defense_send(infraction_id=infraction_id)
    if outcome is Delivery.UNKNOWN and self.request.retries < DEFENSE_MAX_RETRIES:
        countdown = min(DEFENSE_RETRY_MAX_SECONDS, DEFENSE_RETRY_FIRST_SECONDS * 2**self.request.retries)
        defense_sweep_skip(infraction_id=infraction_id, seconds=countdown)
        raise self.retry(countdown=countdown)
    return outcome


@shared_task(acks_late=True, ignore_result=True)
def sweep_defenses() -> int:
    """Beat: hand defences submitted but not delivered to a worker again."""
    return defenses_sweep()


@shared_task(acks_late=True, ignore_result=True)
def notify_deadlines() -> int:
    """Beat: the ``infraction.deadline`` webhooks due (infractions.deadlines)."""
    return deadline_notices_send()
