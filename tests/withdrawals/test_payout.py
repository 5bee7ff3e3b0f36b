"""The payout of decisions §5, end to end: a real Celery worker approves and
pays out through sandbox acquirers (``{"payout": "ok"|"fail"|"timeout"}``,
decisions §8) on the test database; the chain moves on only when an acquirer
is done with the payout, asks after a timeout instead of sending again, and
never sends one payout twice, whoever runs it and however often."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import threading
import time
import uuid
from collections.abc import Mapping
from typing import Any, ClassVar

import pytest
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.models import Account, LedgerEntry
from accounts.selectors import available_balance, ledger_sum
from accounts.services import ledger_post
from acquirers import adapters
from acquirers.adapters.base import (
    AcquirerAdapter,
    AcquirerUnavailable,
    ChargeRequest,
    ChargeResult,
    InvalidNotification,
    Notification,
    PayoutRequest,
    PayoutResult,
    PayoutStatus,
)
from acquirers.adapters.sandbox import SandboxAdapter, new_e2e_id
from acquirers.models import Acquirer, AcquirerGrant, AcquirerSlot
from acquirers.selectors import payout_chain
from acquirers.services import acquirer_slots_set
from config.celery import app
from tests.factories import AccountFactory, AcquirerFactory
from tests.realworld import CeleryWorker, Receiver, wait_for
from webhooks.models import WebhookEvent
from webhooks.services import endpoint_create
from withdrawals import services
from withdrawals.exceptions import PayoutUndetermined
from withdrawals.models import PayoutAttempt, Withdrawal, WithdrawalStatus, WithdrawalTransition
from withdrawals.payouts import withdrawal_process
from withdrawals.polling import payouts_poll
from withdrawals.services import withdrawal_approve, withdrawal_request, withdrawal_transition
from withdrawals.tasks import poll_stuck_payouts, process_withdrawal

SEED = 20_000
AMOUNT = 5000
FEE = 150  # 100 + 1 % of 5000
TOTAL = AMOUNT  # discount_fee defaults to true: the fee comes out of the transfer
LIQUID = AMOUNT - FEE
CPF = "52998224725"
# Short timeouts so a sandbox "timeout" plays out in under a second.
FAST = {"connect_timeout_ms": 100, "read_timeout_ms": 200}

# The worker is another process: it sees only committed rows.
pytestmark = pytest.mark.django_db(transaction=True)


# --------------------------------------------------------------------------- fixtures and helpers


@pytest.fixture
def account(db: Any) -> Account:
    account = AccountFactory(withdrawal_fee_fixed=100, withdrawal_fee_bps=100)
    seed(account)
    return account


@pytest.fixture
def worker(celery_worker_process: CeleryWorker) -> CeleryWorker:
    return celery_worker_process


def seed(account: Account, amount: int = SEED) -> None:
    with transaction.atomic():
        ledger_post(
            account_id=account.pk,
            amount=amount,
            kind=LedgerEntry.Kind.CHARGE_PAID,
            reference=f"seed:{uuid.uuid4().hex}",
        )


def sandbox(key: str, payout: str, **fields: Any) -> Acquirer:
    return AcquirerFactory(key=key, options={"charge": "ok", "payout": payout}, **{**FAST, **fields})


def cashout_chain(account: Account, *acquirers: Acquirer) -> None:
    acquirer_slots_set(account=account, purpose=AcquirerSlot.Purpose.CASHOUT, acquirers=list(acquirers))


def request_via_api(api: APIClient) -> Withdrawal:
    response = api.post("/api/withdrawals", {"amount": AMOUNT, "key_value": CPF}, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["data"]["status"] == WithdrawalStatus.PENDING
    return Withdrawal.objects.get(pk=response.json()["data"]["id"])


def request(account: Account) -> Withdrawal:
    return withdrawal_request(account=account, amount=AMOUNT, key_type="cpf", key_value=CPF)


def wait_status(withdrawal: Withdrawal, status: str, timeout: float = 20.0) -> Withdrawal:
    def reached() -> Withdrawal | None:
        withdrawal.refresh_from_db()
        return withdrawal if withdrawal.status == status else None

    return wait_for(reached, timeout=timeout)


def attempts(withdrawal: Withdrawal) -> list[tuple[str, str, str]]:
    rows = PayoutAttempt.objects.filter(withdrawal=withdrawal).order_by("id").select_related("acquirer")
    return [(a.acquirer.key, a.action, a.outcome) for a in rows]


def transitions(withdrawal: Withdrawal) -> list[tuple[str, str, str]]:
    rows = WithdrawalTransition.objects.filter(withdrawal=withdrawal).order_by("id")
    return [(t.from_status, t.to_status, t.source) for t in rows]


def events(withdrawal: Withdrawal) -> list[str]:
    return list(
        WebhookEvent.objects.filter(record_id=withdrawal.pk).order_by("created_at").values_list("status", flat=True)
    )


def ledger(account: Account) -> list[tuple[str, int]]:
    return [(e.kind, e.amount) for e in LedgerEntry.objects.filter(account=account).order_by("id")]


def sandbox_payout(acquirer: Acquirer, withdrawal: Withdrawal) -> PayoutResult:
    """What the sandbox acquirer itself holds for this payout (shared through Redis)."""
    return adapters.build(acquirer).get_payout_status(withdrawal.idempotency_id)


def task_result(worker: CeleryWorker, task_id: str, timeout: float = 20.0) -> str:
    """The worker's own log line for a finished task: its return value."""
    marker = f"[{task_id}] succeeded in "

    def finished() -> str | None:
        line = next((line for line in worker.output().splitlines() if marker in line), None)
        # "... [id] succeeded in 0.02s: 'value'"
        return line.split(marker, 1)[1].split("s: ", 1)[1] if line else None

    return str(wait_for(finished, timeout=timeout))


