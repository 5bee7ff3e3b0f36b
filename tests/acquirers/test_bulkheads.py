"""Bulkheads (issue #13): a cap on the calls in flight to each acquirer and
a bounded pool per outbound purpose, per process (``acquirers.capacity``).

A busy acquirer is passed over by a charge's chain like an open circuit
(a ``busy`` attempt, nothing sent to it); a payout that a busy acquirer may
hold waits for it, never goes elsewhere, and comes back in a few seconds; a
full pool refuses its own purpose only; and a slot is given back however a
call ends.

Real PostgreSQL and Redis; the slow acquirer is the fake API Pix PSP on
loopback holding its answers until the test lets them go; the calls holding
it are real charges on their own threads.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pytest
from django.db import connection, transaction
from openapi_core.testing import MockRequest
from prometheus_client import REGISTRY
from rest_framework.test import APIClient

from accounts.models import Account, LedgerEntry
from accounts.selectors import available_balance, ledger_sum
from accounts.services import ledger_post
from acquirers import adapters, breaker, calls, capacity
from acquirers.adapters.base import (
    AcquirerAdapter,
    AcquirerUnavailable,
    ChargeRequest,
    ChargeResult,
    ChargeStatusResult,
    InvalidNotification,
    Notification,
    PayoutRequest,
    PayoutResult,
    PayoutStatus,
    ProviderChargeState,
    RefundRequest,
    RefundResult,
    RefundStatus,
)
from acquirers.adapters.sandbox import SandboxAdapter, new_e2e_id
from acquirers.calls import Outcome
from acquirers.checks import cap_below_charge_pool
from acquirers.models import Acquirer, AcquirerSlot
from acquirers.services import acquirer_slots_set
from config.settings import outbound
from core.bulkhead import Bulkhead
from payments.exceptions import AllAcquirersFailed, RefundFailed
from payments.models import Charge, ChargeAttempt, ChargeStatus, ChargeTransition
from payments.refunds import charge_refund
from payments.services import Buyer, charge_create, charge_transition
from payments.status_polling import charge_status_poll
from tests.acquirers.conftest import CHAVE, CLIENT_SECRET, PKI, warm_up
from tests.acquirers.fake_psp import FakePsp, Fault, Handler
from tests.factories import AccountFactory, AcquirerFactory
from tests.realworld import wait_for
from withdrawals import services as withdrawal_services
from withdrawals.exceptions import PayoutUndetermined
from withdrawals.models import PayoutAttempt, Withdrawal, WithdrawalStatus
from withdrawals.payouts import ProcessOutcome, withdrawal_process
from withdrawals.services import withdrawal_request

# Charges on other threads: committed rows only.
pytestmark = pytest.mark.django_db(transaction=True)

BUYER = Buyer(name="Maria da Silva", document="52998224725", phone="11987654321", address={})
CPF = "52998224725"
CAP = 2


@pytest.fixture(autouse=True)
def small_bulkheads(settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    settings.ACQUIRER_MAX_IN_FLIGHT = CAP
    settings.ACQUIRER_BREAKER_ENABLED = False  # capacity alone decides here
    monkeypatch.setattr(breaker, "_suspended_until", 0.0)


@pytest.fixture
def enqueued(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    """Processing hand-offs (and their countdowns), recorded instead of sent to a broker."""
    made: list[tuple[Any, ...]] = []
    monkeypatch.setattr(
        withdrawal_services, "_enqueue_processing", lambda *args, **kwargs: made.append((*args, kwargs))
    )
    return made


def in_flight(acquirer: Acquirer) -> int:
    return capacity.cap(acquirer).in_flight


def pools_in_flight() -> dict[str, int]:
    return {purpose: capacity.pool(purpose).in_flight for purpose in capacity.Purpose}


IDLE = {"charge": 0, "payout": 0, "reconcile": 0}


def skips(acquirer: Acquirer, operation: str, reason: str = "busy") -> float:
    labels = {"acquirer": acquirer.key, "operation": operation, "reason": reason}
    return REGISTRY.get_sample_value("pix_acquirer_circuit_skips_total", labels) or 0.0


@contextlib.contextmanager
def held(bulkhead: Bulkhead, slots: int) -> Iterator[None]:
    """``slots`` calls of this process in flight on ``bulkhead``, for the block."""
    with contextlib.ExitStack() as stack:
        for _ in range(slots):
            assert stack.enter_context(bulkhead.slot())
        yield


def attempts_of(charge_id: Any) -> list[tuple[str, str]]:
    rows = ChargeAttempt.objects.filter(charge_id=charge_id).select_related("acquirer").order_by("position")
    return [(a.acquirer.key, a.outcome) for a in rows]


def last_attempts(account: Account) -> list[tuple[str, str]]:
    return attempts_of(ChargeAttempt.objects.filter(account=account).latest("id").charge_id)


# --------------------------------------------------------------------------- a slow PSP on loopback


class _HeldHandler(Handler):
    def _cob_put(self, request: MockRequest, body: dict[str, Any], fault: Fault | None) -> tuple[int, Any]:
        psp = self.psp
        assert isinstance(psp, SlowPsp)
        assert psp.release.wait(timeout=20), "the test never let the charges go"
        return super()._cob_put(request, body, fault)


@dataclass
class SlowPsp(FakePsp):
    """The API Pix fake, answering no charge creation until ``release`` is set."""

    release: threading.Event = field(default_factory=threading.Event)

    def handler(self) -> type[Handler]:
        return _HeldHandler


@pytest.fixture
def fake_psp() -> Iterator[FakePsp]:
    """The conftest's PSP (and its acquirers), slow."""
    psp = SlowPsp(pki=PKI, client_id=f"bulkhead-{time.monotonic_ns()}", client_secret=CLIENT_SECRET, chave=CHAVE)
    with psp.running():
        try:
            yield psp
        finally:
            psp.release.set()
    assert psp.violations == [], "\n".join(psp.violations)


