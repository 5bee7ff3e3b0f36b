"""GET /api/due-charges/{id} and the listing: the amount due today as the
days pass, the 404s, the listing's filters (overdue included) and its
envelope, in a constant number of queries."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from accounts.models import Account
from acquirers.models import Acquirer
from due_charges import selectors, serializers
from payments.due_models import DueCharge
from payments.models import Charge
from tests.due_charges.helpers import CNPJ, URL, client_of, create, due_in, pay
from tests.factories import AccountFactory, AcquirerFactory

pytestmark = pytest.mark.django_db

NOT_FOUND = {"success": False, "message": "Cobrança com vencimento não encontrada.", "data": None}


@pytest.fixture
def acquirer(db: Any) -> Acquirer:
    return AcquirerFactory(key="due_read", default_priority=1)


@pytest.fixture
def account(db: Any) -> Account:
    return AccountFactory()


@pytest.fixture
def api(account: Account, acquirer: Acquirer) -> APIClient:
    return client_of(account)


def on(monkeypatch: pytest.MonkeyPatch, day: dt.date) -> None:
    """Brasília's today is ``day`` for the read and the listing."""
    monkeypatch.setattr(serializers, "now_in_brazil", lambda: day)
    monkeypatch.setattr(selectors, "now_in_brazil", lambda: day)


def today_of(api: APIClient, charge_id: str) -> Any:
    response = api.get(f"{URL}/{charge_id}")
    assert response.status_code == 200
    return response.json()["data"]["amount_due_today"]


def test_the_amount_due_today_follows_the_day(api: APIClient, monkeypatch: pytest.MonkeyPatch) -> None:
    discount = {"modalidade": 1, "descontoDataFixa": [{"data": due_in(5).isoformat(), "valorPerc": "10.00"}]}
    charge = create(api, discount=discount)

    on(monkeypatch, due_in(3))
    early = today_of(api, charge["id"])
    assert early["components"]["desconto"] == 1500
    assert early["amount"] == 13500

    on(monkeypatch, due_in(10))
    assert today_of(api, charge["id"])["amount"] == 15000

    on(monkeypatch, due_in(15))
    late = today_of(api, charge["id"])
    assert late["date"] == due_in(15).isoformat()
    assert late["components"]["multa"] == 300
    assert late["components"]["juros"] > 0
    assert late["amount"] == 15000 + 300 + late["components"]["juros"]
    on(monkeypatch, due_in(16))
    assert today_of(api, charge["id"])["amount"] > late["amount"]

    last = DueCharge.objects.get(pk=charge["id"]).last_payable_date
    on(monkeypatch, last + dt.timedelta(days=1))
    assert today_of(api, charge["id"]) is None


def test_a_paid_charge_shows_what_was_paid_and_owes_nothing_today(api: APIClient) -> None:
    charge = create(api)
    pay(charge["id"], amount=15345)

    data = api.get(f"{URL}/{charge['id']}").json()["data"]

    assert (data["status"], data["paid_amount"], data["amount"]) == ("paid", 15345, 15000)
    assert data["paid_components"] == {"original": 15345}
    assert data["amount_due_today"] is None
    assert data["liquid_amount"] == 15345 - data["platform_tax"]


def test_unknown_malformed_immediate_or_anothers_id_is_a_404(api: APIClient, acquirer: Acquirer) -> None:
    other = create(client_of(AccountFactory()))
    buyer = {"buyer_name": "A", "buyer_document": CNPJ, "buyer_phone": "11987654321"}
    immediate = api.post("/api/transactions", {"payment_method": "pix", "amount": 1000, "buyer": buyer})
    immediate_id = immediate.json()["data"]["id"]

    for charge_id in (other["id"], immediate_id, "00000000-0000-0000-0000-000000000000", "nao-e-uuid"):
        response = api.get(f"{URL}/{charge_id}")
        assert (response.status_code, response.json()) == (404, NOT_FOUND)


def listed(api: APIClient, **params: Any) -> list[str]:
    response = api.get(URL, params)
    assert response.status_code == 200, response.json()
    return [item["id"] for item in response.json()["data"]["due_charges"]]


def test_the_listing_filters(api: APIClient, monkeypatch: pytest.MonkeyPatch) -> None:
    soon = create(api)
    later = create(api, due_date=due_in(40).isoformat(), debtor={"name": "Empresa", "document": CNPJ})
    paid = create(api, due_date=due_in(1).isoformat())
    pay(paid["id"])
    create(client_of(AccountFactory()))  # another account's: never listed

    assert listed(api) == [paid["id"], later["id"], soon["id"]]
    assert listed(api, status="pending") == [later["id"], soon["id"]]
    assert listed(api, due_date_from=due_in(10).isoformat()) == [later["id"], soon["id"]]
    assert listed(api, due_date_to=due_in(10).isoformat()) == [paid["id"], soon["id"]]
    assert listed(api, document="11.222.333/0001-81") == [later["id"]]
    assert listed(api, txid=soon["txid"]) == [soon["id"]]
    assert listed(api, overdue="true") == []

    on(monkeypatch, due_in(11))  # soon is overdue; paid is paid; later is not due yet
    assert listed(api, overdue="true") == [soon["id"]]
    assert listed(api, overdue="false") == [paid["id"], later["id"]]

    created = Charge.objects.get(pk=later["id"]).created_at
    Charge.objects.filter(pk=later["id"]).update(created_at=created - dt.timedelta(days=3))
    start = (created - dt.timedelta(days=1)).astimezone(dt.timezone(dt.timedelta(hours=-3)))
    assert listed(api, created_at_start=start.strftime("%Y-%m-%d %H:%M:%S")) == [paid["id"], soon["id"]]


def test_the_listing_envelope_and_its_422s(api: APIClient) -> None:
    charge = create(api)

    body = api.get(URL, {"per_page": 1}).json()
    assert body["message"] == "Cobranças com vencimento listadas com sucesso."
    assert body["data"]["pagination"] == {"current_page": 1, "last_page": 1, "per_page": 1, "total": 1}
    assert body["data"]["due_charges"][0] == api.get(f"{URL}/{charge['id']}").json()["data"]

    response = api.get(URL, {"due_date_from": "10/12/2026", "overdue": "sim", "status": "pago", "created_at_end": "x"})
    assert response.status_code == 422
    assert set(response.json()["data"]["errors"]) == {"due_date_from", "overdue", "status", "created_at_end"}


def test_a_page_costs_the_same_queries_whatever_its_size(api: APIClient) -> None:
    create(api)
    with CaptureQueriesContext(connection) as one:
        assert len(listed(api)) == 1
    for _ in range(4):
        create(api)
    with CaptureQueriesContext(connection) as five:
        assert len(listed(api)) == 5
    assert len(five) == len(one)
