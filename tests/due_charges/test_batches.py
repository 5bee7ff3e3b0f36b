"""Batches of due-date charges as a merchant sees them: one request of many
charges, each created (or refused with its reasons) by workers against the
sandbox acquirer, the progress and the results readable, one webhook when
the last one settles; a request the batch as a whole cannot take stores
nothing; an item retried after a crash never makes a second charge."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.models import Account
from accounts.services import credential_issue
from acquirers import adapters
from acquirers.adapters.base import DueChargeRequest
from acquirers.adapters.sandbox import SandboxAdapter
from acquirers.exceptions import BOTH_OVERRIDE_FORMS
from acquirers.models import Acquirer
from acquirers.services import acquirer_grants_set
from due_charges import batches
from due_charges.batches import CLAIM_LEASE, item_check, item_claim, item_process, item_terms
from due_charges.models import DueChargeBatch, DueChargeBatchItem
from due_charges.tasks import sweep_due_batches
from payments.due_payments import now_in_brazil
from payments.models import Charge, ChargeAttempt
from tests.conftest import client_for
from tests.factories import AccountFactory, AcquirerFactory
from tests.helpers import listing_data
from tests.realworld import wait_for
from webhooks.models import WebhookEvent

URL = "/api/due-charges/batches"
BAD_DOCUMENT = "CPF ou CNPJ inválido."
NOT_AN_OBJECT = "Cada cobrança do lote deve ser um objeto JSON."
REQUIRED = "Este campo é obrigatório."


def item(n: int = 0, **changes: Any) -> dict[str, Any]:
    """A monthly fee due in 30 days, with fine and interest."""
    body: dict[str, Any] = {
        "amount": 15000 + n,
        "due_date": (now_in_brazil() + dt.timedelta(days=30)).isoformat(),
        "days_after_due": 30,
        "debtor": {"name": f"Devedor {n}", "document": "52998224725", "city": "São Paulo", "state": "SP"},
        "fine": {"modalidade": 2, "valorPerc": "2.00"},
        "interest": {"modalidade": 2, "valorPerc": "0.03"},
        "description": f"Mensalidade {n}",
    }
    body.update(changes)
    return body


@pytest.fixture
def sandbox(db: Any) -> Acquirer:
    """The platform's chain: one sandbox acquirer that creates due-date charges."""
    return AcquirerFactory(key="due_sandbox", default_priority=1)


@pytest.fixture
def merchant(sandbox: Acquirer) -> Account:
    return AccountFactory()


@pytest.fixture
def client(merchant: Account) -> APIClient:
    return client_for(credential_issue(account=merchant))


def post(client: APIClient, body: Any, key: str | None = None) -> Any:
    headers = {"Idempotency-Key": key} if key else {}
    return client.post(URL, data=json.dumps(body), content_type="application/json", headers=headers)


# --------------------------------------------------------------------------- with a worker


@pytest.mark.django_db(transaction=True)
def test_a_batch_creates_its_valid_charges_and_refuses_the_others_each_with_its_reasons(
    celery_worker_process: Any, client: APIClient, merchant: Account
) -> None:
    valid = [item(n) for n in range(30)]
    body = {
        "description": "Mensalidades",
        "items": [
            *valid[:10],
            item(90, debtor={"name": "Sem documento", "document": "123"}),
            "not an object",
            *valid[10:],
            item(91, amount=50),
        ],
    }

    response = post(client, body)

    assert response.status_code == 202, response.json()
    answer = response.json()["data"]
    assert answer["status"] == "processing"
    assert answer["counts"]["total"] == 33
    assert answer["counts"]["failed"] == 3  # refused at once: the others are not held up
    batch_url = f"{URL}/{answer['id']}"
    done = wait_for(lambda: (r := client.get(batch_url).json()["data"])["status"] == "done" and r, timeout=60)
    assert done["counts"] == {"total": 33, "pending": 0, "created": 30, "failed": 3}
    assert done["finished_at"] is not None

    items = listing_data(client, f"{batch_url}/items", per_page=100)["items"]
    assert [i["position"] for i in items] == list(range(33))
    refused = {i["position"]: i["errors"] for i in items if i["status"] == "failed"}
    assert refused == {
        10: {"debtor.document": [BAD_DOCUMENT]},
        11: {"non_field_errors": [NOT_AN_OBJECT]},
        32: {"amount": ["O valor mínimo permitido para transações é de R$ 1,00."]},
    }
    assert all(i["charge_id"] is None for i in items if i["status"] == "failed")
    created = [i for i in items if i["status"] == "created"]
    charges = Charge.objects.filter(pk__in=[i["charge_id"] for i in created]).select_related("due")
    assert len(charges) == 30
    assert all(c.account_id == merchant.pk and c.kind == "due" and c.txid == c.pk.hex for c in charges)
    by_amount = sorted((c.amount, c.due.description, c.buyer_name) for c in charges)
    assert by_amount == sorted((15000 + n, f"Mensalidade {n}", f"Devedor {n}") for n in range(30))

    events = WebhookEvent.objects.filter(account=merchant, event_type="due_charge_batch")
    assert [(e.record_id, e.status, e.data["counts"]) for e in events] == [
        (uuid.UUID(answer["id"]), "done", {"total": 33, "pending": 0, "created": 30, "failed": 3})
    ]

    csv = client.get(f"{batch_url}/items.csv")
    assert csv.status_code == 200
    rows = [line.split(";") for line in csv.content.decode("utf-8-sig").splitlines()]
    assert rows[0][:3] == ["position", "status", "charge_id"]
    assert len(rows) == 34
    assert rows[11][1] == "failed"
    assert BAD_DOCUMENT in rows[11][-1]
    first = Charge.objects.get(pk=rows[1][2])
    assert rows[1][3:5] == [first.txid, first.emv]