def assert_paid_by(withdrawal: Withdrawal, acquirer: Acquirer) -> None:
    withdrawal.refresh_from_db()
    assert withdrawal.status == WithdrawalStatus.PAID
    assert withdrawal.acquirer_id == acquirer.pk
    assert withdrawal.e2e_id is not None
    assert len(withdrawal.e2e_id) == 32
    assert withdrawal.e2e_id.startswith("E")
    assert withdrawal.paid_at is not None
    assert withdrawal.provider_payout_id == f"sbx_{withdrawal.idempotency_id}"
    assert withdrawal.payout_leased_until is None
    held = sandbox_payout(acquirer, withdrawal)
    assert (held.status, held.e2e_id) == (PayoutStatus.PAID, withdrawal.e2e_id)


# --------------------------------------------------------------------------- with the worker


def test_automatic_approval_and_payout(
    worker: CeleryWorker, api: APIClient, account: Account, receiver: Receiver
) -> None:
    acquirer = sandbox("sbx_auto", "ok", default_priority=1)
    endpoint = endpoint_create(account=account, url=receiver.url).endpoint
    started = timezone.now()

    withdrawal = request_via_api(api)

    wait_status(withdrawal, WithdrawalStatus.PAID)
    assert_paid_by(withdrawal, acquirer)
    assert withdrawal.paid_at is not None
    assert started <= withdrawal.paid_at <= timezone.now()
    assert withdrawal.approved_at is not None
    assert transitions(withdrawal) == [
        (WithdrawalStatus.PENDING, WithdrawalStatus.APPROVED, "system"),
        (WithdrawalStatus.APPROVED, WithdrawalStatus.PAID, "acquirer"),
    ]
    assert attempts(withdrawal) == [("sbx_auto", "send", "paid")]
    assert events(withdrawal) == [WithdrawalStatus.APPROVED, WithdrawalStatus.PAID]
    # Debited once, at creation; nothing moved when it was paid.
    assert ledger(account) == [(LedgerEntry.Kind.CHARGE_PAID, SEED), (LedgerEntry.Kind.WITHDRAWAL, -TOTAL)]
    assert available_balance(account) == SEED - TOTAL == ledger_sum(account)
    read = api.get(f"/api/withdrawals/{withdrawal.pk}").json()["data"]
    assert (read["status"], read["e2e_id"]) == (WithdrawalStatus.PAID, withdrawal.e2e_id)
    # The account's endpoint heard both changes, never the creation.
    received = receiver.wait_for_requests(2)
    bodies = [json.loads(r.body) for r in received]
    assert sorted(b["data"]["status"] for b in bodies) == [WithdrawalStatus.APPROVED, WithdrawalStatus.PAID]
    assert {(b["event_type"], b["data"]["id"]) for b in bodies} == {("withdrawal", str(withdrawal.pk))}
    assert {r.headers["X-Webhook-Code"] for r in received} == {endpoint.code}


