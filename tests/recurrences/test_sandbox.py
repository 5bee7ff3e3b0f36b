"""The sandbox's payer's bank over HTTP, against the sandbox acquirer itself
(its state in Redis): the payer authorises, refuses, lets expire or cancels
a recurrence; a cycle's attempt is settled (the charge credited as any
charge: fee, balance, webhook) or rejected and retried under the policy.
Each answer is what the sandbox says, applied by the services; a driver the
state does not allow is a 409, and another account's recurrence a 404."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from rest_framework.test import APIClient

from accounts.models import Account, AccountBalance
from acquirers.models import Acquirer
from payments.due_payments import now_in_brazil
from payments.recurrence_schedule import settlement_date
from recurrences.cycles import cycle_send, cycles_open
from recurrences.models import Cycle, Recurrence
from tests.due_charges.helpers import client_of
from tests.factories import AccountFactory, AcquirerFactory
from tests.recurrences.helpers import URL, body, due_in, push_body
from webhooks.models import WebhookEvent

pytestmark = pytest.mark.django_db

SANDBOX = "/api/sandbox/recurrences"


@pytest.fixture
def acquirer(db: Any) -> Acquirer:
    """The sandbox acquirer, first in the platform's chain (overrides the conftest's test adapter)."""
    return AcquirerFactory(key="sandbox_rec", default_priority=1)


def created(api: APIClient, **changes: Any) -> dict[str, Any]:
    response = api.post(URL, body(**changes))
    assert response.status_code == 201, response.json()
    data: dict[str, Any] = response.json()["data"]
    return data


def approve(api: APIClient, recurrence_id: str, **payload: Any) -> Any:
    return api.post(f"{SANDBOX}/{recurrence_id}/approve", payload, format="json")


def sent_cycle(recurrence_id: str, index: int = 0) -> Cycle:
    """Today's round: the cycle opened in its window and its cobr sent to the sandbox."""
    today = now_in_brazil()
    cycles_open(recurrence_id=recurrence_id, today=today)
    cycle = Cycle.objects.get(recurrence_id=recurrence_id, index=index)
    assert cycle_send(cycle_id=cycle.pk, today=today) == "active"
    return Cycle.objects.select_related("charge").get(pk=cycle.pk)


def test_the_payer_approves_a_qr_recurrence(api: APIClient, acquirer: Acquirer) -> None:
    recurrence = created(api)

    response = approve(api, recurrence["id"], payer_ispb="12345678")

    assert response.status_code == 200, response.json()
    assert response.json()["message"] == "Recorrência autorizada pelo pagador."
    data = response.json()["data"]
    assert (data["status"], data["payer_ispb"]) == ("approved", "12345678")
    assert data["approved_at"] is not None
    assert api.get(f"{URL}/{recurrence['id']}").json()["data"] == data
    assert WebhookEvent.objects.filter(event_type="recurrence", status="approved").count() == 1
    # Again: the same, nothing new.
    again = approve(api, recurrence["id"])
    assert again.status_code == 200
    assert WebhookEvent.objects.filter(event_type="recurrence", status="approved").count() == 1


def test_a_push_recurrences_payer_bank_is_the_default_ispb(api: APIClient, acquirer: Acquirer) -> None:
    response = api.post(URL, push_body(payer_bank={"ispb": "87654321", "account": "99"}))
    assert response.status_code == 201, response.json()

    approved = approve(api, response.json()["data"]["id"])

    assert approved.json()["data"]["payer_ispb"] == "87654321"


