"""A payout whose send is unclear belongs to that acquirer until it answers
definitively (README, "Money safety"), against the fake of Efí's send-Pix API
on loopback (``fake_efi.py``) and, where it matters, a real Celery worker and
our real notification endpoint.

Efí may record a send only after our deadline and answer 404
``PixEnviadoNaoEncontrado`` to a lookup meanwhile; it may say "failed" while
our send is still on its way, then pay. Neither lets the payout go to another
acquirer or its money back to the account."""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection, transaction
from django.test import Client
from django.utils import timezone

from accounts.models import Account, LedgerEntry
from accounts.selectors import available_balance, ledger_sum
from accounts.services import account_approve, account_reject, account_set_blocked, ledger_post
from acquirers import adapters
from acquirers.adapters.base import PayoutStatus
from acquirers.models import Acquirer, AcquirerSlot
from acquirers.services import acquirer_slots_set
from core.exceptions import ValidationFailed
from tests.acquirers.conftest import EFI_CHAVE, EFI_NOTIFY_TOKEN, warm_up
from tests.acquirers.fake_efi import EfiFault, FakeEfi
from tests.factories import AccountFactory, AcquirerFactory
from tests.realworld import CeleryWorker, wait_for
from withdrawals import services
from withdrawals.exceptions import PayoutUndetermined, PayoutUnsettled
from withdrawals.models import HoldReason, PayoutAttempt, UndeterminedPayout, Withdrawal, WithdrawalStatus
from withdrawals.payouts import withdrawal_process
from withdrawals.polling import payouts_poll
from withdrawals.services import (
    withdrawal_approve,
    withdrawal_payout_resolve,
    withdrawal_request,
    withdrawal_transition,
)

SEED = 20_000
WITHDRAWAL = 5000
CPF = "52998224725"

# Our calls and the worker are other threads and processes: committed rows only.
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def account(db: Any) -> Account:
    account = AccountFactory(withdrawal_fee_fixed=100, withdrawal_fee_bps=100)
    with transaction.atomic():
        ledger_post(account_id=account.pk, amount=SEED, kind=LedgerEntry.Kind.CHARGE_PAID, reference="seed:efi-unclear")
    return account


@pytest.fixture
def handoffs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """In-process tests drive the payout themselves: hand-offs to the broker
    are recorded, so no worker processes the withdrawal behind their back."""
    calls: list[str] = []
    monkeypatch.setattr(
        services, "_enqueue_processing", lambda withdrawal_id, *a, **k: calls.append(str(withdrawal_id))
    )
    return calls


@pytest.fixture
def efi(fake_efi: FakeEfi, make_efi_acquirer: Callable[..., Acquirer]) -> Acquirer:
    # Efí's answer to a send comes after our 2 s: the call gives up first.
    acquirer = make_efi_acquirer(connect_timeout_ms=1000, read_timeout_ms=1000)
    warm_up(acquirer)
    fake_efi.delay = 3.0
    return acquirer


def sandbox(key: str, payout: str) -> Acquirer:
    return AcquirerFactory(key=key, options={"charge": "ok", "payout": payout})


def withdraw(account: Account, *chain: Acquirer) -> Withdrawal:
    acquirer_slots_set(account=account, purpose=AcquirerSlot.Purpose.CASHOUT, acquirers=list(chain))
    return withdrawal_request(account=account, amount=WITHDRAWAL, key_type="cpf", key_value=CPF)


def approved(account: Account, *chain: Acquirer) -> Withdrawal:
    withdrawal = withdraw(account, *chain)
    assert withdrawal_process(withdrawal_id=withdrawal.pk) == "approved"
    return withdrawal


def attempts(withdrawal: Withdrawal) -> list[tuple[str, str, str]]:
    rows = PayoutAttempt.objects.filter(withdrawal=withdrawal).order_by("id").select_related("acquirer")
    return [(a.acquirer.key, a.action, a.outcome) for a in rows]


def sends_at(efi: FakeEfi) -> list[str]:
    return [c.path.rsplit("/", 1)[-1] for c in efi.calls_of("send")]


def never_asked(acquirer: Acquirer, withdrawal: Withdrawal) -> None:
    assert not PayoutAttempt.objects.filter(withdrawal=withdrawal, acquirer=acquirer).exists()
    assert adapters.build(acquirer).get_payout_status(withdrawal.idempotency_id).status is PayoutStatus.NOT_FOUND


def reversals(account: Account) -> int:
    return LedgerEntry.objects.filter(account=account, kind=LedgerEntry.Kind.WITHDRAWAL_REVERSAL).count()


