"""A payout whose pool child is SIGKILLed mid-send (the OOM killer's way)
resumes within seconds, is paid once, and a payout that kills its child
every time stops after a bounded number of deliveries, held for staff
(issue 29, part 8).

Real parts: the three workers as deployed (the payout one prefork, one
child, so the child holding the send is the one killed), Efí's send-Pix API
faked on loopback behind mTLS, which kills that child while it holds the
send it has just recorded, and the broker's default visibility timeout
(an hour): the redelivery does not wait for it.
"""

from __future__ import annotations

import datetime as dt
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from django.contrib.admin.models import LogEntry
from django.test import Client

from accounts.models import Account, LedgerEntry
from accounts.selectors import available_balance, ledger_sum
from acquirers.models import Acquirer
from tests.acquirers.fake_efi import FakeEfi
from tests.faults.conftest import SEED, efi_cashout, wait_until_paid
from tests.helpers import admin_action
from tests.realworld import CeleryWorker, celery_workers_apart, wait_for
from webhooks.models import WebhookEvent
from withdrawals.models import HoldReason, PayoutAttempt, Withdrawal, WithdrawalStatus
from withdrawals.polling import payouts_poll
from withdrawals.services import withdrawal_request

AMOUNT = 5000  # fee 1.00 + 1 % discounted: 48.50 sent
CPF = "52998224725"
#: The issue's bound is a minute from the worker's death; well under it.
PROMPTLY = 45.0

# The workers are other processes: they see only committed rows.
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def efi_acquirer(account: Account, efi: FakeEfi) -> Acquirer:
    return efi_cashout(account, efi, name="efi_lost", read_timeout_ms=10_000)  # the kill, not a timeout, ends the send


def pool_children(worker: CeleryWorker) -> list[int]:
    """The prefork pool's child processes of ``worker``."""
    path = Path(f"/proc/{worker.process.pid}/task/{worker.process.pid}/children")
    return [int(pid) for pid in path.read_text().split()]


