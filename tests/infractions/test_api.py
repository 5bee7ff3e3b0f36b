"""The merchant's MED infractions: GET /api/infractions (filters, pages,
isolation), GET /api/infractions/{id} and its documented webhook body."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import pytest
from django.utils import timezone
from drf_spectacular.generators import SchemaGenerator
from rest_framework.test import APIClient

from accounts.models import Account, ApiCredential
from accounts.services import credential_issue
from acquirers.adapters.base import InfractionStatus
from acquirers.models import Acquirer
from infractions.models import Infraction
from infractions.payloads import infraction_payload
from tests.conftest import client_for
from tests.factories import AccountFactory
from tests.helpers import listing_data, listing_errors, local
from tests.infractions.conftest import close_infraction, open_infraction, paid_charge
from webhooks.models import WebhookEvent

pytestmark = pytest.mark.django_db

URL = "/api/infractions"
NOT_FOUND = {"success": False, "message": "Infração não encontrada.", "data": None}
NO_PERMISSION = "Esta credencial não tem permissão para realizar esta operação."
FIELDS = {
    "id",
    "transaction_id",
    "e2e_id",
    "status",
    "reason",
    "amount",
    "blocked_amount",
    "returned_amount",
    "debited_amount",
    "defense_deadline",
    "defense",
    "opened_at",
    "closed_at",
}


def created_at(infraction: Infraction, moment: dt.datetime) -> Infraction:
    Infraction.objects.filter(pk=infraction.pk).update(created_at=moment)
    infraction.refresh_from_db()
    return infraction


def three(account: Account, acquirer: Acquirer) -> list[Infraction]:
    """Three infractions one day apart, oldest first; the middle one rejected."""
    start = timezone.now() - dt.timedelta(days=3)
    found = [open_infraction(acquirer, paid_charge(account, acquirer)) for _ in range(3)]
    close_infraction(acquirer, found[1], InfractionStatus.REJECTED)
    return [created_at(inf, start + dt.timedelta(days=i)) for i, inf in enumerate(found)]


def test_the_listing_shows_the_accounts_infractions_newest_first(
    api: APIClient, account: Account, acquirer: Acquirer
) -> None:
    mine = three(account, acquirer)
    open_infraction(acquirer, paid_charge(AccountFactory(), acquirer))  # another account's

    data = listing_data(api, URL)

    assert [i["id"] for i in data["infractions"]] == [str(i.pk) for i in reversed(mine)]
    assert data["pagination"] == {"current_page": 1, "last_page": 1, "per_page": 15, "total": 3}
    newest = data["infractions"][0]
    assert set(newest) == FIELDS
    # The same record the webhooks carry.
    assert newest == infraction_payload(Infraction.objects.get(pk=mine[2].pk))
    assert newest["transaction_id"] == str(mine[2].charge_id)
    assert (newest["status"], newest["amount"], newest["blocked_amount"]) == ("open", 10_000, 9_900)
    assert newest["defense_deadline"] == local(mine[2].defense_deadline)


def test_filters(api: APIClient, account: Account, acquirer: Acquirer) -> None:
    oldest, rejected, newest = three(account, acquirer)

    def ids(**params: Any) -> list[str]:
        return [i["id"] for i in listing_data(api, URL, **params)["infractions"]]

    assert ids(status="rejected") == [str(rejected.pk)]
    assert ids(status="open") == [str(newest.pk), str(oldest.pk)]
    assert ids(transaction_id=str(oldest.charge_id)) == [str(oldest.pk)]
    assert ids(e2e_id=newest.e2e_id) == [str(newest.pk)]
    assert ids(transaction_id=str(uuid.uuid4())) == []
    assert ids(created_at_start=local(rejected.created_at)) == [str(newest.pk), str(rejected.pk)]
    assert ids(created_at_end=local(rejected.created_at)) == [str(rejected.pk), str(oldest.pk)]
    assert ids(created_at_start=local(rejected.created_at), created_at_end=local(rejected.created_at)) == [
        str(rejected.pk)
    ]


def test_bad_filters_are_422s_by_name(api: APIClient) -> None:
    errors = listing_errors(
        api, URL, status="bogus", transaction_id="nope", created_at_start="2026-01-01T00:00:00", page="0"
    )
    assert set(errors) == {"status", "transaction_id", "created_at_start", "page"}
    assert errors["created_at_start"] == ["Use o formato AAAA-MM-DD HH:mm:ss."]


def test_pages(api: APIClient, account: Account, acquirer: Acquirer) -> None:
    oldest, middle, newest = three(account, acquirer)
    first = listing_data(api, URL, per_page=2)
    second = listing_data(api, URL, per_page=2, page=2)
    assert [i["id"] for i in first["infractions"]] == [str(newest.pk), str(middle.pk)]
    assert [i["id"] for i in second["infractions"]] == [str(oldest.pk)]
    assert second["pagination"] == {"current_page": 2, "last_page": 2, "per_page": 2, "total": 3}
    assert listing_data(api, URL, per_page=2, page=3)["infractions"] == []


def test_the_listing_reads_a_page_in_a_fixed_number_of_queries(
    api: APIClient, account: Account, acquirer: Acquirer, django_assert_max_num_queries: Any
) -> None:
    from django.db import transaction

    from infractions.defenses import infraction_defend

    for infraction in three(account, acquirer):
        if infraction.closed_at is None:
            with transaction.atomic():
                infraction_defend(infraction_id=infraction.pk, text="Entregue.", by="t", account=account)
    api.get(URL)
    # The credential is cached after the first request: the page and its attachments, whatever the
    # number of defences (a short first page needs no COUNT).
    with django_assert_max_num_queries(2):
        data = listing_data(api, URL)
    assert sum(1 for i in data["infractions"] if i["defense"]) == 2


def test_read_one(api: APIClient, account: Account, acquirer: Acquirer) -> None:
    infraction = open_infraction(acquirer, paid_charge(account, acquirer))
    response = api.get(f"{URL}/{infraction.pk}")
    assert response.status_code == 200
    body = response.json()
    assert (body["success"], body["message"]) == (True, "Infração consultada com sucesso.")
    assert body["data"] == infraction_payload(infraction)


@pytest.mark.parametrize("which", ["unknown", "malformed", "another account's"])
def test_an_id_not_the_accounts_is_a_404(api: APIClient, acquirer: Acquirer, which: str) -> None:
    other = open_infraction(acquirer, paid_charge(AccountFactory(), acquirer))
    infraction_id = {"unknown": str(uuid.uuid4()), "malformed": "abc", "another account's": str(other.pk)}[which]
    response = api.get(f"{URL}/{infraction_id}")
    assert response.status_code == 404
    assert response.json() == NOT_FOUND


def test_a_cashout_credential_sees_no_infractions(account: Account, acquirer: Acquirer) -> None:
    infraction = open_infraction(acquirer, paid_charge(account, acquirer))
    cashout = client_for(credential_issue(account=account, permission=ApiCredential.Permission.CASHOUT))
    for response in (
        cashout.get(URL),
        cashout.get(f"{URL}/{infraction.pk}"),
        cashout.post(f"{URL}/{infraction.pk}/defense", {"text": "Entregue."}, format="json"),
    ):
        assert response.status_code == 403
        assert response.json() == {"success": False, "message": NO_PERMISSION, "data": None}
    assert Infraction.objects.get(pk=infraction.pk).defense_submitted_at is None
    for permission in (ApiCredential.Permission.CASHIN, ApiCredential.Permission.ALL):
        client = client_for(credential_issue(account=account, permission=permission))
        assert client.get(URL).status_code == client.get(f"{URL}/{infraction.pk}").status_code == 200


def test_no_credentials_is_a_401(acquirer: Acquirer) -> None:
    response = APIClient().get(URL)
    assert response.status_code == 401


# --------------------------------------------------------------------------- the webhook, documented


def _component(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node or "allOf" in node:
        ref = node["$ref"] if "$ref" in node else node["allOf"][0]["$ref"]
        node = schema["components"]["schemas"][ref.rsplit("/", 1)[-1]]
    return node


def test_the_documented_infraction_event_is_what_receivers_get(account: Account, acquirer: Acquirer) -> None:
    infraction = open_infraction(acquirer, paid_charge(account, acquirer))
    sent: dict[str, Any] = WebhookEvent.objects.get(
        event_type="infraction", record_id=infraction.pk, status="opened"
    ).body()

    schema = SchemaGenerator().get_schema(request=None, public=True)
    [callback] = schema["paths"]["/api/infractions"]["get"]["callbacks"].values()
    [operation] = [ops["post"] for ops in callback.values()]
    body = _component(schema, operation["requestBody"]["content"]["application/json"]["schema"])
    data = _component(schema, body["properties"]["data"])

    assert set(sent) == set(body["properties"])
    assert sent["event_type"] == "infraction"
    assert sent["data"]["event"] == "infraction.opened"
    # hours_left: deadline notices only.
    assert set(sent["data"]) == set(data["properties"]) - {"hours_left"}
    assert set(data["required"]) <= set(sent["data"])
    deliveries = schema["paths"]["/api/webhooks/{endpoint_id}/deliveries"]["get"]["parameters"]
    [event_type] = [p for p in deliveries if p["name"] == "event_type"]
    assert "infraction" in str(event_type["schema"])