def test_manual_approval_waits_for_staff_then_pays(worker: CeleryWorker, api: APIClient, account: Account) -> None:
    Account.objects.filter(pk=account.pk).update(withdrawals_need_approval=True)
    acquirer = sandbox("sbx_manual", "ok", default_priority=1)
    withdrawal = request_via_api(api)

    # Give the worker its chance: processing it leaves it waiting for a person.
    assert task_result(worker, process_withdrawal.delay(str(withdrawal.pk)).id) == "'awaiting_approval'"
    assert payouts_poll(older_than=dt.timedelta(0)) == 0  # beat leaves it alone too
    withdrawal.refresh_from_db()
    assert withdrawal.status == WithdrawalStatus.PENDING
    assert transitions(withdrawal) == []
    assert attempts(withdrawal) == []

    assert withdrawal_approve(withdrawal_id=withdrawal.pk, source="staff", actor="ops")

    wait_status(withdrawal, WithdrawalStatus.PAID)
    assert_paid_by(withdrawal, acquirer)
    assert transitions(withdrawal) == [
        (WithdrawalStatus.PENDING, WithdrawalStatus.APPROVED, "staff"),
        (WithdrawalStatus.APPROVED, WithdrawalStatus.PAID, "acquirer"),
    ]
    assert (
        WithdrawalTransition.objects.filter(withdrawal=withdrawal, to_status=WithdrawalStatus.APPROVED).get().actor
        == "ops"
    )
    assert attempts(withdrawal) == [("sbx_manual", "send", "paid")]
    assert available_balance(account) == SEED - TOTAL == ledger_sum(account)


def test_staff_cancel_gives_the_money_back_and_nothing_is_sent(
    worker: CeleryWorker, api: APIClient, account: Account
) -> None:
    Account.objects.filter(pk=account.pk).update(withdrawals_need_approval=True)
    sandbox("sbx_cancel", "ok", default_priority=1)
    withdrawal = request_via_api(api)
    assert available_balance(account) == SEED - TOTAL

    assert withdrawal_transition(
        withdrawal_id=withdrawal.pk, to_status=WithdrawalStatus.CANCELED, source="staff", actor="ops"
    )

    # A stray processing run (a duplicate message) finds nothing to do.
    assert task_result(worker, process_withdrawal.delay(str(withdrawal.pk)).id) == "'canceled'"
    withdrawal.refresh_from_db()
    assert withdrawal.status == WithdrawalStatus.CANCELED
    assert attempts(withdrawal) == []
    assert available_balance(account) == SEED == ledger_sum(account)
    assert ledger(account) == [
        (LedgerEntry.Kind.CHARGE_PAID, SEED),
        (LedgerEntry.Kind.WITHDRAWAL, -TOTAL),
        (LedgerEntry.Kind.WITHDRAWAL_REVERSAL, TOTAL),
    ]
    assert events(withdrawal) == [WithdrawalStatus.CANCELED]


