"""A payout run that loses its PostgreSQL connection mid-way is retried
within seconds, not left to beat's poller (payouts idle for 2 minutes),
and the retry never pays twice (issue 13, "transient faults").

Real parts: the three workers as deployed (the payout one on its own queue,
prefork), Efí's send-Pix API faked on loopback behind mTLS, and a real
``pg_terminate_backend``. The moment is the worst one: Efí has recorded the
send, and the run's write of the answer (it holds no connection while Efí
answers) is made to wait on the withdrawal's row and its backend is
terminated there, so the send's outcome is lost, and so is the release of
its lease.
"""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.utils import timezone

from accounts.models import Account, LedgerEntry
from accounts.selectors import available_balance, ledger_sum
from acquirers.models import AcquirerSlot
from acquirers.services import acquirer_slots_set
from tests.acquirers.fake_efi import FakeEfi
from tests.factories import AcquirerFactory
from tests.faults.conftest import SEED, efi_cashout, wait_until_paid
from tests.faults.test_database_dropped import pg_connect
from tests.realworld import celery_workers_apart, wait_for
from webhooks.models import WebhookEvent
from withdrawals.models import PayoutAttempt, Withdrawal, WithdrawalStatus
from withdrawals.payouts import withdrawal_process
from withdrawals.services import LEASE, withdrawal_approve, withdrawal_request

AMOUNT = 5000  # fee 1.00 + 1 % discounted: 48.50 sent
CPF = "52998224725"
#: Retries come 2, 4, 8... s after a loss; the poller only after 2 minutes.
PROMPTLY = 15.0

# The workers are other processes: they see only committed rows.
pytestmark = pytest.mark.django_db(transaction=True)


def terminate_backends_of(application_name: str) -> int:
    """Terminate the test database's backends of one process (its
    connections carry its name), never the test's own; how many."""
    with pg_connect() as admin:
        rows = admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND application_name = %s AND pid <> pg_backend_pid()",
            (application_name,),
        ).fetchall()
    return sum(1 for (done,) in rows if done)


def waiting_on_a_lock(application_name: str) -> bool:
    with pg_connect() as admin:
        row = admin.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND application_name = %s AND wait_event_type = 'Lock'",
            (application_name,),
        ).fetchone()
    return bool(row and row[0])


def test_a_payout_whose_database_connection_is_terminated_mid_send_is_paid_within_seconds_and_once(
    database_name: str, account: Account, efi: FakeEfi, tmp_path: Path
) -> None:
    efi_cashout(account, efi, name="efi_dropped", read_timeout_ms=3000)

    with celery_workers_apart(database_name, tmp_path, concurrency=1, webhook_concurrency=1) as workers:
        terminated: list[int] = []
        once = threading.Lock()

        def drop_the_workers_connections(operation: str) -> None:
            if operation == "send" and once.acquire(blocking=False):
                # The run holds no connection while Efí answers (core/connections.py):
                # it meets the fault when it writes the answer. Hold the
                # withdrawal's rows so that write waits, and terminate the
                # backend waiting on it.
                holder = pg_connect()
                holder.autocommit = False  # the locks last until cut_the_write lets go
                for table, column in (
                    (Withdrawal._meta.db_table, "id"),
                    (PayoutAttempt._meta.db_table, "withdrawal_id"),
                ):
                    holder.execute(
                        f"SELECT 1 FROM {table} WHERE {column} = %s FOR UPDATE",  # noqa: S608 - our tables
                        (withdrawal_id[0],),
                    )
                threading.Thread(target=cut_the_write, args=(holder,), daemon=True).start()

        def cut_the_write(holder: psycopg.Connection[Any]) -> None:
            try:
                wait_for(lambda: waiting_on_a_lock(workers.payouts.name), timeout=10, interval=0.02)
                terminated.append(terminate_backends_of(workers.payouts.name))
            finally:
                holder.rollback()
                holder.close()

        efi.while_holding = drop_the_workers_connections
        started = time.monotonic()
        withdrawal_id: list[uuid.UUID] = []
        # Auto-approved: committed, and its payout run enqueued, as it returns.
        withdrawal = withdrawal_request(account=account, amount=AMOUNT, key_type="cpf", key_value=CPF)
        withdrawal_id.append(withdrawal.pk)
        wait_until_paid(withdrawal, workers.payouts, within=PROMPTLY)
        elapsed = time.monotonic() - started
        log = workers.payouts.output()

    # The fault did happen, to the run holding the payout, and it was retried.
    assert terminated, "Efí never held a send"
    assert terminated[0] >= 1, "the payout worker had no connection to terminate"
    assert "database connection lost" in log, log[-4000:]
    assert elapsed < PROMPTLY
    # Efí got exactly one send, under the withdrawal's id; the retry asked.
    (send,) = efi.calls_of("send")
    assert send.path == f"/v3/gn/pix/{withdrawal.idempotency_id}"
    assert list(efi.sends) == [withdrawal.idempotency_id]
    actions = list(PayoutAttempt.objects.filter(withdrawal=withdrawal).order_by("id").values_list("action", "outcome"))
    assert [action for action, _ in actions] == ["send", "status"], actions
    assert actions[-1] == ("status", "paid")
    assert withdrawal.e2e_id == efi.sends[withdrawal.idempotency_id]["endToEndId"]
    assert (withdrawal.payout_leased_until, withdrawal.payout_lease_token) == (None, "")
    # The money moved once: one debit, no reversal; balance equals the ledger.
    assert available_balance(account) == SEED - AMOUNT == ledger_sum(account)
    kinds = list(LedgerEntry.objects.filter(account=account).order_by("id").values_list("kind", flat=True))
    assert kinds == [LedgerEntry.Kind.CHARGE_PAID, LedgerEntry.Kind.WITHDRAWAL]
    statuses = WebhookEvent.objects.filter(record_id=withdrawal.pk).order_by("created_at")
    assert list(statuses.values_list("status", flat=True)) == [WithdrawalStatus.APPROVED, WithdrawalStatus.PAID]


