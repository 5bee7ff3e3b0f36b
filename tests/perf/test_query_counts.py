"""SQL queries per request, as upper bounds that hold with 1 row and with 30.

A bound that holds for both sizes means the count does not grow with the
data: an N+1 (a query per row listed, per attempt, per acquirer) fails here.
Every request is made once before it is measured, so the credential's
``last_used_at`` write (at most once a minute) and the first reads of the
credential and chain snapshots (core/snapshots.py) are not counted.
``test_query_budgets.py`` holds the hot endpoints to issue 14's exact budgets.

Counts are of the request alone, SAVEPOINT/RELEASE of its atomic blocks
included. The credential and the account's chain come from the process's
snapshots: no query on the warm path. Bounds are the measured count + 1:
the small case may grow by one query unnoticed, the large one cannot grow
by thirty.

===================================  ========  ===  ================================================================
Endpoint                             Measured  Max  Why
===================================  ========  ===  ================================================================
GET  /api/health                     0         1    liveness: touches nothing
GET  /api/health/ready               1         2    SELECT 1, no credentials (broker and heartbeats are Redis)
GET  /api/withdrawals/balance        2         3    balance row, SUM of today's withdrawals
GET  /api/transactions               2         3    COUNT, the page
GET  /api/transactions/{id}          1         2    the charge (a precompiled SELECT of the fields shown)
GET  /api/transactions/{id}/qrcode   1         2    the charge (image drawn from its stored EMV)
POST /api/transactions               1         2    the charge and its attempts in one INSERT statement; one
                                                    acquirer in the chain
GET  /api/pix-cash-in/acquirers      2         3    slots (acquirer joined), granted acquirers
PUT  /api/pix-cash-in/acquirers      8         9    selectable acquirers (IN keys), SAVEPOINT, account lock, slots
                                                    read, slots DELETE (collected first), one bulk INSERT, RELEASE,
                                                    snapshot
GET  /api/withdrawals                2         3    COUNT, the page
GET  /api/withdrawals/{id}           1         2    the withdrawal (a precompiled SELECT of the fields shown)
POST /api/withdrawals                5         6    SAVEPOINT, balance lock, day SUM, one statement inserting the
                                                    withdrawal and its ledger entry and moving the balance, RELEASE
GET  /api/webhooks                   1         2    the endpoints
GET  /api/webhooks/{id}/deliveries   4         5    endpoint, COUNT, page (event joined), attempts (one prefetch for
                                                    the page)
===================================  ========  ===  ================================================================
"""

from __future__ import annotations

import datetime as dt
import re
import uuid
from typing import Any

import pytest
from django.db import transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from pytest_django import DjangoAssertNumQueries
from rest_framework.test import APIClient

from accounts.models import Account, LedgerEntry
from accounts.services import credential_issue, ledger_post
from acquirers.adapters.sandbox import new_e2e_id
from acquirers.models import Acquirer, AcquirerSlot
from acquirers.services import acquirer_grants_set, acquirer_slots_set
from payments.models import ChargeStatus, ChargeTransition
from payments.services import Buyer, charge_create, charge_transition
from tests.conftest import client_for
from tests.factories import AccountFactory, AcquirerFactory
from webhooks.models import EventType, WebhookAttempt, WebhookDelivery
from webhooks.services import endpoint_create, event_emit
from withdrawals.services import withdrawal_request

SIZES = [1, 30]
# The "Max" column of the table above.
BOUNDS = {
    "GET /api/health": 1,
    "GET /api/health/ready": 2,
    "GET /api/withdrawals/balance": 3,
    "GET /api/transactions": 3,
    "GET /api/transactions/{id}": 2,
    "GET /api/transactions/{id}/qrcode": 2,
    "POST /api/transactions": 2,
    "GET /api/pix-cash-in/acquirers": 3,
    "PUT /api/pix-cash-in/acquirers": 9,
    "GET /api/withdrawals": 3,
    "GET /api/withdrawals/{id}": 2,
    "POST /api/withdrawals": 6,
    "GET /api/webhooks": 2,
    "GET /api/webhooks/{id}/deliveries": 5,
}
CHARGE = {
    "payment_method": "pix",
    "amount": 1000,
    "buyer": {"buyer_name": "Fulano", "buyer_document": "52998224725", "buyer_phone": "11999998888"},
}
BUYER = Buyer(name="Fulano", document="52998224725", phone="11999998888", address={})
ATTEMPTS_PER_DELIVERY = 3

