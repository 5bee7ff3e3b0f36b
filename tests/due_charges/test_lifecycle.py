"""A due-date charge's lifecycle beyond its payment: expiry at the end of
its last payable day (withdrawn at the acquirer), the withdrawal's answers
(removed, or paid there first: a late payment for staff), status polling,
the refund of a paid one, the statement's components and reconciliation of
a late payment with fine and interest."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import pytest
from rest_framework.test import APIClient

from accounts.models import Account, LedgerEntry
from accounts.selectors import available_balance, ledger_sum
from acquirers.adapters.sandbox import new_e2e_id
from acquirers.models import Acquirer
from payments.cancel_pursuit import charge_cancel_pursue
from payments.due_charges import DUE_EXPIRY_GRACE
from payments.due_payments import BRT
from payments.models import Charge, ChargeCancellation, ChargeStatus, LatePayment
from payments.refunds import RefundOutcome, charge_refund_pursue
from payments.services import charge_transition, charges_expire
from payments.status_polling import charge_status_poll
from reconciliation.models import ReconciliationItem
from reconciliation.run import acquirer_reconcile
from tests.due_charges.support import (
    FEE_BPS,
    FEE_FIXED,
    ORIGINAL,
    business_day_from,
    expected_parts,
    fee,
    make_due,
    paid_of,
    pay,
    sandbox,
    today,
)
from tests.factories import AccountFactory, AcquirerFactory
from webhooks.models import WebhookEvent

pytestmark = pytest.mark.django_db

State = ChargeCancellation.State


@pytest.fixture
def account(db: Any) -> Account:
    return AccountFactory(cashin_fee_fixed=FEE_FIXED, cashin_fee_bps=FEE_BPS)


@pytest.fixture
def acquirer(db: Any) -> Acquirer:
    # A key of its own: the sandbox keeps its state in Redis across tests (the day\'s listing included).
    return AcquirerFactory(key=f"sbx_due_life_{uuid.uuid4().hex[:8]}", default_priority=1)


@pytest.fixture
def due() -> dt.date:
    return business_day_from(today() + dt.timedelta(days=7))


def events(charge: Charge) -> list[tuple[str, str]]:
    return list(
        WebhookEvent.objects.filter(record_id=charge.pk).order_by("created_at").values_list("event_type", "status")
    )


def status_of(charge: Charge) -> str:
    charge.refresh_from_db()
    return str(charge.status)


def paid_there(acquirer: Acquirer, charge: Charge, day: dt.date, parts: dict[str, int]) -> str:
    """A payer pays at the sandbox and its notification is lost: only the sandbox knows."""
    e2e_id = new_e2e_id()
    at = dt.datetime.combine(day, dt.time(12), tzinfo=BRT)
    components = {name: value for name, value in parts.items() if value}
    assert sandbox(acquirer).due_charge_pay(
        charge.txid, e2e_id=e2e_id, amount=paid_of(parts), components=components, at=at
    )
    return e2e_id


# --------------------------------------------------------------------------- expiry


def test_a_due_charge_past_its_last_payable_day_is_canceled_and_withdrawn_at_the_acquirer(
    api: APIClient, account: Account, acquirer: Acquirer, due: dt.date
) -> None:
    expiring = make_due(account, due_date=due, days_after_due=2)
    payable = make_due(account, due_date=due, days_after_due=30)
    last = expiring.due.last_payable_date
    # Payable up to 23:59:59 of its last payable day, Brasília; cancelled an
    # hour later, so a Pix of the day's last minute finds it pending.
    end_of_day = dt.datetime.combine(last + dt.timedelta(days=1), dt.time.min, tzinfo=BRT)
    assert expiring.expires_at == end_of_day + DUE_EXPIRY_GRACE
    assert charges_expire(now=end_of_day + DUE_EXPIRY_GRACE - dt.timedelta(seconds=1)) == 0
    assert status_of(expiring) == ChargeStatus.PENDING

    assert charges_expire(now=expiring.expires_at + dt.timedelta(seconds=1)) == 1

    assert (status_of(expiring), status_of(payable)) == (ChargeStatus.CANCELED, ChargeStatus.PENDING)
    assert api.get(f"/api/transactions/{expiring.pk}").json()["data"]["status"] == "canceled"
    assert events(expiring) == [("due_charge", "canceled")]
    event = WebhookEvent.objects.get(record_id=expiring.pk)
    assert (event.data["id"], event.data["status"], event.data["paid_amount"]) == (str(expiring.pk), "canceled", None)
    assert events(payable) == []
    # Withdrawn at the acquirer (its cobv's own withdrawal): the payer can no longer pay it.
    assert charge_cancel_pursue(charge_id=expiring.pk) == State.DONE
    assert sandbox(acquirer).due_charge_status(expiring.txid).status == "REMOVIDA_PELO_USUARIO_RECEBEDOR"
    assert sandbox(acquirer).due_charge_status(payable.txid).status == "ATIVA"
    assert pay(api, expiring, last).status_code == 409
    assert pay(api, payable, last).status_code == 200
    assert (
        available_balance(account)
        == ledger_sum(account)
        == paid_of(expected_parts(ORIGINAL, on=last, due=due))
        - fee(paid_of(expected_parts(ORIGINAL, on=last, due=due)))
    )


def test_a_cancel_that_finds_it_paid_there_records_what_was_paid_as_a_late_payment(
    account: Account, acquirer: Acquirer, due: dt.date
) -> None:
    charge = make_due(account, due_date=due)
    late_day = due + dt.timedelta(days=4)
    parts = expected_parts(ORIGINAL, on=late_day, due=due)
    e2e_id = paid_there(acquirer, charge, late_day, parts)
    charge_transition(charge_id=charge.pk, to_status=ChargeStatus.CANCELED, source="staff")

    assert charge_cancel_pursue(charge_id=charge.pk) == State.PAID_THERE

    assert status_of(charge) == ChargeStatus.CANCELED
    late = LatePayment.objects.get(charge=charge)
    assert (late.e2e_id, late.amount) == (e2e_id, paid_of(parts))  # with its fine and interest
    assert available_balance(account) == 0  # staff credit or return it
    assert charge_cancel_pursue(charge_id=charge.pk) == State.PAID_THERE  # answered: asked no more
    assert LatePayment.objects.filter(charge=charge).count() == 1


def test_a_cancel_the_acquirer_leaves_active_is_asked_again(
    account: Account, acquirer: Acquirer, due: dt.date, monkeypatch: pytest.MonkeyPatch
) -> None:
    charge = make_due(account, due_date=due)
    charge_transition(charge_id=charge.pk, to_status=ChargeStatus.CANCELED, source="staff")
    adapter_class = type(sandbox(acquirer))
    monkeypatch.setattr(adapter_class, "cancel_due_charge", adapter_class.due_charge_status)

    assert charge_cancel_pursue(charge_id=charge.pk) == State.PENDING

    cancellation = ChargeCancellation.objects.get(charge=charge)
    assert (cancellation.attempts, "ativa" in cancellation.last_error) == (1, True)


# --------------------------------------------------------------------------- status polling


def test_polling_finds_a_late_payment_whose_notification_was_lost_and_credits_what_was_paid(
    account: Account, acquirer: Acquirer, due: dt.date
) -> None:
    charge = make_due(account, due_date=due)
    late_day = due + dt.timedelta(days=6)
    parts = expected_parts(ORIGINAL, on=late_day, due=due)
    paid = paid_of(parts)
    e2e_id = paid_there(acquirer, charge, late_day, parts)
    assert paid > ORIGINAL

    assert [r.changed for r in charge_status_poll(charge_id=charge.pk)] == [True]

    charge.refresh_from_db()
    assert (charge.status, charge.amount, charge.e2e_id) == (ChargeStatus.PAID, paid, e2e_id)
    assert (charge.platform_tax, charge.liquid_amount) == (fee(paid), paid - fee(paid))
    assert charge.paid_at == dt.datetime.combine(late_day, dt.time(12), tzinfo=BRT)
    assert charge.due.paid_components == {name: value for name, value in parts.items() if value}
    assert available_balance(account) == ledger_sum(account) == paid - fee(paid)
    assert events(charge) == [("due_charge", "paid")]
    assert [r.changed for r in charge_status_poll(charge_id=charge.pk)] == [False]  # once


def test_polling_a_due_charge_removed_there_while_pending_fails_it(
    account: Account, acquirer: Acquirer, due: dt.date
) -> None:
    charge = make_due(account, due_date=due)
    sandbox(acquirer).cancel_due_charge(charge.txid)

    charge_status_poll(charge_id=charge.pk)

    assert status_of(charge) == ChargeStatus.FAILED
    assert events(charge) == [("due_charge", "failed")]
    assert available_balance(account) == 0


def test_polling_leaves_a_due_charge_still_active_alone(account: Account, acquirer: Acquirer, due: dt.date) -> None:
    charge = make_due(account, due_date=due)
    assert charge_status_poll(charge_id=charge.pk) == []
    assert (status_of(charge), events(charge)) == (ChargeStatus.PENDING, [])


# --------------------------------------------------------------------------- refund, statement


def test_a_paid_due_charge_is_refunded_for_what_was_paid(
    api: APIClient, account: Account, acquirer: Acquirer, due: dt.date
) -> None:
    charge = make_due(account, due_date=due)
    day = due + dt.timedelta(days=3)
    paid = paid_of(expected_parts(ORIGINAL, on=day, due=due))
    assert pay(api, charge, day).status_code == 200

    response = api.post(f"/api/transactions/{charge.pk}/refund", {"reason": "pagamento em duplicidade"}, format="json")

    assert response.status_code == 202, response.content
    data = response.json()["data"]
    # The payer gets back what was paid; the balance gives back what it got (paid less the fee).
    assert (data["amount"], data["liquid_amount"], data["status"]) == (paid, paid - fee(paid), "processing")
    assert available_balance(account) == 0
    assert charge_refund_pursue(refund_id=data["id"]) is RefundOutcome.REFUNDED
    assert status_of(charge) == ChargeStatus.REFUNDED
    assert available_balance(account) == ledger_sum(account) == 0
    assert events(charge) == [("due_charge", "paid"), ("due_charge", "refunded")]
    assert api.get(f"/api/transactions/{charge.pk}/refund").json()["data"]["status"] == "refunded"


def test_the_statement_shows_a_due_charges_credit_with_what_was_paid_by_component(
    api: APIClient, account: Account, acquirer: Acquirer, due: dt.date
) -> None:
    discount_until = business_day_from(today() + dt.timedelta(days=2))
    early = make_due(account, due_date=due, discount_until=discount_until)
    late = make_due(account, due_date=due)
    late_day = due + dt.timedelta(days=2)
    assert pay(api, early, today()).status_code == 200
    assert pay(api, late, late_day).status_code == 200
    immediate = api.post(
        "/api/transactions",
        {
            "payment_method": "pix",
            "amount": 1000,
            "buyer": {"buyer_name": "Fulano", "buyer_document": "52998224725", "buyer_phone": "11999998888"},
        },
        format="json",
    ).json()["data"]["id"]
    assert api.post(f"/api/sandbox/transactions/{immediate}/pay").status_code == 200

    entries = api.get("/api/statement").json()["data"]["entries"]

    by_record = {e["record"]["id"]: e for e in entries}
    for charge, parts in (
        (early, expected_parts(ORIGINAL, on=today(), due=due, discount_until=discount_until)),
        (late, expected_parts(ORIGINAL, on=late_day, due=due)),
    ):
        entry = by_record[str(charge.pk)]
        paid = paid_of(parts)
        assert (entry["kind"], entry["amount"], entry["components"]) == ("charge_paid", paid - fee(paid), parts)
        c = entry["components"]
        assert c["original"] + c["multa"] + c["juros"] - c["abatimento"] - c["desconto"] == paid
    assert by_record[immediate]["components"] is None  # additive: other entries as before


# --------------------------------------------------------------------------- reconciliation


def test_a_late_payment_with_fine_and_interest_reconciles_clean(
    api: APIClient, account: Account, acquirer: Acquirer, due: dt.date
) -> None:
    charge = make_due(account, due_date=due)
    day = due + dt.timedelta(days=9)
    paid = paid_of(expected_parts(ORIGINAL, on=day, due=due))
    assert pay(api, charge, day).status_code == 200
    charge.refresh_from_db()
    assert charge.amount == paid > ORIGINAL
    listed = sandbox(acquirer).list_received(
        dt.datetime.combine(day, dt.time.min, tzinfo=BRT), dt.datetime.combine(day, dt.time.max, tzinfo=BRT)
    )
    assert [(r.reference, r.amount) for r in listed.records] == [(charge.txid, charge.amount)]
    balance = available_balance(account)

    run = acquirer_reconcile(acquirer_id=acquirer.pk, day=day)

    run.refresh_from_db()
    assert (run.status, run.matched_count, run.unmatched_count, run.healed_count) == ("done", 1, 0, 0), run.error
    assert list(ReconciliationItem.objects.all()) == []
    assert available_balance(account) == ledger_sum(account) == balance == paid - fee(paid)
    assert LedgerEntry.objects.filter(account=account).count() == 1


def test_reconciliation_credits_a_late_payment_whose_notification_was_lost_at_what_was_paid(
    account: Account, acquirer: Acquirer, due: dt.date
) -> None:
    charge = make_due(account, due_date=due)
    day = due + dt.timedelta(days=9)
    parts = expected_parts(ORIGINAL, on=day, due=due)
    paid = paid_of(parts)
    e2e_id = paid_there(acquirer, charge, day, parts)
    assert paid != charge.amount  # the listing's amount is not the original's

    run = acquirer_reconcile(acquirer_id=acquirer.pk, day=day)

    run.refresh_from_db()
    assert (run.status, run.healed_count) == ("done", 1), run.error
    charge.refresh_from_db()
    assert (charge.status, charge.amount, charge.e2e_id) == (ChargeStatus.PAID, paid, e2e_id)
    assert charge.due.paid_components == {name: value for name, value in parts.items() if value}
    assert available_balance(account) == ledger_sum(account) == paid - fee(paid)
    assert events(charge) == [("due_charge", "paid")]
