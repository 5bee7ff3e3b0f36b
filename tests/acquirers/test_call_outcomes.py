"""One guarded call (``acquirers.calls``): a failure of an acquirer is
recorded the same on every path. For each kind of failure, the outcome on
the attempt row and the attempt metric's label are the same whether the
call created a charge, sent a payout, asked where a payout stands, refunded
a charge or asked where a charge stands (reconciliation) (before
the guarded call, an invalid answer was ``invalid_response`` for a charge
and ``unavailable`` for a payout).

An answered call is ``ok`` for a charge; for a payout the row and the label
carry the acquirer's answer (``paid``...), which the payout engine acts on:
both are healthy answers for the breaker.

Real PostgreSQL and Redis; the acquirer is a scripted adapter raising what
the HTTP layer raises (``acquirers.adapters.apipix.problems``) for each failure.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping

import pytest
from django.db import transaction

from accounts.models import LedgerEntry
from accounts.services import ledger_post
from acquirers import adapters, brcode, breaker, calls
from acquirers.adapters import base
from acquirers.adapters.apipix.problems import HttpDeclined, HttpTimeout, HttpUnavailable
from acquirers.adapters.base import (
    AcquirerAdapter,
    AcquirerTimeout,
    AcquirerUnavailable,
    ChargeRequest,
    ChargeResult,
    ChargeStatusResult,
    InvalidNotification,
    InvalidResponse,
    Notification,
    PayoutRequest,
    PayoutResult,
    ProviderChargeState,
    RefundRequest,
    RefundResult,
    RefundStatus,
)
from acquirers.calls import Outcome
from acquirers.models import Acquirer
from acquirers.tasks import cancel_charge_at_acquirer
from core import deadline, metrics
from payments.exceptions import AllAcquirersFailed, RefundFailed
from payments.models import Charge, ChargeAttempt, ChargeStatus, ChargeTransition
from payments.refunds import charge_refund
from payments.services import Buyer, charge_create, charge_transition
from payments.status_polling import charge_status_poll
from tests.factories import AccountFactory, AcquirerFactory
from tests.withdrawals.payout_adapters import paid
from withdrawals import services as withdrawal_services
from withdrawals.exceptions import PayoutUndetermined
from withdrawals.models import PayoutAttempt, Withdrawal
from withdrawals.payouts import withdrawal_process
from withdrawals.services import withdrawal_request

# As in production: each attempt row is committed before its call.
pytestmark = pytest.mark.django_db(transaction=True)

#: The acquirer's whole budget (connect + read) in these tests, in seconds.
DEADLINE = 0.2


def _fail(kind: str) -> None:
    """Fail the way the HTTP layer does for ``kind``."""
    if kind == "deadline":
        deadline.sleep(DEADLINE * 5)  # drip-fed past our deadline: the deadline ends it
        raise HttpUnavailable("answer after the deadline", status=503)
    errors: dict[str, Exception] = {
        "timeout": HttpTimeout("POST /pix: read timeout"),
        "connection": HttpUnavailable("POST /pix: connection failed: ConnectionRefusedError"),
        "5xx": HttpUnavailable("Service Unavailable", status=503),
        "invalid": InvalidResponse("POST /pix: answer is not JSON"),
        "declined": HttpDeclined("saldo insuficiente", status=422),
        "bug": KeyError("endToEndId"),  # an adapter bug, not an acquirer's answer
    }
    raise errors[kind]


@adapters.register
class Scripted(AcquirerAdapter):
    """Answers or fails each operation as its options say (``charge``,
    ``send``, ``status``: ``ok`` or a kind of failure)."""

    name = "test_call_outcomes"
    supports_refund = True
    supports_charge_status = True

    def create_charge(self, request: ChargeRequest) -> ChargeResult:
        if self.options["charge"] != "ok":
            _fail(self.options["charge"])
        emv = brcode.encode_dynamic(
            location=f"pix.test.local/qr/v2/{request.txid}",
            amount=request.amount,
            merchant_name=request.merchant_name,
            merchant_city=request.merchant_city,
        )
        return ChargeResult(provider_charge_id=f"c_{request.txid}", emv=emv)

    def create_payout(self, request: PayoutRequest) -> PayoutResult:
        if self.options["send"] != "ok":
            _fail(self.options["send"])
        return paid(request.idempotency_id)

    def get_payout_status(self, idempotency_id: str) -> PayoutResult:
        if self.options["status"] != "ok":
            _fail(self.options["status"])
        return paid(idempotency_id)

    def refund_charge(self, request: RefundRequest) -> RefundResult:
        if self.options["refund"] != "ok":
            _fail(self.options["refund"])
        return RefundResult(status=RefundStatus.DONE)

    def refund_status(self, request: RefundRequest) -> RefundResult:
        return self.refund_charge(request)

    def charge_status(self, txid: str) -> ChargeStatusResult:
        if self.options["lookup"] != "ok":
            _fail(self.options["lookup"])
        return ChargeStatusResult(state=ProviderChargeState.ACTIVE)

    def parse_notification(self, headers: Mapping[str, str], body: bytes) -> list[Notification]:
        raise InvalidNotification("not in these tests")


#: kind → (outcome recorded on every path, error class recorded).
FAILURES = {
    "deadline": (Outcome.TIMEOUT, "DeadlineExceeded"),
    "timeout": (Outcome.TIMEOUT, "HttpTimeout"),
    "connection": (Outcome.UNAVAILABLE, "HttpUnavailable"),
    "5xx": (Outcome.UNAVAILABLE, "HttpUnavailable"),
    "invalid": (Outcome.INVALID_RESPONSE, "InvalidResponse"),
    "declined": (Outcome.DECLINED, "HttpDeclined"),
    "bug": (Outcome.ERROR, "KeyError"),
}


@pytest.fixture(autouse=True)
def nothing_to_the_broker(monkeypatch: pytest.MonkeyPatch) -> None:
    """The test drives processing itself; cancels of abandoned charges stay here."""
    monkeypatch.setattr(withdrawal_services, "_enqueue_processing", lambda *args, **kwargs: None)
    monkeypatch.setattr(cancel_charge_at_acquirer, "delay", lambda *args, **kwargs: None)


def scripted(
    *, charge: str = "ok", send: str = "ok", status: str = "ok", refund: str = "ok", lookup: str = "ok"
) -> Acquirer:
    """The platform's only acquirer, for charges and payouts alike."""
    return AcquirerFactory(
        adapter=Scripted.name,
        options={"charge": charge, "send": send, "status": status, "refund": refund, "lookup": lookup},
        connect_timeout_ms=50,
        read_timeout_ms=int(DEADLINE * 1000) - 50,
        default_priority=1,
    )


