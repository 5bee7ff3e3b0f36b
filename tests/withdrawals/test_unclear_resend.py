"""After an unclear send only that acquirer may settle the payout
(docs/api/withdrawals.md, "Unclear payouts"): neither a refusal of the same
payout sent to it again nor a "failed" or "not found" while our send (cut at
its deadline, or by a killed worker) may still land frees the chain."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import ClassVar

import pytest
from django.db import transaction
from django.utils import timezone

from accounts.models import Account, LedgerEntry
from accounts.selectors import available_balance, ledger_sum
from accounts.services import ledger_post
from acquirers import adapters
from acquirers.adapters.base import (
    AcquirerDeclined,
    AcquirerUnavailable,
    PayoutRequest,
    PayoutResult,
    PayoutStatus,
)
from acquirers.models import Acquirer, AcquirerSlot
from acquirers.services import acquirer_slots_set
from core import deadline
from tests.factories import AccountFactory, AcquirerFactory
from tests.withdrawals.payout_adapters import PayoutsOnly, paid
from withdrawals import services
from withdrawals.exceptions import PayoutUndetermined
from withdrawals.models import PayoutAttempt, Withdrawal, WithdrawalStatus
from withdrawals.payouts import withdrawal_process
from withdrawals.services import withdrawal_request

SEED = 20_000
AMOUNT = 5000


@adapters.register
class RefusesTheResend(PayoutsOnly):
    """Hangs up on the first send (it may have it); never found when asked;
    refuses the same payout sent again (e.g. the first took the balance)."""

    name = "test_refuses_resend"
    sends: ClassVar[list[str]] = []

    def create_payout(self, request: PayoutRequest) -> PayoutResult:
        self.sends.append(request.idempotency_id)
        if len(self.sends) == 1:
            raise AcquirerUnavailable("connection reset after the request was sent")
        raise AcquirerDeclined("saldo insuficiente")

    def get_payout_status(self, idempotency_id: str) -> PayoutResult:
        return PayoutResult(status=PayoutStatus.NOT_FOUND)


@adapters.register
class Drips(PayoutsOnly):
    """Takes the send and never finishes answering it: our deadline ends the
    call (as it cuts a drip-fed connection). Asked, says the payout failed
    (while our send may still land there)."""

    name = "test_drips"
    sends: ClassVar[list[str]] = []

    def create_payout(self, request: PayoutRequest) -> PayoutResult:
        self.sends.append(request.idempotency_id)
        deadline.sleep(30)
        return paid(request.idempotency_id)

    def get_payout_status(self, idempotency_id: str) -> PayoutResult:
        return PayoutResult(status=PayoutStatus.FAILED, reason="NAO_REALIZADO")


@adapters.register
class PaysAtOnce(PayoutsOnly):
    name = "test_pays_at_once"
    sends: ClassVar[list[str]] = []

    def create_payout(self, request: PayoutRequest) -> PayoutResult:
        self.sends.append(request.idempotency_id)
        return paid(request.idempotency_id)

    def get_payout_status(self, idempotency_id: str) -> PayoutResult:
        return PayoutResult(status=PayoutStatus.NOT_FOUND)


def _account(first: Acquirer, monkeypatch: pytest.MonkeyPatch) -> tuple[Account, Acquirer]:
    monkeypatch.setattr(services, "_enqueue_processing", lambda *args, **kwargs: None)
    PaysAtOnce.sends = []
    second = AcquirerFactory(key="test_pays_acq", adapter="test_pays_at_once", options={})
    account = AccountFactory(withdrawal_fee_fixed=0, withdrawal_fee_bps=0)
    with transaction.atomic():
        ledger_post(
            account_id=account.pk, amount=SEED, kind=LedgerEntry.Kind.CHARGE_PAID, reference=f"seed:{uuid.uuid4().hex}"
        )
    acquirer_slots_set(account=account, purpose=AcquirerSlot.Purpose.CASHOUT, acquirers=[first, second])
    return account, second


def _approved(account: Account) -> Withdrawal:
    withdrawal = withdrawal_request(account=account, amount=AMOUNT, key_type="cpf", key_value="52998224725")
    assert withdrawal_process(withdrawal_id=withdrawal.pk) == "approved"
    return withdrawal


@pytest.mark.django_db
def test_a_refused_resend_keeps_the_payout_with_its_acquirer(monkeypatch: pytest.MonkeyPatch) -> None:
    RefusesTheResend.sends = []
    first = AcquirerFactory(key="test_refuser", adapter="test_refuses_resend", options={})
    account, _ = _account(first, monkeypatch)
    withdrawal = _approved(account)

    with pytest.raises(PayoutUndetermined):
        withdrawal_process(withdrawal_id=withdrawal.pk)  # unclear send, then "not found"
    with pytest.raises(PayoutUndetermined):
        withdrawal_process(withdrawal_id=withdrawal.pk)  # sent again, refused: still its payout

    withdrawal.refresh_from_db()
    assert RefusesTheResend.sends == [withdrawal.idempotency_id] * 2
    assert PaysAtOnce.sends == []  # the next acquirer is never asked
    assert (withdrawal.status, withdrawal.payout_owner_id) == (WithdrawalStatus.APPROVED, first.pk)
    assert withdrawal.payout_unclear_since is not None
    assert available_balance(account) == SEED - AMOUNT == ledger_sum(account)


@pytest.mark.django_db
def test_a_failed_after_a_send_cut_at_our_deadline_frees_nothing_past_the_lease(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    Drips.sends = []
    first = AcquirerFactory(
        key="test_drips_acq", adapter="test_drips", options={}, connect_timeout_ms=100, read_timeout_ms=200
    )
    account, _ = _account(first, monkeypatch)
    withdrawal = _approved(account)

    # Cut at our deadline; asked right away it says "failed": not its last word.
    with pytest.raises(PayoutUndetermined):
        withdrawal_process(withdrawal_id=withdrawal.pk)
    send = PayoutAttempt.objects.get(withdrawal=withdrawal, action="send")
    assert (send.outcome, send.error_class) == ("timeout", services.ABANDONED)
    assert send.latency_ms < 1000  # the call ended at its deadline (0.3 s): nothing of it runs on

    # Longer ago than the lease: the acquirer may still record it, so still in flight.
    PayoutAttempt.objects.filter(pk=send.pk).update(created_at=timezone.now() - services.LEASE * 2)
    with pytest.raises(PayoutUndetermined):
        withdrawal_process(withdrawal_id=withdrawal.pk)
    withdrawal.refresh_from_db()
    assert (withdrawal.status, withdrawal.payout_owner_id) == (WithdrawalStatus.APPROVED, first.pk)
    assert PaysAtOnce.sends == []
    assert Drips.sends == [withdrawal.idempotency_id]  # sent once, never again
    assert available_balance(account) == SEED - AMOUNT == ledger_sum(account)


@adapters.register
class LostWithItsWorker(PayoutsOnly):
    """A send whose run's worker was killed mid-call: how far it got is not
    known. Asked, it answers ``answer`` ("failed", or "not found": it has not
    recorded it yet); the same payout sent again, it says failed."""

    name = "test_lost_with_worker"
    answer: ClassVar[PayoutStatus] = PayoutStatus.NOT_FOUND
    sends: ClassVar[list[str]] = []

    def create_payout(self, request: PayoutRequest) -> PayoutResult:
        self.sends.append(request.idempotency_id)
        return PayoutResult(status=PayoutStatus.FAILED, reason="id em processamento")

    def get_payout_status(self, idempotency_id: str) -> PayoutResult:
        return PayoutResult(status=self.answer, reason="NAO_REALIZADO")


@pytest.mark.django_db
@pytest.mark.parametrize("answer", [PayoutStatus.NOT_FOUND, PayoutStatus.FAILED])
def test_a_send_a_killed_worker_left_keeps_the_payout_with_its_acquirer_for_the_settle_window(
    monkeypatch: pytest.MonkeyPatch, answer: PayoutStatus
) -> None:
    """The finding: a send cut by a killed worker (RunInterrupted) was in
    flight for the lease only (5 minutes), one cut at our deadline for the
    settle window; past 5 minutes the owner's "failed" or "not found" freed
    the payout and the next acquirer paid it while the first send could still land."""
    LostWithItsWorker.sends, LostWithItsWorker.answer = [], answer
    first = AcquirerFactory(key="test_lost_acq", adapter="test_lost_with_worker", options={})
    account, _ = _account(first, monkeypatch)
    withdrawal = _approved(account)
    # What a run killed mid-send leaves: the owner, and its send on record, still "in progress".
    Withdrawal.objects.filter(pk=withdrawal.pk).update(payout_owner=first, acquirer=first)
    PayoutAttempt.objects.create(
        withdrawal=withdrawal, acquirer=first, action="send", outcome="in_progress", latency_ms=0
    )

    with pytest.raises(PayoutUndetermined):
        withdrawal_process(withdrawal_id=withdrawal.pk)  # the redelivery, at once
    send = PayoutAttempt.objects.get(withdrawal=withdrawal, action="send")
    assert (send.outcome, send.error_class) == ("timeout", services.INTERRUPTED)

    # Six minutes on: past the lease, well within the settle window (30 min).
    later = timezone.now() + services.LEASE + dt.timedelta(minutes=1)
    assert later - send.created_at < services.payout_settle_window()
    monkeypatch.setattr(timezone, "now", lambda: later)
    with pytest.raises(PayoutUndetermined):
        withdrawal_process(withdrawal_id=withdrawal.pk)

    withdrawal.refresh_from_db()
    assert (withdrawal.status, withdrawal.payout_owner_id) == (WithdrawalStatus.APPROVED, first.pk)
    assert PaysAtOnce.sends == []  # the next acquirer is never asked
    assert LostWithItsWorker.sends == []  # nor is it sent again to the first
    assert available_balance(account) == SEED - AMOUNT == ledger_sum(account)
