"""Background work on withdrawals. Payout runs go to their own queue and
worker (``PAYOUT_QUEUE``, settings' CELERY_TASK_ROUTES); the poller, which
only scans and enqueues, stays on the default queue."""

from __future__ import annotations

import contextlib
import logging
import uuid
from typing import Any

import psycopg
from celery import Task, shared_task
from django.db import DatabaseError, InterfaceError, OperationalError, connection

from withdrawals.exceptions import PayoutUndetermined
from withdrawals.payouts import withdrawal_process
from withdrawals.services import payouts_poll

logger = logging.getLogger(__name__)

#: The database went away under a run: its backend terminated, PostgreSQL
#: restarting or failing over, no pooled connection to be had. Django wraps
#: psycopg's errors; the raw ones can escape where it does not (the pool).
TRANSIENT_DB_ERRORS: tuple[type[Exception], ...] = (
    OperationalError,
    InterfaceError,
    psycopg.OperationalError,
    psycopg.InterfaceError,
)
#: Seconds before each retry after such an error; past the last, beat's
#: poller (payouts idle for over 2 minutes) remains the safety net.
TRANSIENT_RETRY_COUNTDOWNS = (2, 4, 8, 16, 32)


@shared_task(
    bind=True,
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
def process_withdrawal(self: Task[Any, Any], withdrawal_id: str, db_retries: int = 0, left_lease: str = "") -> str:
    """Approve (when automatic) and pay out. Idempotent: a lease on the row
    and the attempt history make a second run ask before it ever sends.

    A run whose database connection is lost is retried within seconds
    (``TRANSIENT_RETRY_COUNTDOWNS``, counted by ``db_retries``) rather than
    left to the poller. The retry is harmless, like any second run:

    - it takes back the lease its dead attempt could not release (that
      release needed the lost connection too) instead of waiting it out: the
      retry carries that attempt's token (``left_lease``) and swaps it for a
      fresh one of its own in one conditional UPDATE, so of two deliveries of
      the same message (brokers deliver at least once) only the first takes
      it; the other, and any other run (poller, staff's "ask again"), finds
      the payout held. Every run has its own token: a duplicate delivery of
      a first run claims nothing a running one holds;
    - it asks before it sends: a send is recorded (committed) before the
      acquirer is called, so whatever the attempt got to, the retry finds it
      in the history and asks that acquirer for the payout's status first;
      it sends again only on "not found" with nothing of ours still on its
      way, to that acquirer alone and under the same idempotency id, which
      the acquirer deduplicates on. A send whose answer was lost with the
      connection is thus asked about, never repeated blindly;
    - money moves only in ``withdrawal_transition``, one transaction under
      the row lock, a no-op when repeated: a transaction cut by the lost
      connection rolled back whole, one that committed is seen as done.
    """
    lease_token = uuid.uuid4().hex
    try:
        return withdrawal_process(withdrawal_id=withdrawal_id, lease_token=lease_token, take_over=left_lease)
    except TRANSIENT_DB_ERRORS as exc:
        # Discard the broken connection (the pool drops a dead one) so that
        # nothing after this, in this process, gets it again.
        with contextlib.suppress(DatabaseError, psycopg.Error):
            connection.close()
        if db_retries >= len(TRANSIENT_RETRY_COUNTDOWNS):
            logger.warning("withdrawal %s: database still failing; left to the poller", withdrawal_id)
            raise
        countdown = TRANSIENT_RETRY_COUNTDOWNS[db_retries]
        logger.warning("withdrawal %s: database connection lost (%s); retried in %ss", withdrawal_id, exc, countdown)
        raise self.retry(
            args=(withdrawal_id,),
            kwargs={"db_retries": db_retries + 1, "left_lease": lease_token},
            countdown=countdown,
            exc=exc,
        ) from exc


@shared_task(acks_late=True, ignore_result=True)
def poll_stuck_payouts() -> int:
    """Beat: processing again the withdrawals nothing moved for a while."""
    return payouts_poll()