def metric_labels(acquirer: Acquirer, operation: str) -> dict[str, float]:
    """outcome label → calls counted by the attempt metric."""
    counts: dict[str, float] = {}
    for family in metrics.ACQUIRER_ATTEMPT_LATENCY.collect():
        for sample in family.samples:
            labels = sample.labels
            if (
                sample.name.endswith("_count")
                and labels["acquirer"] == acquirer.key
                and labels["operation"] == operation
                and sample.value
            ):
                counts[labels["outcome"]] = sample.value
    return counts


def charge_attempt(acquirer: Acquirer) -> tuple[str, str]:
    account = AccountFactory()
    buyer = Buyer(name="Maria da Silva", document="52998224725", phone="11987654321", address={})
    with contextlib.suppress(AllAcquirersFailed):
        charge_create(account=account, amount=1000, buyer=buyer)
    attempt = ChargeAttempt.objects.get(acquirer=acquirer)
    return attempt.outcome, attempt.error_class


def pending_charge(acquirer: Acquirer) -> Charge:
    account = AccountFactory()
    buyer = Buyer(name="Maria da Silva", document="52998224725", phone="11987654321", address={})
    charge = charge_create(account=account, amount=1000, buyer=buyer)
    assert charge.acquirer_id == acquirer.pk
    return charge


def paid_charge(acquirer: Acquirer) -> Charge:
    charge = pending_charge(acquirer)
    charge_transition(
        charge_id=charge.pk,
        to_status=ChargeStatus.PAID,
        source=ChargeTransition.Source.ACQUIRER,
        e2e_id="E" + "1" * 31,
    )
    return charge


def approved_withdrawal() -> Withdrawal:
    account = AccountFactory(withdrawal_fee_fixed=0, withdrawal_fee_bps=0)
    with transaction.atomic():
        ledger_post(account_id=account.pk, amount=10_000, kind=LedgerEntry.Kind.CHARGE_PAID, reference="seed")
    withdrawal = withdrawal_request(account=account, amount=5000, key_type="cpf", key_value="52998224725")
    assert withdrawal_process(withdrawal_id=withdrawal.pk) == "approved"
    return withdrawal


def payout_attempt(withdrawal: Withdrawal, action: str) -> PayoutAttempt:
    with contextlib.suppress(PayoutUndetermined):  # the acquirer may hold it: asked again later
        withdrawal_process(withdrawal_id=withdrawal.pk)
    return PayoutAttempt.objects.get(withdrawal=withdrawal, action=action)


# --------------------------------------------------------------------------- the same label on every path


@pytest.mark.parametrize("kind", list(FAILURES))
def test_a_failed_charge_records_the_kind_of_failure(kind: str) -> None:
    outcome, error_class = FAILURES[kind]
    acquirer = scripted(charge=kind)
    assert charge_attempt(acquirer) == (outcome, error_class)
    assert metric_labels(acquirer, "create_charge") == {outcome: 1}


@pytest.mark.parametrize("kind", list(FAILURES))
def test_a_failed_payout_send_records_it_as_a_charge_would(kind: str) -> None:
    outcome, error_class = FAILURES[kind]
    acquirer = scripted(send=kind)
    send = payout_attempt(approved_withdrawal(), "send")
    assert (send.outcome, send.error_class) == (outcome, error_class)
    assert metric_labels(acquirer, "payout_send") == {outcome: 1}
    if kind == "deadline":
        # Ended at the deadline, not when the acquirer would have answered.
        assert send.latency_ms < DEADLINE * 1000 * 3


