"""Acquirer health (issue #7): the circuit breaker opens on repeated
unavailability seen through real charge requests, the chains pass an open
acquirer over (the client still gets its 201 from the next one), one probe
goes through after the cool-down whatever the concurrency, its answer closes
or re-opens the circuit, a decline never counts, a payout that an acquirer
may hold is always asked about, staff see and reset the breaker, /metrics
shows it, and a Redis outage makes the breaker step aside.

Real PostgreSQL and Redis; time is a clock the tests move (``breaker.clock``),
never a sleep.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import pytest
from django.conf import settings as django_settings
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import Permission
from django.db import connection, transaction
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families
from rest_framework.test import APIClient

from accounts.models import Account, LedgerEntry
from accounts.services import ledger_post
from acquirers import adapters, brcode, breaker
from acquirers.adapters.base import (
    AcquirerAdapter,
    AcquirerDeclined,
    AcquirerTimeout,
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
from acquirers.models import Acquirer, AcquirerSlot
from acquirers.services import acquirer_slots_set
from payments.models import Charge, ChargeAttempt
from payments.services import Buyer, charge_create
from tests.factories import AccountFactory, AcquirerFactory
from tests.realworld import run_concurrently, wait_for
from withdrawals import services as withdrawal_services
from withdrawals.exceptions import PayoutUndetermined
from withdrawals.models import PayoutAttempt, Withdrawal, WithdrawalStatus
from withdrawals.payouts import withdrawal_process
from withdrawals.services import withdrawal_request

pytestmark = pytest.mark.django_db

URL = "/api/transactions"
BUYER = {"buyer_name": "Fulano de Tal", "buyer_document": "52998224725", "buyer_phone": "11999998888"}
ALL_FAILED = "Erro ao processar o pagamento. Tente novamente mais tarde."
FAILURES = 3  # ACQUIRER_BREAKER_FAILURES in these tests
COOLDOWN = 30.0
CPF = "52998224725"
METRICS_TOKEN = "breaker-scrape-" + "x" * 20
State = breaker.State


# --------------------------------------------------------------------------- clock, settings, helpers


class FakeClock:
    """Wall-clock seconds that move only when a test says so."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture(autouse=True)
def clock(monkeypatch: pytest.MonkeyPatch, settings: Any) -> FakeClock:
    settings.ACQUIRER_BREAKER_ENABLED = True
    settings.ACQUIRER_BREAKER_FAILURES = FAILURES
    settings.ACQUIRER_BREAKER_FAILURE_RATE = 0.5
    settings.ACQUIRER_BREAKER_WINDOW = 60
    settings.ACQUIRER_BREAKER_MIN_CALLS = 10
    settings.ACQUIRER_BREAKER_COOLDOWN = COOLDOWN
    settings.ACQUIRER_HEALTH_SAMPLES = 200
    fake = FakeClock()
    monkeypatch.setattr(breaker, "clock", fake)
    # A Redis outage played by one test must not switch the breaker off for the next.
    monkeypatch.setattr(breaker, "_suspended_until", 0.0)
    return fake


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Charge calls that really reached each sandbox acquirer, by key."""
    made: dict[str, int] = {}
    original = SandboxAdapter.create_charge

    def counted(self: SandboxAdapter, request: ChargeRequest) -> ChargeResult:
        made[self.config.key] = made.get(self.config.key, 0) + 1
        return original(self, request)

    monkeypatch.setattr(SandboxAdapter, "create_charge", counted)
    return made


def state(acquirer: Acquirer) -> breaker.Health:
    found = breaker.snapshot(acquirer)
    assert found is not None
    return found


def fail(acquirer: Acquirer, times: int = FAILURES, outcome: str = "unavailable") -> None:
    for _ in range(times):
        breaker.record(acquirer, outcome=outcome, latency_ms=5)


def post(api: APIClient, amount: int = 1000) -> Any:
    return api.post(URL, {"payment_method": "pix", "amount": amount, "buyer": BUYER}, format="json")


def attempts_of(charge_id: Any) -> list[tuple[str, str]]:
    rows = ChargeAttempt.objects.filter(charge_id=charge_id).select_related("acquirer").order_by("position")
    return [(a.acquirer.key, a.outcome) for a in rows]


def created(response: Any) -> tuple[Charge, list[tuple[str, str]]]:
    assert response.status_code == 201, response.content
    body = response.json()
    charge = Charge.objects.select_related("acquirer").get(pk=body["data"]["id"])
    # The spec's creation body, whichever acquirer took the charge.
    assert body == {
        "success": True,
        "message": "Transação criada com sucesso.",
        "data": {
            "id": str(charge.pk),
            "amount": charge.amount,
            "platform_tax": charge.platform_tax,
            "liquid_amount": charge.liquid_amount,
            "pix": {"emv": charge.emv},
        },
    }
    return charge, attempts_of(charge.pk)


def last_attempts(account: Account) -> list[tuple[str, str]]:
    """Attempts of the account's latest creation, which may have no charge."""
    return attempts_of(ChargeAttempt.objects.filter(account=account).latest("id").charge_id)


