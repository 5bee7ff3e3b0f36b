"""POST /api/withdrawals/batches as a client sees it (docs/api/payout-batches.md):
a batch is accepted or refused as a whole; accepted, every item is a
withdrawal debited with its own ledger entry, in one transaction under the
balance lock; refused (422 per item, 400 per rule), nothing changed; the
Idempotency-Key replays; progress, items and CSV read back."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from rest_framework.test import APIClient

from accounts.models import Account, AccountBalance, LedgerEntry
from accounts.selectors import available_balance, ledger_sum
from accounts.services import credential_issue, ledger_post
from tests.conftest import client_for
from tests.factories import AccountFactory
from tests.helpers import admin_action, admin_messages
from tests.withdrawals.conftest import snapshot
from withdrawals import batches
from withdrawals import exceptions as err
from withdrawals.models import PayoutBatch, Withdrawal, WithdrawalStatus

pytestmark = pytest.mark.django_db

URL = "/api/withdrawals/batches"
CPF = "52998224725"
VALIDATION = "Erro de validação nos dados fornecidos"


@pytest.fixture
def enqueued(monkeypatch: pytest.MonkeyPatch) -> list[list[Any]]:
    """The items handed to the payout engine, recorded instead of sent."""
    calls: list[list[Any]] = []
    monkeypatch.setattr(batches, "_enqueue_items", lambda ids: calls.append(list(ids)))
    return calls


@pytest.fixture
def account(db: Any) -> Account:
    account = AccountFactory(withdrawal_fee_fixed=100, withdrawal_fee_bps=0)
    with transaction.atomic():
        ledger_post(account_id=account.pk, amount=100_000, kind=LedgerEntry.Kind.CHARGE_PAID, reference="seed:b")
    return account


@pytest.fixture
def client(account: Account) -> APIClient:
    return client_for(credential_issue(account=account))


def item(amount: int = 5000, **changes: Any) -> dict[str, Any]:
    return {"amount": amount, "key_type": "cpf", "key_value": CPF, **changes}


def test_a_batch_is_debited_item_by_item_in_one_go(
    client: APIClient, account: Account, enqueued: list[list[Any]], django_capture_on_commit_callbacks: Any
) -> None:
    body = {
        "description": "Comissões",
        "items": [
            item(5000, external_id="a-1"),
            item(2000, discount_fee=False, external_id="a-2"),
            item(1500, key_type="email", key_value="Fin@Loja.example.com"),
        ],
    }
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(URL, body, format="json")
    assert response.status_code == 201, response.content
    data = response.json()["data"]
    assert response.json()["message"] == "Lote de saques recebido."
    assert data["status"] == "processing"
    assert (data["item_count"], data["total_amount"], data["total_debit"]) == (3, 8500, 8600)
    assert data["counts"] == {**dict.fromkeys(WithdrawalStatus.values, 0), "pending": 3, "total": 3}
    assert data["amounts"]["pending"] == 8500
    items = list(Withdrawal.objects.filter(batch_id=data["id"]).order_by("batch_index"))
    assert [(w.batch_index, w.amount, w.total_debit, w.external_id) for w in items] == [
        (0, 5000, 5000, "a-1"),
        (1, 2000, 2100, "a-2"),
        (2, 1500, 1500, ""),
    ]
    assert items[2].pix_key == "fin@loja.example.com"
    # Each item its own debit, as a single withdrawal's; balance = ledger.
    entries = list(LedgerEntry.objects.filter(account=account, kind="withdrawal").order_by("id"))
    assert [(e.amount, e.reference, e.balance_after) for e in entries] == [
        (-5000, f"withdrawal:{items[0].pk}", 95_000),
        (-2100, f"withdrawal:{items[1].pk}", 92_900),
        (-1500, f"withdrawal:{items[2].pk}", 91_400),
    ]
    assert available_balance(account) == ledger_sum(account) == 91_400
    assert AccountBalance.objects.get(account=account).withdrawn_on_day == 8500
    # Every item handed to the payout engine once committed.
    assert enqueued == [[w.pk for w in items]]
    # No webhook at creation (as a single withdrawal's), none for the batch yet.
    read = client.get(f"{URL}/{data['id']}").json()["data"]
    assert read == data


def test_a_batch_debits_in_a_few_statements(client: APIClient, account: Account, enqueued: list[list[Any]]) -> None:
    """1,000 items: the statements do not grow with the batch (bulk inserts)."""
    Account.objects.filter(pk=account.pk).update(withdrawal_daily_limit=10_000_000)
    with transaction.atomic():
        ledger_post(account_id=account.pk, amount=1_000_000, kind=LedgerEntry.Kind.CHARGE_PAID, reference="seed:big")
    body = {"items": [item(1000, external_id=f"n{n}") for n in range(1000)]}
    with CaptureQueriesContext(connection) as queries:
        response = client.post(URL, body, format="json")
    assert response.status_code == 201, response.content
    assert Withdrawal.objects.filter(batch_id=response.json()["data"]["id"]).count() == 1000
    assert len(queries) < 40, [q["sql"][:80] for q in queries]
    assert available_balance(account) == ledger_sum(account) == 100_000


def test_a_batch_of_1000_with_the_longest_fields_is_not_too_large(
    client: APIClient, account: Account, enqueued: list[list[Any]]
) -> None:
    """The body limit of /api/ (256 KiB) would refuse it with a 413: the route takes more."""
    Account.objects.filter(pk=account.pk).update(withdrawal_daily_limit=10_000_000)
    with transaction.atomic():
        ledger_post(account_id=account.pk, amount=1_000_000, kind=LedgerEntry.Kind.CHARGE_PAID, reference="seed:long")
    key = "f" * 65 + "@example.com"  # 77 characters, the longest key
    longest = {"key_type": "email", "key_value": key, "discount_fee": True, "payee_document": "11.222.333/0001-81"}
    body = {"items": [item(1000, **longest, external_id=f"{n:064d}") for n in range(1000)]}
    assert len(json.dumps(body, separators=(",", ":"))) > 256 * 1024

    response = client.post(URL, body, format="json")

    assert response.status_code == 201, response.content[:200]
    assert Withdrawal.objects.filter(batch_id=response.json()["data"]["id"]).count() == 1000


def test_invalid_items_refuse_the_whole_batch_each_with_its_errors(
    client: APIClient, account: Account, enqueued: list[list[Any]]
) -> None:
    before = snapshot(account)
    body = {
        "items": [
            item(),
            item(key_value="123"),
            item(500),
            "x",
            item(scheduled_for="2030-01-02"),
            item(payee_document="111"),
        ]
    }
    response = client.post(URL, body, format="json")
    assert response.status_code == 422, response.content
    assert response.json()["data"]["errors"] == {
        "items.1.key_value": ["Chave PIX inválida para o tipo informado."],
        "items.2.amount": ["O valor mínimo para saque é de R$ 10,00."],
        "items.3": ["Cada saque do lote deve ser um objeto JSON."],
        "items.4.scheduled_for": ["Saques de um lote não podem ser agendados."],
        "items.5.payee_document": ["CPF/CNPJ do recebedor inválido."],
    }
    assert snapshot(account) == before
    assert PayoutBatch.objects.count() == 0
    assert enqueued == []


@pytest.mark.parametrize(
    ("body", "errors"),
    [
        ({}, {"items": ["Informe a lista de saques em items."]}),
        ({"items": {}}, {"items": ["items deve ser uma lista de saques."]}),
        ({"items": []}, {"items": ["O lote deve ter ao menos um saque."]}),
        ({"items": [item()] * 1001}, {"items": ["O lote pode ter no máximo 1000 saques."]}),
    ],
)
def test_a_batch_without_items_is_a_422(
    client: APIClient, account: Account, body: dict[str, Any], errors: dict[str, list[str]]
) -> None:
    before = snapshot(account)
    response = client.post(URL, body, format="json")
    assert response.status_code == 422, response.content
    assert response.json()["data"]["errors"] == errors
    assert snapshot(account) == before


@pytest.mark.parametrize(
    ("change", "items", "message"),
    [
        (
            {"withdrawal_per_request_limit": 4000},
            [item(3000), item(4001)],
            "Item 1: O valor excede o limite por solicitação de saque.",
        ),
        ({"withdrawal_daily_limit": 9000}, [item(5000), item(4001)], "O valor excede o limite diário de saques."),
        ({}, [item(50_000), item(50_001)], "Saldo insuficiente para realizar o saque."),
    ],
)
def test_a_business_rule_refuses_the_whole_batch(
    client: APIClient,
    account: Account,
    enqueued: list[list[Any]],
    change: dict[str, int],
    items: list[dict[str, Any]],
    message: str,
) -> None:
    Account.objects.filter(pk=account.pk).update(**change)
    before = snapshot(account)
    response = client.post(URL, {"items": items}, format="json")
    assert response.status_code == 400, response.content
    assert response.json() == {"success": False, "message": message, "data": None}
    assert snapshot(account) == before
    assert PayoutBatch.objects.count() == 0
    assert enqueued == []


OTHER_CPF = "11144477735"


@pytest.mark.parametrize(
    ("same_ownership_only", "bad_item", "message"),
    [
        # Only the holder's own keys, and this CPF key is another person's.
        (True, item(2000, key_type="cnpj", key_value="11222333000181", payee_document="11222333000181"), None),
        (True, item(2000, key_type="cpf", key_value=OTHER_CPF), err.SAME_OWNERSHIP_ONLY),
        # A CPF key is owned by that CPF: not the item's payee_document, never will be.
        (False, item(2000, payee_document=OTHER_CPF), err.KEY_NOT_PAYEE),
    ],
)
def test_an_item_the_payee_check_refuses_at_request_refuses_the_batch(
    client: APIClient,
    account: Account,
    enqueued: list[list[Any]],
    same_ownership_only: bool,
    bad_item: dict[str, Any],
    message: str | None,
) -> None:
    """As a single withdrawal's (decisions, the payee check): a 400 naming the
    item, before the balance lock, no lookup, nothing debited or stored."""
    Account.objects.filter(pk=account.pk).update(
        payouts_same_ownership_only=same_ownership_only, document="11222333000181"
    )
    own = item(1000, key_type="cnpj", key_value="11.222.333/0001-81")
    before = snapshot(account)
    response = client.post(URL, {"items": [own, bad_item]}, format="json")
    if message is None:  # the holder's own document: accepted, as a single withdrawal
        assert response.status_code == 201, response.content
        return
    assert response.status_code == 400, response.content
    assert response.json() == {"success": False, "message": f"Item 1: {message}", "data": None}
    assert snapshot(account) == before
    assert PayoutBatch.objects.count() == 0
    assert enqueued == []


def test_the_idempotency_key_replays_the_batch(client: APIClient, account: Account, enqueued: list[list[Any]]) -> None:
    body = {"items": [item(), item(2000)]}
    first = client.post(URL, body, format="json", HTTP_IDEMPOTENCY_KEY="lote-1")
    after = snapshot(account)
    again = client.post(URL, body, format="json", HTTP_IDEMPOTENCY_KEY="lote-1")
    assert first.status_code == again.status_code == 201
    assert again.json() == first.json()
    assert snapshot(account) == after
    assert PayoutBatch.objects.count() == 1


def test_items_listing_csv_and_listing_of_batches(
    client: APIClient, account: Account, enqueued: list[list[Any]]
) -> None:
    batch_id = client.post(URL, {"items": [item(external_id="x-1"), item(2000)]}, format="json").json()["data"]["id"]
    first = Withdrawal.objects.get(batch_id=batch_id, batch_index=0)
    listed = client.get(f"{URL}/{batch_id}/items").json()["data"]
    assert [w["external_id"] for w in listed["withdrawals"]] == ["x-1", ""]
    assert listed["withdrawals"][0]["batch_id"] == batch_id
    assert listed["pagination"]["total"] == 2
    csv = client.get(f"{URL}/{batch_id}/items.csv")
    assert csv.status_code == 200
    rows = [line.split(";") for line in csv.content.decode("utf-8-sig").splitlines()]
    assert rows[0][:4] == ["batch_index", "external_id", "id", "amount"]
    assert rows[1][:5] == ["0", "x-1", str(first.pk), "5000", "100"]
    assert rows[1][8] == "pending"
    batches_page = client.get(URL).json()["data"]
    assert [b["id"] for b in batches_page["batches"]] == [batch_id]
    assert batches_page["batches"][0]["counts"]["pending"] == 2


def test_another_accounts_batch_is_a_404(client: APIClient, enqueued: list[list[Any]]) -> None:
    batch_id = client.post(URL, {"items": [item()]}, format="json").json()["data"]["id"]
    other = client_for(credential_issue(account=AccountFactory()))
    for path in ("", "/items", "/items.csv"):
        response = other.get(f"{URL}/{batch_id}{path}")
        assert response.status_code == 404
        assert response.json()["message"] == "Lote de saques não encontrado."
    assert other.get(URL).json()["data"]["batches"] == []
    assert client.get(f"{URL}/{uuid.uuid4()}").status_code == 404


def test_staff_approve_a_batch_from_the_back_office_once(
    account: Account, enqueued: list[list[Any]], staff_member: Any, django_capture_on_commit_callbacks: Any
) -> None:
    Account.objects.filter(pk=account.pk).update(withdrawals_need_approval=True)
    account.refresh_from_db()
    batch = batches.payout_batch_create(account=account, items=[item(), item(2000)])
    changelist = reverse("admin:withdrawals_payoutbatch_changelist")
    operations = staff_member("operations", "carla")
    listing = operations.get(changelist)
    assert listing.status_code == 200
    assert "Aguardando aprovação" in listing.content.decode()
    page = operations.get(reverse("admin:withdrawals_payoutbatch_change", args=[batch.pk]))
    assert "Aprovar lote de saques" in page.content.decode()
    # The list's POST only shows the confirmation page: nothing moves yet.
    confirm = admin_action(operations, changelist, "approve_batch", [batch.pk])
    assert "confirmar" in confirm.content.decode()
    assert set(batch.items.values_list("status", flat=True)) == {"pending"}
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        done = admin_action(operations, changelist, "approve_batch", [batch.pk], reason="conferido com o cliente")
    assert admin_messages(done) == [f"Lote {batch.pk} aprovado: 2 saques."]
    assert set(batch.items.values_list("status", flat=True)) == {"approved"}
    assert len(callbacks) >= 2  # each item's payout handed over on commit
    batch.refresh_from_db()
    assert (batch.status, batch.decided_by) == (PayoutBatch.Status.PROCESSING, "carla")
    # Finance sees batches but may not decide on them: a batch still awaiting stays so.
    waiting = batches.payout_batch_create(account=account, items=[item(1500)])
    finance = staff_member("finance", "fabio")
    refused = admin_action(finance, changelist, "refuse_batch", [waiting.pk], reason="tentativa")
    assert refused.status_code in (200, 403)
    waiting.refresh_from_db()
    assert waiting.status == PayoutBatch.Status.AWAITING_APPROVAL
    assert set(waiting.items.values_list("status", flat=True)) == {"pending"}