def test_refused_payout_fails_and_gives_the_money_back(worker: CeleryWorker, api: APIClient, account: Account) -> None:
    refuses = sandbox("sbx_refuses", "fail")
    sandbox("sbx_default_unused", "ok", default_priority=1)  # the account's chain wins over the default
    cashout_chain(account, refuses)

    withdrawal = request_via_api(api)

    wait_status(withdrawal, WithdrawalStatus.FAILED)
    assert attempts(withdrawal) == [("sbx_refuses", "send", "declined")]
    assert transitions(withdrawal) == [
        (WithdrawalStatus.PENDING, WithdrawalStatus.APPROVED, "system"),
        (WithdrawalStatus.APPROVED, WithdrawalStatus.FAILED, "system"),
    ]
    assert withdrawal.failure_reason
    assert (withdrawal.e2e_id, withdrawal.paid_at) == (None, None)
    assert events(withdrawal) == [WithdrawalStatus.APPROVED, WithdrawalStatus.FAILED]
    assert ledger(account) == [
        (LedgerEntry.Kind.CHARGE_PAID, SEED),
        (LedgerEntry.Kind.WITHDRAWAL, -TOTAL),
        (LedgerEntry.Kind.WITHDRAWAL_REVERSAL, TOTAL),
    ]
    assert available_balance(account) == SEED == ledger_sum(account)
    assert sandbox_payout(refuses, withdrawal).status is PayoutStatus.NOT_FOUND


def test_chain_falls_back_to_the_next_acquirer_after_a_refusal(
    worker: CeleryWorker, api: APIClient, account: Account
) -> None:
    refuses, pays = sandbox("sbx_first_refuses", "fail"), sandbox("sbx_second_pays", "ok")
    cashout_chain(account, refuses, pays)

    withdrawal = request_via_api(api)

    wait_status(withdrawal, WithdrawalStatus.PAID)
    assert_paid_by(withdrawal, pays)
    assert attempts(withdrawal) == [("sbx_first_refuses", "send", "declined"), ("sbx_second_pays", "send", "paid")]
    assert sandbox_payout(refuses, withdrawal).status is PayoutStatus.NOT_FOUND
    assert available_balance(account) == SEED - TOTAL == ledger_sum(account)


def test_timeout_is_followed_by_a_status_check_never_by_a_second_send(
    worker: CeleryWorker, api: APIClient, account: Account
) -> None:
    slow, spare = sandbox("sbx_slow", "timeout"), sandbox("sbx_spare", "ok")
    cashout_chain(account, slow, spare)

    withdrawal = request_via_api(api)

    wait_status(withdrawal, WithdrawalStatus.PAID)
    # The slow acquirer did pay (late): asking it found that, so the spare was never used.
    assert_paid_by(withdrawal, slow)
    assert attempts(withdrawal) == [("sbx_slow", "send", "timeout"), ("sbx_slow", "status", "paid")]
    assert sandbox_payout(spare, withdrawal).status is PayoutStatus.NOT_FOUND
    send = PayoutAttempt.objects.get(withdrawal=withdrawal, action="send")
    assert send.error_class == "DeadlineExceeded"
    assert send.latency_ms < 1000  # ended at the deadline: nothing of the send runs on
    slow_adapter = adapters.build(slow)
    assert isinstance(slow_adapter, SandboxAdapter)
    assert slow_adapter.payout_requests(withdrawal.idempotency_id) == 1
    assert available_balance(account) == SEED - TOTAL == ledger_sum(account)
    assert events(withdrawal) == [WithdrawalStatus.APPROVED, WithdrawalStatus.PAID]


def test_beat_processes_withdrawals_left_behind(
    worker: CeleryWorker, account: Account, monkeypatch: pytest.MonkeyPatch
) -> None:
    acquirer = sandbox("sbx_poll", "ok", default_priority=1)
    manual = AccountFactory(withdrawals_need_approval=True)
    seed(manual)
    with monkeypatch.context() as lost:
        # The broker lost every hand-off (or the worker died after approving).
        lost.setattr(services, "_enqueue_processing", lambda *args, **kwargs: None)
        stuck_approved, stuck_pending, fresh = request(account), request(account), request(account)
        waiting = request(manual)
        for withdrawal in (stuck_approved, fresh):
            withdrawal_approve(withdrawal_id=withdrawal.pk, source="system")
    long_ago = timezone.now() - dt.timedelta(minutes=3)
    Withdrawal.objects.filter(pk__in=[stuck_approved.pk, stuck_pending.pk, waiting.pk]).update(updated_at=long_ago)

    polled = poll_stuck_payouts.delay()

    assert task_result(worker, polled.id) == "2"
    for withdrawal in (stuck_approved, stuck_pending):
        wait_status(withdrawal, WithdrawalStatus.PAID)
        assert_paid_by(withdrawal, acquirer)
        assert attempts(withdrawal) == [("sbx_poll", "send", "paid")]
    for withdrawal, status in ((fresh, WithdrawalStatus.APPROVED), (waiting, WithdrawalStatus.PENDING)):
        withdrawal.refresh_from_db()
        assert withdrawal.status == status
        assert attempts(withdrawal) == []
    assert available_balance(account) == SEED - 3 * TOTAL == ledger_sum(account)