def scrape() -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    response = Client().get("/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"})
    assert response.status_code == 200
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(response.content.decode())
        for sample in family.samples
    }


def sample(name: str, **labels: str) -> float | None:
    return scrape().get((name, frozenset(labels.items())))


def counter(name: str, **labels: str) -> Callable[[], float]:
    """How much a counter moved from now until the returned function is called."""
    before = sample(name, **labels) or 0.0
    return lambda: (sample(name, **labels) or 0.0) - before


def _code(request: ChargeRequest) -> str:
    return brcode.encode_dynamic(
        location=f"pix.test.local/qr/v2/{request.txid}",
        amount=request.amount,
        merchant_name=request.merchant_name,
        merchant_city=request.merchant_city,
    )


class _TestAdapter(AcquirerAdapter):
    def create_charge(self, request: ChargeRequest) -> ChargeResult:
        raise NotImplementedError

    def create_payout(self, request: PayoutRequest) -> PayoutResult:
        raise NotImplementedError

    def get_payout_status(self, idempotency_id: str) -> PayoutResult:
        raise NotImplementedError

    def parse_notification(self, headers: Mapping[str, str], body: bytes) -> list[Notification]:
        raise InvalidNotification("not in these tests")


@adapters.register
class Declines(_TestAdapter):
    """Up and answering, and saying no to every charge."""

    name = "test_cb_declines"

    def create_charge(self, request: ChargeRequest) -> ChargeResult:
        raise AcquirerDeclined("charge refused by the acquirer")


@adapters.register
class Gated(_TestAdapter):
    """Holds every charge until the test opens the gate; counts the calls."""

    name = "test_cb_gated"
    gate = threading.Event()
    calls: ClassVar[list[str]] = []

    def create_charge(self, request: ChargeRequest) -> ChargeResult:
        self.calls.append(request.txid)
        assert self.gate.wait(timeout=20)
        return ChargeResult(provider_charge_id="gated", emv=_code(request))


@adapters.register
class Unclear(_TestAdapter):
    """A payout send that times out at once (it may have been paid); the
    status query answers ``options["status"]``: down, not_found, failed or paid."""

    name = "test_cb_unclear"
    sends: ClassVar[list[str]] = []

    def create_payout(self, request: PayoutRequest) -> PayoutResult:
        self.sends.append(request.idempotency_id)
        raise AcquirerTimeout("no answer")

    def get_payout_status(self, idempotency_id: str) -> PayoutResult:
        answer = self.options.get("status", "down")
        if answer == "paid":
            return PayoutResult(status=PayoutStatus.PAID, provider_payout_id="u", e2e_id=new_e2e_id())
        if answer == "not_found":
            return PayoutResult(status=PayoutStatus.NOT_FOUND)
        if answer == "failed":
            return PayoutResult(status=PayoutStatus.FAILED, reason="AC03")
        raise AcquirerUnavailable("status endpoint down")


# --------------------------------------------------------------------------- opening, through real charges


def test_opens_after_failures_in_a_row_and_the_chain_skips_it(
    api: APIClient, settings: Any, calls: dict[str, int]
) -> None:
    settings.METRICS_TOKEN = METRICS_TOKEN
    down = AcquirerFactory(key="cb_down", default_priority=1, options={"charge": "fail"})
    AcquirerFactory(key="cb_up", default_priority=2)
    opens = counter("pix_acquirer_circuit_opens_total", acquirer="cb_down")
    skips = counter(
        "pix_acquirer_circuit_skips_total", acquirer="cb_down", operation="create_charge", reason="circuit_open"
    )

    for n in range(1, FAILURES + 1):
        charge, attempts = created(post(api))
        assert charge.acquirer.key == "cb_up"
        assert attempts == [("cb_down", "unavailable"), ("cb_up", "ok")]
        assert (state(down).state, state(down).failures) == (State.OPEN if n == FAILURES else State.CLOSED, n)
    assert calls == {"cb_down": FAILURES, "cb_up": FAILURES}
    assert opens() == 1

    # Open: passed over without a call, recorded as such, and the client
    # sees an ordinary 201 from the next acquirer.
    response = post(api, amount=1234)
    charge, attempts = created(response)
    assert (charge.acquirer.key, charge.amount) == ("cb_up", 1234)
    assert attempts == [("cb_down", "circuit_open"), ("cb_up", "ok")]
    skipped = ChargeAttempt.objects.get(charge_id=charge.pk, acquirer=down)
    assert (skipped.latency_ms, skipped.error_class) == (0, "CircuitOpen")
    assert "circuit open" in skipped.error_message
    assert calls == {"cb_down": FAILURES, "cb_up": FAILURES + 1}
    assert skips() == 1
    assert opens() == 1