pytestmark = pytest.mark.django_db


@pytest.fixture
def alpha(db: Any) -> Acquirer:
    return AcquirerFactory(key="alpha", default_priority=1)


@pytest.fixture
def account(db: Any) -> Account:
    return AccountFactory(can_select_pix_cash_in_acquirer=True)


@pytest.fixture
def api(account: Account) -> APIClient:
    return client_for(credential_issue(account=account))


def bounded(assert_max: DjangoAssertNumQueries, endpoint: str, size: int) -> CaptureQueriesContext:
    return assert_max(BOUNDS[endpoint], info=f"{endpoint} with {size} row(s): see the table at the top of {__name__}")


def charges(account: Account, count: int) -> list[str]:
    """``count`` charges through the acquirer chain, every other one paid."""
    made = []
    for i in range(count):
        charge = charge_create(account=account, amount=1000 + i, buyer=BUYER)
        if i % 2 == 0:
            charge_transition(
                charge_id=charge.pk,
                to_status=ChargeStatus.PAID,
                source=ChargeTransition.Source.SANDBOX,
                e2e_id=new_e2e_id(),
            )
        made.append(str(charge.pk))
    return made


def withdrawals(account: Account, count: int) -> list[str]:
    with transaction.atomic():
        ledger_post(account_id=account.pk, amount=1_000_000, kind=LedgerEntry.Kind.CHARGE_PAID, reference="seed:perf")
    return [
        str(withdrawal_request(account=account, amount=1000 + i, key_type="cpf", key_value="52998224725").pk)
        for i in range(count)
    ]


def deliveries(account: Account, count: int) -> str:
    """One endpoint with ``count`` deliveries of ``ATTEMPTS_PER_DELIVERY`` attempts each."""
    endpoint = endpoint_create(account=account, url="https://example.com/hook").endpoint
    with transaction.atomic():
        for _ in range(count):
            event_emit(
                account_id=account.pk, event_type=EventType.TRANSACTION, record_id=uuid.uuid4(), status="paid", data={}
            )
    now = timezone.now()
    WebhookAttempt.objects.bulk_create(
        WebhookAttempt(
            delivery=delivery,
            number=n,
            attempted_at=now - dt.timedelta(minutes=n),
            status_code=500,
            latency_ms=12,
            succeeded=False,
        )
        for delivery in WebhookDelivery.objects.filter(endpoint=endpoint)
        for n in range(1, ATTEMPTS_PER_DELIVERY + 1)
    )
    WebhookDelivery.objects.filter(endpoint=endpoint).update(attempt_count=ATTEMPTS_PER_DELIVERY)
    return str(endpoint.pk)


def granted_acquirers(account: Account, count: int, *, active: bool = True) -> list[Acquirer]:
    """``count`` acquirers granted to the account; the first three active unless told otherwise."""
    made: list[Acquirer] = [AcquirerFactory(key=f"acq{i:02d}") for i in range(count)]
    acquirer_grants_set(account=account, acquirers=made)
    if active:
        acquirer_slots_set(account=account, purpose=AcquirerSlot.Purpose.CASHIN, acquirers=made[:3])
    return made


def ok(response: Any, status: int = 200) -> dict[str, Any]:
    assert response.status_code == status, response.content
    body: dict[str, Any] = response.json()
    return body["data"]


# --------------------------------------------------------------------------- project


@pytest.mark.parametrize("size", SIZES)
def test_health(
    api: APIClient, account: Account, alpha: Acquirer, size: int, django_assert_max_num_queries: DjangoAssertNumQueries
) -> None:
    charges(account, size)
    client = APIClient()
    client.get("/api/health")
    with bounded(django_assert_max_num_queries, "GET /api/health", size):
        assert ok(client.get("/api/health")) == {"status": "ok"}