def test_beat_schedule_runs_the_poller() -> None:
    entry = settings.CELERY_BEAT_SCHEDULE["poll-stuck-payouts"]
    assert entry["task"] == "withdrawals.tasks.poll_stuck_payouts"
    assert float(entry["schedule"]) <= 120  # type: ignore[arg-type]
    assert "withdrawals.tasks.poll_stuck_payouts" in app.tasks
    # The task retries on its own while an acquirer cannot say where a payout stands.
    assert PayoutUndetermined in process_withdrawal.autoretry_for  # type: ignore[attr-defined]
    # Bounded: past that, beat's poller (which also asks before sending) takes over.
    assert process_withdrawal.max_retries == 20


# --------------------------------------------------------------------------- in process


@pytest.mark.django_db
@pytest.mark.parametrize("configured", ["cashout", "cashin", "default"])
def test_payout_chain_prefers_cashout_then_cashin_then_default(account: Account, configured: str) -> None:
    default = sandbox("sbx_chain_default", "ok", default_priority=1)
    cashin = sandbox("sbx_chain_cashin", "ok")
    cashout = sandbox("sbx_chain_cashout", "ok")
    AcquirerGrant.objects.create(account=account, acquirer=cashin)
    if configured in ("cashout", "cashin"):
        acquirer_slots_set(account=account, purpose=AcquirerSlot.Purpose.CASHIN, acquirers=[cashin])
    if configured == "cashout":
        cashout_chain(account, cashout)
    expected = {"cashout": cashout, "cashin": cashin, "default": default}[configured]
    withdrawal = request(account)

    assert payout_chain(account, LIQUID) == [expected]
    assert withdrawal_process(withdrawal_id=withdrawal.pk) == "approved"
    assert withdrawal_process(withdrawal_id=withdrawal.pk) == WithdrawalStatus.PAID

    assert_paid_by(withdrawal, expected)
    assert attempts(withdrawal) == [(expected.key, "send", "paid")]


@pytest.mark.django_db
def test_payout_sends_the_liquid_amount_with_the_idempotency_id(account: Account) -> None:
    sandbox("sbx_request", "ok", default_priority=1)
    withdrawal = request(account)
    assert withdrawal.idempotency_id.isalnum()
    assert 1 <= len(withdrawal.idempotency_id) <= 35
    sent: list[PayoutRequest] = []
    Recorder.requests = sent
    recorder = AcquirerFactory(key="test_recorder_acq", adapter="test_recorder", **FAST)
    cashout_chain(account, recorder)

    withdrawal_process(withdrawal_id=withdrawal.pk)
    assert withdrawal_process(withdrawal_id=withdrawal.pk) == WithdrawalStatus.PAID

    assert sent == [
        PayoutRequest(
            withdrawal_id=withdrawal.pk,
            idempotency_id=withdrawal.idempotency_id,
            amount=LIQUID,
            key_type="cpf",
            key_value=CPF,
        )
    ]


class _TestAdapter(AcquirerAdapter):
    """Payout-only adapters for the cases the sandbox cannot play."""

    def create_charge(self, request: ChargeRequest) -> ChargeResult:
        raise AcquirerUnavailable("payouts only")

    def parse_notification(self, headers: Mapping[str, str], body: bytes) -> list[Notification]:
        raise InvalidNotification("payouts only")

    def create_payout(self, request: PayoutRequest) -> PayoutResult:
        raise NotImplementedError

    def get_payout_status(self, idempotency_id: str) -> PayoutResult:
        raise NotImplementedError