@pytest.mark.parametrize(
    ("action", "status", "message"),
    [
        ("reject", "rejected", "Recorrência rejeitada pelo pagador."),
        ("expire", "expired", "Recorrência expirada sem resposta do pagador."),
    ],
)
def test_the_payer_refuses_or_lets_it_expire(
    api: APIClient, acquirer: Acquirer, action: str, status: str, message: str
) -> None:
    recurrence = created(api)

    response = api.post(f"{SANDBOX}/{recurrence['id']}/{action}")

    assert response.status_code == 200, response.json()
    assert response.json()["message"] == message
    assert response.json()["data"]["status"] == status
    assert response.json()["data"]["ended_at"] is not None
    # Ended: no approval, no cancel by the merchant either.
    refused = approve(api, recurrence["id"])
    assert refused.status_code == 409
    assert Recurrence.objects.get(pk=recurrence["id"]).status == status
    assert api.post(f"{URL}/{recurrence['id']}/cancel").status_code == 409


def test_the_payer_cancels_an_approved_one_and_its_cycles_stop(api: APIClient, acquirer: Acquirer) -> None:
    recurrence = created(api, first_due_date=due_in(5).isoformat())
    assert approve(api, recurrence["id"]).status_code == 200
    cycle = sent_cycle(recurrence["id"])

    response = api.post(f"{SANDBOX}/{recurrence['id']}/payer-cancel")

    assert response.status_code == 200, response.json()
    assert (response.json()["data"]["status"], response.json()["data"]["cancelled_by"]) == ("cancelled", "payer")
    cycle.refresh_from_db()
    assert cycle.status == "cancelled"
    assert cycle.charge is not None
    cycle.charge.refresh_from_db()
    assert cycle.charge.status == "canceled"


def test_a_payer_cancel_before_approval_is_a_409(api: APIClient, acquirer: Acquirer) -> None:
    recurrence = created(api)

    response = api.post(f"{SANDBOX}/{recurrence['id']}/payer-cancel")

    assert response.status_code == 409
    assert (
        response.json()["message"]
        == "A recorrência está aguardando autorização na adquirente sandbox: esta ação não se aplica."
    )
    assert Recurrence.objects.get(pk=recurrence["id"]).status == "created"


def test_a_cycle_paid_on_its_settlement_day_credits_the_charge(
    api: APIClient, account: Account, acquirer: Acquirer
) -> None:
    Account.objects.filter(pk=account.pk).update(cashin_fee_fixed=30, cashin_fee_bps=0)
    recurrence = created(api, first_due_date=due_in(5).isoformat())
    approve(api, recurrence["id"])
    cycle = sent_cycle(recurrence["id"])

    response = api.post(f"{SANDBOX}/{recurrence['id']}/cycles/0/pay", {}, format="json")

    assert response.status_code == 200, response.json()
    assert response.json()["message"] == "Ciclo pago."
    data = response.json()["data"]
    assert (data["status"], data["amount"], data["platform_tax"], data["liquid_amount"]) == ("paid", 4990, 30, 4960)
    assert data["e2e_id"] is not None
    assert data["paid_at"].startswith(settlement_date(due_in(5)).isoformat())
    assert AccountBalance.objects.get(account=account).available == 4960
    assert WebhookEvent.objects.filter(event_type="recurrence_cycle", record_id=cycle.pk, status="paid").exists()
    # Again: the first Pix stands, nothing credited twice.
    again = api.post(f"{SANDBOX}/{recurrence['id']}/cycles/0/pay", {}, format="json")
    assert again.status_code == 200
    assert again.json()["data"] == data
    assert AccountBalance.objects.get(account=account).available == 4960


def test_a_day_without_an_attempt_is_a_409(api: APIClient, acquirer: Acquirer) -> None:
    recurrence = created(api, first_due_date=due_in(5).isoformat())
    approve(api, recurrence["id"])
    sent_cycle(recurrence["id"])
    wrong = settlement_date(due_in(5)) + dt.timedelta(days=1)

    response = api.post(f"{SANDBOX}/{recurrence['id']}/cycles/0/pay", {"date": wrong.isoformat()}, format="json")

    assert response.status_code == 409
    assert (
        response.json()["message"] == f"Nenhuma tentativa de liquidação do ciclo está agendada para {wrong:%d/%m/%Y}."
    )
    assert Cycle.objects.get(recurrence_id=recurrence["id"], index=0).status == "active"