def test_timeouts_invalid_answers_and_adapter_errors_count_like_unavailability() -> None:
    garbage = AcquirerFactory(key="cb_garbage")
    for outcome in ("timeout", "invalid_response", "error"):
        breaker.record(garbage, outcome=outcome, latency_ms=10)
    assert state(garbage).state is State.OPEN


def test_declined_charges_never_open_the_circuit(api: APIClient) -> None:
    declines = AcquirerFactory(key="cb_declines", default_priority=1, adapter="test_cb_declines", options={})
    AcquirerFactory(key="cb_takes", default_priority=2)

    for _ in range(2 * FAILURES + 1):
        assert created(post(api))[1] == [("cb_declines", "declined"), ("cb_takes", "ok")]

    found = state(declines)
    assert (found.state, found.failures, found.calls, found.success_rate) == (State.CLOSED, 0, 2 * FAILURES + 1, 1.0)


def test_a_failure_rate_opens_a_flapping_acquirer(clock: FakeClock, settings: Any) -> None:
    flapping = AcquirerFactory(key="cb_flapping")
    # Never FAILURES in a row, but half of the calls: opens once there are
    # MIN_CALLS (10) in the window and a failure tips the rate.
    for outcome in ["unavailable", "ok"] * 5:
        breaker.record(flapping, outcome=outcome, latency_ms=20)
        clock.advance(1)
    assert state(flapping).state is State.CLOSED
    breaker.record(flapping, outcome="timeout", latency_ms=20)
    assert state(flapping).state is State.OPEN

    # Calls older than the window no longer count.
    other = AcquirerFactory(key="cb_flapping_slowly")
    for outcome in ["unavailable", "ok"] * 5:
        breaker.record(other, outcome=outcome, latency_ms=20)
    clock.advance(settings.ACQUIRER_BREAKER_WINDOW + 1)
    breaker.record(other, outcome="unavailable", latency_ms=20)
    assert (state(other).state, state(other).failures) == (State.CLOSED, 1)


def test_recent_success_rate_and_latency_percentiles() -> None:
    acquirer = AcquirerFactory(key="cb_measured")
    for latency in range(1, 101):
        breaker.record(acquirer, outcome="unavailable" if latency % 10 == 0 else "ok", latency_ms=latency)
    found = state(acquirer)
    assert (found.calls, found.success_rate, found.p50_ms, found.p95_ms) == (100, 0.9, 50, 95)
    assert found.since is not None


# --------------------------------------------------------------------------- half-open: the probe


def test_after_the_cool_down_one_probe_closes_the_circuit(
    api: APIClient, clock: FakeClock, calls: dict[str, int]
) -> None:
    flaky = AcquirerFactory(key="cb_recovers", default_priority=1, options={"charge": "fail"})
    AcquirerFactory(key="cb_backup", default_priority=2)
    for _ in range(FAILURES):
        created(post(api))
    assert state(flaky).state is State.OPEN
    Acquirer.objects.filter(pk=flaky.pk).update(options={"charge": "ok", "payout": "ok"})

    clock.advance(COOLDOWN - 1)
    assert created(post(api))[1] == [("cb_recovers", "circuit_open"), ("cb_backup", "ok")]

    clock.advance(2)
    assert state(flaky).state is State.HALF_OPEN
    charge, attempts = created(post(api))
    assert (charge.acquirer.key, attempts) == ("cb_recovers", [("cb_recovers", "ok")])
    assert (state(flaky).state, state(flaky).failures) == (State.CLOSED, 0)

    # Closed again: every charge goes to it.
    assert created(post(api))[1] == [("cb_recovers", "ok")]
    assert calls["cb_recovers"] == FAILURES + 2