# In the test's transaction: no commit, so nothing is enqueued; this test runs the engine itself.
@pytest.mark.django_db
def test_a_lease_left_by_a_dead_attempt_is_taken_back_by_its_tasks_retry_only(account: Account) -> None:
    """What lets the retry proceed at once, and nothing else: the retry
    carries the token of the attempt that died, and swaps it for its own in
    one conditional UPDATE; a second delivery of the same retry (brokers
    deliver at least once) and every other run find the payout held."""
    acquirer = AcquirerFactory(key=f"sbx_lease_{uuid.uuid4().hex[:8]}", options={"charge": "ok", "payout": "ok"})
    acquirer_slots_set(account=account, purpose=AcquirerSlot.Purpose.CASHOUT, acquirers=[acquirer])
    account.withdrawals_need_approval = True
    account.save(update_fields=["withdrawals_need_approval"])
    withdrawal = withdrawal_request(account=account, amount=AMOUNT, key_type="cpf", key_value=CPF)
    withdrawal_approve(withdrawal_id=withdrawal.pk, source="staff", actor="ops")
    dead = uuid.uuid4().hex
    # The attempt died holding the lease (its release needed the lost connection).
    leased = Withdrawal.objects.filter(pk=withdrawal.pk)
    leased.update(payout_leased_until=timezone.now() + LEASE, payout_lease_token=dead)

    assert withdrawal_process(withdrawal_id=withdrawal.pk) == "held"  # a poller's run, a staff "ask again"
    assert withdrawal_process(withdrawal_id=withdrawal.pk, take_over=uuid.uuid4().hex) == "held"  # another's retry
    # A first delivery of the retry took the lease (its own token now) and is still running:
    retry = uuid.uuid4().hex
    leased.update(payout_lease_token=retry)
    assert withdrawal_process(withdrawal_id=withdrawal.pk, take_over=dead) == "held"  # the duplicate delivery
    leased.update(payout_lease_token=dead)
    assert withdrawal_process(withdrawal_id=withdrawal.pk, lease_token=retry, take_over=dead) == WithdrawalStatus.PAID
    withdrawal.refresh_from_db()
    assert (withdrawal.status, withdrawal.payout_leased_until, withdrawal.payout_lease_token) == (
        WithdrawalStatus.PAID,
        None,
        "",
    )
    assert available_balance(account) == SEED - AMOUNT == ledger_sum(account)
