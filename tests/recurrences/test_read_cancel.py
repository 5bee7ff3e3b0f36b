"""GET /api/recurrences (filters, pages), GET /api/recurrences/{id} and
POST /api/recurrences/{id}/cancel: an account reads and cancels only its
own; a cancel is at once here, asked of the acquirer after, repeatable, and
a 409 for a recurrence that ended otherwise."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.models import Account
from acquirers.models import Acquirer
from core import dispatch
from recurrences.authorisations import recurrence_cancel_there
from recurrences.models import Recurrence
from recurrences.services import CANCEL_AT_ACQUIRER
from tests.due_charges.helpers import client_of
from tests.factories import AccountFactory
from tests.helpers import listing_data
from tests.recurrences.conftest import RecAdapter
from tests.recurrences.helpers import CNPJ, URL, body, create, push_body
from webhooks.models import WebhookEvent

pytestmark = pytest.mark.django_db

NOT_FOUND = {"success": False, "message": "Recorrência não encontrada.", "data": None}


def test_read_is_what_the_creation_answered(api: APIClient, acquirer: Acquirer) -> None:
    created = create(api)

    response = api.get(f"{URL}/{created['id']}")

    assert response.status_code == 200
    assert response.json()["message"] == "Recorrência consultada com sucesso."
    assert response.json()["data"] == created


@pytest.mark.parametrize("ident", ["nao-e-uuid", str(uuid.uuid4())])
def test_unknown_or_malformed_is_a_404(api: APIClient, ident: str) -> None:
    response = api.get(f"{URL}/{ident}")

    assert response.status_code == 404
    assert response.json() == NOT_FOUND


def test_another_accounts_recurrence_is_a_404_everywhere_and_stays_as_it_was(
    api: APIClient, acquirer: Acquirer
) -> None:
    theirs = create(api)
    other = client_of(AccountFactory())
    before = Recurrence.objects.get(pk=theirs["id"])

    answers = [
        other.get(f"{URL}/{theirs['id']}"),
        other.post(f"{URL}/{theirs['id']}/cancel"),
        other.get(f"{URL}/{theirs['id']}/cycles"),
        other.get(f"{URL}/{theirs['id']}/cycles/0"),
        other.put(f"{URL}/{theirs['id']}/cycles/0/amount", {"amount": 1000}, format="json"),
    ]

    assert [a.status_code for a in answers] == [404] * 5
    assert all(a.json() == NOT_FOUND for a in answers)
    after = Recurrence.objects.get(pk=theirs["id"])
    assert (after.status, after.updated_at) == (before.status, before.updated_at)
    assert not after.cycles.exists()
    assert listing_data(other, URL)["recurrences"] == []


def test_the_listing_filters_and_pages(api: APIClient, account: Account, acquirer: Acquirer) -> None:
    first = create(api, contract="C-1")
    second = create(api, contract="C-2", debtor={"document": CNPJ, "name": "Empresa"})
    push = api.post(URL, push_body(contract="C-3")).json()["data"]
    api.post(f"{URL}/{first['id']}/cancel")

    listed = listing_data(api, URL)
    assert [r["id"] for r in listed["recurrences"]] == [push["id"], second["id"], first["id"]]
    assert listed["pagination"] == {"current_page": 1, "last_page": 1, "per_page": 15, "total": 3}
    assert listed["recurrences"][1] == second
    assert [r["id"] for r in listing_data(api, URL, status="cancelled")["recurrences"]] == [first["id"]]
    assert [r["id"] for r in listing_data(api, URL, status="created")["recurrences"]] == [push["id"], second["id"]]
    assert [r["id"] for r in listing_data(api, URL, contract="C-2")["recurrences"]] == [second["id"]]
    assert [r["id"] for r in listing_data(api, URL, debtor_document="11.222.333/0001-81")["recurrences"]] == [
        second["id"]
    ]
    page = listing_data(api, URL, per_page=2, page=2)
    assert [r["id"] for r in page["recurrences"]] == [first["id"]]
    assert page["pagination"] == {"current_page": 2, "last_page": 2, "per_page": 2, "total": 3}
    assert listing_data(api, URL, page=9)["recurrences"] == []


@pytest.mark.parametrize(
    ("params", "key"),
    [({"status": "paid"}, "status"), ({"per_page": 101}, "per_page"), ({"contract": ""}, "contract")],
)
def test_a_bad_filter_is_a_422_under_its_name(api: APIClient, params: dict[str, Any], key: str) -> None:
    response = api.get(URL, params)

    assert response.status_code == 422
    assert key in response.json()["data"]["errors"]


def test_cancel_is_at_once_and_asked_of_the_acquirer(
    api: APIClient, acquirer: Acquirer, monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: Any
) -> None:
    created = create(api)
    RecAdapter.calls.clear()
    queued: list[tuple[str, tuple[Any, ...]]] = []
    monkeypatch.setattr(dispatch, "enqueue", lambda task, *args, **kwargs: queued.append((task, args)))

    with django_capture_on_commit_callbacks(execute=True):
        response = api.post(f"{URL}/{created['id']}/cancel")

    assert response.status_code == 200
    assert response.json()["message"] == "Recorrência cancelada."
    data = response.json()["data"]
    assert (data["status"], data["cancelled_by"]) == ("cancelled", "merchant")
    assert data["ended_at"] is not None
    assert RecAdapter.calls == []  # after the answer, by a worker
    assert queued == [(CANCEL_AT_ACQUIRER, (created["id"],))]
    assert recurrence_cancel_there(recurrence_id=created["id"])
    assert RecAdapter.calls == ["cancel_recurrence"]
    assert Recurrence.objects.get(pk=created["id"]).cancel_pending is False
    assert WebhookEvent.objects.filter(event_type="recurrence", status="cancelled").count() == 1

    again = api.post(f"{URL}/{created['id']}/cancel")

    assert again.status_code == 200
    assert again.json()["message"] == "A recorrência já estava cancelada."
    assert again.json()["data"]["status"] == "cancelled"
    assert WebhookEvent.objects.filter(event_type="recurrence", status="cancelled").count() == 1


def test_cancel_of_a_rejected_one_is_a_409_and_changes_nothing(api: APIClient, acquirer: Acquirer) -> None:
    created = create(api)
    Recurrence.objects.filter(pk=created["id"]).update(status="rejected", ended_at=timezone.now())
    events = WebhookEvent.objects.count()

    response = api.post(f"{URL}/{created['id']}/cancel")

    assert response.status_code == 409
    assert response.json() == {
        "success": False,
        "message": "A recorrência já está encerrada (rejeitada).",
        "data": None,
    }
    assert Recurrence.objects.get(pk=created["id"]).status == "rejected"
    assert WebhookEvent.objects.count() == events


def test_read_needs_cashin(account: Account, acquirer: Acquirer) -> None:
    from accounts.services import credential_issue
    from tests.conftest import client_for

    created = create(client_of(account), **body())
    cashout = client_for(credential_issue(account=account, permission="cashout"))

    assert cashout.get(f"{URL}/{created['id']}").status_code == 403
    assert cashout.get(URL).status_code == 403