def _paid(idempotency_id: str) -> PayoutResult:
    return PayoutResult(
        status=PayoutStatus.PAID,
        provider_payout_id=f"sbx_{idempotency_id}",
        e2e_id=new_e2e_id(),
        paid_at=timezone.now(),
    )


@adapters.register
class Recorder(_TestAdapter):
    name = "test_recorder"
    requests: ClassVar[list[PayoutRequest]] = []

    def create_payout(self, request: PayoutRequest) -> PayoutResult:
        self.requests.append(request)
        return _paid(request.idempotency_id)


@adapters.register
class Blackhole(_TestAdapter):
    """Takes the payout and never answers in time; its status query is down
    until ``options["status"]`` says otherwise (``paid``, ``not_found``)."""

    name = "test_blackhole"
    sends: ClassVar[list[str]] = []

    def create_payout(self, request: PayoutRequest) -> PayoutResult:
        self.sends.append(request.idempotency_id)
        time.sleep(self.config.connect_timeout + self.config.read_timeout + 0.3)
        return _paid(request.idempotency_id)

    def get_payout_status(self, idempotency_id: str) -> PayoutResult:
        answer = self.options.get("status", "down")
        if answer == "paid":
            return _paid(idempotency_id)
        if answer == "not_found":
            return PayoutResult(status=PayoutStatus.NOT_FOUND)
        raise AcquirerUnavailable("status endpoint down")


@adapters.register
class Gate(_TestAdapter):
    """Holds the send until the test opens the gate."""

    name = "test_gate"
    opened = threading.Event()
    sends: ClassVar[list[str]] = []

    def create_payout(self, request: PayoutRequest) -> PayoutResult:
        self.sends.append(request.idempotency_id)
        assert self.opened.wait(timeout=8)
        return _paid(request.idempotency_id)


@pytest.fixture
def blackhole(db: Any) -> Acquirer:
    Blackhole.sends = []
    return AcquirerFactory(key="test_blackhole_acq", adapter="test_blackhole", options={}, **FAST)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("later", "paid_by", "later_attempts"),
    [
        # The acquirer had it all along: paid there, nothing sent anywhere else.
        ("paid", "test_blackhole_acq", [("test_blackhole_acq", "status", "paid")]),
    ],
)
def test_undetermined_payout_stays_approved_and_is_never_sent_elsewhere(
    account: Account, blackhole: Acquirer, later: str, paid_by: str, later_attempts: list[tuple[str, str, str]]
) -> None:
    spare = sandbox("sbx_after_blackhole", "ok")
    cashout_chain(account, blackhole, spare)
    withdrawal = request(account)
    assert withdrawal_process(withdrawal_id=withdrawal.pk) == "approved"

    with pytest.raises(PayoutUndetermined):
        withdrawal_process(withdrawal_id=withdrawal.pk)

    withdrawal.refresh_from_db()
    assert withdrawal.status == WithdrawalStatus.APPROVED
    assert withdrawal.payout_leased_until is None  # the next run may try again at once
    first = [("test_blackhole_acq", "send", "timeout"), ("test_blackhole_acq", "status", "unavailable")]
    assert attempts(withdrawal) == first
    assert sandbox_payout(spare, withdrawal).status is PayoutStatus.NOT_FOUND
    assert available_balance(account) == SEED - TOTAL
    assert events(withdrawal) == [WithdrawalStatus.APPROVED]

    # A retry while it is still down only asks again.
    with pytest.raises(PayoutUndetermined):
        withdrawal_process(withdrawal_id=withdrawal.pk)
    second = [*first, ("test_blackhole_acq", "status", "unavailable")]
    assert attempts(withdrawal) == second
    assert Blackhole.sends == [withdrawal.idempotency_id]

    Acquirer.objects.filter(pk=blackhole.pk).update(options={"status": later})
    assert withdrawal_process(withdrawal_id=withdrawal.pk) == WithdrawalStatus.PAID

    withdrawal.refresh_from_db()
    assert withdrawal.status == WithdrawalStatus.PAID
    assert withdrawal.acquirer is not None
    assert withdrawal.acquirer.key == paid_by
    assert attempts(withdrawal) == [*second, *later_attempts]
    assert Blackhole.sends == [withdrawal.idempotency_id]
    assert available_balance(account) == SEED - TOTAL == ledger_sum(account)