def test_a_rejected_attempt_is_retried_under_the_policy(api: APIClient, acquirer: Acquirer) -> None:
    recurrence = created(api, first_due_date=due_in(5).isoformat())  # 3_in_7_days
    approve(api, recurrence["id"])
    sent_cycle(recurrence["id"])

    response = api.post(f"{SANDBOX}/{recurrence['id']}/cycles/0/fail", {"reason": "AB10"}, format="json")

    assert response.status_code == 200, response.json()
    data = response.json()["data"]
    assert data["status"] == "retrying"
    assert data["next_retry_on"] is not None
    assert data["next_retry_on"] > settlement_date(due_in(5)).isoformat()
    assert "AB10" in data["failure_reason"]


def test_without_retries_a_rejected_attempt_fails_the_cycle(api: APIClient, acquirer: Acquirer) -> None:
    recurrence = created(api, first_due_date=due_in(5).isoformat(), retry_policy="none")
    approve(api, recurrence["id"])
    cycle = sent_cycle(recurrence["id"])

    response = api.post(f"{SANDBOX}/{recurrence['id']}/cycles/0/fail", {}, format="json")

    assert response.status_code == 200, response.json()
    assert response.json()["data"]["status"] == "failed"
    assert cycle.charge is not None
    cycle.charge.refresh_from_db()
    assert cycle.charge.status == "canceled"


def test_a_cycle_not_sent_yet_is_a_409(api: APIClient, acquirer: Acquirer) -> None:
    recurrence = created(api, first_due_date=due_in(5).isoformat())
    approve(api, recurrence["id"])
    cycles_open(recurrence_id=recurrence["id"], today=now_in_brazil())

    response = api.post(f"{SANDBOX}/{recurrence['id']}/cycles/0/pay", {}, format="json")

    assert response.status_code == 409
    assert response.json()["message"] == "A cobrança deste ciclo ainda não foi enviada à adquirente."


@pytest.mark.parametrize(
    ("path", "payload", "key"),
    [
        ("approve", {"payer_ispb": "123"}, "payer_ispb"),
        ("cycles/0/pay", {"date": "2030-1-1"}, "date"),
        ("cycles/0/fail", {"reason": "XXXX"}, "reason"),
    ],
)
def test_a_bad_body_is_a_422(api: APIClient, acquirer: Acquirer, path: str, payload: dict[str, Any], key: str) -> None:
    recurrence = created(api)

    response = api.post(f"{SANDBOX}/{recurrence['id']}/{path}", payload, format="json")

    assert response.status_code == 422
    assert key in response.json()["data"]["errors"]
    assert Recurrence.objects.get(pk=recurrence["id"]).status == "created"


def test_another_accounts_recurrence_is_a_404_and_untouched(api: APIClient, acquirer: Acquirer) -> None:
    recurrence = created(api)
    other = client_of(AccountFactory())

    answers = [
        other.post(f"{SANDBOX}/{recurrence['id']}/approve", {}, format="json"),
        other.post(f"{SANDBOX}/{recurrence['id']}/reject"),
        other.post(f"{SANDBOX}/{recurrence['id']}/expire"),
        other.post(f"{SANDBOX}/{recurrence['id']}/payer-cancel"),
        other.post(f"{SANDBOX}/{recurrence['id']}/cycles/0/pay", {}, format="json"),
        other.post(f"{SANDBOX}/{recurrence['id']}/cycles/0/fail", {}, format="json"),
    ]

    assert [a.status_code for a in answers] == [404] * 6
    assert Recurrence.objects.get(pk=recurrence["id"]).status == "created"


def test_a_recurrence_at_another_adapter_is_not_the_sandboxs(api: APIClient, account: Account) -> None:
    from tests.recurrences.conftest import RecAdapter

    AcquirerFactory(key="rec_ok", adapter=RecAdapter.name, options={}, default_priority=0)
    recurrence = created(api)
    assert recurrence["acquirer"] == "rec_ok"

    assert approve(api, recurrence["id"]).status_code == 404
