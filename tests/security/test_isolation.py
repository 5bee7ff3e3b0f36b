"""Tenant isolation (decisions §2): an account never reads, drives or changes
another account's records. Every API route that takes an id is walked with a
second account's credentials on the first account's ids; the walk is checked
against the URL resolver, so a new id-taking route without a walk step fails
here until it gets one."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from django.db import transaction
from django.db.models import QuerySet
from django.urls import URLPattern, URLResolver, get_resolver, resolve
from rest_framework.test import APIClient

from accounts.models import Account, AccountBalance, LedgerEntry
from accounts.services import credential_issue, ledger_post
from acquirers.models import Acquirer, AcquirerSlot
from acquirers.services import acquirer_grants_set, acquirer_slots_set
from due_charges.models import DueChargeBatch, DueChargeBatchItem
from infractions.models import DefenseAttachment, Infraction
from payments.due_models import DueCharge
from payments.due_payments import now_in_brazil
from payments.models import Charge, ChargeAttempt, ChargeRefund, ChargeTransition
from payments.sandbox import SANDBOX_EVENTS
from recurrences.cycles import cycle_send, cycles_open
from recurrences.models import Cycle, Recurrence
from tests.conftest import client_for
from tests.factories import AccountFactory, AcquirerFactory
from webhooks.models import WebhookAttempt, WebhookDelivery, WebhookEndpoint, WebhookEvent
from withdrawals.batch_apis import BATCH_NOT_FOUND as PAYOUT_BATCH_NOT_FOUND
from withdrawals.models import PayoutBatch, Withdrawal, WithdrawalStatus, WithdrawalTransition
from withdrawals.services import withdrawal_transition

CHARGE = {
    "payment_method": "pix",
    "amount": 1000,
    "buyer": {"buyer_name": "Fulano", "buyer_document": "52998224725", "buyer_phone": "11999998888"},
}
CHARGE_NOT_FOUND = "Transação não encontrada."
DUE_CHARGE_NOT_FOUND = "Cobrança com vencimento não encontrada."
WITHDRAWAL_NOT_FOUND = "Saque não encontrado."
ENDPOINT_NOT_FOUND = "Webhook não encontrado."
EVENT_NOT_FOUND = "Evento não encontrado."
INFRACTION_NOT_FOUND = "Infração não encontrada."
BATCH_NOT_FOUND = "Lote não encontrado."
RECURRENCE_NOT_FOUND = "Recorrência não encontrada."
HTTP_METHODS = ("get", "post", "put", "patch", "delete")

pytestmark = pytest.mark.django_db


@dataclass(frozen=True)
class Step:
    """One id-taking request: ``path`` has an ``{id}`` placeholder filled
    with the owner's record named ``target``; ``owner_status`` is what the
    owner itself gets, proving the id was live and the action possible."""

    method: str
    path: str
    target: str
    not_found: str
    owner_status: int
    #: A valid JSON body, for a route that checks its fields before the record.
    body: dict[str, Any] | None = None

    def __str__(self) -> str:
        return f"{self.method.upper()} {self.path}"


WALK = [
    Step("get", "/api/transactions/{id}", "charge", CHARGE_NOT_FOUND, 200),
    Step("get", "/api/transactions/{id}/qrcode", "charge", CHARGE_NOT_FOUND, 200),
    # Its refund is in progress (populate asked for it): the owner's second request is a 409.
    Step("post", "/api/transactions/{id}/refund", "paid_charge", CHARGE_NOT_FOUND, 409),
    Step("get", "/api/transactions/{id}/refund", "paid_charge", CHARGE_NOT_FOUND, 200),
    # Each sandbox action targets a charge in a status that allows it, so a
    # missing ownership check would show as a changed charge and ledger.
    Step("post", "/api/sandbox/transactions/{id}/pay", "charge", CHARGE_NOT_FOUND, 200),
    Step("post", "/api/sandbox/transactions/{id}/fail", "charge", CHARGE_NOT_FOUND, 200),
    Step("post", "/api/sandbox/transactions/{id}/refund", "paid_charge", CHARGE_NOT_FOUND, 200),
    Step("post", "/api/sandbox/transactions/{id}/chargeback", "paid_charge", CHARGE_NOT_FOUND, 200),
    Step("get", "/api/due-charges/{id}", "due_charge", DUE_CHARGE_NOT_FOUND, 200),
    Step("post", "/api/due-charges/{id}/cancel", "due_charge", DUE_CHARGE_NOT_FOUND, 200),
    # The sandbox's payer of due-date charges: its own charge, payable today (the walk cancels the other).
    Step("post", "/api/sandbox/due-charges/{id}/pay", "payable_due_charge", CHARGE_NOT_FOUND, 200, {}),
    Step("get", "/api/withdrawals/{id}", "withdrawal", WITHDRAWAL_NOT_FOUND, 200),
    Step("get", "/api/withdrawals/{id}/receipt", "paid_withdrawal", WITHDRAWAL_NOT_FOUND, 200),
    Step("get", "/api/withdrawals/{id}/receipt.pdf", "paid_withdrawal", WITHDRAWAL_NOT_FOUND, 200),
    Step("post", "/api/sandbox/withdrawals/{id}/return", "paid_withdrawal", WITHDRAWAL_NOT_FOUND, 200),
    Step("post", "/api/withdrawals/{id}/cancel", "scheduled_withdrawal", WITHDRAWAL_NOT_FOUND, 200),
    Step("delete", "/api/webhooks/{id}", "endpoint", ENDPOINT_NOT_FOUND, 200),
    Step("post", "/api/webhooks/{id}/rotate-secret", "endpoint", ENDPOINT_NOT_FOUND, 200),
    Step("get", "/api/webhooks/{id}/deliveries", "endpoint", ENDPOINT_NOT_FOUND, 200),
    Step("post", "/api/webhook-events/{id}/redeliver", "failed_event", EVENT_NOT_FOUND, 202),
    # The sandbox's MED drivers: the refund-asked charge takes an infraction
    # (its owner's control: 201), the open infraction each decision (200).
    Step("post", "/api/sandbox/transactions/{id}/infraction", "paid_charge", CHARGE_NOT_FOUND, 201),
    Step("post", "/api/sandbox/infractions/{id}/accept", "infraction", INFRACTION_NOT_FOUND, 200),
    Step("post", "/api/sandbox/infractions/{id}/reject", "infraction", INFRACTION_NOT_FOUND, 200),
    Step("post", "/api/sandbox/infractions/{id}/cancel", "infraction", INFRACTION_NOT_FOUND, 200),
    Step("get", "/api/infractions/{id}", "infraction", INFRACTION_NOT_FOUND, 200),
    Step("post", "/api/infractions/{id}/defense", "infraction", INFRACTION_NOT_FOUND, 201, body={"text": "Entregue."}),
    Step("get", "/api/due-charges/batches/{id}", "batch", BATCH_NOT_FOUND, 200),
    Step("get", "/api/due-charges/batches/{id}/items", "batch", BATCH_NOT_FOUND, 200),
    Step("get", "/api/due-charges/batches/{id}/items.csv", "batch", BATCH_NOT_FOUND, 200),
    Step("get", "/api/withdrawals/batches/{id}", "payout_batch", PAYOUT_BATCH_NOT_FOUND, 200),
    Step("get", "/api/withdrawals/batches/{id}/items", "payout_batch", PAYOUT_BATCH_NOT_FOUND, 200),
    Step("get", "/api/withdrawals/batches/{id}/items.csv", "payout_batch", PAYOUT_BATCH_NOT_FOUND, 200),
    # Pix Automático: "recurrence" awaits the payer's authorisation; "cycled_recurrence" is
    # authorised, its cycle 0 sent to the sandbox; "variable_recurrence" takes cycle amounts.
    Step("get", "/api/recurrences/{id}", "recurrence", RECURRENCE_NOT_FOUND, 200),
    Step("post", "/api/recurrences/{id}/cancel", "recurrence", RECURRENCE_NOT_FOUND, 200),
    Step("get", "/api/recurrences/{id}/cycles", "cycled_recurrence", RECURRENCE_NOT_FOUND, 200),
    Step("get", "/api/recurrences/{id}/cycles/0", "cycled_recurrence", RECURRENCE_NOT_FOUND, 200),
    Step(
        "put",
        "/api/recurrences/{id}/cycles/0/amount",
        "variable_recurrence",
        RECURRENCE_NOT_FOUND,
        200,
        {"amount": 1000},
    ),
    Step("post", "/api/sandbox/recurrences/{id}/approve", "recurrence", RECURRENCE_NOT_FOUND, 200, {}),
    Step("post", "/api/sandbox/recurrences/{id}/reject", "recurrence", RECURRENCE_NOT_FOUND, 200),
    Step("post", "/api/sandbox/recurrences/{id}/expire", "recurrence", RECURRENCE_NOT_FOUND, 200),
    Step("post", "/api/sandbox/recurrences/{id}/payer-cancel", "cycled_recurrence", RECURRENCE_NOT_FOUND, 200),
    Step("post", "/api/sandbox/recurrences/{id}/cycles/0/pay", "cycled_recurrence", RECURRENCE_NOT_FOUND, 200, {}),
    Step("post", "/api/sandbox/recurrences/{id}/cycles/0/fail", "cycled_recurrence", RECURRENCE_NOT_FOUND, 200, {}),
]

# (route, method) → why it is not walked with account credentials.
EXEMPT = {
    ("api/acquirers/<str:key>/notifications", "post"): (
        "an acquirer's callback: no account credentials, the adapter authenticates it, and the key names a "
        "platform acquirer, not an account's record"
    ),
    ("api/acquirers/<str:key>/notifications/<str:token>", "post"): (
        "an API Pix PSP's callback: no account credentials; the adapter checks the URL's secret token; key and "
        "token name a platform acquirer, not an account's record"
    ),
    ("api/acquirers/<str:key>/notifications/<str:token>/pix", "post"): (
        "the same callback: API Pix PSPs append /pix to the registered URL"
    ),
    ("api/acquirers/<str:key>/notifications/<str:token>/rec", "post"): (
        "the same callback for Pix Automático's recurrences (the PSP appends /rec); a wake-up read at the PSP"
    ),
    ("api/acquirers/<str:key>/notifications/<str:token>/cobr", "post"): (
        "the same callback for Pix Automático's cycles (the PSP appends /cobr); a wake-up read at the PSP"
    ),
}


@dataclass(frozen=True)
class Tenant:
    account: Account
    client: APIClient
    ids: dict[str, str]


def create_due_charge(client: APIClient) -> str:
    due_date = (dt.date.today() + dt.timedelta(days=10)).isoformat()
    body = {"amount": 1000, "due_date": due_date, "debtor": {"name": "Fulano", "document": "52998224725"}}
    response = client.post("/api/due-charges", body, format="json")
    assert response.status_code == 201, response.json()
    charge_id: str = response.json()["data"]["id"]
    return charge_id


def create_charge(client: APIClient) -> str:
    response = client.post("/api/transactions", CHARGE, format="json")
    assert response.status_code == 201, response.json()
    charge_id: str = response.json()["data"]["id"]
    return charge_id


def pay(client: APIClient, charge_id: str) -> None:
    response = client.post(f"/api/sandbox/transactions/{charge_id}/pay")
    assert response.status_code == 200, response.json()


def request_withdrawal(client: APIClient) -> str:
    response = client.post("/api/withdrawals", {"amount": 5000, "key_value": "52998224725"}, format="json")
    assert response.status_code == 201, response.json()
    withdrawal_id: str = response.json()["data"]["id"]
    return withdrawal_id


def schedule_withdrawal(client: APIClient) -> str:
    tomorrow = (now_in_brazil() + dt.timedelta(days=1)).isoformat()
    body = {"amount": 5000, "key_value": "52998224725", "scheduled_for": tomorrow}
    response = client.post("/api/withdrawals", body, format="json")
    assert response.status_code == 201, response.json()
    withdrawal_id: str = response.json()["data"]["id"]
    return withdrawal_id


def register_endpoint(client: APIClient) -> str:
    response = client.post("/api/webhooks", {"url": "https://example.com/hook"}, format="json")
    assert response.status_code == 201, response.json()
    endpoint_id: str = response.json()["data"]["id"]
    return endpoint_id


def seed_balance(account: Account, amount: int) -> None:
    with transaction.atomic():
        ledger_post(
            account_id=account.pk, amount=amount, kind=LedgerEntry.Kind.CHARGE_PAID, reference=f"seed:{account.pk}"
        )


def open_infraction(client: APIClient) -> Infraction:
    """A paid charge its (sandbox) acquirer reports a MED infraction on, with a block."""
    charge_id = create_charge(client)
    pay(client, charge_id)
    opened = client.post(f"/api/sandbox/transactions/{charge_id}/infraction")
    assert opened.status_code == 201, opened.json()
    return Infraction.objects.get(pk=opened.json()["data"]["id"])


def create_batch(client: APIClient) -> str:
    """A batch of one due-date charge (stored; no worker creates it here)."""
    due_date = (dt.date.today() + dt.timedelta(days=30)).isoformat()
    charge = {"amount": 15000, "due_date": due_date, "debtor": {"name": "Fulano", "document": "52998224725"}}
    response = client.post("/api/due-charges/batches", {"items": [charge]}, format="json")
    assert response.status_code == 202, response.json()
    batch_id: str = response.json()["data"]["id"]
    return batch_id


def create_payout_batch(client: APIClient) -> str:
    """A batch of one payout (debited; no worker sends it here)."""
    body = {"items": [{"amount": 5000, "key_value": "52998224725", "external_id": "iso-1"}]}
    response = client.post("/api/withdrawals/batches", body, format="json")
    assert response.status_code == 201, response.json()
    batch_id: str = response.json()["data"]["id"]
    return batch_id


def create_recurrence(client: APIClient, contract: str, *, due_in: int = 20, **changes: Any) -> str:
    """A monthly QR-journey recurrence of R$ 49,90 (or ``changes``) for contract ``contract``."""
    first_due = (now_in_brazil() + dt.timedelta(days=due_in)).isoformat()
    body = {
        "debtor": {"document": "52998224725", "name": "Fulano"},
        "contract": contract,
        "amount": 4990,
        "periodicity": "monthly",
        "first_due_date": first_due,
        "retry_policy": "3_in_7_days",
        "journey": "qr",
        **changes,
    }
    response = client.post("/api/recurrences", {k: v for k, v in body.items() if v is not None}, format="json")
    assert response.status_code == 201, response.json()
    recurrence_id: str = response.json()["data"]["id"]
    return recurrence_id


def cycled_recurrence(client: APIClient) -> str:
    """A recurrence the payer authorised, its first cycle sent to the sandbox (its charge pending)."""
    recurrence_id = create_recurrence(client, "ISO-CYCLED", due_in=5)
    approved = client.post(f"/api/sandbox/recurrences/{recurrence_id}/approve", {}, format="json")
    assert approved.status_code == 200, approved.json()
    cycles_open(recurrence_id=recurrence_id, today=now_in_brazil())
    cycle = Cycle.objects.get(recurrence_id=recurrence_id, index=0)
    assert cycle_send(cycle_id=cycle.pk, today=now_in_brazil()) == "active"
    return recurrence_id


def populate(account: Account) -> Tenant:
    """An account with an endpoint, a pending and a paid charge (its refund asked), a pending and
    a paid withdrawal, a webhook event whose delivery failed for good, and a MED infraction on a
    charge of its own."""
    client = client_for(credential_issue(account=account))
    endpoint = register_endpoint(client)  # first, so every status change writes a delivery to it
    seed_balance(account, 100_000)
    charge = create_charge(client)
    due_charge = create_due_charge(client)
    paid_charge = create_charge(client)
    pay(client, paid_charge)
    asked = client.post(f"/api/transactions/{paid_charge}/refund")
    assert asked.status_code == 202, asked.json()
    withdrawal = request_withdrawal(client)
    paid_withdrawal = request_withdrawal(client)
    scheduled_withdrawal = schedule_withdrawal(client)
    # Sent through the sandbox acquirer that took the charges, as the payout chain would.
    Withdrawal.objects.filter(pk=paid_withdrawal).update(acquirer=Charge.objects.get(pk=paid_charge).acquirer)
    withdrawal_transition(
        withdrawal_id=paid_withdrawal, to_status=WithdrawalStatus.APPROVED, source=WithdrawalTransition.Source.SYSTEM
    )
    withdrawal_transition(
        withdrawal_id=paid_withdrawal,
        to_status=WithdrawalStatus.PAID,
        source=WithdrawalTransition.Source.SYSTEM,
        e2e_id=f"E{uuid.uuid4().hex}"[:32],
    )
    infraction = open_infraction(client)
    batch = create_batch(client)
    payout_batch = create_payout_batch(client)
    payable_due_charge = create_due_charge(client)
    recurrence = create_recurrence(client, "ISO-CREATED")
    variable_recurrence = create_recurrence(client, "ISO-VARIABLE", amount=None, max_amount=50000)
    cycled = cycled_recurrence(client)
    event = WebhookEvent.objects.get(account=account, record_id=paid_charge, status="paid")
    WebhookDelivery.objects.filter(event=event).update(status=WebhookDelivery.Status.FAILED, next_attempt_at=None)
    ids = {
        "charge": charge,
        "due_charge": due_charge,
        "paid_charge": paid_charge,
        "withdrawal": withdrawal,
        "paid_withdrawal": paid_withdrawal,
        "scheduled_withdrawal": scheduled_withdrawal,
        "endpoint": endpoint,
        "failed_event": str(event.pk),
        "med_charge": str(infraction.charge_id),
        "infraction": str(infraction.pk),
        "batch": batch,
        "payout_batch": payout_batch,
        "payable_due_charge": payable_due_charge,
        "recurrence": recurrence,
        "variable_recurrence": variable_recurrence,
        "cycled_recurrence": cycled,
    }
    return Tenant(account=account, client=client, ids=ids)


@pytest.fixture
def alpha(db: Any) -> Acquirer:
    return AcquirerFactory(key="alpha", default_priority=1)


@pytest.fixture
def tenant_a(alpha: Acquirer) -> Tenant:
    return populate(AccountFactory(name="Loja A Ltda"))


@pytest.fixture
def tenant_b(alpha: Acquirer) -> Tenant:
    """Approved, acquirer selection on, a full credential: nothing but
    ownership stands between it and another account's records."""
    return populate(AccountFactory(name="Loja B Ltda", can_select_pix_cash_in_acquirer=True))


