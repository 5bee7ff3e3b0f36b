"""Background work on withdrawals. Payout runs go to their own queue and
worker (``PAYOUT_QUEUE``, settings' CELERY_TASK_ROUTES); the poller, which
only scans and enqueues, stays on the default queue."""

from __future__ import annotations

import contextlib
import logging
import os
import uuid
from typing import Any

import psycopg
from billiard.einfo import ExceptionInfo, ExceptionWithTraceback  # type: ignore[attr-defined]  # not in the stub
from billiard.exceptions import WorkerLostError
from celery import Task, shared_task
from celery.worker.request import Request
from django.conf import settings
from django.db import DatabaseError, InterfaceError, OperationalError, connection

from withdrawals.batches import payout_batches_sweep
from withdrawals.exceptions import PayoutUndetermined
from withdrawals.payees import payee_look_up
from withdrawals.payouts import ProcessOutcome, withdrawal_process
from withdrawals.polling import payouts_poll
from withdrawals.runs import lost_run_note, lost_runs, lost_runs_forget, run_token, withdrawal_payout_hold_interrupted
from withdrawals.schedule import scheduled_payouts_release

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


class PayoutRunRequest(Request):
    """A payout run as the worker's main process sees it (Celery's custom
    request class): when the pool child running it dies, the main process
    notes the lease token the dead run held (``withdrawals.runs``) before the
    message goes back to the queue, so its redelivery takes the payout back
    at once and counts the runs lost in a row."""

    def on_failure(self, exc_info: ExceptionInfo, send_failed_event: bool = True, return_ok: bool = False) -> None:
        exc = exc_info.exception
        if isinstance(exc, ExceptionWithTraceback):
            exc = exc.exc
        # The child is gone (billiard reports SIGKILL as WorkerLostError, an
        # exit as SystemExit): nothing of the run can act any more.
        if isinstance(exc, (WorkerLostError, SystemExit)):
            self._note_lost()
        super().on_failure(exc_info, send_failed_event=send_failed_event, return_ok=return_ok)

    def _note_lost(self) -> None:
        withdrawal_id = self.args[0] if self.args else self.kwargs.get("withdrawal_id")
        if not withdrawal_id:
            return
        token = ""
        if self.worker_pid:
            retries = int(self.request_dict.get("retries") or 0)
            token = run_token(node=self.hostname, pid=int(self.worker_pid), task_id=self.id, retries=retries)
        count = lost_run_note(withdrawal_id=withdrawal_id, token=token)
        logger.warning(
            "withdrawal %s: its payout run died with pool child %s (%s in a row); sent again at once",
            withdrawal_id,
            self.worker_pid,
            count,
        )


class PayoutRunTask(Task[Any, Any]):
    """Payout runs: the worker's main process handles them as :class:`PayoutRunRequest`."""

    Request = f"{__name__}:PayoutRunRequest"


@shared_task(
    bind=True,
    base=PayoutRunTask,
    acks_late=True,
    # A run whose pool child dies (OOM killer, SIGKILL) is handed back to the
    # queue at once, not acknowledged and lost; PayoutRunRequest lets it take
    # the payout back, and bounds how often (PAYOUT_MAX_LOST_RUNS).
    reject_on_worker_lost=True,
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
def process_withdrawal(self: PayoutRunTask, withdrawal_id: str, db_retries: int = 0, left_lease: str = "") -> str:
    """Approve (when automatic) and pay out. Idempotent: a lease on the row
    and the attempt history make a second run ask before it ever sends.

    A run whose database connection is lost is retried within seconds
    (``TRANSIENT_RETRY_COUNTDOWNS``, counted by ``db_retries``) rather than
    left to the poller; one whose pool child dies is handed back to the queue
    at once (``PayoutRunRequest``). The second run is harmless, like any:

    - it takes back the lease its dead attempt could not release instead of
      waiting it out: the retry carries that attempt's token (``left_lease``),
      the redelivery finds the dead child's in ``withdrawals.runs``, and
      either swaps it for one of its own in one conditional UPDATE, so of two
      deliveries of the same message (brokers deliver at least once) only the
      first takes it; the other, and any other run (poller, staff's "ask
      again"), finds the payout held. Every run alive has its own token
      (``withdrawals.runs.run_token``): a duplicate delivery of a message
      claims nothing a running one holds. A payout whose runs died
      ``PAYOUT_MAX_LOST_RUNS`` times in a row is held for staff instead;
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
    request = self.request
    dead = {left_lease}
    # Handed back to the queue: its last run may have died with its process.
    lost = lost_runs(withdrawal_id) if (request.delivery_info or {}).get("redelivered") else None
    if lost is not None:
        if lost.count >= settings.PAYOUT_MAX_LOST_RUNS:
            # It kills its worker every time: run no more, staff's now.
            status = withdrawal_payout_hold_interrupted(
                withdrawal_id=withdrawal_id, runs_lost=lost.count, take_over=lost.token
            )
            return status or ProcessOutcome.ON_HOLD
        dead.add(lost.token)
    dead.discard("")
    lease_token = run_token(
        node=request.hostname or "", pid=os.getpid(), task_id=request.id or "", retries=request.retries or 0
    )
    if lease_token in dead:  # a new child got the dead one's pid: a token of its own all the same
        lease_token = uuid.uuid4().hex
    try:
        return withdrawal_process(withdrawal_id=withdrawal_id, lease_token=lease_token, take_over=dead)
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
    finally:
        if lost is not None:
            lost_runs_forget(withdrawal_id)  # this run did not die: losses count in a row


@shared_task(acks_late=True, ignore_result=True)
def poll_stuck_payouts() -> int:
    """Beat: processing again the withdrawals nothing moved for a while."""
    return payouts_poll()


@shared_task(acks_late=True, ignore_result=True)
def release_scheduled_withdrawals() -> int:
    """Beat: the payouts of withdrawals scheduled for today go out (withdrawals.schedule)."""
    return scheduled_payouts_release()


@shared_task(acks_late=True, ignore_result=True)
def look_up_payee(withdrawal_id: str) -> str | None:
    """A pending withdrawal's payee check, so staff see the key's owner on
    the approval screen; its send reuses the result while fresh. Nothing is
    decided here: only the payout run fails a withdrawal."""
    return payee_look_up(withdrawal_id=withdrawal_id)


@shared_task(acks_late=True, ignore_result=True)
def sweep_payout_batches() -> int:
    """Beat: payout batches whose decision was cut midway, or left unended."""
    return payout_batches_sweep()