# --------------------------------------------------------------------------- a retried item


@pytest.fixture
def pending_item(client: APIClient, sandbox: Acquirer) -> DueChargeBatchItem:
    """A batch of one, stored and not yet worked on (no commit: no task)."""
    response = post(client, {"items": [item()]})
    assert response.status_code == 202, response.json()
    return DueChargeBatchItem.objects.get(batch_id=response.json()["data"]["id"])


def created_at_acquirer(acquirer: Acquirer, pending: DueChargeBatchItem) -> None:
    """What a worker killed after the acquirer answered left behind: the
    cobv exists at the acquirer, nothing is stored here, the claim is old."""
    terms, debtor = item_terms(pending.request), pending.request["debtor"]
    adapter = adapters.build(acquirer)
    assert isinstance(adapter, SandboxAdapter)
    adapter.create_due_charge(
        DueChargeRequest(
            charge_id=pending.charge_id,
            txid=pending.charge_id.hex,
            due_date=terms.data_de_vencimento,
            validity_after_due=terms.validade_apos_vencimento,
            debtor_name=debtor["name"],
            debtor_document=debtor["document"],
            valor=terms.to_api()["valor"],
            description=pending.request["description"],
            cidade=debtor["city"],
            uf=debtor["state"],
        )
    )
    DueChargeBatchItem.objects.filter(pk=pending.pk).update(
        attempts=1, updated_at=dt.datetime.now(dt.UTC) - CLAIM_LEASE - dt.timedelta(seconds=1)
    )


def test_an_item_retried_after_a_crash_takes_the_acquirers_charge_and_makes_no_second(
    pending_item: DueChargeBatchItem, sandbox: Acquirer
) -> None:
    created_at_acquirer(sandbox, pending_item)

    assert batches.batches_stalled(older_than=dt.timedelta(0)) == [pending_item.batch_id]
    assert item_process(pending_item.pk) == "created"

    charge = Charge.objects.get(pk=pending_item.charge_id)
    assert charge.txid == pending_item.charge_id.hex
    assert Charge.objects.filter(account=charge.account).count() == 1
    adapter = adapters.build(sandbox)
    assert adapter.due_charge_status(charge.txid).status == "ATIVA"  # not withdrawn as a duplicate
    assert DueChargeBatch.objects.get(pk=pending_item.batch_id).status == "done"