@pytest.mark.parametrize("size", SIZES)
def test_readiness(
    account: Account, alpha: Acquirer, size: int, settings: Any, django_assert_max_num_queries: DjangoAssertNumQueries
) -> None:
    from observability import heartbeat

    charges(account, size)
    settings.WORKER_HEARTBEAT_KEY = f"pix-test:workers:{uuid.uuid4().hex}"
    heartbeat.beat("worker@host")
    client = APIClient()
    try:
        client.get("/api/health/ready")
        with bounded(django_assert_max_num_queries, "GET /api/health/ready", size):
            assert ok(client.get("/api/health/ready")) == {"database": "ok", "broker": "ok", "worker": "ok"}
    finally:
        heartbeat.forget("worker@host")


# --------------------------------------------------------------------------- charges


@pytest.mark.parametrize("size", SIZES)
def test_charge_listing(
    api: APIClient, account: Account, alpha: Acquirer, size: int, django_assert_max_num_queries: DjangoAssertNumQueries
) -> None:
    charges(account, size)
    api.get("/api/withdrawals/balance")
    with bounded(django_assert_max_num_queries, "GET /api/transactions", size):
        data = ok(api.get("/api/transactions", {"per_page": 100}))
    assert len(data["transactions"]) == size


@pytest.mark.parametrize("size", SIZES)
def test_charge_detail(
    api: APIClient, account: Account, alpha: Acquirer, size: int, django_assert_max_num_queries: DjangoAssertNumQueries
) -> None:
    charge_id = charges(account, size)[0]
    api.get("/api/withdrawals/balance")
    with bounded(django_assert_max_num_queries, "GET /api/transactions/{id}", size):
        assert ok(api.get(f"/api/transactions/{charge_id}"))["id"] == charge_id


@pytest.mark.parametrize("size", SIZES)
def test_charge_qrcode(
    api: APIClient, account: Account, alpha: Acquirer, size: int, django_assert_max_num_queries: DjangoAssertNumQueries
) -> None:
    charge_id = charges(account, size)[0]
    api.get("/api/withdrawals/balance")
    with bounded(django_assert_max_num_queries, "GET /api/transactions/{id}/qrcode", size):
        response = api.get(f"/api/transactions/{charge_id}/qrcode")
    assert (response.status_code, response["Content-Type"]) == (200, "image/png")


@pytest.mark.parametrize("size", SIZES)
def test_charge_create(
    api: APIClient, account: Account, alpha: Acquirer, size: int, django_assert_max_num_queries: DjangoAssertNumQueries
) -> None:
    charges(account, size)
    api.get("/api/withdrawals/balance")
    with bounded(django_assert_max_num_queries, "POST /api/transactions", size):
        ok(api.post("/api/transactions", CHARGE, format="json"), 201)


# --------------------------------------------------------------------------- acquirers


@pytest.mark.parametrize("size", SIZES)
def test_acquirer_listing(
    api: APIClient, account: Account, size: int, django_assert_max_num_queries: DjangoAssertNumQueries
) -> None:
    granted_acquirers(account, size)
    api.get("/api/withdrawals/balance")
    with bounded(django_assert_max_num_queries, "GET /api/pix-cash-in/acquirers", size):
        data = ok(api.get("/api/pix-cash-in/acquirers"))
    assert len(data["acquirers"]) == size
    assert sum(entry["active_priority"] is not None for entry in data["acquirers"]) == min(size, 3)


@pytest.mark.parametrize("size", SIZES)
def test_acquirer_selection(
    api: APIClient, account: Account, size: int, django_assert_max_num_queries: DjangoAssertNumQueries
) -> None:
    made = granted_acquirers(account, size, active=False)
    chosen = list(reversed(made[-3:]))
    body = {"acquirers": [{"acquirer_key": a.key, "priority": p} for p, a in enumerate(chosen, start=1)]}
    api.get("/api/withdrawals/balance")
    with bounded(django_assert_max_num_queries, "PUT /api/pix-cash-in/acquirers", size):
        data = ok(api.put("/api/pix-cash-in/acquirers", body, format="json"))
    assert data["active_acquirers"]["primary"]["acquirer_key"] == chosen[0].key