@pytest.mark.django_db
def test_not_found_after_an_unclear_send_is_no_answer_the_payout_stays_with_that_acquirer(
    account: Account, blackhole: Acquirer
) -> None:
    # Before: "not found" let the chain send the payout to the next acquirer
    # while the first send could still land there (paid twice).
    spare = sandbox("sbx_after_blackhole", "ok")
    cashout_chain(account, blackhole, spare)
    withdrawal = request(account)
    assert withdrawal_process(withdrawal_id=withdrawal.pk) == "approved"
    with pytest.raises(PayoutUndetermined):
        withdrawal_process(withdrawal_id=withdrawal.pk)
    Acquirer.objects.filter(pk=blackhole.pk).update(options={"status": "not_found"})

    # Asked again within the settle window: still its, and (its send may
    # still be on the way) not sent again either.
    with pytest.raises(PayoutUndetermined):
        withdrawal_process(withdrawal_id=withdrawal.pk)

    withdrawal.refresh_from_db()
    assert withdrawal.status == WithdrawalStatus.APPROVED
    assert withdrawal.payout_owner_id == blackhole.pk
    assert withdrawal.payout_unclear_since is not None
    assert attempts(withdrawal) == [
        ("test_blackhole_acq", "send", "timeout"),
        ("test_blackhole_acq", "status", "unavailable"),
        ("test_blackhole_acq", "status", "not_found"),
    ]
    assert sandbox_payout(spare, withdrawal).status is PayoutStatus.NOT_FOUND
    assert Blackhole.sends == [withdrawal.idempotency_id]

    # Past the window: staff's queue. Only the owner is asked; nothing moves.
    past = timezone.now() - services.payout_settle_window() - dt.timedelta(minutes=1)
    Withdrawal.objects.filter(pk=withdrawal.pk).update(payout_unclear_since=past)
    assert withdrawal_process(withdrawal_id=withdrawal.pk) == "undetermined"

    withdrawal.refresh_from_db()
    assert withdrawal.status == WithdrawalStatus.APPROVED
    assert attempts(withdrawal)[-1] == ("test_blackhole_acq", "status", "not_found")
    assert [a for a in attempts(withdrawal) if a[0] != "test_blackhole_acq"] == []
    assert Blackhole.sends == [withdrawal.idempotency_id]
    assert available_balance(account) == SEED - TOTAL == ledger_sum(account)
    assert events(withdrawal) == [WithdrawalStatus.APPROVED]


def test_two_concurrent_runs_send_once(account: Account, no_enqueue: list[Any]) -> None:
    Gate.sends = []
    Gate.opened.clear()
    gate = AcquirerFactory(key="test_gate_acq", adapter="test_gate", connect_timeout_ms=100, read_timeout_ms=10_000)
    cashout_chain(account, gate)
    withdrawal = request(account)
    assert withdrawal_process(withdrawal_id=withdrawal.pk) == "approved"
    barrier = threading.Barrier(2)
    results: list[str] = []

    def run() -> None:
        try:
            barrier.wait(timeout=10)
            results.append(withdrawal_process(withdrawal_id=withdrawal.pk))
        except Exception as exc:  # noqa: BLE001 - reported through the results
            results.append(repr(exc))
        finally:
            connection.close()

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    try:
        # The second run finds the payout held while the first is still sending.
        wait_for(lambda: results == ["held"], timeout=10)
        withdrawal.refresh_from_db()
        assert withdrawal.payout_leased_until is not None
        assert withdrawal.payout_leased_until > timezone.now()
    finally:
        Gate.opened.set()
        for thread in threads:
            thread.join(timeout=20)

    assert results == ["held", WithdrawalStatus.PAID]
    assert Gate.sends == [withdrawal.idempotency_id]
    assert attempts(withdrawal) == [("test_gate_acq", "send", "paid")]
    withdrawal.refresh_from_db()
    assert withdrawal.status == WithdrawalStatus.PAID
    assert withdrawal.payout_leased_until is None
    # A run after the end is a no-op.
    assert withdrawal_process(withdrawal_id=withdrawal.pk) == WithdrawalStatus.PAID
    assert len(attempts(withdrawal)) == 1
    assert events(withdrawal) == [WithdrawalStatus.APPROVED, WithdrawalStatus.PAID]


