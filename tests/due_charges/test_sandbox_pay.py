"""The sandbox's payer for due-date charges: ``POST
/api/sandbox/due-charges/{id}/pay`` pays on a simulated day at the amount
due that day; the balance is credited with what was paid less the fee on it,
the merchant hears a ``due_charge`` event, and the sandbox holds the Pix."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import pytest
from rest_framework.test import APIClient

from accounts.models import Account, LedgerEntry
from accounts.selectors import available_balance, ledger_sum
from acquirers.models import Acquirer
from payments.models import Charge, ChargeStatus
from payments.services import charge_transition
from tests.conftest import client_for
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

CHARGE_NOT_FOUND = {"success": False, "message": "Transação não encontrada.", "data": None}
REMOVED = {
    "success": False,
    "message": "A transação foi removida na adquirente: o pagador não consegue mais pagá-la.",
    "data": None,
}


@pytest.fixture
def account(db: Any) -> Account:
    return AccountFactory(cashin_fee_fixed=FEE_FIXED, cashin_fee_bps=FEE_BPS)


@pytest.fixture
def acquirer(db: Any) -> Acquirer:
    # A key of its own: the sandbox keeps its state in Redis across tests (the day\'s listing included).
    return AcquirerFactory(key=f"sbx_due_pay_{uuid.uuid4().hex[:8]}", default_priority=1)


@pytest.fixture
def due() -> dt.date:
    return business_day_from(today() + dt.timedelta(days=10))


@pytest.fixture
def discount_until() -> dt.date:
    return business_day_from(today() + dt.timedelta(days=3))


def events(charge: Charge) -> list[tuple[str, str]]:
    return list(
        WebhookEvent.objects.filter(record_id=charge.pk).order_by("created_at").values_list("event_type", "status")
    )


def credits(charge: Charge) -> list[int]:
    return list(
        LedgerEntry.objects.filter(reference__startswith=f"charge:{charge.pk}:").values_list("amount", flat=True)
    )


@pytest.mark.parametrize(
    ("when", "parts_seen"),
    [
        ("early", {"desconto"}),  # before the discount's date: 5 % off
        ("due", set()),  # on the due date: the original
        ("late", {"multa", "juros"}),  # five days late: the fine and five days of interest
    ],
)
def test_the_payer_pays_the_amount_due_that_day_and_the_balance_gets_it_less_the_fee(
    api: APIClient,
    account: Account,
    acquirer: Acquirer,
    due: dt.date,
    discount_until: dt.date,
    when: str,
    parts_seen: set[str],
) -> None:
    day = {"early": today(), "due": due, "late": due + dt.timedelta(days=5)}[when]
    charge = make_due(account, due_date=due, discount_until=discount_until)
    parts = expected_parts(ORIGINAL, on=day, due=due, discount_until=discount_until)
    paid = paid_of(parts)
    assert {name for name, value in parts.items() if value and name != "original"} == parts_seen

    response = pay(api, charge, day)

    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["success"], body["message"]) == (True, "Cobrança paga.")
    data = body["data"]
    assert (data["id"], data["status"], data["original_amount"]) == (str(charge.pk), "paid", ORIGINAL)
    assert (data["paid_amount"], data["platform_tax"], data["liquid_amount"]) == (paid, fee(paid), paid - fee(paid))
    assert data["paid_components"] == {name: value for name, value in parts.items() if value}
    assert data["e2e_id"].startswith("E")
    assert data["paid_at"] == f"{day.isoformat()} 12:00:00"  # Brasília time, as every datetime the API shows
    # The ledger credits what was paid less the fee on it; the charge reads as paid at that amount.
    assert available_balance(account) == ledger_sum(account) == paid - fee(paid)
    assert credits(charge) == [paid - fee(paid)]
    listed = api.get(f"/api/transactions/{charge.pk}").json()["data"]
    assert (listed["status"], listed["amount"]) == ("paid", paid)
    assert events(charge) == [("due_charge", "paid")]
    # The sandbox holds the Pix, as its listing for reconciliation shows it.
    held = sandbox(acquirer).due_charge_status(charge.txid)
    assert (held.status, [p.amount for p in held.pix], held.e2e_ids) == ("CONCLUIDA", [paid], (data["e2e_id"],))


def test_paying_again_changes_nothing(api: APIClient, account: Account, acquirer: Acquirer, due: dt.date) -> None:
    charge = make_due(account, due_date=due)
    first = pay(api, charge, due)
    assert first.status_code == 200, first.content

    # Another day, even: the sandbox keeps its first Pix and nothing moves.
    again = pay(api, charge, due + dt.timedelta(days=3))

    assert again.status_code == 200, again.content
    assert again.json()["data"] == first.json()["data"]
    assert available_balance(account) == ledger_sum(account) == ORIGINAL - fee(ORIGINAL)
    assert events(charge) == [("due_charge", "paid")]


def test_without_a_date_the_payer_pays_today(api: APIClient, account: Account, acquirer: Acquirer) -> None:
    due = business_day_from(today() + dt.timedelta(days=2))
    charge = make_due(account, due_date=due)

    response = pay(api, charge)

    assert response.status_code == 200, response.content
    assert response.json()["data"]["paid_amount"] == ORIGINAL
    assert response.json()["data"]["paid_at"] == f"{today().isoformat()} 12:00:00"


def test_a_day_after_the_last_payable_day_is_a_409_and_changes_nothing(
    api: APIClient, account: Account, acquirer: Acquirer, due: dt.date
) -> None:
    charge = make_due(account, due_date=due, days_after_due=5)
    last = charge.due.last_payable_date
    assert pay(api, charge, last + dt.timedelta(days=1)).json() == {
        "success": False,
        "message": f"A cobrança não pode ser paga nessa data: o último dia de pagamento foi {last:%d/%m/%Y}.",
        "data": None,
    }
    assert pay(api, charge, last + dt.timedelta(days=1)).status_code == 409
    charge.refresh_from_db()
    assert (charge.status, available_balance(account), events(charge)) == (ChargeStatus.PENDING, 0, [])
    assert sandbox(acquirer).due_charge_status(charge.txid).status == "ATIVA"
    # The last day itself is still payable, late.
    assert pay(api, charge, last).status_code == 200


@pytest.mark.parametrize("body", [{"date": "2026-13-01"}, {"date": "amanhã"}, {"date": 20261210}])
def test_a_malformed_date_is_a_422(
    api: APIClient, account: Account, acquirer: Acquirer, due: dt.date, body: Any
) -> None:
    charge = make_due(account, due_date=due)
    response = api.post(f"/api/sandbox/due-charges/{charge.pk}/pay", body, format="json")
    assert response.status_code == 422
    assert list(response.json()["data"]["errors"]) == ["date"]
    charge.refresh_from_db()
    assert charge.status == ChargeStatus.PENDING


def test_a_day_before_the_charge_was_created_is_a_422(
    api: APIClient, account: Account, acquirer: Acquirer, due: dt.date
) -> None:
    charge = make_due(account, due_date=due)
    yesterday = today() - dt.timedelta(days=1)
    response = pay(api, charge, yesterday)
    assert (response.status_code, response.json()) == (
        422,
        {
            "success": False,
            "message": "Erro de validação nos dados fornecidos",
            "data": {"errors": {"date": [f"A data não pode ser anterior à criação da cobrança ({today():%d/%m/%Y})."]}},
        },
    )
    charge.refresh_from_db()
    assert (charge.status, available_balance(account)) == (ChargeStatus.PENDING, 0)


def test_a_charge_withdrawn_at_the_sandbox_cannot_be_paid(
    api: APIClient, account: Account, acquirer: Acquirer, due: dt.date
) -> None:
    charge = make_due(account, due_date=due)
    sandbox(acquirer).cancel_due_charge(charge.txid)  # withdrawn there (a cancel that reached it)

    response = pay(api, charge, due)

    assert (response.status_code, response.json()) == (409, REMOVED)
    charge.refresh_from_db()
    assert (charge.status, available_balance(account), events(charge)) == (ChargeStatus.PENDING, 0, [])


def test_paid_after_a_cancel_here_that_has_not_reached_the_sandbox_is_a_late_payment(
    api: APIClient, account: Account, acquirer: Acquirer, due: dt.date
) -> None:
    charge = make_due(account, due_date=due)
    charge_transition(charge_id=charge.pk, to_status=ChargeStatus.CANCELED, source="staff")

    response = pay(api, charge, due)

    assert response.status_code == 200, response.content
    assert response.json()["message"].startswith("Pagamento recebido após o cancelamento")
    assert response.json()["data"]["status"] == "canceled"
    assert available_balance(account) == 0  # for staff to credit or return
    late = charge.late_payments.get()
    assert late.amount == ORIGINAL


def test_only_due_charges_of_the_account_at_a_sandbox_are_paid(
    api: APIClient, account: Account, acquirer: Acquirer, due: dt.date, issue_credential: Any
) -> None:
    charge = make_due(account, due_date=due)
    other = client_for(issue_credential(AccountFactory()))
    assert (other.post(f"/api/sandbox/due-charges/{charge.pk}/pay").status_code) == 404
    assert other.post(f"/api/sandbox/due-charges/{charge.pk}/pay").json() == CHARGE_NOT_FOUND
    immediate = api.post(
        "/api/transactions",
        {
            "payment_method": "pix",
            "amount": 1000,
            "buyer": {"buyer_name": "Fulano", "buyer_document": "52998224725", "buyer_phone": "11999998888"},
        },
        format="json",
    ).json()["data"]["id"]
    assert api.post(f"/api/sandbox/due-charges/{immediate}/pay").json() == CHARGE_NOT_FOUND
    assert api.post("/api/sandbox/due-charges/not-an-id/pay").status_code == 404
    charge.refresh_from_db()
    assert charge.status == ChargeStatus.PENDING