def snapshot(account: Account) -> dict[str, list[dict[str, Any]]]:
    """Every row of every table that belongs to ``account``, in full."""
    tables: dict[str, QuerySet[Any]] = {
        "account": Account.objects.filter(pk=account.pk),
        "balance": AccountBalance.objects.filter(account=account),
        "ledger": LedgerEntry.objects.filter(account=account),
        "charges": Charge.objects.filter(account=account),
        "due_charges": DueCharge.objects.filter(charge__account=account),
        "charge_attempts": ChargeAttempt.objects.filter(account=account),
        "charge_transitions": ChargeTransition.objects.filter(charge__account=account),
        "charge_refunds": ChargeRefund.objects.filter(charge__account=account),
        "withdrawals": Withdrawal.objects.filter(account=account),
        "withdrawal_transitions": WithdrawalTransition.objects.filter(withdrawal__account=account),
        "endpoints": WebhookEndpoint.objects.filter(account=account),
        "events": WebhookEvent.objects.filter(account=account),
        "deliveries": WebhookDelivery.objects.filter(event__account=account),
        "attempts": WebhookAttempt.objects.filter(delivery__event__account=account),
        "slots": AcquirerSlot.objects.filter(account=account),
        "infractions": Infraction.objects.filter(account=account),
        "defense_attachments": DefenseAttachment.objects.filter(infraction__account=account),
        "due_charge_batches": DueChargeBatch.objects.filter(account=account),
        "due_charge_batch_items": DueChargeBatchItem.objects.filter(batch__account=account),
        "payout_batches": PayoutBatch.objects.filter(account=account),
        "recurrences": Recurrence.objects.filter(account=account),
        "cycles": Cycle.objects.filter(recurrence__account=account),
    }
    return {name: list(rows.order_by("pk").values()) for name, rows in tables.items()}