def in_thread(func: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    results: list[Any] = []

    def run() -> None:
        try:
            results.append(func())
        except Exception as exc:  # noqa: BLE001 - reported through the results
            results.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread, results


# --------------------------------------------------------------------------- recorded only after our deadline


def test_a_send_efi_records_after_our_deadline_is_paid_there_once_and_the_next_acquirer_is_never_asked(
    celery_worker_process: CeleryWorker, fake_efi: FakeEfi, efi: Acquirer, account: Account
) -> None:
    fallback = sandbox("sbx_after_slow_efi", "ok")
    fake_efi.outcome = "paid"
    # Efí takes the PUT, records it 3 s later (404 to a lookup meanwhile), then answers.
    fake_efi.fail("send", EfiFault.LATE_RECORD)

    withdrawal = withdraw(account, efi, fallback)

    wait_for(lambda: Withdrawal.objects.get(pk=withdrawal.pk).status == WithdrawalStatus.PAID, timeout=90)
    withdrawal.refresh_from_db()
    history = attempts(withdrawal)
    assert history[:2] == [("efi", "send", "timeout"), ("efi", "status", "not_found")]
    # Our send was cut at its deadline: Efí saw the connection closed before it answered.
    assert fake_efi.hung_up == 1
    assert history[-1] == ("efi", "status", "paid")
    assert {key for key, _, _ in history} == {"efi"}
    never_asked(fallback, withdrawal)
    # Exactly one payout at Efí, and it is the one the withdrawal says was paid.
    assert list(fake_efi.sends) == [withdrawal.idempotency_id]
    assert sends_at(fake_efi) == [withdrawal.idempotency_id]
    assert withdrawal.e2e_id == fake_efi.sends[withdrawal.idempotency_id]["endToEndId"]
    assert (withdrawal.acquirer_id, withdrawal.payout_owner_id) == (efi.pk, efi.pk)
    assert withdrawal.payout_unclear_since is None
    assert available_balance(account) == SEED - WITHDRAWAL == ledger_sum(account)
    assert reversals(account) == 0


def test_when_every_other_acquirer_would_refuse_the_withdrawal_waits_for_efi_and_is_never_failed(
    fake_efi: FakeEfi, efi: Acquirer, account: Account, handoffs: list[str]
) -> None:
    refuses = sandbox("sbx_refuses_after_efi", "fail")
    fake_efi.fail("send", EfiFault.LATE_RECORD)
    withdrawal = approved(account, efi, refuses)

    # Before: "not found" moved on, the refusal failed it, and the money went
    # back while Efí was about to pay.
    with pytest.raises(PayoutUndetermined):
        withdrawal_process(withdrawal_id=withdrawal.pk)

    withdrawal.refresh_from_db()
    assert withdrawal.status == WithdrawalStatus.APPROVED
    assert attempts(withdrawal) == [("efi", "send", "timeout"), ("efi", "status", "not_found")]
    assert (withdrawal.payout_owner_id, withdrawal.failure_reason) == (efi.pk, "")
    assert withdrawal.payout_unclear_since is not None
    assert available_balance(account) == SEED - WITHDRAWAL
    assert reversals(account) == 0
    # Nor will money go back by hand or by a notification while it is undetermined.
    with pytest.raises(PayoutUnsettled, match="ainda não disse se pagou"):
        withdrawal_transition(
            withdrawal_id=withdrawal.pk, to_status=WithdrawalStatus.FAILED, source="staff", actor="ops"
        )

    wait_for(lambda: withdrawal.idempotency_id in fake_efi.sends, timeout=30)
    assert withdrawal_process(withdrawal_id=withdrawal.pk) == "processing"
    fake_efi.settle(withdrawal.idempotency_id, "REALIZADO")
    assert withdrawal_process(withdrawal_id=withdrawal.pk) == WithdrawalStatus.PAID

    withdrawal.refresh_from_db()
    assert withdrawal.status == WithdrawalStatus.PAID
    assert withdrawal.e2e_id == fake_efi.sends[withdrawal.idempotency_id]["endToEndId"]
    assert sends_at(fake_efi) == [withdrawal.idempotency_id]
    never_asked(refuses, withdrawal)
    assert available_balance(account) == SEED - WITHDRAWAL == ledger_sum(account)
    assert reversals(account) == 0


def test_past_the_settle_window_an_undetermined_payout_waits_in_staffs_queue_asking_only_its_acquirer(
    fake_efi: FakeEfi, efi: Acquirer, account: Account, handoffs: list[str], admin_client: Client
) -> None:
    refuses = sandbox("sbx_refuses_queue", "fail")
    # Efí hangs up on both sends after reading them, and never records either.
    fake_efi.fail("send", EfiFault.RESET, EfiFault.RESET)
    withdrawal = approved(account, efi, refuses)

    with pytest.raises(PayoutUndetermined):
        withdrawal_process(withdrawal_id=withdrawal.pk)
    # Nothing of ours is on the way and Efí says it never got it: sent again,
    # to Efí alone, under the same idEnvio (Efí deduplicates on it).
    with pytest.raises(PayoutUndetermined):
        withdrawal_process(withdrawal_id=withdrawal.pk)
    assert sends_at(fake_efi) == [withdrawal.idempotency_id, withdrawal.idempotency_id]
    assert attempts(withdrawal) == [
        ("efi", "send", "unavailable"),
        ("efi", "status", "not_found"),
        ("efi", "status", "not_found"),
        ("efi", "send", "unavailable"),
        ("efi", "status", "not_found"),
    ]

    # The window (minutes) passes.
    past = timezone.now() - services.payout_settle_window() - dt.timedelta(minutes=1)
    Withdrawal.objects.filter(pk=withdrawal.pk).update(payout_unclear_since=past)
    assert withdrawal_process(withdrawal_id=withdrawal.pk) == "undetermined"
    # Beat keeps asking Efí, and nothing else.
    assert payouts_poll(older_than=dt.timedelta(0)) == 1

    withdrawal.refresh_from_db()
    assert withdrawal.status == WithdrawalStatus.APPROVED
    assert attempts(withdrawal)[-1] == ("efi", "status", "not_found")
    assert len(sends_at(fake_efi)) == 2  # no send past the window
    never_asked(refuses, withdrawal)
    assert available_balance(account) == SEED - WITHDRAWAL == ledger_sum(account)
    assert list(UndeterminedPayout.objects.values_list("pk", flat=True)) == [withdrawal.pk]

    # Staff see it with everything known, and may ask Efí again.
    queue = admin_client.get("/admin/withdrawals/undeterminedpayout/")
    assert queue.status_code == 200
    assert str(withdrawal.pk) in queue.content.decode()
    page = admin_client.get(f"/admin/withdrawals/undeterminedpayout/{withdrawal.pk}/change/").content.decode()
    assert "PUT /v3/gn/pix/" in page  # the attempts' errors
    filtered = admin_client.get("/admin/withdrawals/withdrawal/?payout=staff").content.decode()
    assert str(withdrawal.pk) in filtered
    asked = admin_client.post(
        "/admin/withdrawals/undeterminedpayout/",
        {"action": "ask_owner_again", "_selected_action": [str(withdrawal.pk)]},
        follow=True,
    )
    assert asked.status_code == 200
    assert "undetermined" in asked.content.decode()
    assert attempts(withdrawal)[-1] == ("efi", "status", "not_found")
    assert len(sends_at(fake_efi)) == 2
    assert Withdrawal.objects.get(pk=withdrawal.pk).status == WithdrawalStatus.APPROVED

    # Efí confirms out of band that it never got it: staff resolve it, saying how they know.
    with pytest.raises(ValidationFailed):
        withdrawal_payout_resolve(
            withdrawal_id=withdrawal.pk, to_status=WithdrawalStatus.FAILED, reason="ok", actor="ops"
        )
    assert available_balance(account) == SEED - WITHDRAWAL
    assert withdrawal_payout_resolve(
        withdrawal_id=withdrawal.pk,
        to_status=WithdrawalStatus.FAILED,
        reason="Efí, chamado 4471: idEnvio nunca recebido",
        actor="ops",
    )
    withdrawal.refresh_from_db()
    assert (withdrawal.status, withdrawal.payout_unclear_since) == (WithdrawalStatus.FAILED, None)
    assert attempts(withdrawal)[-1] == ("efi", "notice", "failed")
    assert available_balance(account) == SEED == ledger_sum(account)
    assert reversals(account) == 1
    assert not UndeterminedPayout.objects.exists()


# --------------------------------------------------------------------------- a PSP that contradicts itself


@pytest.fixture
def slow_efi(fake_efi: FakeEfi, make_efi_acquirer: Callable[..., Acquirer], live_server: Any) -> Acquirer:
    """Efí holds its answer to a send for 7 s (it records the send at once);
    our call gives up after 4 s. Its callbacks reach our real endpoint."""
    acquirer = make_efi_acquirer(connect_timeout_ms=1000, read_timeout_ms=4000)
    warm_up(acquirer)
    fake_efi.delay = 7.0
    fake_efi.webhook_url = f"{live_server.url}/api/acquirers/{acquirer.key}/notifications/{EFI_NOTIFY_TOKEN}"
    return acquirer


@pytest.mark.parametrize("final", ["REALIZADO", "NAO_REALIZADO"])
def test_a_failed_notice_while_our_send_is_in_flight_gives_no_money_back_until_efi_is_definitive(
    fake_efi: FakeEfi, slow_efi: Acquirer, account: Account, handoffs: list[str], final: str
) -> None:
    fake_efi.fail("send", EfiFault.TIMEOUT)
    withdrawal = approved(account, slow_efi)
    run, results = in_thread(lambda: withdrawal_process(withdrawal_id=withdrawal.pk))
    try:
        wait_for(lambda: withdrawal.idempotency_id in fake_efi.sends, timeout=10)
        # While our PUT waits for its answer, Efí says (and confirms on lookup) it failed.
        assert fake_efi.settle(withdrawal.idempotency_id, "NAO_REALIZADO", notify=True) == 200

        withdrawal.refresh_from_db()
        assert withdrawal.status == WithdrawalStatus.APPROVED
        assert available_balance(account) == SEED - WITHDRAWAL
        assert reversals(account) == 0
        notice = PayoutAttempt.objects.get(withdrawal=withdrawal, action="notice")
        assert (notice.acquirer_id, notice.outcome) == (slow_efi.pk, "failed")
        assert "not applied" in notice.error_message
        # The payout engine is asked to settle with Efí instead.
        assert str(withdrawal.pk) in handoffs
    finally:
        run.join(timeout=30)
    # Its lookup right after our unanswered send says "failed" too: not the last word.
    assert isinstance(results[0], PayoutUndetermined), results
    assert attempts(withdrawal) == [
        ("efi", "send", "timeout"),
        ("efi", "notice", "failed"),
        ("efi", "status", "failed"),
    ]
    assert Withdrawal.objects.get(pk=withdrawal.pk).status == WithdrawalStatus.APPROVED
    assert reversals(account) == 0

    fake_efi.change_mind(withdrawal.idempotency_id, final)
    if final == "NAO_REALIZADO":
        # Efí keeps saying "failed" once nothing of ours can still be on its way.
        PayoutAttempt.objects.filter(withdrawal=withdrawal, action="send").update(
            created_at=timezone.now() - services.LEASE - dt.timedelta(seconds=1)
        )
    outcome = withdrawal_process(withdrawal_id=withdrawal.pk)

    withdrawal.refresh_from_db()
    assert sends_at(fake_efi) == [withdrawal.idempotency_id]
    if final == "REALIZADO":
        assert (outcome, withdrawal.status) == (WithdrawalStatus.PAID, WithdrawalStatus.PAID)
        assert withdrawal.e2e_id == fake_efi.sends[withdrawal.idempotency_id]["endToEndId"]
        assert available_balance(account) == SEED - WITHDRAWAL == ledger_sum(account)
        assert reversals(account) == 0
    else:
        assert (outcome, withdrawal.status) == (WithdrawalStatus.FAILED, WithdrawalStatus.FAILED)
        assert available_balance(account) == SEED == ledger_sum(account)
        assert reversals(account) == 1


def test_the_lease_is_released_only_by_the_run_that_holds_it(
    fake_efi: FakeEfi, slow_efi: Acquirer, account: Account, handoffs: list[str]
) -> None:
    fake_efi.fail("send", EfiFault.TIMEOUT)
    withdrawal = approved(account, slow_efi)
    run, results = in_thread(lambda: withdrawal_process(withdrawal_id=withdrawal.pk))
    try:
        wait_for(lambda: withdrawal.idempotency_id in fake_efi.sends, timeout=10)
        withdrawal.refresh_from_db()
        assert withdrawal.payout_leased_until is not None
        assert withdrawal.payout_lease_token
        # Staff cannot fail it (money back) while the send is in flight.
        with pytest.raises(PayoutUnsettled, match="sendo enviado"):
            withdrawal_transition(
                withdrawal_id=withdrawal.pk, to_status=WithdrawalStatus.FAILED, source="staff", actor="ops"
            )
        # Another run takes the payout over (as after an expired lease).
        other = "b" * 32
        later = timezone.now() + services.LEASE
        Withdrawal.objects.filter(pk=withdrawal.pk).update(payout_lease_token=other, payout_leased_until=later)
    finally:
        run.join(timeout=30)
    assert results == ["processing"]  # Efí had it: it will say when it is paid

    withdrawal.refresh_from_db()
    # The first run ended without touching the lease it no longer held.
    assert (withdrawal.payout_lease_token, withdrawal.payout_leased_until) == (other, later)
    assert withdrawal_process(withdrawal_id=withdrawal.pk) == "held"
    assert withdrawal.status == WithdrawalStatus.APPROVED
    assert available_balance(account) == SEED - WITHDRAWAL


# --------------------------------------------------------------------------- blocked or no-longer-approved accounts


@pytest.mark.parametrize("change", ["blocked", "rejected"])
def test_a_blocked_or_rejected_accounts_approved_withdrawal_is_held_and_paid_once_it_may_cash_out(
    celery_worker_process: CeleryWorker,
    fake_efi: FakeEfi,
    efi_acquirer: Acquirer,
    account: Account,
    admin_client: Client,
    change: str,
) -> None:
    Account.objects.filter(pk=account.pk).update(withdrawals_need_approval=True)
    fake_efi.outcome = "paid"
    withdrawal = withdraw(account, efi_acquirer)
    with transaction.atomic():
        locked = Account.objects.select_for_update().get(pk=account.pk)
        if change == "blocked":
            account_set_blocked(account=locked, blocked=True)
        else:
            account_reject(account=locked)

    # Approved by staff: the worker checks the account right before the send.
    assert withdrawal_approve(withdrawal_id=withdrawal.pk, source="staff", actor="ops")
    reason = HoldReason.ACCOUNT_BLOCKED if change == "blocked" else HoldReason.ACCOUNT_NOT_APPROVED
    wait_for(lambda: Withdrawal.objects.get(pk=withdrawal.pk).hold_reason == reason, timeout=30)

    withdrawal.refresh_from_db()
    assert withdrawal.status == WithdrawalStatus.APPROVED
    assert withdrawal.held_since is not None
    assert fake_efi.calls_of("send") == []
    assert attempts(withdrawal) == []
    assert available_balance(account) == SEED - WITHDRAWAL  # still debited
    assert payouts_poll(older_than=dt.timedelta(0)) == 0  # beat leaves it be
    held = admin_client.get("/admin/withdrawals/withdrawal/?payout=held").content.decode()
    assert str(withdrawal.pk) in held

    with transaction.atomic():
        locked = Account.objects.select_for_update().get(pk=account.pk)
        if change == "blocked":
            account_set_blocked(account=locked, blocked=False)
        else:
            account_approve(account=locked)

    # Resumed at once (no beat), sent once, then settled.
    wait_for(lambda: attempts(withdrawal) == [("efi", "send", "processing")], timeout=30)
    wait_for(lambda: Withdrawal.objects.get(pk=withdrawal.pk).payout_leased_until is None, timeout=30)
    assert payouts_poll(older_than=dt.timedelta(0)) == 1
    wait_for(lambda: Withdrawal.objects.get(pk=withdrawal.pk).status == WithdrawalStatus.PAID, timeout=30)
    resumed = Withdrawal.objects.get(pk=withdrawal.pk)
    assert (resumed.hold_reason, resumed.held_since) == ("", None)
    assert sends_at(fake_efi) == [withdrawal.idempotency_id]
    assert fake_efi.sends[withdrawal.idempotency_id]["chave"] == EFI_CHAVE
    assert available_balance(account) == SEED - WITHDRAWAL == ledger_sum(account)


def test_a_withdrawal_is_held_when_the_account_is_blocked_between_two_sends(
    fake_efi: FakeEfi, efi: Acquirer, account: Account, handoffs: list[str]
) -> None:
    # The check runs before every send, a second one to the same acquirer included.
    fake_efi.fail("send", EfiFault.RESET)
    withdrawal = approved(account, efi)
    with pytest.raises(PayoutUndetermined):
        withdrawal_process(withdrawal_id=withdrawal.pk)
    account_set_blocked(account=Account.objects.get(pk=account.pk), blocked=True)

    assert withdrawal_process(withdrawal_id=withdrawal.pk) == "on_hold"

    withdrawal.refresh_from_db()
    assert withdrawal.hold_reason == HoldReason.ACCOUNT_BLOCKED
    assert len(sends_at(fake_efi)) == 1
    assert attempts(withdrawal)[-1] == ("efi", "status", "not_found")
    handoffs.clear()
    account_set_blocked(account=Account.objects.get(pk=account.pk), blocked=False)
    assert handoffs == [str(withdrawal.pk)]
