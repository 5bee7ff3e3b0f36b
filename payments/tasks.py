"""Background work on charges: periodic (scheduled by beat), and the
acquirer's side of a refund asked by API."""

from __future__ import annotations

from typing import Any

from celery import Task, shared_task

from payments.cancel_pursuit import charge_cancel_pursue
from payments.cancellation import State as CancelState
from payments.cancellation import cancel_next_ask_in, cancellations_sweep
from payments.conversion import acquirers_conversion_measure
from payments.late_payments import late_payment_return_pursue, late_return_sweep_skip, late_returns_sweep
from payments.refunds import RefundOutcome, charge_refund_pursue, refund_sweep_skip, refunds_sweep
from payments.services import charges_expire
from payments.status_polling import charges_status_poll

#: Seconds before the first retry of a refund without a definitive answer;
#: doubled each time up to REFUND_RETRY_MAX_SECONDS, for REFUND_MAX_RETRIES
#: tries; past them beat's sweep (refunds_sweep) keeps asking.
REFUND_RETRY_FIRST_SECONDS = 10
REFUND_RETRY_MAX_SECONDS = 600
REFUND_MAX_RETRIES = 20


@shared_task(acks_late=True)
def expire_charges() -> int:
    """Cancel pending charges past their account's expiry. Idempotent."""
    return charges_expire()


@shared_task(acks_late=True)
def poll_charge_statuses() -> int:
    """Ask acquirers that can answer (``GET /cob/{txid}``) about charges left
    pending, in case their notification was lost. Idempotent."""
    return charges_status_poll()


@shared_task(bind=True, acks_late=True, ignore_result=True, max_retries=REFUND_MAX_RETRIES)
def pursue_refund(self: Task[Any, Any], refund_id: int) -> str:
    """Ask the acquirer for a refund asked by API and apply its definitive
    answer. Idempotent (the devolução id is the charge's; a refund that ended
    is left alone). "Processing" or no definitive answer (a timeout, a 5xx):
    nothing is released, and the acquirer is asked again with growing backoff."""
    outcome = charge_refund_pursue(refund_id=refund_id)
    if outcome in (RefundOutcome.PROCESSING, RefundOutcome.UNDETERMINED) and self.request.retries < REFUND_MAX_RETRIES:
        countdown = min(REFUND_RETRY_MAX_SECONDS, REFUND_RETRY_FIRST_SECONDS * 2**self.request.retries)
        refund_sweep_skip(refund_id=refund_id, seconds=countdown)
        raise self.retry(countdown=countdown)
    return outcome


@shared_task(acks_late=True, ignore_result=True)
def sweep_refunds() -> int:
    """Beat: hand refunds left processing to a worker again."""
    return refunds_sweep()


@shared_task(bind=True, acks_late=True, ignore_result=True, max_retries=None)
def pursue_charge_cancel(self: Task[Any, Any], charge_id: str) -> str:
    """Ask the acquirer to withdraw a charge cancelled here, and again with
    growing backoff while its answer is unclear, until it is known or the
    cancellation gives up for staff (payments.cancellation). Idempotent."""
    state = charge_cancel_pursue(charge_id=charge_id)
    if state == CancelState.PENDING:
        raise self.retry(countdown=cancel_next_ask_in(charge_id=charge_id))
    return state


@shared_task(acks_late=True, ignore_result=True)
def sweep_charge_cancels() -> int:
    """Beat: hand cancellations whose next ask is overdue to a worker again."""
    return cancellations_sweep()


@shared_task(bind=True, acks_late=True, ignore_result=True, max_retries=REFUND_MAX_RETRIES)
def pursue_late_payment_return(self: Task[Any, Any], resolution_id: int) -> str:
    """Ask the acquirer for the devolução of a late payment staff decided to
    return, and apply its definitive answer; asked again with growing backoff
    while it is processing or unclear (the same devolução id: never twice)."""
    status = late_payment_return_pursue(resolution_id=resolution_id)
    if status == "processing" and self.request.retries < REFUND_MAX_RETRIES:
        countdown = min(REFUND_RETRY_MAX_SECONDS, REFUND_RETRY_FIRST_SECONDS * 2**self.request.retries)
        late_return_sweep_skip(resolution_id=resolution_id, seconds=countdown)
        raise self.retry(countdown=countdown)
    return status


@shared_task(acks_late=True, ignore_result=True)
def sweep_late_payment_returns() -> int:
    """Beat: hand returns of late payments left processing to a worker again."""
    return late_returns_sweep()


@shared_task(ignore_result=True)
def measure_acquirer_conversion() -> int:
    """Beat, every 10 minutes: the acquirer listing's measured conversion
    (payments.conversion). Idempotent: a run repeated measures the same."""
    return acquirers_conversion_measure()