def call(client: APIClient, step: Step, record_id: str) -> Any:
    if step.body is not None:
        return getattr(client, step.method)(step.path.format(id=record_id), step.body, format="json")
    return getattr(client, step.method)(step.path.format(id=record_id))


def listed(client: APIClient, path: str, collection: str, **params: Any) -> list[str]:
    response = client.get(path, params)
    assert response.status_code == 200, response.json()
    return [item["id"] for item in response.json()["data"][collection]]


# --------------------------------------------------------------------------- id routes


@pytest.mark.parametrize("step", WALK, ids=str)
def test_another_accounts_id_is_404_and_changes_nothing(tenant_a: Tenant, tenant_b: Tenant, step: Step) -> None:
    record_id = tenant_a.ids[step.target]
    a_before, b_before = snapshot(tenant_a.account), snapshot(tenant_b.account)

    for spelling in (record_id, record_id.upper()):
        response = call(tenant_b.client, step, spelling)
        assert response.status_code == 404, (spelling, response.content)
        assert response.json() == {"success": False, "message": step.not_found, "data": None}

    assert snapshot(tenant_a.account) == a_before
    assert snapshot(tenant_b.account) == b_before
    # Control: the id was live and the action possible for its owner.
    assert call(tenant_a.client, step, record_id).status_code == step.owner_status