# --------------------------------------------------------------------------- withdrawals


@pytest.mark.parametrize("size", SIZES)
def test_balance(
    api: APIClient, account: Account, size: int, django_assert_max_num_queries: DjangoAssertNumQueries
) -> None:
    withdrawals(account, size)
    api.get("/api/withdrawals")
    with bounded(django_assert_max_num_queries, "GET /api/withdrawals/balance", size):
        data = ok(api.get("/api/withdrawals/balance"))
    assert data["available_balance"] == 1_000_000 - sum(1000 + i for i in range(size))


@pytest.mark.parametrize("size", SIZES)
def test_withdrawal_listing(
    api: APIClient, account: Account, size: int, django_assert_max_num_queries: DjangoAssertNumQueries
) -> None:
    withdrawals(account, size)
    api.get("/api/withdrawals/balance")
    with bounded(django_assert_max_num_queries, "GET /api/withdrawals", size):
        data = ok(api.get("/api/withdrawals", {"per_page": 100}))
    assert len(data["withdrawals"]) == size


@pytest.mark.parametrize("size", SIZES)
def test_withdrawal_detail(
    api: APIClient, account: Account, size: int, django_assert_max_num_queries: DjangoAssertNumQueries
) -> None:
    withdrawal_id = withdrawals(account, size)[0]
    api.get("/api/withdrawals/balance")
    with bounded(django_assert_max_num_queries, "GET /api/withdrawals/{id}", size):
        assert ok(api.get(f"/api/withdrawals/{withdrawal_id}"))["id"] == withdrawal_id


@pytest.mark.parametrize("size", SIZES)
def test_withdrawal_request(
    api: APIClient, account: Account, size: int, django_assert_max_num_queries: DjangoAssertNumQueries
) -> None:
    withdrawals(account, size)
    api.get("/api/withdrawals/balance")
    with bounded(django_assert_max_num_queries, "POST /api/withdrawals", size):
        ok(api.post("/api/withdrawals", {"amount": 5000, "key_value": "52998224725"}, format="json"), 201)


# --------------------------------------------------------------------------- webhooks


@pytest.mark.parametrize("size", SIZES)
def test_webhook_listing(
    api: APIClient,
    account: Account,
    size: int,
    settings: Any,
    django_assert_max_num_queries: DjangoAssertNumQueries,
) -> None:
    # More endpoints than an account may have by default: the listing must
    # stay flat whatever the operator sets the limit to.
    settings.WEBHOOK_MAX_ENDPOINTS_PER_ACCOUNT = size
    for i in range(size):
        endpoint_create(account=account, url=f"https://example.com/hook/{i}")
    api.get("/api/withdrawals/balance")
    with bounded(django_assert_max_num_queries, "GET /api/webhooks", size):
        data = ok(api.get("/api/webhooks"))
    assert len(data["webhooks"]) == size


@pytest.mark.parametrize("size", SIZES)
def test_webhook_deliveries(
    api: APIClient, account: Account, size: int, django_assert_max_num_queries: DjangoAssertNumQueries
) -> None:
    endpoint_id = deliveries(account, size)
    api.get("/api/withdrawals/balance")
    with bounded(django_assert_max_num_queries, "GET /api/webhooks/{id}/deliveries", size):
        data = ok(api.get(f"/api/webhooks/{endpoint_id}/deliveries", {"per_page": 100}))
    assert len(data["deliveries"]) == size
    assert all(len(item["attempts"]) == ATTEMPTS_PER_DELIVERY for item in data["deliveries"])


# --------------------------------------------------------------------------- the table


def test_the_table_documents_the_bounds_in_force() -> None:
    rows = re.findall(r"^(GET|POST|PUT|DELETE) +(/api/\S+) +(\d+) +(\d+) ", __doc__ or "", re.MULTILINE)
    assert {f"{method} {path}": int(bound) for method, path, _, bound in rows} == BOUNDS
    assert all(int(bound) == int(measured) + 1 for _, _, measured, bound in rows)
