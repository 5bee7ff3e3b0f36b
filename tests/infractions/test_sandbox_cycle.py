"""A MED infraction's whole cycle, as a merchant plays it against the
sandbox (``POST /api/sandbox/transactions/{id}/infraction``, ``POST
/api/sandbox/infractions/{id}/accept|reject|cancel``): the sandbox acquirer
records each change, and the service learns it the way it learns a real
acquirer's, from the acquirer's listing. What the merchant notices: the
answer, the balance (available, blocked, kept back), the ledger, the
charge's status, the webhooks."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from rest_framework.test import APIClient

from accounts.models import Account, AccountBalance, LedgerEntry
from accounts.selectors import PLATFORM_MINIMUM_WITHDRAWAL, available_balance, ledger_sum
from acquirers import adapters
from acquirers.adapters.sandbox import SandboxAdapter
from acquirers.models import Acquirer
from infractions.models import Infraction
from payments.models import Charge, ChargeStatus
from tests.factories import AcquirerFactory
from webhooks.models import WebhookEvent

pytestmark = pytest.mark.django_db

AMOUNT = 10000
CPF = "52998224725"
CHARGE = {
    "payment_method": "pix",
    "amount": AMOUNT,
    "buyer": {"buyer_name": "Fulano", "buyer_document": CPF, "buyer_phone": "11999998888"},
}


@pytest.fixture
def sandbox(db: Any) -> Acquirer:
    return AcquirerFactory(key=f"sbx_{uuid.uuid4().hex[:8]}", adapter="sandbox", options={}, default_priority=1)


def paid_charge(api: APIClient) -> Charge:
    created = api.post("/api/transactions", CHARGE, format="json")
    assert created.status_code == 201, created.content
    charge_id = created.json()["data"]["id"]
    paid = api.post(f"/api/sandbox/transactions/{charge_id}/pay")
    assert paid.status_code == 200, paid.content
    return Charge.objects.get(pk=charge_id)


def open_infraction(api: APIClient, charge: Charge, **body: Any) -> dict[str, Any]:
    response = api.post(f"/api/sandbox/transactions/{charge.pk}/infraction", body, format="json")
    assert response.status_code == 201, response.content
    payload: dict[str, Any] = response.json()
    assert (payload["success"], payload["message"]) == (True, "Infração aberta.")
    return payload["data"]


def decide(api: APIClient, infraction_id: str, action: str, **body: Any) -> Any:
    return api.post(f"/api/sandbox/infractions/{infraction_id}/{action}", body, format="json")


def holds(account: Account) -> tuple[int, int, int]:
    """(available, blocked, kept back) as the balance row has them."""
    row = AccountBalance.objects.get(account=account)
    return row.available, row.held, row.hold_uncovered


def kinds(account: Account) -> list[tuple[str, int]]:
    return list(
        LedgerEntry.objects.filter(account=account, kind__startswith="med").order_by("id").values_list("kind", "amount")
    )


def events(account: Account) -> list[str]:
    return [
        e["event"]
        for e in WebhookEvent.objects.filter(account=account, event_type="infraction")
        .order_by("created_at")
        .values_list("data", flat=True)
    ]


def test_open_blocks_the_money_and_accepting_returns_it(api: APIClient, account: Account, sandbox: Acquirer) -> None:
    charge = paid_charge(api)
    liquid = charge.liquid_amount
    assert available_balance(account) == liquid

    data = open_infraction(api, charge, reason="Golpe do falso parente")

    infraction = Infraction.objects.get()
    assert data["id"] == str(infraction.pk)
    assert (data["status"], data["transaction_id"], data["e2e_id"]) == ("open", str(charge.pk), charge.e2e_id)
    assert (data["amount"], data["blocked_amount"], data["returned_amount"]) == (AMOUNT, liquid, 0)
    assert data["reason"] == "Golpe do falso parente"
    assert data["defense_deadline"] is not None
    assert holds(account) == (0, liquid, 0)
    assert kinds(account) == [("med_hold", -liquid)]
    charge.refresh_from_db()
    assert (charge.status, charge.med_open) == (ChargeStatus.CHARGEBACK, True)
    # Recorded at the acquirer: the evidence the service read.
    held = adapters.build(sandbox)
    assert isinstance(held, SandboxAdapter)
    assert held.infraction_get(infraction.external_id)["status"] == "open"  # type: ignore[index]

    response = decide(api, data["id"], "accept")

    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["success"], body["message"]) == (True, "Infração aceita: valor devolvido ao pagador.")
    assert body["data"]["status"] == "accepted"
    assert (body["data"]["returned_amount"], body["data"]["debited_amount"]) == (AMOUNT, liquid)
    assert holds(account) == (0, 0, 0)
    assert kinds(account) == [("med_hold", -liquid), ("med_hold_release", liquid), ("med_return", -liquid)]
    assert ledger_sum(account) == available_balance(account) == 0
    charge.refresh_from_db()
    assert (charge.status, charge.med_open) == (ChargeStatus.REFUNDED, False)
    assert events(account) == ["infraction.opened", "infraction.closed"]


@pytest.mark.parametrize(
    ("action", "status", "message"),
    [
        ("reject", "rejected", "Infração rejeitada: valor liberado."),
        ("cancel", "canceled", "Infração cancelada."),
    ],
)
def test_a_rejection_or_cancel_releases_the_block(
    api: APIClient, account: Account, sandbox: Acquirer, action: str, status: str, message: str
) -> None:
    charge = paid_charge(api)
    liquid = charge.liquid_amount
    data = open_infraction(api, charge)

    response = decide(api, data["id"], action)

    assert response.status_code == 200, response.content
    assert (response.json()["message"], response.json()["data"]["status"]) == (message, status)
    assert holds(account) == (liquid, 0, 0)
    assert kinds(account) == [("med_hold", -liquid), ("med_hold_release", liquid)]
    charge.refresh_from_db()
    assert (charge.status, charge.med_open) == (ChargeStatus.PAID, False)

    # The same decision again changes nothing; another one is refused.
    again = decide(api, data["id"], action)
    assert (again.status_code, again.json()["data"]["status"]) == (200, status)
    refused = decide(api, data["id"], "accept")
    assert refused.status_code == 409
    assert refused.json() == {
        "success": False,
        "message": "A infração já foi encerrada com outra decisão.",
        "data": None,
    }
    assert holds(account) == (liquid, 0, 0)
    assert kinds(account) == [("med_hold", -liquid), ("med_hold_release", liquid)]


def test_a_partial_block_and_returns_in_parts(api: APIClient, account: Account, sandbox: Acquirer) -> None:
    charge = paid_charge(api)
    liquid = charge.liquid_amount
    data = open_infraction(api, charge, blocked_amount=4000)
    assert data["blocked_amount"] == 4000
    assert holds(account) == (liquid - 4000, 4000, 0)

    first = decide(api, data["id"], "accept", returned_amount=3000)
    assert first.status_code == 200, first.content
    assert (first.json()["data"]["returned_amount"], first.json()["data"]["debited_amount"]) == (3000, 3000)
    assert holds(account) == (liquid - 3000, 0, 0)

    # MED 2.0 follows the money: a later, larger return debits the difference.
    later = decide(api, data["id"], "accept", returned_amount=5000)
    assert (later.json()["data"]["returned_amount"], later.json()["data"]["debited_amount"]) == (5000, 5000)
    assert holds(account) == (liquid - 5000, 0, 0)
    # Reported again, nothing more.
    same = decide(api, data["id"], "accept", returned_amount=5000)
    assert same.status_code == 200
    assert kinds(account) == [
        ("med_hold", -4000),
        ("med_hold_release", 4000),
        ("med_return", -3000),
        ("med_return", -2000),
    ]
    assert ledger_sum(account) == available_balance(account) == liquid - 5000
    assert events(account) == ["infraction.opened", "infraction.closed", "infraction.returned"]

    too_much = decide(api, data["id"], "accept", returned_amount=AMOUNT + 1)
    assert too_much.status_code == 409


def test_money_already_withdrawn_is_kept_back_then_the_return_overdraws(
    api: APIClient, account: Account, sandbox: Acquirer
) -> None:
    charge = paid_charge(api)
    liquid = charge.liquid_amount
    withdrawn = liquid - 1000
    response = api.post("/api/withdrawals", {"amount": withdrawn, "key_type": "cpf", "key_value": CPF}, format="json")
    assert response.status_code == 201, response.content
    assert available_balance(account) == 1000

    data = open_infraction(api, charge)

    # The hold covers only what is left; the rest is kept back, never overdrawn.
    assert data["blocked_amount"] == liquid
    assert holds(account) == (0, liquid, withdrawn)
    assert kinds(account) == [("med_hold", -1000)]
    # Nothing is left to withdraw.
    more = api.post(
        "/api/withdrawals", {"amount": PLATFORM_MINIMUM_WITHDRAWAL, "key_type": "cpf", "key_value": CPF}, format="json"
    )
    assert (more.status_code, more.json()["message"]) == (400, "Saldo insuficiente para realizar o saque.")

    response = decide(api, data["id"], "accept")

    assert response.status_code == 200, response.content
    # The covered part released, the merchant's share debited: below zero by what was uncovered.
    assert holds(account) == (-withdrawn, 0, 0)
    assert kinds(account) == [("med_hold", -1000), ("med_hold_release", 1000), ("med_return", -liquid)]
    assert ledger_sum(account) == available_balance(account) == -withdrawn


def test_only_charges_that_received_a_pix_at_a_sandbox_acquirer(
    api: APIClient, account: Account, sandbox: Acquirer
) -> None:
    created = api.post("/api/transactions", CHARGE, format="json").json()["data"]
    pending = api.post(f"/api/sandbox/transactions/{created['id']}/infraction", {}, format="json")
    assert pending.status_code == 409
    assert pending.json()["message"] == "A transação não recebeu um Pix: não há o que contestar."

    unknown = api.post(f"/api/sandbox/transactions/{uuid.uuid4()}/infraction", {}, format="json")
    assert (unknown.status_code, unknown.json()["message"]) == (404, "Transação não encontrada.")
    not_ours = decide(api, str(uuid.uuid4()), "reject")
    assert (not_ours.status_code, not_ours.json()["message"]) == (404, "Infração não encontrada.")

    invalid = api.post(f"/api/sandbox/transactions/{created['id']}/infraction", {"blocked_amount": -1}, format="json")
    assert invalid.status_code == 422
    assert Infraction.objects.count() == 0