@pytest.mark.django_db
def test_the_lease_ends_in_the_commit_that_settles_the_payout(account: Account) -> None:
    # A reader that sees "paid" (the API, a test waiting on the status) must
    # never see the payout still leased: the lease goes with the transition,
    # not with the sending run's clean-up after it.
    sandbox("sbx_lease_end", "ok", default_priority=1)
    withdrawal = request(account)
    withdrawal_process(withdrawal_id=withdrawal.pk)
    Withdrawal.objects.filter(pk=withdrawal.pk).update(
        payout_leased_until=timezone.now() + dt.timedelta(minutes=4), payout_lease_token="run-a"
    )

    assert services.withdrawal_transition(
        withdrawal_id=withdrawal.pk,
        to_status=WithdrawalStatus.PAID,
        source=WithdrawalTransition.Source.SYSTEM,
        lease_token="run-a",
    )

    withdrawal.refresh_from_db()
    assert withdrawal.status == WithdrawalStatus.PAID
    assert withdrawal.payout_leased_until is None
    assert withdrawal.payout_lease_token == ""


@pytest.mark.django_db
def test_an_expired_lease_is_taken_over(account: Account) -> None:
    acquirer = sandbox("sbx_lease", "ok", default_priority=1)
    withdrawal = request(account)
    withdrawal_process(withdrawal_id=withdrawal.pk)

    Withdrawal.objects.filter(pk=withdrawal.pk).update(payout_leased_until=timezone.now() + dt.timedelta(minutes=4))
    assert withdrawal_process(withdrawal_id=withdrawal.pk) == "held"
    assert attempts(withdrawal) == []

    # Its holder died: once the lease has run out, the next run goes ahead.
    Withdrawal.objects.filter(pk=withdrawal.pk).update(payout_leased_until=timezone.now() - dt.timedelta(seconds=1))
    assert withdrawal_process(withdrawal_id=withdrawal.pk) == WithdrawalStatus.PAID
    assert_paid_by(withdrawal, acquirer)


@pytest.mark.django_db
def test_no_acquirer_at_all_fails_with_the_money_back(account: Account) -> None:
    withdrawal = request(account)
    withdrawal_process(withdrawal_id=withdrawal.pk)
    assert withdrawal_process(withdrawal_id=withdrawal.pk) == WithdrawalStatus.FAILED
    assert attempts(withdrawal) == []
    assert available_balance(account) == SEED == ledger_sum(account)


@pytest.mark.django_db
@pytest.mark.parametrize("change", ["disabled", "reordered"])
def test_undetermined_payout_is_never_sent_elsewhere_even_after_the_chain_changes(
    account: Account, blackhole: Acquirer, change: str
) -> None:
    spare = sandbox("sbx_spare_after_change", "ok")
    cashout_chain(account, blackhole, spare)
    withdrawal = request(account)
    withdrawal_process(withdrawal_id=withdrawal.pk)
    with pytest.raises(PayoutUndetermined):
        withdrawal_process(withdrawal_id=withdrawal.pk)
    # What an operator does about an acquirer that stopped answering.
    if change == "disabled":
        Acquirer.objects.filter(pk=blackhole.pk).update(enabled=False)
    else:
        cashout_chain(account, spare, blackhole)

    with contextlib.suppress(PayoutUndetermined):
        withdrawal_process(withdrawal_id=withdrawal.pk)

    # The black hole may well have paid: until it says it did not, nobody else may be sent the payout.
    assert sandbox_payout(spare, withdrawal).status is PayoutStatus.NOT_FOUND
    assert [a for a in attempts(withdrawal) if a[1] == "send"] == [("test_blackhole_acq", "send", "timeout")]
    withdrawal.refresh_from_db()
    assert withdrawal.status == WithdrawalStatus.APPROVED