def test_the_sweep_takes_up_a_batch_only_once_its_work_stopped_moving(
    pending_item: DueChargeBatchItem, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent: list[tuple[str, tuple[Any, ...]]] = []
    monkeypatch.setattr(batches, "enqueue", lambda task, *args, **_: sent.append((task, args)))
    batch_id, long_ago = pending_item.batch_id, timezone.now() - 2 * CLAIM_LEASE
    DueChargeBatch.objects.filter(pk=batch_id).update(created_at=long_ago, updated_at=long_ago)

    assert batches.batch_dispatch(batch_id) == 1
    # An old batch whose chunk is queued (its item not yet reached): nothing was lost.
    assert batches.batches_stalled() == []
    assert sweep_due_batches() == 0
    assert len(sent) == 1

    # Its task was lost: nothing moved for a lease. Handed out again, once.
    DueChargeBatch.objects.filter(pk=batch_id).update(progress_at=long_ago)
    assert batches.batches_stalled() == [batch_id]
    assert sweep_due_batches() == 1
    assert sweep_due_batches() == 0
    assert [task for task, _ in sent] == [batches.ITEMS_TASK] * 2

    # A worker settling an item is progress too.
    DueChargeBatch.objects.filter(pk=batch_id).update(progress_at=long_ago)
    assert item_process(pending_item.pk) == "created"
    assert DueChargeBatch.objects.get(pk=batch_id).progress_at > long_ago


def test_an_item_held_by_a_worker_is_not_taken_by_another(pending_item: DueChargeBatchItem) -> None:
    assert item_claim(pending_item.pk) is not None

    assert item_process(pending_item.pk) == "skipped"
    assert not Charge.objects.filter(pk=pending_item.charge_id).exists()
    assert not ChargeAttempt.objects.filter(charge_id=pending_item.charge_id).exists()


def test_an_item_whose_charge_was_stored_is_settled_without_asking_again(
    pending_item: DueChargeBatchItem, sandbox: Acquirer
) -> None:
    assert item_process(pending_item.pk) == "created"
    DueChargeBatchItem.objects.filter(pk=pending_item.pk).update(status="pending", attempts=0)
    DueChargeBatch.objects.filter(pk=pending_item.batch_id).update(status="processing", finished_at=None)

    assert item_process(pending_item.pk) == "created"
    assert ChargeAttempt.objects.filter(charge_id=pending_item.charge_id).count() == 1


# --------------------------------------------------------------------------- the request as a whole


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("body", "errors"),
    [
        ({}, {"items": ["Informe a lista de cobranças em items."]}),
        ({"items": {"amount": 1}}, {"items": ["items deve ser uma lista de cobranças."]}),
        ({"items": []}, {"items": ["O lote deve ter ao menos uma cobrança."]}),
        ({"items": [{}] * 1001}, {"items": ["O lote pode ter no máximo 1000 cobranças."]}),
        ({"items": [item()], "postback_url": "ftp://x"}, {"postback_url": ["Informe uma URL http ou https válida."]}),
    ],
    ids=["missing", "not-a-list", "empty", "too-many", "bad-postback"],
)
def test_a_request_the_batch_cannot_take_is_a_422_and_stores_nothing(
    client: APIClient, body: dict[str, Any], errors: dict[str, list[str]]
) -> None:
    response = post(client, body)

    assert response.status_code == 422
    assert response.json() == {
        "success": False,
        "message": "Erro de validação nos dados fornecidos",
        "data": {"errors": errors},
    }
    assert not DueChargeBatch.objects.exists()
    assert not DueChargeBatchItem.objects.exists()


def test_a_body_past_the_batches_cap_is_a_413_and_one_of_1000_charges_fits(client: APIClient) -> None:
    too_big = post(client, {"items": [item(description="x" * 140)] * 1000, "description": "y" * 3_000_000})
    assert too_big.status_code == 413
    assert not DueChargeBatch.objects.exists()

    thousand = post(client, {"items": [item(n) for n in range(1000)]})
    assert thousand.status_code == 202, thousand.json()
    assert len(thousand.content) < 1000  # the answer is the batch, not its items
    assert thousand.json()["data"]["counts"] == {"total": 1000, "pending": 1000, "created": 0, "failed": 0}


def test_a_repeated_idempotency_key_answers_the_same_batch_once(client: APIClient) -> None:
    body = {"items": [item()]}
    first = post(client, body, key="lote-dezembro")
    again = post(client, body, key="lote-dezembro")

    assert (first.status_code, again.status_code) == (202, 202)
    assert again.json() == first.json()
    assert again["Idempotent-Replayed"] == "true"
    assert DueChargeBatch.objects.count() == 1


def test_another_accounts_batch_is_a_404(client: APIClient, sandbox: Acquirer) -> None:
    theirs = client_for(credential_issue(account=AccountFactory(name="Outra Loja Ltda")))
    batch_id = post(theirs, {"items": [item()]}).json()["data"]["id"]

    for path in (f"{URL}/{batch_id}", f"{URL}/{batch_id}/items", f"{URL}/{batch_id}/items.csv"):
        response = client.get(path)
        assert response.status_code == 404, path
        assert response.json()["message"] == "Lote não encontrado."


def test_an_item_is_checked_as_a_single_charge_is_override_forms_included(merchant: Account, sandbox: Acquirer) -> None:
    merchant.can_select_pix_cash_in_acquirer = True
    merchant.save(update_fields=["can_select_pix_cash_in_acquirer"])
    acquirer_grants_set(account=merchant, acquirers=[sandbox])
    both = item(acquirer_key="due_sandbox", acquirers=[{"acquirer_key": "due_sandbox", "priority": 1}])
    data, errors = item_check(account=merchant, raw=both)
    assert data == {}
    assert BOTH_OVERRIDE_FORMS in json.dumps(errors, ensure_ascii=False)
    data, errors = item_check(account=merchant, raw=item(acquirer_key="due_sandbox"))
    assert errors == {}
    assert data["acquirer_key"] == "due_sandbox"
    data, errors = item_check(account=merchant, raw=item(days_after_due=3651, due_date="2030-1-5"))
    assert set(errors) == {"days_after_due", "due_date"}