@contextlib.contextmanager
def charges_held_at(psp: SlowPsp, acquirer: Acquirer, count: int) -> Iterator[list[Any]]:
    """``count`` real charges on their own threads, each waiting on the slow
    PSP; given their answers when the block ends. Yields their outcomes."""
    outcomes: list[Any] = []

    def charge() -> None:
        try:
            outcomes.append(charge_create(account=AccountFactory(), amount=1000, buyer=BUYER))
        except Exception as exc:  # noqa: BLE001 - asserted by the test
            outcomes.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=charge) for _ in range(count)]
    for thread in threads:
        thread.start()
    try:
        wait_for(lambda: len(psp.calls_of("cob.put")) == count and in_flight(acquirer) == count)
        yield outcomes
    finally:
        psp.release.set()
        for thread in threads:
            thread.join(timeout=30)
    assert not any(thread.is_alive() for thread in threads)


@pytest.fixture
def slow(fake_psp: FakePsp, make_bacen_acquirer: Callable[..., Acquirer]) -> Acquirer:
    acquirer = make_bacen_acquirer("bh_slow", default_priority=1)
    warm_up(acquirer)  # the token is fetched now, not by the held charges
    return acquirer


@pytest.fixture
def sandbox_calls(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Charge calls that really reached each sandbox acquirer, by key."""
    made: dict[str, int] = {}
    original = SandboxAdapter.create_charge

    def counted(self: SandboxAdapter, request: ChargeRequest) -> ChargeResult:
        made[self.config.key] = made.get(self.config.key, 0) + 1
        return original(self, request)

    monkeypatch.setattr(SandboxAdapter, "create_charge", counted)
    return made


# --------------------------------------------------------------------------- charges


def test_a_busy_acquirer_is_passed_over_like_an_open_circuit(
    fake_psp: SlowPsp, slow: Acquirer, api: APIClient, account: Account, sandbox_calls: dict[str, int]
) -> None:
    spare = AcquirerFactory(key="bh_spare", default_priority=2)
    before = skips(slow, "create_charge")

    with charges_held_at(fake_psp, slow, CAP) as holders:
        # The slow acquirer has CAP calls in flight: the next charge goes to
        # the next acquirer at once, and the slow one is not called at all.
        started = time.monotonic()
        buyer = {"buyer_name": BUYER.name, "buyer_document": CPF, "buyer_phone": BUYER.phone}
        response = api.post(
            "/api/transactions", {"payment_method": "pix", "amount": 1500, "buyer": buyer}, format="json"
        )
        assert response.status_code == 201, response.content
        assert time.monotonic() - started < slow.deadline_seconds
        charge = Charge.objects.get(pk=response.json()["data"]["id"])
        assert charge.acquirer_id == spare.pk
        assert attempts_of(charge.pk) == [("bh_slow", "busy"), ("bh_spare", "ok")]
        busy = ChargeAttempt.objects.get(charge_id=charge.pk, acquirer=slow)
        assert (busy.latency_ms, busy.error_class) == (0, "AcquirerBusy")
        assert len(fake_psp.calls_of("cob.put")) == CAP
        assert sandbox_calls == {"bh_spare": 1}
        assert skips(slow, "create_charge") == before + 1

    # The held charges were answered and taken by the slow acquirer.
    assert [type(o) for o in holders] == [Charge] * CAP
    assert {o.acquirer_id for o in holders} == {slow.pk}
    assert in_flight(slow) == 0
    assert pools_in_flight() == IDLE

    # Free again: the next charge goes to it.
    fake_psp.release.set()
    taken = charge_create(account=account, amount=1000, buyer=BUYER)
    assert (taken.acquirer_id, attempts_of(taken.pk)) == (slow.pk, [("bh_slow", "ok")])


def test_a_full_charge_pool_refuses_charges_at_once_and_nothing_else(
    fake_psp: SlowPsp,
    slow: Acquirer,
    settings: Any,
    account: Account,
    sandbox_calls: dict[str, int],
    enqueued: list[tuple[Any, ...]],
) -> None:
    # (enqueued: the approval's task must not reach a worker of the session,
    # which would pay the payout from its own process, pools and all.)
    settings.OUTBOUND_POOL_CHARGE = 1
    spare = AcquirerFactory(key="bh_spare_pool", default_priority=2, options={"charge": "ok", "payout": "ok"})
    payer = funded()
    acquirer_slots_set(account=payer, purpose=AcquirerSlot.Purpose.CASHOUT, acquirers=[spare])

    with charges_held_at(fake_psp, slow, 1):
        # Every acquirer of the chain is busy (this process's pool for
        # charges is full, whatever their own caps): the charge fails now,
        # with the spec's "try again later" answer, rather than wait.
        started = time.monotonic()
        with pytest.raises(AllAcquirersFailed):
            charge_create(account=account, amount=1000, buyer=BUYER)
        assert time.monotonic() - started < 1.0
        assert last_attempts(account) == [("bh_slow", "busy"), ("bh_spare_pool", "busy")]
        assert sandbox_calls == {}
        assert not Charge.objects.filter(account=account).exists()

        # Payouts have a pool of their own: unaffected.
        withdrawal = withdrawal_request(account=payer, amount=5000, key_type="cpf", key_value=CPF)
        assert withdrawal_process(withdrawal_id=withdrawal.pk) == "approved"
        assert withdrawal_process(withdrawal_id=withdrawal.pk) == WithdrawalStatus.PAID

    assert pools_in_flight() == IDLE


def test_an_acquirer_at_its_cap_leaves_charge_slots_to_the_others(
    settings: Any, api: APIClient, sandbox_calls: dict[str, int]
) -> None:
    # The deployed sizes, not this module's small cap: what a web process
    # has when one acquirer is slow. With the cap equal to the charge pool
    # (both were 48), the slow one's calls filled the pool and a charge
    # whose chain had a healthy acquirer failed as busy too (make bench, the
    # other account beside the 2 s acquirer).
    settings.ACQUIRER_MAX_IN_FLIGHT = outbound.ACQUIRER_MAX_IN_FLIGHT
    settings.OUTBOUND_POOL_CHARGE = outbound.OUTBOUND_POOL_CHARGE
    slow = AcquirerFactory(key="bh_cap_slow", default_priority=1)
    healthy = AcquirerFactory(key="bh_cap_healthy", default_priority=2)
    buyer = {"buyer_name": BUYER.name, "buyer_document": CPF, "buyer_phone": BUYER.phone}

    with contextlib.ExitStack() as stack:
        # The slow acquirer's charges in flight, each holding a slot of the
        # charge pool and one of its cap, as calls.call takes them.
        for _ in range(outbound.ACQUIRER_MAX_IN_FLIGHT):
            assert stack.enter_context(capacity.slot(slow, "create_charge"))
        response = api.post(
            "/api/transactions", {"payment_method": "pix", "amount": 1500, "buyer": buyer}, format="json"
        )

    assert response.status_code == 201, response.content
    charge = Charge.objects.get(pk=response.json()["data"]["id"])
    assert attempts_of(charge.pk) == [("bh_cap_slow", "busy"), ("bh_cap_healthy", "ok")]
    assert charge.acquirer_id == healthy.pk
    assert sandbox_calls == {"bh_cap_healthy": 1}
    assert pools_in_flight() == IDLE


def test_a_cap_at_or_above_the_charge_pool_is_warned_of(settings: Any) -> None:
    settings.ACQUIRER_MAX_IN_FLIGHT = outbound.ACQUIRER_MAX_IN_FLIGHT
    settings.OUTBOUND_POOL_CHARGE = outbound.OUTBOUND_POOL_CHARGE
    assert cap_below_charge_pool(None) == []
    settings.ACQUIRER_MAX_IN_FLIGHT = settings.OUTBOUND_POOL_CHARGE
    assert [message.id for message in cap_below_charge_pool(None)] == ["acquirers.W001"]


def test_an_open_acquirer_is_probed_when_the_others_are_busy(settings: Any, account: Account) -> None:
    settings.ACQUIRER_BREAKER_ENABLED = True
    settings.ACQUIRER_BREAKER_FAILURES = 1
    settings.ACQUIRER_BREAKER_COOLDOWN = 300
    busy = AcquirerFactory(key="bh_busy", default_priority=1)
    tripped = AcquirerFactory(key="bh_tripped", default_priority=2)
    breaker.record(tripped, outcome="unavailable", latency_ms=5)
    assert breaker.admit(tripped).allowed is False

    # The existing all-open rule, the busy one left out: the open one is
    # called anyway as its probe; a busy one is never forced.
    with held(capacity.cap(busy), CAP):
        charge = charge_create(account=account, amount=1000, buyer=BUYER)
    assert charge.acquirer_id == tripped.pk
    assert attempts_of(charge.pk) == [("bh_busy", "busy"), ("bh_tripped", "ok")]


# --------------------------------------------------------------------------- payouts


@adapters.register
class Unclear(AcquirerAdapter):
    """A payout send that times out (it may have been paid); the status
    lookup answers ``options["status"]``: not_found or paid."""

    name = "test_bh_unclear"
    sends: ClassVar[list[str]] = []

    def create_charge(self, request: ChargeRequest) -> ChargeResult:
        raise AcquirerUnavailable("no charges here")

    def create_payout(self, request: PayoutRequest) -> PayoutResult:
        self.sends.append(request.idempotency_id)
        raise AcquirerUnavailable("read timeout") from TimeoutError()

    def get_payout_status(self, idempotency_id: str) -> PayoutResult:
        if self.options.get("status") == "paid":
            return PayoutResult(status=PayoutStatus.PAID, provider_payout_id="bh", e2e_id=new_e2e_id())
        return PayoutResult(status=PayoutStatus.NOT_FOUND)

    def parse_notification(self, headers: Mapping[str, str], body: bytes) -> list[Notification]:
        raise InvalidNotification("not in these tests")


def funded() -> Account:
    account = AccountFactory(withdrawal_fee_fixed=0, withdrawal_fee_bps=0)
    with transaction.atomic():
        ledger_post(account_id=account.pk, amount=100_000, kind=LedgerEntry.Kind.CHARGE_PAID, reference="seed:bh")
    return account


def approved(account: Account, *chain: Acquirer) -> Withdrawal:
    acquirer_slots_set(account=account, purpose=AcquirerSlot.Purpose.CASHOUT, acquirers=list(chain))
    withdrawal = withdrawal_request(account=account, amount=5000, key_type="cpf", key_value=CPF)
    assert withdrawal_process(withdrawal_id=withdrawal.pk) == "approved"
    return withdrawal


def payout_attempts(withdrawal: Withdrawal) -> list[tuple[str, str, str]]:
    rows = PayoutAttempt.objects.filter(withdrawal=withdrawal).order_by("id").select_related("acquirer")
    return [(a.acquirer.key, a.action, a.outcome) for a in rows]


def never_asked(acquirer: Acquirer, withdrawal: Withdrawal) -> None:
    assert not PayoutAttempt.objects.filter(withdrawal=withdrawal, acquirer=acquirer).exists()
    assert adapters.build(acquirer).get_payout_status(withdrawal.idempotency_id).status is PayoutStatus.NOT_FOUND


def test_a_payout_owned_by_a_busy_acquirer_waits_for_it(enqueued: list[tuple[Any, ...]]) -> None:
    Unclear.sends = []
    owner = AcquirerFactory(key="bh_owner", adapter=Unclear.name, options={"status": "not_found"})
    spare = AcquirerFactory(key="bh_po_spare")
    payer = funded()
    withdrawal = approved(payer, owner, spare)
    with pytest.raises(PayoutUndetermined):  # sent, unclear: the owner keeps it
        withdrawal_process(withdrawal_id=withdrawal.pk)
    first = [("bh_owner", "send", "unavailable"), ("bh_owner", "status", "not_found")]
    assert payout_attempts(withdrawal) == first
    unclear_since = Withdrawal.objects.get(pk=withdrawal.pk).payout_unclear_since
    balance_rows = LedgerEntry.objects.filter(account=payer).count()
    enqueued.clear()

    # The owner is busy: it is not asked now, the payout goes nowhere else,
    # nothing is failed, and the run comes back in a few seconds.
    with held(capacity.cap(owner), CAP):
        assert withdrawal_process(withdrawal_id=withdrawal.pk) == ProcessOutcome.DEFERRED
    assert payout_attempts(withdrawal) == [*first, ("bh_owner", "status", "busy")]
    assert enqueued == [(withdrawal.pk, {"countdown": capacity.BUSY_RETRY_SECONDS})]
    never_asked(spare, withdrawal)
    after = Withdrawal.objects.get(pk=withdrawal.pk)
    assert (after.status, after.payout_owner_id, after.payout_unclear_since) == (
        WithdrawalStatus.APPROVED,
        owner.pk,
        unclear_since,
    )
    assert (after.payout_leased_until, after.payout_lease_token) == (None, "")
    assert LedgerEntry.objects.filter(account=payer).count() == balance_rows
    assert in_flight(owner) == 0

    # Free again, it answers: paid there, and only there.
    Acquirer.objects.filter(pk=owner.pk).update(options={"status": "paid"})
    assert withdrawal_process(withdrawal_id=withdrawal.pk) == WithdrawalStatus.PAID
    assert payout_attempts(withdrawal)[-1] == ("bh_owner", "status", "paid")
    assert Unclear.sends == [withdrawal.idempotency_id]
    never_asked(spare, withdrawal)


def test_a_new_payout_passes_a_busy_acquirer_over(enqueued: list[tuple[Any, ...]]) -> None:
    loaded = AcquirerFactory(key="bh_po_loaded")
    spare = AcquirerFactory(key="bh_po_free")
    payer = funded()
    before = skips(loaded, "payout")

    withdrawal = approved(payer, loaded, spare)
    with held(capacity.cap(loaded), CAP):
        assert withdrawal_process(withdrawal_id=withdrawal.pk) == WithdrawalStatus.PAID
    assert payout_attempts(withdrawal) == [("bh_po_free", "send", "paid")]
    never_asked(loaded, withdrawal)
    assert skips(loaded, "payout") == before + 1

    # With nowhere else to go it waits (neither sent nor failed), back in a few seconds.
    alone = approved(payer, loaded)
    enqueued.clear()
    with held(capacity.pool(capacity.Purpose.PAYOUT), 32):
        assert withdrawal_process(withdrawal_id=alone.pk) == ProcessOutcome.DEFERRED
    assert payout_attempts(alone) == []
    (_, kwargs), *rest = enqueued
    assert rest == []
    assert 1.0 <= kwargs["countdown"] <= capacity.BUSY_RETRY_SECONDS + 1
    assert Withdrawal.objects.get(pk=alone.pk).status == WithdrawalStatus.APPROVED


def test_a_send_that_found_its_acquirer_full_at_the_call_was_never_made(
    enqueued: list[tuple[Any, ...]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Admission is a hint: the slot is taken at the call. A send that lost
    that race is on record as "busy" but was never made, so the acquirer
    holds nothing of it: the next run sends afresh, nobody is asked about it
    and it never counts as a first send a refusal could not cancel."""
    racy = AcquirerFactory(key="bh_po_race")
    payer = funded()
    withdrawal = approved(payer, racy)
    admit = calls.admit
    monkeypatch.setattr(calls, "admit", lambda acquirer, operation: breaker.ALLOWED)
    with held(capacity.cap(racy), CAP):
        assert withdrawal_process(withdrawal_id=withdrawal.pk) == ProcessOutcome.DEFERRED
    monkeypatch.setattr(calls, "admit", admit)
    assert payout_attempts(withdrawal) == [("bh_po_race", "send", "busy")]

    assert withdrawal_process(withdrawal_id=withdrawal.pk) == WithdrawalStatus.PAID
    # Sent, not asked about first: the busy row made no contact.
    assert payout_attempts(withdrawal) == [("bh_po_race", "send", "busy"), ("bh_po_race", "send", "paid")]
    assert available_balance(payer) == ledger_sum(payer)


# --------------------------------------------------------------------------- reconciliation and refunds


@adapters.register
class Lookups(SandboxAdapter):
    """The sandbox, with refunds and status lookups that work, counted."""

    name = "test_bh_lookups"
    supports_refund = True
    supports_charge_status = True
    made: ClassVar[list[str]] = []

    def refund_charge(self, request: RefundRequest) -> RefundResult:
        self.made.append("refund")
        return RefundResult(status=RefundStatus.DONE)

    def charge_status(self, txid: str) -> ChargeStatusResult:
        self.made.append("charge_status")
        return ChargeStatusResult(state=ProviderChargeState.ACTIVE)


def test_a_full_reconcile_pool_leaves_lookups_and_refunds_for_later(settings: Any, account: Account) -> None:
    settings.OUTBOUND_POOL_RECONCILE = 1
    Lookups.made = []
    acquirer = AcquirerFactory(key="bh_lookups", adapter=Lookups.name, options={}, default_priority=1)
    pending = charge_create(account=account, amount=1000, buyer=BUYER)
    paid = charge_create(account=account, amount=2000, buyer=BUYER)
    charge_transition(
        charge_id=paid.pk,
        to_status=ChargeStatus.PAID,
        source=ChargeTransition.Source.ACQUIRER,
        e2e_id="E" + "1" * 31,
    )

    with held(capacity.pool(capacity.Purpose.RECONCILE), 1):
        # The try-later paths: an acquirer error for reconciliation (the
        # acquirer is left alone for the rest of the run), a refund refused
        # for now (asked again later), and nothing sent.
        with pytest.raises(capacity.AcquirerBusy):
            charge_status_poll(charge_id=pending.pk)
        with pytest.raises(RefundFailed):
            charge_refund(charge_id=paid.pk, actor="staff")
        assert Lookups.made == []
        # Charges have a pool of their own.
        assert charge_create(account=account, amount=1000, buyer=BUYER).acquirer_id == acquirer.pk

    assert Charge.objects.get(pk=paid.pk).status == ChargeStatus.PAID
    assert charge_status_poll(charge_id=pending.pk) == []
    assert Lookups.made == ["charge_status"]
    assert pools_in_flight() == IDLE


# --------------------------------------------------------------------------- slots never leak


class Abort(BaseException):
    """Not an Exception: passes through the call's own handler, as a
    KeyboardInterrupt or SystemExit would."""


@adapters.register
class Behaves(SandboxAdapter):
    """The sandbox, doing with each charge what ``options["do"]`` says; notes
    the slots held (``target``'s and the charge pool's) while it runs."""

    name = "test_bh_behaves"
    target: ClassVar[Acquirer | None] = None
    seen: ClassVar[list[tuple[int, int]]] = []

    @classmethod
    def validate_options(cls, options: Mapping[str, Any]) -> dict[str, Any]:
        return {"charge": "ok", "payout": "ok", "do": options.get("do", "ok")}

    def create_charge(self, request: ChargeRequest) -> ChargeResult:
        assert Behaves.target is not None
        Behaves.seen.append((in_flight(Behaves.target), capacity.pool(capacity.Purpose.CHARGE).in_flight))
        match self.options["do"]:
            case "fail":
                raise AcquirerUnavailable("503")
            case "bug":
                raise KeyError("pixCopiaECola")
            case "abort":
                raise Abort()
            case "hang":
                threading.Event().wait(1.0)  # past the deadline
        return super().create_charge(request)


def _request() -> ChargeRequest:
    return ChargeRequest(
        charge_id=uuid.uuid4(),
        txid="bh" + "0" * 30,
        amount=1000,
        expires_in=3600,
        payer_name=BUYER.name,
        payer_document=BUYER.document,
        merchant_name="Loja",
        merchant_city="SAO PAULO",
    )


@pytest.mark.parametrize(
    ("do", "outcome"),
    [
        ("ok", Outcome.OK),
        ("fail", Outcome.UNAVAILABLE),
        ("bug", Outcome.ERROR),
        ("hang", Outcome.TIMEOUT),
        ("refused", Outcome.INVALID_RESPONSE),  # the caller's check refuses the answer
    ],
)
def test_a_slot_is_given_back_however_the_call_ends(do: str, outcome: Outcome) -> None:
    Behaves.seen = []
    acquirer = Behaves.target = AcquirerFactory(
        key=f"bh_{do}", adapter=Behaves.name, options={"do": do}, connect_timeout_ms=50, read_timeout_ms=150
    )

    def check(result: ChargeResult) -> None:
        if do == "refused":
            raise AcquirerUnavailable("unusable") from None

    done = calls.call(acquirer, "create_charge", lambda adapter: adapter.create_charge(_request()), check=check)
    assert done.outcome is (Outcome.UNAVAILABLE if do == "refused" else outcome)
    assert Behaves.seen == [(1, 1)]  # held while it ran
    assert in_flight(acquirer) == 0
    assert pools_in_flight() == IDLE


def test_a_slot_is_given_back_when_the_call_raises_through() -> None:
    Behaves.seen = []
    acquirer = Behaves.target = AcquirerFactory(key="bh_abort", adapter=Behaves.name, options={"do": "abort"})
    with pytest.raises(Abort):
        calls.call(acquirer, "create_charge", lambda adapter: adapter.create_charge(_request()))
    assert Behaves.seen == [(1, 1)]
    assert in_flight(acquirer) == 0
    assert pools_in_flight() == IDLE


def test_at_most_cap_calls_run_at_once_whatever_the_concurrency() -> None:
    acquirer = Behaves.target = AcquirerFactory(key="bh_crowd", adapter=Behaves.name, options={"do": "ok"})
    gate = threading.Event()
    running = []
    peak = []

    def slow(adapter: AcquirerAdapter) -> ChargeResult:
        running.append(1)
        peak.append(in_flight(acquirer))
        assert gate.wait(timeout=10)
        return adapter.create_charge(_request())

    results: list[Outcome] = []

    def one() -> None:
        results.append(calls.call(acquirer, "create_charge", slow).outcome)
        connection.close()

    threads = [threading.Thread(target=one) for _ in range(8)]
    for thread in threads:
        thread.start()
    wait_for(lambda: len(results) == 8 - CAP)  # the others were refused at once
    assert results == [Outcome.BUSY] * (8 - CAP)
    assert in_flight(acquirer) == CAP
    gate.set()
    for thread in threads:
        thread.join(timeout=10)
    assert sorted(results) == sorted([Outcome.BUSY] * (8 - CAP) + [Outcome.OK] * CAP)
    assert max(peak) <= CAP
    assert in_flight(acquirer) == 0


def test_every_operation_has_a_purpose() -> None:
    for operation in ("create_charge", "payout", "payout_send", "payout_status", "refund", "charge_status"):
        assert capacity.purpose_of(operation) in capacity.Purpose
    with pytest.raises(ValueError, match="no purpose"):
        capacity.purpose_of("teleport")
