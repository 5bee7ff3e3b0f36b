"""POST /api/due-charges/{id}/cancel and GET /api/due-charges.csv."""

from __future__ import annotations

import csv
import datetime as dt
import io
from typing import Any

import pytest
from rest_framework.test import APIClient

from accounts.models import Account
from acquirers.models import Acquirer
from payments.choices import ChargeSource
from payments.models import Charge, ChargeCancellation, ChargeTransition
from tests.due_charges.helpers import URL, client_of, create, pay
from tests.factories import AccountFactory, AcquirerFactory
from webhooks.models import WebhookEvent

pytestmark = pytest.mark.django_db


@pytest.fixture
def acquirer(db: Any) -> Acquirer:
    return AcquirerFactory(key="due_cancel", default_priority=1)


@pytest.fixture
def account(db: Any) -> Account:
    return AccountFactory()


@pytest.fixture
def api(account: Account, acquirer: Acquirer) -> APIClient:
    return client_of(account)


def test_a_pending_due_charge_is_canceled_with_its_webhook_and_withdrawn(api: APIClient) -> None:
    charge = create(api)

    response = api.post(f"{URL}/{charge['id']}/cancel")

    assert response.status_code == 200
    assert response.json()["message"] == "Cobrança com vencimento cancelada."
    assert response.json()["data"]["status"] == "canceled"
    assert response.json()["data"]["amount_due_today"] is None
    assert Charge.objects.get(pk=charge["id"]).status == "canceled"
    transition = ChargeTransition.objects.get(charge_id=charge["id"], to_status="canceled")
    assert transition.source == ChargeSource.MERCHANT
    event = WebhookEvent.objects.get(record_id=charge["id"], status="canceled")
    assert event.event_type == "due_charge"
    assert event.data["id"] == charge["id"]
    assert ChargeCancellation.objects.filter(charge_id=charge["id"]).exists()

    again = api.post(f"{URL}/{charge['id']}/cancel")
    assert again.status_code == 200
    assert again.json()["message"] == "A cobrança com vencimento já estava cancelada."
    assert WebhookEvent.objects.filter(record_id=charge["id"], status="canceled").count() == 1


def test_a_paid_due_charge_is_a_409_and_stays_paid(api: APIClient) -> None:
    charge = create(api)
    pay(charge["id"])

    response = api.post(f"{URL}/{charge['id']}/cancel")

    assert response.status_code == 409
    assert response.json() == {
        "success": False,
        "message": "A transação não pode passar de Paga para Cancelada.",
        "data": None,
    }
    assert Charge.objects.get(pk=charge["id"]).status == "paid"


def test_anothers_due_charge_is_a_404_and_stays_pending(api: APIClient) -> None:
    other = create(client_of(AccountFactory()))

    response = api.post(f"{URL}/{other['id']}/cancel")

    assert response.status_code == 404
    assert Charge.objects.get(pk=other["id"]).status == "pending"


def period(**params: Any) -> dict[str, Any]:
    today = dt.datetime.now(dt.timezone(dt.timedelta(hours=-3))).date()
    return {
        "created_at_start": f"{today - dt.timedelta(days=1)} 00:00:00",
        "created_at_end": f"{today + dt.timedelta(days=1)} 23:59:59",
        **params,
    }


def rows(api: APIClient, **params: Any) -> list[dict[str, str]]:
    response = api.get(f"{URL}.csv", period(**params))
    assert response.status_code == 200, response
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    text = b"".join(response.streaming_content).decode()
    return list(csv.DictReader(io.StringIO(text), delimiter=";"))


def test_the_export_has_the_listings_records_and_filters(api: APIClient) -> None:
    pending = create(api)
    paid = create(api)
    pay(paid["id"], amount=15345)

    found = rows(api)
    assert [row["id"] for row in found] == [paid["id"], pending["id"]]
    assert found[0]["status"] == "paid"
    assert (found[0]["amount"], found[0]["paid_amount"]) == ("15000", "15345")
    assert found[0]["debtor_document"] == "52998224725"
    assert found[1]["paid_amount"] == ""
    assert [row["id"] for row in rows(api, status="pending")] == [pending["id"]]


def test_the_export_needs_its_period(api: APIClient) -> None:
    response = api.get(f"{URL}.csv")

    assert response.status_code == 422
    assert set(response.json()["data"]["errors"]) == {"created_at_start", "created_at_end"}
