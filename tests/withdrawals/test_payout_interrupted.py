"""Payout runs that died with their worker process (issue 29, part 8), in
process: what the next run does with the dead run's lease and calls, and
the hold for staff once runs kept dying. The real pool child killed under a
real worker is tests/faults/test_payout_worker_lost.py."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from django.utils import timezone

from accounts.models import Account, LedgerEntry
from accounts.selectors import available_balance, ledger_sum
from accounts.services import ledger_post
from acquirers import adapters
from acquirers.adapters.sandbox import SandboxAdapter
from acquirers.models import Acquirer, AcquirerSlot
from acquirers.services import acquirer_slots_set
from tests.factories import AccountFactory, AcquirerFactory
from withdrawals.exceptions import PayoutUndetermined
from withdrawals.models import HoldReason, PayoutAttempt, Withdrawal, WithdrawalStatus
from withdrawals.payouts import withdrawal_process
from withdrawals.polling import payouts_poll, withdrawals_resume_held
from withdrawals.runs import (
    lost_run_note,
    lost_runs,
    lost_runs_forget,
    run_token,
    withdrawal_payout_hold_interrupted,
    withdrawal_payout_resume,
)
from withdrawals.services import LEASE, withdrawal_approve, withdrawal_request

SEED = 20_000
AMOUNT = 5000
CPF = "52998224725"

pytestmark = pytest.mark.django_db


@pytest.fixture
def account(db: Any) -> Account:
    account = AccountFactory(withdrawals_need_approval=True)
    ledger_post(
        account_id=account.pk, amount=SEED, kind=LedgerEntry.Kind.CHARGE_PAID, reference=f"seed:{uuid.uuid4().hex}"
    )
    return account


def sandbox(key: str) -> Acquirer:
    return AcquirerFactory(
        key=f"{key}_{uuid.uuid4().hex[:6]}",
        options={"charge": "ok", "payout": "ok"},
        connect_timeout_ms=100,
        read_timeout_ms=200,
    )


def approved(account: Account, *chain: Acquirer) -> Withdrawal:
    """Approved in the test's transaction: nothing is enqueued (no commit)."""
    acquirer_slots_set(account=account, purpose=AcquirerSlot.Purpose.CASHOUT, acquirers=list(chain))
    withdrawal = withdrawal_request(account=account, amount=AMOUNT, key_type="cpf", key_value=CPF)
    withdrawal_approve(withdrawal_id=withdrawal.pk, source="staff", actor="ops")
    return withdrawal


def died_mid_send(withdrawal: Withdrawal, acquirer: Acquirer, token: str) -> PayoutAttempt:
    """What a run killed mid-send leaves: its lease, its owner, its send on
    record (written before the call), still "in progress"."""
    now = timezone.now()
    Withdrawal.objects.filter(pk=withdrawal.pk).update(
        payout_leased_until=now + LEASE, payout_lease_token=token, payout_owner=acquirer, acquirer=acquirer
    )
    return PayoutAttempt.objects.create(
        withdrawal=withdrawal, acquirer=acquirer, action="send", outcome="in_progress", latency_ms=0
    )


def calls(withdrawal: Withdrawal) -> list[tuple[str, str, str, str]]:
    rows = PayoutAttempt.objects.filter(withdrawal=withdrawal).order_by("id").select_related("acquirer")
    return [(a.acquirer.key, a.action, a.outcome, a.error_class) for a in rows]


def payouts_asked(acquirer: Acquirer, withdrawal: Withdrawal) -> int:
    adapter = adapters.build(acquirer)
    assert isinstance(adapter, SandboxAdapter)
    return adapter.payout_requests(withdrawal.idempotency_id)


def test_the_token_a_main_process_names_is_the_dead_runs_and_no_live_one_shares_it() -> None:
    token = run_token(node="payouts@a", pid=41, task_id="t", retries=0)
    assert len(token) == 32
    assert token == run_token(node="payouts@a", pid=41, task_id="t", retries=0)
    # Another child, another worker, a retry of the same task: tokens of their own.
    others = {
        run_token(node="payouts@a", pid=42, task_id="t", retries=0),
        run_token(node="payouts@b", pid=41, task_id="t", retries=0),
        run_token(node="payouts@a", pid=41, task_id="t", retries=1),
    }
    assert token not in others
    assert len(others) == 3


def test_the_lost_runs_note_counts_in_a_row_and_is_forgotten() -> None:
    withdrawal_id = uuid.uuid4()
    assert lost_runs(withdrawal_id) is None
    assert lost_run_note(withdrawal_id=withdrawal_id, token="a" * 32) == 1
    assert lost_run_note(withdrawal_id=withdrawal_id, token="b" * 32) == 2
    note = lost_runs(withdrawal_id)
    assert note is not None
    assert (note.count, note.token) == (2, "b" * 32)
    lost_runs_forget(withdrawal_id)
    assert lost_runs(withdrawal_id) is None


