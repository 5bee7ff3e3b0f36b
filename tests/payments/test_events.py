"""What an acquirer's charge events do (``payments.events``), as a sandbox
acquirer's signed notification delivers them: the charge lifecycle, its
ledger, and the chargeback rule (decisions §4)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from rest_framework.test import APIClient

from accounts.models import Account, LedgerEntry
from accounts.selectors import available_balance, ledger_sum
from acquirers.models import Acquirer, InboundNotification
from payments.models import Charge, ChargeStatus, LatePayment
from payments.services import charge_transition
from tests.acquirers.sandbox_notify import (
    E2E,
    LIQUID,
    OTHER_SECRET,
    Status,
    accepted,
    create_charge,
    event,
    last_inbound,
    notify,
    sandbox_acquirer,
    state,
)
from tests.factories import AccountFactory, AcquirerFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def account(db: Any) -> Account:
    """A merchant with the cash-in fees LIQUID counts on: 30 centavos + 1.5 %."""
    return AccountFactory(cashin_fee_fixed=30, cashin_fee_bps=150)


@pytest.fixture
def acquirer(db: Any) -> Acquirer:
    return sandbox_acquirer()


@pytest.fixture
def charge(api: APIClient, acquirer: Acquirer) -> Charge:
    return create_charge(api)


def test_balance_visible_to_the_account(api: APIClient, charge: Charge) -> None:
    notify(event("charge.paid", charge, e2e_id=E2E))
    assert api.get("/api/withdrawals/balance").json()["data"]["available_balance"] == LIQUID
    record = api.get(f"/api/transactions/{charge.pk}").json()["data"]
    assert (record["status"], record["e2e_id"]) == ("paid", E2E)


def test_occurred_at_becomes_paid_at(charge: Charge) -> None:
    notify(event("charge.paid", charge, e2e_id=E2E, occurred_at="2026-01-10T12:00:00+00:00"))
    assert state(charge)["paid_at"] == dt.datetime(2026, 1, 10, 12, tzinfo=dt.UTC)


def test_repeated_notification_credits_once(charge: Charge, account: Account) -> None:
    body = event("charge.paid", charge, e2e_id=E2E)
    accepted(notify(body), 1)
    before = state(charge)

    accepted(notify(body), 0)

    assert state(charge) == before
    assert available_balance(account) == LIQUID
    assert list(InboundNotification.objects.values_list("status", flat=True)) == [Status.PROCESSED] * 2


@pytest.mark.parametrize(
    ("path", "name", "status", "sign"),
    [
        ((), "charge.failed", ChargeStatus.FAILED, 0),
        ((ChargeStatus.PAID,), "charge.refunded", ChargeStatus.REFUNDED, -1),
        ((ChargeStatus.PAID,), "charge.chargeback", ChargeStatus.CHARGEBACK, -1),
        ((ChargeStatus.PAID, ChargeStatus.CHARGEBACK), "charge.refunded", ChargeStatus.REFUNDED, 0),
        ((ChargeStatus.PAID, ChargeStatus.CHARGEBACK), "charge.chargeback_resolved", ChargeStatus.PAID, +1),
    ],
    ids=lambda v: str(v),
)
def test_lifecycle_events(charge: Charge, path: tuple[str, ...], name: str, status: str, sign: int) -> None:
    for step in path:
        charge_transition(charge_id=charge.pk, to_status=step, source="staff")
    before = state(charge)

    accepted(notify(event(name, charge)), 1)

    after = state(charge)
    assert after["status"] == status
    assert after["balance"] == before["balance"] + sign * LIQUID == ledger_sum(charge.account)
    assert after["ledger"] == before["ledger"] + (1 if sign else 0)
    assert last_inbound().status == Status.PROCESSED


def test_chargeback_resolved_credits_and_keeps_the_payment_data(charge: Charge, account: Account) -> None:
    accepted(notify(event("charge.paid", charge, e2e_id=E2E)), 1)
    paid = state(charge)
    accepted(notify(event("charge.chargeback", charge)), 1)
    assert available_balance(account) == 0

    accepted(notify(event("charge.chargeback_resolved", charge)), 1)

    resolved = state(charge)
    assert (resolved["status"], resolved["paid_at"], resolved["e2e_id"]) == (ChargeStatus.PAID, paid["paid_at"], E2E)
    assert available_balance(account) == LIQUID == ledger_sum(account)
    assert [e.kind for e in LedgerEntry.objects.filter(account=account).order_by("id")] == [
        LedgerEntry.Kind.CHARGE_PAID,
        LedgerEntry.Kind.CHARGE_CHARGEBACK,
        LedgerEntry.Kind.CHARGEBACK_REVERSAL,
    ]


def test_chargeback_resolved_without_open_chargeback_is_a_no_op(charge: Charge) -> None:
    accepted(notify(event("charge.paid", charge)), 1)
    before = state(charge)
    accepted(notify(event("charge.chargeback_resolved", charge)), 0)
    assert state(charge) == before
    assert last_inbound().status == Status.PROCESSED


@pytest.mark.parametrize(
    "then",
    [
        (ChargeStatus.CHARGEBACK,),
        (ChargeStatus.REFUNDED,),
        (ChargeStatus.CHARGEBACK, ChargeStatus.REFUNDED),
    ],
)
def test_late_paid_never_undoes_a_chargeback_or_refund(charge: Charge, then: tuple[str, ...]) -> None:
    accepted(notify(event("charge.paid", charge, e2e_id=E2E)), 1)
    for step in then:
        charge_transition(charge_id=charge.pk, to_status=step, source="acquirer")
    before = state(charge)

    accepted(notify(event("charge.paid", charge, e2e_id=E2E)), 0)

    assert state(charge) == before
    assert before["balance"] == 0


def test_charge_of_another_acquirer_is_stored_as_failed(charge: Charge) -> None:
    AcquirerFactory(key="sbx_other", options={"charge": "ok", "payout": "ok", "notification_secret": OTHER_SECRET})
    before = state(charge)

    response = notify(event("charge.paid", charge), secret=OTHER_SECRET, url="/api/acquirers/sbx_other/notifications")

    accepted(response, 0)
    assert state(charge) == before
    inbound = last_inbound()
    assert (inbound.acquirer.key, inbound.status) == ("sbx_other", Status.FAILED)
    assert inbound.error == f"charge.paid {charge.txid}: Transação não encontrada."


def test_a_pix_for_a_canceled_charge_is_a_late_payment_and_moves_no_money(charge: Charge, account: Account) -> None:
    """Refused before (the money was lost): kept for staff now, once per e2e id."""
    charge_transition(charge_id=charge.pk, to_status=ChargeStatus.CANCELED, source="expiry")
    before = state(charge)

    accepted(notify(event("charge.paid", charge, e2e_id=E2E)), 1)
    accepted(notify(event("charge.paid", charge, e2e_id=E2E)), 0)  # notified again: the same record

    assert state(charge) == before
    assert available_balance(account) == 0
    assert not LedgerEntry.objects.filter(account=account).exists()
    assert last_inbound().status == Status.PROCESSED
    (late,) = LatePayment.objects.all()
    assert (late.charge_id, late.e2e_id, late.amount, late.status) == (charge.pk, E2E, charge.amount, "open")