def test_a_failed_probe_opens_the_circuit_for_another_cool_down(
    api: APIClient, clock: FakeClock, settings: Any, calls: dict[str, int]
) -> None:
    settings.METRICS_TOKEN = METRICS_TOKEN
    broken = AcquirerFactory(key="cb_still_down", default_priority=1, options={"charge": "fail"})
    AcquirerFactory(key="cb_other", default_priority=2)
    fail(broken)
    opens = counter("pix_acquirer_circuit_opens_total", acquirer="cb_still_down")

    clock.advance(COOLDOWN + 1)
    assert created(post(api))[1] == [("cb_still_down", "unavailable"), ("cb_other", "ok")]
    found = state(broken)
    assert found.state is State.OPEN
    assert found.retry_at is not None
    assert abs(found.retry_at.timestamp() - (clock.now + COOLDOWN)) < 0.01
    assert opens() == 1

    # Skipped again for the whole new cool-down: the probe was the only call.
    clock.advance(COOLDOWN - 1)
    assert created(post(api))[1] == [("cb_still_down", "circuit_open"), ("cb_other", "ok")]
    assert calls["cb_still_down"] == 1


def test_half_open_lets_exactly_one_probe_through_across_threads(clock: FakeClock) -> None:
    acquirer = AcquirerFactory(key="cb_contended")
    fail(acquirer)
    clock.advance(COOLDOWN + 1)

    gates = run_concurrently([lambda: breaker.admit(acquirer)] * 16, timeout=30)

    assert not [g for g in gates if isinstance(g, BaseException)]
    assert sum(g.probe for g in gates) == 1
    assert sum(g.allowed for g in gates) == 1
    # The others know when the probe's claim runs out, should its caller die.
    lease = (acquirer.connect_timeout_ms + acquirer.read_timeout_ms) / 1000
    assert {round(g.retry_at - clock.now) for g in gates if not g.allowed} == {round(lease + 2)}

    # A probe that never reports gives its claim up after the lease.
    clock.advance(lease + 3)
    assert breaker.admit(acquirer).probe


@pytest.mark.django_db(transaction=True)
def test_concurrent_charges_send_one_probe_and_the_rest_fall_back(clock: FakeClock) -> None:
    Gated.calls = []
    Gated.gate.clear()
    gated = AcquirerFactory(
        key="cb_gated", adapter="test_cb_gated", options={}, default_priority=1, read_timeout_ms=20_000
    )
    AcquirerFactory(key="cb_spare", default_priority=2)
    account = AccountFactory()
    buyer = Buyer(name="Fulano", document=CPF, phone="11999998888", address={})
    fail(gated)
    clock.advance(COOLDOWN + 1)
    outcomes: list[Any] = []

    def create() -> Charge:
        try:
            return charge_create(account=account, amount=1000, buyer=buyer)
        finally:
            connection.close()

    runner = threading.Thread(target=lambda: outcomes.extend(run_concurrently([create] * 6, timeout=60)))
    runner.start()
    try:
        # The five that lost the race to the probe went to the spare
        # while the probe is still held at the gate.
        wait_for(lambda: ChargeAttempt.objects.filter(acquirer__key="cb_spare", outcome="ok").count() == 5)
        assert len(Gated.calls) == 1
    finally:
        Gated.gate.set()
        runner.join(timeout=60)

    assert not [o for o in outcomes if isinstance(o, BaseException)], outcomes
    assert sorted(charge.acquirer.key for charge in outcomes) == ["cb_gated"] + ["cb_spare"] * 5
    assert len(Gated.calls) == 1
    by_outcome = {
        outcome: ChargeAttempt.objects.filter(acquirer=gated, outcome=outcome).count()
        for outcome in ("ok", "circuit_open")
    }
    assert by_outcome == {"ok": 1, "circuit_open": 5}
    assert state(gated).state is State.CLOSED


# --------------------------------------------------------------------------- every acquirer open


def test_every_acquirer_open_still_tries_the_one_whose_cool_down_ends_first(
    api: APIClient, account: Account, clock: FakeClock, calls: dict[str, int]
) -> None:
    first = AcquirerFactory(key="cb_first", default_priority=1, options={"charge": "fail"})
    second = AcquirerFactory(key="cb_second", default_priority=2, options={"charge": "fail"})
    fail(second)  # opened first: its cool-down ends first
    clock.advance(5)
    fail(first)
    clock.advance(5)
    # second open until t+30, first until t+35.

    # Both still fail: each request makes one call, to the nearest, which
    # opens again; the next request goes to the other one.
    response = post(api)
    assert (response.status_code, response.json()["message"]) == (400, ALL_FAILED)
    assert last_attempts(account) == [("cb_first", "circuit_open"), ("cb_second", "unavailable")]
    assert calls == {"cb_second": 1}
    assert state(second).state is State.OPEN  # again, until t+40
    clock.advance(1)
    response = post(api)  # first is the nearest now; it opens again until t+41
    assert response.status_code == 400
    assert last_attempts(account) == [("cb_first", "unavailable"), ("cb_second", "circuit_open")]
    assert calls == {"cb_second": 1, "cb_first": 1}

    # Once the nearest answers, the charge is taken and its circuit closes.
    Acquirer.objects.filter(pk=second.pk).update(options={"charge": "ok", "payout": "ok"})
    charge, attempts = created(post(api))
    assert (charge.acquirer.key, attempts) == ("cb_second", [("cb_first", "circuit_open"), ("cb_second", "ok")])
    assert (state(second).state, state(first).state) == (State.CLOSED, State.OPEN)