def gone(pid: int) -> bool:
    """Dead: no process, or a zombie its parent has not reaped yet."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state in ("Z", "X")


def killer(worker: CeleryWorker, operations: tuple[str, ...], times: int) -> tuple[list[int], Callable[[str], None]]:
    """A ``while_holding`` hook for the fake Efí: on each of ``operations``,
    at most ``times`` times, SIGKILL the payout worker's only pool child
    (the one whose call Efí is holding, having acted on it), and answer only
    once it is dead. Returns the pids killed and the hook."""
    killed: list[int] = []

    def kill(operation: str) -> None:
        if operation not in operations or len(killed) >= times:
            return
        (child,) = pool_children(worker)
        os.kill(child, signal.SIGKILL)
        killed.append(child)
        wait_for(lambda: gone(child), timeout=10, interval=0.01)

    return killed, kill


def attempts(withdrawal: Withdrawal) -> list[tuple[str, str, str]]:
    rows = PayoutAttempt.objects.filter(withdrawal=withdrawal).order_by("id")
    return list(rows.values_list("action", "outcome", "error_class"))


def test_a_payout_whose_pool_child_is_killed_mid_send_is_paid_within_seconds_and_once(
    database_name: str, account: Account, efi: FakeEfi, efi_acquirer: Acquirer, tmp_path: Path
) -> None:
    with celery_workers_apart(
        database_name, tmp_path, concurrency=1, webhook_concurrency=1, payout_concurrency=1
    ) as workers:
        killed, kill = killer(workers.payouts, ("send",), times=1)
        efi.while_holding = kill
        # Auto-approved: committed, and its run enqueued, as it returns; that
        # run approves and enqueues the payout run, whose send is held.
        withdrawal = withdrawal_request(account=account, amount=AMOUNT, key_type="cpf", key_value=CPF)
        wait_for(lambda: killed, timeout=30, interval=0.02)
        died = time.monotonic()
        wait_until_paid(withdrawal, workers.payouts, within=PROMPTLY, since=" of the kill")
        resumed_in = time.monotonic() - died
        log = workers.payouts.output()

    assert len(killed) == 1
    assert "WorkerLostError" in log, log[-4000:]
    assert resumed_in < PROMPTLY
    # Efí got exactly one send, under the withdrawal's id: the redelivered run
    # took the dead run's lease back, asked, and found it paid.
    (send,) = efi.calls_of("send")
    assert send.path == f"/v3/gn/pix/{withdrawal.idempotency_id}"
    assert list(efi.sends) == [withdrawal.idempotency_id]
    assert attempts(withdrawal) == [("send", "timeout", "RunInterrupted"), ("status", "paid", "")]
    assert withdrawal.e2e_id == efi.sends[withdrawal.idempotency_id]["endToEndId"]
    assert (withdrawal.payout_leased_until, withdrawal.payout_lease_token, withdrawal.hold_reason) == (None, "", "")
    # The money moved once: one debit, no reversal; balance equals the ledger.
    assert available_balance(account) == SEED - AMOUNT == ledger_sum(account)
    kinds = list(LedgerEntry.objects.filter(account=account).order_by("id").values_list("kind", flat=True))
    assert kinds == [LedgerEntry.Kind.CHARGE_PAID, LedgerEntry.Kind.WITHDRAWAL]
    statuses = WebhookEvent.objects.filter(record_id=withdrawal.pk).order_by("created_at")
    assert list(statuses.values_list("status", flat=True)) == [WithdrawalStatus.APPROVED, WithdrawalStatus.PAID]


def test_a_payout_that_kills_its_child_every_time_stops_held_for_staff_who_resume_it(
    database_name: str,
    account: Account,
    efi: FakeEfi,
    efi_acquirer: Acquirer,
    admin_client: Client,
    tmp_path: Path,
) -> None:
    with celery_workers_apart(
        database_name, tmp_path, concurrency=1, webhook_concurrency=1, payout_concurrency=1
    ) as workers:
        # Every call of the payout kills the child making it: the send, then
        # each redelivery's status question (it asks before anything else).
        killed, kill = killer(workers.payouts, ("send", "status"), times=10)
        efi.while_holding = kill
        withdrawal = withdrawal_request(account=account, amount=AMOUNT, key_type="cpf", key_value=CPF)

        def held() -> bool:
            withdrawal.refresh_from_db()
            return withdrawal.hold_reason == HoldReason.PAYOUT_INTERRUPTED

        try:
            wait_for(held, timeout=90, interval=0.05)
        except AssertionError:
            raise AssertionError(f"never held; killed {killed}:\n{workers.payouts.output()[-6000:]}") from None
        # The delivery that held it was acknowledged: nothing is left to run.
        wait_for(lambda: "succeeded in" in workers.payouts.output().rsplit("received", 1)[-1], timeout=10)
        assert "'on_hold'" in workers.payouts.output().rsplit("received", 1)[-1]

        # Three runs died (settings.PAYOUT_MAX_LOST_RUNS), the fourth delivery ran nothing.
        assert len(killed) == 3
        assert len(efi.calls_of("send")) == 1
        assert len(efi.calls_of("status")) == 2
        assert attempts(withdrawal) == [
            ("send", "timeout", "RunInterrupted"),
            ("status", "timeout", "RunInterrupted"),
            ("status", "timeout", "RunInterrupted"),
        ]
        # Held, undetermined (a send is on record), no lease left, money still debited.
        assert withdrawal.status == WithdrawalStatus.APPROVED
        assert withdrawal.held_since is not None
        assert withdrawal.payout_unclear_since is not None
        assert withdrawal.payout_owner_id == efi_acquirer.pk
        assert (withdrawal.payout_leased_until, withdrawal.payout_lease_token) == (None, "")
        assert available_balance(account) == SEED - AMOUNT == ledger_sum(account)
        assert list(WebhookEvent.objects.filter(record_id=withdrawal.pk).values_list("status", flat=True)) == [
            WithdrawalStatus.APPROVED
        ]
        assert payouts_poll(older_than=dt.timedelta(0)) == 0  # beat leaves it to staff

        # Staff see it, with why, among the payouts that wait.
        listing = admin_client.get("/admin/withdrawals/withdrawal/?payout=held")
        page = listing.content.decode()
        assert f'value="{withdrawal.pk}"' in page
        assert "Processamento interrompido repetidamente" in page

        # The cause dealt with, staff resume it: it asks Efí, which paid the one send.
        efi.while_holding = None
        resumed = admin_action(
            admin_client, "/admin/withdrawals/withdrawal/", "resume_payout", [withdrawal.pk], reason="Causa corrigida"
        )
        assert resumed.status_code == 200
        wait_until_paid(withdrawal, workers.payouts, within=PROMPTLY, since=" of staff resuming it")

    assert len(efi.calls_of("send")) == 1
    assert list(efi.sends) == [withdrawal.idempotency_id]
    assert withdrawal.e2e_id == efi.sends[withdrawal.idempotency_id]["endToEndId"]
    settled = Withdrawal.objects.filter(pk=withdrawal.pk).values_list("hold_reason", "payout_unclear_since")
    assert list(settled) == [("", None)]
    assert available_balance(account) == SEED - AMOUNT == ledger_sum(account)
    kinds = list(LedgerEntry.objects.filter(account=account).order_by("id").values_list("kind", flat=True))
    assert kinds == [LedgerEntry.Kind.CHARGE_PAID, LedgerEntry.Kind.WITHDRAWAL]
    (logged,) = LogEntry.objects.filter(object_id=str(withdrawal.pk)).values_list("change_message", flat=True)
    assert logged == "Retomar pagamento interrompido. Motivo: Causa corrigida"