def test_a_redelivery_takes_the_dead_runs_lease_asks_its_acquirer_and_sends_nowhere_else(account: Account) -> None:
    first, second = sandbox("first"), sandbox("second")
    withdrawal = approved(account, first, second)
    dead = uuid.uuid4().hex
    died_mid_send(withdrawal, first, dead)  # the acquirer never got it (the kill came first)

    # Any run but the one holding the dead run's token finds the payout held,
    # a run alive included: its token is not the one the main process named.
    assert withdrawal_process(withdrawal_id=withdrawal.pk) == "held"
    assert withdrawal_process(withdrawal_id=withdrawal.pk, take_over={uuid.uuid4().hex}) == "held"

    # The redelivery takes it: the send may have reached the acquirer, so it is
    # unclear, as a timeout is: asked about; "not found" is no answer while
    # it may still land, and nothing goes to the next acquirer.
    with pytest.raises(PayoutUndetermined):
        withdrawal_process(withdrawal_id=withdrawal.pk, lease_token=uuid.uuid4().hex, take_over={dead})
    assert calls(withdrawal) == [
        (first.key, "send", "timeout", "RunInterrupted"),
        (first.key, "status", "not_found", ""),
    ]
    assert payouts_asked(first, withdrawal) == payouts_asked(second, withdrawal) == 0
    withdrawal.refresh_from_db()
    assert (withdrawal.status, withdrawal.payout_owner_id) == (WithdrawalStatus.APPROVED, first.pk)
    assert withdrawal.payout_unclear_since is not None
    assert (withdrawal.payout_leased_until, withdrawal.payout_lease_token) == (None, "")

    # Once that send can no longer be on its way, the same payout goes again
    # to the same acquirer under the same idempotency id, and is paid there.
    PayoutAttempt.objects.filter(withdrawal=withdrawal).update(created_at=timezone.now() - LEASE - dt.timedelta(1))
    assert withdrawal_process(withdrawal_id=withdrawal.pk) == WithdrawalStatus.PAID
    assert payouts_asked(first, withdrawal) == 1
    assert payouts_asked(second, withdrawal) == 0
    assert available_balance(account) == SEED - AMOUNT == ledger_sum(account)


def test_a_payout_held_because_its_runs_kept_dying_runs_again_only_when_staff_resume_it(
    account: Account, django_capture_on_commit_callbacks: Callable[..., Any]
) -> None:
    acquirer = sandbox("held")
    withdrawal = approved(account, acquirer)
    dead = uuid.uuid4().hex
    died_mid_send(withdrawal, acquirer, dead)
    lost_run_note(withdrawal_id=withdrawal.pk, token=dead)

    assert withdrawal_payout_hold_interrupted(withdrawal_id=withdrawal.pk, runs_lost=3, take_over=dead) is None
    withdrawal.refresh_from_db()
    assert (withdrawal.hold_reason, withdrawal.status) == (HoldReason.PAYOUT_INTERRUPTED, WithdrawalStatus.APPROVED)
    assert withdrawal.held_since is not None
    # A send is on record: undetermined too (only its acquirer, or staff, settle it).
    assert withdrawal.payout_unclear_since is not None
    assert (withdrawal.payout_leased_until, withdrawal.payout_lease_token) == (None, "")
    assert calls(withdrawal) == [(acquirer.key, "send", "timeout", "RunInterrupted")]

    # Nothing runs it: not a run, not beat, not the account's reactivation.
    Withdrawal.objects.filter(pk=withdrawal.pk).update(updated_at=timezone.now() - dt.timedelta(hours=1))
    assert withdrawal_process(withdrawal_id=withdrawal.pk) == "on_hold"
    assert payouts_poll(older_than=dt.timedelta(0)) == 0
    assert withdrawals_resume_held(account.pk) == 0
    assert len(calls(withdrawal)) == 1
    assert payouts_asked(acquirer, withdrawal) == 0

    # Staff resume it: the count starts over and a run is enqueued on commit,
    # which asks the acquirer first and, past that send's time in flight, pays.
    with django_capture_on_commit_callbacks() as enqueued:
        assert withdrawal_payout_resume(withdrawal_id=withdrawal.pk) is True
    assert len(enqueued) == 1
    assert withdrawal_payout_resume(withdrawal_id=withdrawal.pk) is False  # once
    assert lost_runs(withdrawal.pk) is None
    PayoutAttempt.objects.filter(withdrawal=withdrawal).update(created_at=timezone.now() - LEASE - dt.timedelta(1))
    assert withdrawal_process(withdrawal_id=withdrawal.pk) == WithdrawalStatus.PAID
    assert payouts_asked(acquirer, withdrawal) == 1
    assert available_balance(account) == SEED - AMOUNT == ledger_sum(account)