@pytest.mark.parametrize("kind", list(FAILURES))
def test_a_failed_payout_status_lookup_records_it_as_a_charge_would(kind: str) -> None:
    outcome, error_class = FAILURES[kind]
    acquirer = scripted(send="timeout", status=kind)  # an unclear send: the acquirer is asked
    status = payout_attempt(approved_withdrawal(), "status")
    assert (status.outcome, status.error_class) == (outcome, error_class)
    assert metric_labels(acquirer, "payout_status") == {outcome: 1}


@pytest.mark.parametrize("kind", list(FAILURES))
def test_a_failed_refund_records_it_as_a_charge_would(kind: str) -> None:
    outcome, _ = FAILURES[kind]
    acquirer = scripted(refund=kind)
    charge = paid_charge(acquirer)
    with pytest.raises(RefundFailed):
        charge_refund(charge_id=charge.pk, actor="staff")
    assert metric_labels(acquirer, "refund") == {outcome: 1}
    charge.refresh_from_db()
    assert charge.status == ChargeStatus.PAID  # nothing changed


@pytest.mark.parametrize("kind", list(FAILURES))
def test_a_failed_reconciliation_lookup_records_it_as_a_charge_would(kind: str) -> None:
    outcome, error_class = FAILURES[kind]
    acquirer = scripted(lookup=kind)
    charge = pending_charge(acquirer)
    with pytest.raises((base.AdapterError, KeyError)) as raised:
        charge_status_poll(charge_id=charge.pk)
    assert type(raised.value).__name__ == error_class
    assert metric_labels(acquirer, "charge_status") == {outcome: 1}
    charge.refresh_from_db()
    assert charge.status == ChargeStatus.PENDING


def test_an_answered_refund_and_lookup_are_ok() -> None:
    acquirer = scripted()
    assert charge_status_poll(charge_id=pending_charge(acquirer).pk) == []
    assert metric_labels(acquirer, "charge_status") == {Outcome.OK: 1}
    charge_refund(charge_id=paid_charge(acquirer).pk, actor="staff")
    assert metric_labels(acquirer, "refund") == {Outcome.OK: 1}


def test_an_answered_charge_is_ok() -> None:
    acquirer = scripted()
    assert charge_attempt(acquirer) == (Outcome.OK, "")
    assert metric_labels(acquirer, "create_charge") == {Outcome.OK: 1}


def test_an_answered_payout_send_records_the_answer() -> None:
    acquirer = scripted()
    send = payout_attempt(approved_withdrawal(), "send")
    assert (send.outcome, send.error_class) == ("paid", "")
    assert metric_labels(acquirer, "payout_send") == {"paid": 1}


def test_an_answered_payout_status_lookup_records_the_answer() -> None:
    acquirer = scripted(send="timeout")
    status = payout_attempt(approved_withdrawal(), "status")
    assert (status.outcome, status.error_class) == ("paid", "")
    assert metric_labels(acquirer, "payout_status") == {"paid": 1}
    # An answer, like ok, is a healthy call for the breaker.
    assert not breaker.FAILURES & {Outcome.OK, "paid", "processing", "failed", "not_found"}


# --------------------------------------------------------------------------- the one classification


@pytest.mark.parametrize(
    "error_class",
    [cls for cls in vars(base).values() if isinstance(cls, type) and issubclass(cls, base.AdapterError)],
    ids=lambda cls: cls.__name__,
)
def test_every_adapter_error_is_classified_as_it_says(error_class: type[base.AdapterError]) -> None:
    """The adapters' ``error_class`` and the one classification agree, and the
    breaker counts exactly the failures as failures."""
    outcome = calls.classify(error_class("x"))
    assert outcome == error_class.error_class
    assert (outcome in breaker.FAILURES) == (
        outcome in (Outcome.UNAVAILABLE, Outcome.TIMEOUT, Outcome.INVALID_RESPONSE, Outcome.ERROR)
    )


def test_what_the_deadline_and_the_adapters_raise_is_classified() -> None:
    assert calls.classify(calls.DeadlineExceeded("no answer within 0.2s")) is Outcome.TIMEOUT
    assert calls.classify(HttpTimeout("read timeout")) is Outcome.TIMEOUT
    assert calls.classify(HttpUnavailable("connection failed")) is Outcome.UNAVAILABLE
    assert calls.classify(HttpDeclined("no", status=422)) is Outcome.DECLINED
    assert calls.classify(brcode.InvalidBRCode("bad CRC")) is Outcome.INVALID_RESPONSE
    assert calls.classify(AcquirerTimeout("x")) is Outcome.TIMEOUT
    assert calls.classify(AcquirerUnavailable("x")) is Outcome.UNAVAILABLE
    assert calls.classify(KeyError("bug")) is Outcome.ERROR
    assert set(breaker.FAILURES) <= set(Outcome)