def test_switched_off_the_breaker_neither_skips_nor_records(api: APIClient, settings: Any) -> None:
    down = AcquirerFactory(key="cb_off_down", default_priority=1, options={"charge": "fail"})
    AcquirerFactory(key="cb_off_up", default_priority=2)
    fail(down)
    settings.ACQUIRER_BREAKER_ENABLED = False

    assert created(post(api))[1] == [("cb_off_down", "unavailable"), ("cb_off_up", "ok")]
    assert state(down).calls == FAILURES


# --------------------------------------------------------------------------- payouts


@pytest.fixture
def enqueued(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    """Processing hand-offs, recorded instead of sent to a broker."""
    made: list[tuple[Any, ...]] = []
    monkeypatch.setattr(
        withdrawal_services, "_enqueue_processing", lambda *args, **kwargs: made.append((*args, kwargs))
    )
    return made


@pytest.fixture
def payer() -> Account:
    account = AccountFactory(withdrawal_fee_fixed=0, withdrawal_fee_bps=0)
    with transaction.atomic():
        ledger_post(account_id=account.pk, amount=100_000, kind=LedgerEntry.Kind.CHARGE_PAID, reference="seed:cb")
    return account


def approved(account: Account) -> Withdrawal:
    withdrawal = withdrawal_request(account=account, amount=5000, key_type="cpf", key_value=CPF)
    assert withdrawal_process(withdrawal_id=withdrawal.pk) == "approved"
    return withdrawal


def payout_attempts(withdrawal: Withdrawal) -> list[tuple[str, str, str]]:
    rows = PayoutAttempt.objects.filter(withdrawal=withdrawal).order_by("id").select_related("acquirer")
    return [(a.acquirer.key, a.action, a.outcome) for a in rows]


def cashout(account: Account, *chain: Acquirer) -> None:
    acquirer_slots_set(account=account, purpose=AcquirerSlot.Purpose.CASHOUT, acquirers=list(chain))


def held_by(acquirer: Acquirer, withdrawal: Withdrawal) -> PayoutStatus:
    return adapters.build(acquirer).get_payout_status(withdrawal.idempotency_id).status


def test_a_new_payout_skips_an_open_acquirer(payer: Account, enqueued: list[Any], settings: Any) -> None:
    settings.METRICS_TOKEN = METRICS_TOKEN
    closed_off = AcquirerFactory(key="cb_po_open")
    works = AcquirerFactory(key="cb_po_works")
    cashout(payer, closed_off, works)
    fail(closed_off)
    skips = counter(
        "pix_acquirer_circuit_skips_total", acquirer="cb_po_open", operation="payout", reason="circuit_open"
    )
    withdrawal = approved(payer)

    assert withdrawal_process(withdrawal_id=withdrawal.pk) == WithdrawalStatus.PAID
    assert payout_attempts(withdrawal) == [("cb_po_works", "send", "paid")]
    assert held_by(closed_off, withdrawal) is PayoutStatus.NOT_FOUND
    assert skips() == 1


def test_an_open_acquirer_that_may_hold_the_payout_is_always_asked_first(payer: Account, enqueued: list[Any]) -> None:
    Unclear.sends = []
    unclear = AcquirerFactory(key="cb_po_unclear", adapter="test_cb_unclear", options={})
    spare = AcquirerFactory(key="cb_po_spare")
    cashout(payer, unclear, spare)
    withdrawal = approved(payer)

    with pytest.raises(PayoutUndetermined):
        withdrawal_process(withdrawal_id=withdrawal.pk)
    first = [("cb_po_unclear", "send", "timeout"), ("cb_po_unclear", "status", "unavailable")]
    assert payout_attempts(withdrawal) == first
    fail(unclear, times=1)  # a third failure in a row
    assert state(unclear).state is State.OPEN

    # Open, and still the only one asked: it may be paying this payout.
    with pytest.raises(PayoutUndetermined):
        withdrawal_process(withdrawal_id=withdrawal.pk)
    second = [*first, ("cb_po_unclear", "status", "unavailable")]
    assert payout_attempts(withdrawal) == second
    assert held_by(spare, withdrawal) is PayoutStatus.NOT_FOUND

    # "Not found" right after an unclear send is no answer: it stays there.
    Acquirer.objects.filter(pk=unclear.pk).update(options={"status": "not_found"})
    assert state(unclear).state is State.OPEN
    with pytest.raises(PayoutUndetermined):
        withdrawal_process(withdrawal_id=withdrawal.pk)
    third = [*second, ("cb_po_unclear", "status", "not_found")]
    assert payout_attempts(withdrawal) == third
    assert held_by(spare, withdrawal) is PayoutStatus.NOT_FOUND

    # It failed the payout, and nothing of ours can still be on its way there:
    # only now does the payout move on.
    Acquirer.objects.filter(pk=unclear.pk).update(options={"status": "failed"})
    PayoutAttempt.objects.filter(withdrawal=withdrawal, action="send").update(
        created_at=timezone.now() - withdrawal_services.LEASE
    )
    assert withdrawal_process(withdrawal_id=withdrawal.pk) == WithdrawalStatus.PAID
    assert payout_attempts(withdrawal) == [
        *third,
        ("cb_po_unclear", "status", "failed"),
        ("cb_po_spare", "send", "paid"),
    ]
    assert Unclear.sends == [withdrawal.idempotency_id]


def test_a_payout_waits_while_every_acquirer_of_its_chain_is_open(
    payer: Account, enqueued: list[Any], clock: FakeClock
) -> None:
    only = AcquirerFactory(key="cb_po_only")
    cashout(payer, only)
    fail(only)
    withdrawal = approved(payer)
    clock.advance(10)

    # Neither failed nor sent: processed again when the cool-down ends.
    assert withdrawal_process(withdrawal_id=withdrawal.pk) == "deferred"
    withdrawal.refresh_from_db()
    assert (withdrawal.status, withdrawal.payout_leased_until) == (WithdrawalStatus.APPROVED, None)
    assert payout_attempts(withdrawal) == []
    assert enqueued[-1][0] == withdrawal.pk
    assert enqueued[-1][1]["countdown"] == pytest.approx(COOLDOWN - 10, abs=0.01)

    clock.advance(COOLDOWN)
    assert withdrawal_process(withdrawal_id=withdrawal.pk) == WithdrawalStatus.PAID
    assert payout_attempts(withdrawal) == [("cb_po_only", "send", "paid")]
    assert state(only).state is State.CLOSED


def test_declined_payouts_never_open_the_circuit(payer: Account, enqueued: list[Any]) -> None:
    refuses = AcquirerFactory(key="cb_po_refuses", options={"charge": "ok", "payout": "fail"})
    pays = AcquirerFactory(key="cb_po_pays")
    cashout(payer, refuses, pays)

    for _ in range(FAILURES + 1):
        withdrawal = approved(payer)
        assert withdrawal_process(withdrawal_id=withdrawal.pk) == WithdrawalStatus.PAID
        assert payout_attempts(withdrawal) == [("cb_po_refuses", "send", "declined"), ("cb_po_pays", "send", "paid")]

    assert (state(refuses).state, state(refuses).failures) == (State.CLOSED, 0)


# --------------------------------------------------------------------------- back office

ACQUIRERS = reverse("admin:acquirers_acquirer_changelist")


def reset(client: Client, *acquirers: Acquirer) -> Any:
    return client.post(
        ACQUIRERS,
        {"action": "reset_circuit_breaker", "_selected_action": [str(a.pk) for a in acquirers]},
        follow=True,
    )


def test_admin_shows_the_breaker(admin_client: Client, clock: FakeClock) -> None:
    acquirer = AcquirerFactory(key="cb_admin_shown")
    for latency in (100, 200, 300, 400):
        breaker.record(acquirer, outcome="ok", latency_ms=latency)
    fail(acquirer)
    opened = timezone.localtime(dt.datetime.fromtimestamp(clock.now, tz=dt.UTC)).strftime("%d/%m/%Y %H:%M:%S")

    listing = admin_client.get(ACQUIRERS).content.decode()
    assert f"aberto ({FAILURES} falhas seguidas)" in listing
    assert "57,1% de 7 chamadas" in listing

    page = admin_client.get(reverse("admin:acquirers_acquirer_change", args=[acquirer.pk])).content.decode()
    for shown in ("Estado do circuito", "aberto", "Falhas seguidas", opened, "p50 100 ms / p95 400 ms"):
        assert shown in page, shown

    clock.advance(COOLDOWN + 1)
    assert "meio-aberto" in admin_client.get(ACQUIRERS).content.decode()


def test_admin_reset_closes_the_circuit_and_is_logged(admin_client: Client, api: APIClient) -> None:
    acquirer = AcquirerFactory(key="cb_admin_reset", default_priority=1)
    AcquirerFactory(key="cb_admin_spare", default_priority=2)
    fail(acquirer)
    assert created(post(api))[1] == [("cb_admin_reset", "circuit_open"), ("cb_admin_spare", "ok")]

    page = reset(admin_client, acquirer)

    assert "1 circuito fechado." in page.content.decode()
    assert (state(acquirer).state, state(acquirer).failures) == (State.CLOSED, 0)
    entry = LogEntry.objects.get(object_id=str(acquirer.pk))
    assert entry.get_change_message() == "Circuit breaker resetado (circuito fechado)"
    assert created(post(api))[1] == [("cb_admin_reset", "ok")]


def test_only_staff_with_the_permission_may_reset(
    staff_client: Callable[[str], Client], django_user_model: Any
) -> None:
    acquirer = AcquirerFactory(key="cb_admin_perm")
    fail(acquirer)

    support = staff_client("support")
    listing = support.get(ACQUIRERS).content.decode()
    assert "aberto" in listing  # support sees the breaker...
    assert 'value="reset_circuit_breaker"' not in listing  # ...and cannot reset it
    reset(support, acquirer)
    assert state(acquirer).state is State.OPEN

    # What the permission grants, whoever holds it.
    holder = django_user_model.objects.get(username="support-user")
    holder.user_permissions.add(Permission.objects.get(codename="reset_circuit_breaker"))
    assert 'value="reset_circuit_breaker"' in support.get(ACQUIRERS).content.decode()
    reset(support, acquirer)
    assert state(acquirer).state is State.CLOSED


def test_operations_staff_may_reset(staff_client: Callable[[str], Client]) -> None:
    acquirer = AcquirerFactory(key="cb_admin_ops")
    fail(acquirer)
    reset(staff_client("operations"), acquirer)
    assert state(acquirer).state is State.CLOSED


# --------------------------------------------------------------------------- metrics


def test_metrics_show_each_acquirers_circuit(settings: Any, clock: FakeClock) -> None:
    settings.METRICS_TOKEN = METRICS_TOKEN
    acquirer = AcquirerFactory(key="cb_metrics")
    calm = AcquirerFactory(key="cb_metrics_calm")
    breaker.record(calm, outcome="ok", latency_ms=3)
    fail(acquirer, times=FAILURES - 1)
    assert sample("pix_acquirer_circuit_state", acquirer="cb_metrics") == 0
    assert sample("pix_acquirer_consecutive_failures", acquirer="cb_metrics") == FAILURES - 1

    fail(acquirer, times=1)
    assert sample("pix_acquirer_circuit_state", acquirer="cb_metrics") == 2
    clock.advance(COOLDOWN + 1)
    assert sample("pix_acquirer_circuit_state", acquirer="cb_metrics") == 1
    breaker.reset(acquirer)
    assert sample("pix_acquirer_circuit_state", acquirer="cb_metrics") == 0
    assert sample("pix_acquirer_circuit_state", acquirer="cb_metrics_calm") == 0


# --------------------------------------------------------------------------- Redis down


def test_without_redis_the_breaker_fails_open(
    api: APIClient, admin_client: Client, settings: Any, calls: dict[str, int]
) -> None:
    settings.METRICS_TOKEN = METRICS_TOKEN
    primary = AcquirerFactory(key="cb_no_redis", default_priority=1)
    AcquirerFactory(key="cb_no_redis_spare", default_priority=2)
    fail(primary)
    assert created(post(api))[1] == [("cb_no_redis", "circuit_open"), ("cb_no_redis_spare", "ok")]

    # Nothing answers there: connection refused at once.
    settings.REDIS_URL = "redis://127.0.0.1:1/0"

    started = time.monotonic()
    charge, attempts = created(post(api))
    assert (charge.acquirer.key, attempts) == ("cb_no_redis", [("cb_no_redis", "ok")])
    assert created(post(api))[1] == [("cb_no_redis", "ok")]
    assert time.monotonic() - started < 5
    assert calls["cb_no_redis"] == 2

    page = admin_client.get(ACQUIRERS).content.decode()
    assert "indisponível (Redis fora do ar)" in page
    assert "Redis indisponível; nada mudou." in reset(admin_client, primary).content.decode()
    assert sample("pix_acquirer_circuit_state", acquirer="cb_no_redis") is None
    assert not LogEntry.objects.filter(object_id=str(primary.pk)).exists()

    # Redis back: the state it kept is still there (nothing was recorded meanwhile).
    settings.REDIS_URL = settings.CACHES["default"]["LOCATION"]
    assert (state(primary).state, state(primary).calls) == (State.OPEN, FAILURES)


# --------------------------------------------------------------------------- admitting from this process's sight


class LocalClock:
    """The breaker's process clock (freshness of a closed sight), moved by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def local_clock(monkeypatch: pytest.MonkeyPatch) -> LocalClock:
    fake = LocalClock()
    monkeypatch.setattr(breaker, "local_clock", fake)
    return fake


@pytest.fixture
def admissions(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Breaker keys of the admissions that went to Redis."""
    asked: list[str] = []
    real = breaker._connect(django_settings.REDIS_URL)

    def admit(*, keys: list[str], args: list[str]) -> Any:
        asked.append(keys[0])
        return real.admit(keys=keys, args=args)

    spied = breaker._Redis(real.client, admit, real.record)
    monkeypatch.setattr(breaker, "_connect", lambda url: spied)
    return asked


def opened_by_another_process(acquirer: Acquirer) -> None:
    """What another process's record of a failure that trips the circuit leaves in Redis."""
    breaker._connect(django_settings.REDIS_URL).client.hset(
        breaker._key(acquirer),
        mapping={
            "state": "open",
            "opened_at": f"{breaker.clock():.3f}",
            "open_until": f"{breaker.clock() + COOLDOWN:.3f}",
        },
    )


def called_then_opened_elsewhere(api: APIClient, first_key: str, spare_key: str) -> Acquirer:
    """A chain of two acquirers; one charge goes to the first (this process
    sees its circuit closed), then another process opens that circuit."""
    first = AcquirerFactory(key=first_key, default_priority=1)
    AcquirerFactory(key=spare_key, default_priority=2)
    assert created(post(api))[1] == [(first_key, "ok")]
    opened_by_another_process(first)
    return first


def test_a_circuit_seen_closed_admits_the_next_calls_without_asking_redis(
    api: APIClient, admissions: list[str], local_clock: LocalClock, calls: dict[str, int]
) -> None:
    AcquirerFactory(key="cb_local", default_priority=1)
    for _ in range(5):
        assert created(post(api))[1] == [("cb_local", "ok")]
    # The first charge asked; each record since said "still closed".
    assert len(admissions) == 1
    # Idle past the freshness window: the next call asks again.
    local_clock.now += 1.5
    assert created(post(api))[1] == [("cb_local", "ok")]
    assert len(admissions) == 2
    assert calls == {"cb_local": 6}


def test_a_circuit_another_process_opened_is_obeyed_from_this_process_next_record(
    api: APIClient, admissions: list[str], local_clock: LocalClock, calls: dict[str, int]
) -> None:
    first = called_then_opened_elsewhere(api, "cb_elsewhere", "cb_spare")

    # Within the window this process still admits from its last sight (the
    # call was as good as in flight when the circuit opened elsewhere); the
    # record of that call answers "open" ...
    assert created(post(api))[1] == [("cb_elsewhere", "ok")]
    # ... and from then on the circuit is obeyed: passed over, no call made.
    assert created(post(api))[1] == [("cb_elsewhere", "circuit_open"), ("cb_spare", "ok")]
    assert created(post(api))[1] == [("cb_elsewhere", "circuit_open"), ("cb_spare", "ok")]
    assert calls == {"cb_elsewhere": 2, "cb_spare": 2}
    assert state(first).state is State.OPEN


def test_a_circuit_another_process_opened_is_obeyed_once_the_window_passes(
    api: APIClient, admissions: list[str], local_clock: LocalClock, calls: dict[str, int]
) -> None:
    called_then_opened_elsewhere(api, "cb_elsewhere_idle", "cb_spare_idle")
    local_clock.now += 1.01
    assert created(post(api))[1] == [("cb_elsewhere_idle", "circuit_open"), ("cb_spare_idle", "ok")]
    assert calls == {"cb_elsewhere_idle": 1, "cb_spare_idle": 1}


def test_half_open_is_never_admitted_locally_one_probe_whatever_this_process_saw(
    api: APIClient, clock: FakeClock, local_clock: LocalClock, calls: dict[str, int]
) -> None:
    recovering = AcquirerFactory(key="cb_local_probe", default_priority=1, options={"charge": "fail"})
    AcquirerFactory(key="cb_local_spare", default_priority=2)
    for _ in range(FAILURES):
        created(post(api))
    assert state(recovering).state is State.OPEN
    clock.advance(COOLDOWN + 1)
    # The cool-down is over: one probe is let through, and it fails again.
    assert created(post(api))[1] == [("cb_local_probe", "unavailable"), ("cb_local_spare", "ok")]
    assert created(post(api))[1] == [("cb_local_probe", "circuit_open"), ("cb_local_spare", "ok")]
    assert calls["cb_local_probe"] == FAILURES + 1
