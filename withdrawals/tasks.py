"""Background work on withdrawals."""

from __future__ import annotations

from celery import shared_task

from withdrawals.exceptions import PayoutUndetermined
from withdrawals.payouts import withdrawal_process
from withdrawals.services import payouts_poll


@shared_task(
    acks_late=True,
    ignore_result=True,
    # The acquirer that may hold the payout is asked again, with growing
    # backoff, for the settle window (PAYOUT_SETTLE_WINDOW_MINUTES); past it
    # the run returns "undetermined" (staff's queue) instead of raising.
    autoretry_for=(PayoutUndetermined,),
    retry_backoff=10,
    retry_backoff_max=600,
    # Beat's poller is the net under these; both only ever ask before sending.
    max_retries=20,
)
def process_withdrawal(withdrawal_id: str) -> str:
    """Approve (when automatic) and pay out. Idempotent: a lease on the row
    and the attempt history make a second run ask before it ever sends."""
    return withdrawal_process(withdrawal_id=withdrawal_id)


@shared_task(acks_late=True, ignore_result=True)
def poll_stuck_payouts() -> int:
    """Beat: processing again the withdrawals nothing moved for a while."""
    return payouts_poll()