def api_routes(patterns: list[URLPattern | URLResolver], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(full route, callback) of every pattern, joined as Django's resolver
    joins them (a nested regex loses its leading ``^``)."""
    for pattern in patterns:
        part = str(pattern.pattern)
        route = prefix + part.removeprefix("^") if prefix else part
        if isinstance(pattern, URLResolver):
            yield from api_routes(pattern.url_patterns, route)
        else:
            yield route, pattern.callback


def id_routes() -> set[tuple[str, str]]:
    """(route, method) of every API route with a path parameter, for each
    HTTP method its view implements."""
    found = set()
    for route, callback in api_routes(get_resolver().url_patterns):
        if not route.startswith("api/") or not ("<" in route or "(?P<" in route):
            continue
        view_class = getattr(callback, "view_class", None) or getattr(callback, "cls", None)
        assert view_class is not None, f"{route}: a function view; walk it by hand and list it here"
        found |= {(route, method) for method in HTTP_METHODS if hasattr(view_class, method)}
    return found


def test_every_id_taking_api_route_is_walked() -> None:
    walked = {(resolve(step.path.format(id=uuid.uuid4())).route, step.method) for step in WALK}
    routes = id_routes()

    assert set(EXEMPT) <= routes, "an exemption names a route that no longer exists"
    assert walked <= routes, "a walk step does not reach an id-taking route"
    assert routes - set(EXEMPT) - walked == set(), "id-taking routes without an isolation walk step"
    sandbox_actions = {
        step.path.rsplit("/", 1)[1]
        for step in WALK
        if step.path.startswith("/api/sandbox/transactions/") and not step.path.endswith("/infraction")
    }
    assert sandbox_actions == set(SANDBOX_EVENTS)


# --------------------------------------------------------------------------- listings and balance


def test_listings_never_show_another_accounts_records(tenant_a: Tenant, tenant_b: Tenant) -> None:
    a, b = tenant_a.ids, tenant_b.ids
    b_client = tenant_b.client
    a_paid = Charge.objects.get(pk=a["paid_charge"])
    a_paid_withdrawal = Withdrawal.objects.get(pk=a["paid_withdrawal"])
    a_before = snapshot(tenant_a.account)

    for charge_id in (a["charge"], a["paid_charge"], a["due_charge"]):
        assert listed(b_client, "/api/transactions", "transactions", id=charge_id) == []
    assert listed(b_client, "/api/transactions", "transactions", e2e_id=a_paid.e2e_id) == []
    assert set(listed(b_client, "/api/transactions", "transactions", per_page=100)) == {
        b["charge"],
        b["due_charge"],  # a due-date charge is a charge too
        b["paid_charge"],
        b["med_charge"],
        b["payable_due_charge"],
        str(Cycle.objects.get(recurrence_id=b["cycled_recurrence"], index=0).charge_id),  # a cycle's money
    }
    own_recurrences = {b["recurrence"], b["variable_recurrence"], b["cycled_recurrence"]}
    assert set(listed(b_client, "/api/recurrences", "recurrences", per_page=100)) == own_recurrences
    assert set(listed(b_client, "/api/recurrences", "recurrences", debtor_document="52998224725")) == own_recurrences
    assert listed(b_client, "/api/recurrences", "recurrences", contract="ISO-CREATED") == [b["recurrence"]]
    a_due = Charge.objects.get(pk=a["due_charge"])
    assert listed(b_client, "/api/due-charges", "due_charges", txid=a_due.txid) == []
    own_due = {b["due_charge"], b["payable_due_charge"]}
    assert set(listed(b_client, "/api/due-charges", "due_charges", document=a_due.buyer_document)) == own_due
    assert set(listed(b_client, "/api/due-charges", "due_charges", per_page=100)) == own_due
    assert listed(b_client, "/api/infractions", "infractions", transaction_id=a["med_charge"]) == []
    assert listed(b_client, "/api/infractions", "infractions", per_page=100) == [b["infraction"]]

    for withdrawal_id in (a["withdrawal"], a["paid_withdrawal"], a["scheduled_withdrawal"]):
        assert listed(b_client, "/api/withdrawals", "withdrawals", id=withdrawal_id) == []
    assert listed(b_client, "/api/withdrawals", "withdrawals", e2e_id=a_paid_withdrawal.e2e_id) == []
    b_batch_item = str(Withdrawal.objects.get(batch_id=uuid.UUID(b["payout_batch"])).pk)
    assert set(listed(b_client, "/api/withdrawals", "withdrawals", per_page=100)) == {
        b["withdrawal"],
        b["paid_withdrawal"],
        b["scheduled_withdrawal"],
        b_batch_item,  # a batch's payout is a withdrawal too
    }
    assert listed(b_client, "/api/withdrawals/batches", "batches", per_page=100) == [b["payout_batch"]]

    assert listed(b_client, "/api/webhooks", "webhooks") == [b["endpoint"]]
    deliveries = b_client.get(f"/api/webhooks/{b['endpoint']}/deliveries", {"per_page": 100}).json()["data"]
    b_events = {str(pk) for pk in WebhookEvent.objects.filter(account=tenant_b.account).values_list("pk", flat=True)}
    assert deliveries["deliveries"]
    assert {d["event_id"] for d in deliveries["deliveries"]} <= b_events

    assert snapshot(tenant_a.account) == a_before


def balance_of(client: APIClient) -> int:
    response = client.get("/api/withdrawals/balance")
    assert response.status_code == 200
    available: int = response.json()["data"]["available_balance"]
    return available


def test_balance_is_the_callers_own(tenant_a: Tenant, tenant_b: Tenant) -> None:
    a_balance, b_balance = balance_of(tenant_a.client), balance_of(tenant_b.client)
    b_ledger = snapshot(tenant_b.account)["ledger"]

    # A's money moves: a charge paid (1000) and a credit posted (7000).
    pay(tenant_a.client, tenant_a.ids["charge"])
    with transaction.atomic():
        ledger_post(
            account_id=tenant_a.account.pk, amount=7_000, kind=LedgerEntry.Kind.CHARGE_PAID, reference="extra:a"
        )

    assert balance_of(tenant_a.client) == a_balance + 8_000
    assert balance_of(tenant_b.client) == b_balance
    assert AccountBalance.objects.get(account=tenant_b.account).available == b_balance
    assert snapshot(tenant_b.account)["ledger"] == b_ledger


# --------------------------------------------------------------------------- acquirers


def test_acquirer_selection_is_per_account(tenant_a: Tenant, tenant_b: Tenant, alpha: Acquirer) -> None:
    beta = AcquirerFactory(key="beta")
    Account.objects.filter(pk=tenant_a.account.pk).update(can_select_pix_cash_in_acquirer=True)
    acquirer_grants_set(account=tenant_a.account, acquirers=[alpha, beta])
    acquirer_slots_set(account=tenant_a.account, purpose=AcquirerSlot.Purpose.CASHIN, acquirers=[beta, alpha])
    a_before = snapshot(tenant_a.account)

    listing = tenant_b.client.get("/api/pix-cash-in/acquirers")
    assert listing.status_code == 200
    assert listing.json()["data"] == {
        "acquirers": [],
        "active_acquirers": {"primary": None, "secondary": None, "tertiary": None},
    }
    # A's grants are not B's: B can neither select them nor charge through them.
    chosen = tenant_b.client.put("/api/pix-cash-in/acquirers", {"acquirer_key": "beta"}, format="json")
    assert chosen.status_code == 422
    assert chosen.json()["data"] == {"errors": {"acquirers": ["Adquirente indisponível para seleção nesta conta."]}}
    charged = tenant_b.client.post("/api/transactions", {**CHARGE, "acquirer_key": "beta"}, format="json")
    assert charged.status_code == 422
    assert not AcquirerSlot.objects.filter(account=tenant_b.account).exists()
    assert snapshot(tenant_a.account) == a_before


# --------------------------------------------------------------------------- idempotency


@pytest.mark.parametrize(
    ("path", "body"),
    [("/api/transactions", CHARGE), ("/api/withdrawals", {"amount": 5000, "key_value": "52998224725"})],
    ids=["transactions", "withdrawals"],
)
def test_an_idempotency_key_never_replays_another_accounts_response(
    tenant_a: Tenant, tenant_b: Tenant, path: str, body: dict[str, Any]
) -> None:
    first = tenant_a.client.post(path, body, format="json", HTTP_IDEMPOTENCY_KEY="order-42")
    assert first.status_code == 201
    a_before = snapshot(tenant_a.account)

    same_key = tenant_b.client.post(path, body, format="json", HTTP_IDEMPOTENCY_KEY="order-42")

    assert same_key.status_code == 201
    assert "Idempotent-Replayed" not in same_key
    assert same_key.json()["data"]["id"] != first.json()["data"]["id"]
    assert snapshot(tenant_a.account) == a_before
