"""The limit of webhook endpoints per account (issue 13, bulkheads):
``WEBHOOK_MAX_ENDPOINTS_PER_ACCOUNT`` endpoints that are not deleted, then a
422 in the contract's validation envelope under ``webhooks``, whichever way
the endpoint is created (API, admin, bootstrap), and never exceeded by
concurrent creations (the account's row lock)."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from accounts.models import Account
from accounts.services import IssuedCredential
from tests.conftest import client_for
from tests.factories import AccountFactory
from tests.realworld import run_concurrently
from webhooks.models import WebhookEndpoint
from webhooks.services import endpoint_create, endpoint_delete, endpoint_disable

LIMIT = 3
MESSAGE = f"Limite de {LIMIT} endpoints de webhook por conta atingido."
URL = "http://127.0.0.1:9/hook"  # loopback is allowed in tests; nothing connects to it


@pytest.fixture(autouse=True)
def limit(settings: Any) -> int:
    settings.WEBHOOK_MAX_ENDPOINTS_PER_ACCOUNT = LIMIT
    return LIMIT


def register(api: APIClient, url: str = URL) -> Any:
    return api.post("/api/webhooks", {"url": url}, format="json")


def endpoints(account: Account) -> list[tuple[str, str]]:
    return sorted(WebhookEndpoint.objects.filter(account=account).values_list("url", "secret"))


# --------------------------------------------------------------------------- API


@pytest.mark.django_db
def test_one_endpoint_past_the_limit_is_a_422_that_changes_nothing(api: APIClient, account: Account) -> None:
    for i in range(LIMIT):
        assert register(api, f"{URL}/{i}").status_code == 201
    before = endpoints(account)

    response = register(api, f"{URL}/extra")

    assert response.status_code == 422
    assert response.json() == {
        "success": False,
        "message": "Erro de validação nos dados fornecidos",
        "data": {"errors": {"webhooks": [MESSAGE]}},
    }
    assert endpoints(account) == before


@pytest.mark.django_db
def test_deleted_endpoints_free_their_slot_and_disabled_ones_keep_it(api: APIClient, account: Account) -> None:
    made = [endpoint_create(account=account, url=f"{URL}/{i}").endpoint for i in range(LIMIT)]
    # Disabled (by staff, a 410 or days of failures): staff may enable it again, so it counts.
    endpoint_disable(endpoint=made[0], reason="410 Gone")
    assert register(api).status_code == 422

    # Deleted through the API: it is gone for the account, so it does not.
    assert api.delete(f"/api/webhooks/{made[1].pk}").status_code == 200
    assert register(api).status_code == 201
    assert register(api).status_code == 422
    endpoint_delete(endpoint=made[0])
    assert register(api).status_code == 201


@pytest.mark.django_db
def test_the_limit_is_per_account(api: APIClient, account: Account) -> None:
    other = AccountFactory()
    for i in range(LIMIT):
        endpoint_create(account=other, url=f"{URL}/{i}")
    assert register(api).status_code == 201


@pytest.mark.django_db(transaction=True)
def test_concurrent_creations_never_exceed_the_limit(
    settings: Any, account: Account, issue_credential: Callable[..., IssuedCredential]
) -> None:
    """30 requests at once against a limit of 16 (the default): the account's
    row lock serialises them, so exactly 16 are created and 14 refused."""
    settings.WEBHOOK_MAX_ENDPOINTS_PER_ACCOUNT = 16
    clients = [client_for(issue_credential(account)) for _ in range(30)]
    bystander = AccountFactory()
    endpoint_create(account=bystander, url=URL)

    def create(client: APIClient, index: int) -> Callable[[], Any]:
        return lambda: register(client, f"{URL}/{index}")

    responses = run_concurrently([create(client, i) for i, client in enumerate(clients)])

    statuses = sorted(r.status_code for r in responses)
    assert statuses == [201] * 16 + [422] * 14, responses
    refused = [r.json() for r in responses if r.status_code == 422]
    assert all(
        body["data"] == {"errors": {"webhooks": ["Limite de 16 endpoints de webhook por conta atingido."]}}
        for body in refused
    )
    created = {r.json()["data"]["id"] for r in responses if r.status_code == 201}
    assert set(map(str, WebhookEndpoint.objects.filter(account=account).values_list("pk", flat=True))) == created
    assert WebhookEndpoint.objects.filter(account=bystander).count() == 1


# --------------------------------------------------------------------------- admin


def admin_add(client: Client, account: Account, url: str) -> Any:
    return client.post(
        reverse("admin:webhooks_webhookendpoint_add"),
        {"account": str(account.pk), "ref": "", "url": url, "description": "", "is_active": "on"},
    )


@pytest.mark.django_db
def test_admin_add_past_the_limit_is_a_form_error_on_the_account(admin_client: Client, account: Account) -> None:
    for i in range(LIMIT - 1):
        endpoint_create(account=account, url=f"{URL}/{i}")
    assert admin_add(admin_client, account, "https://last.example/hook").status_code == 303

    response = admin_add(admin_client, account, "https://extra.example/hook")

    assert response.status_code == 200
    assert response.context["adminform"].form.errors == {"account": [MESSAGE]}
    assert WebhookEndpoint.objects.filter(account=account).count() == LIMIT


@pytest.mark.django_db
def test_admin_moving_an_endpoint_to_a_full_account_is_refused(admin_client: Client, account: Account) -> None:
    for i in range(LIMIT):
        endpoint_create(account=account, url=f"{URL}/{i}")
    moved = endpoint_create(account=AccountFactory(), url="https://moved.example/hook").endpoint

    response = admin_client.post(
        reverse("admin:webhooks_webhookendpoint_change", args=[moved.pk]),
        {"account": str(account.pk), "ref": "", "url": moved.url, "description": "", "is_active": "on"},
    )

    assert response.status_code == 200
    assert response.context["adminform"].form.errors == {"account": [MESSAGE]}
    moved.refresh_from_db()
    assert moved.account_id != account.pk


def account_page_with_new_endpoints(account: Account, urls: list[str]) -> dict[str, Any]:
    """The account change page's POST: its own fields as stored, the
    endpoints inline with ``urls`` added, every other inline unchanged."""
    from tests.accounts.test_admin import account_form, inline_management

    existing = list(WebhookEndpoint.objects.filter(account=account).order_by("-created_at"))
    data = account_form(name=account.name, document=account.document, status=account.status)
    data |= inline_management(webhook_endpoints=len(existing))
    data["webhook_endpoints-TOTAL_FORMS"] = str(len(existing) + len(urls))
    for index, endpoint in enumerate(existing):
        data |= {
            f"webhook_endpoints-{index}-id": str(endpoint.pk),
            f"webhook_endpoints-{index}-account": str(account.pk),
            f"webhook_endpoints-{index}-url": endpoint.url,
            f"webhook_endpoints-{index}-is_active": "on",
        }
    for offset, url in enumerate(urls):
        index = len(existing) + offset
        data |= {f"webhook_endpoints-{index}-account": str(account.pk), f"webhook_endpoints-{index}-url": url}
    return data


@pytest.mark.django_db
def test_account_page_inline_respects_the_limit(admin_client: Client) -> None:
    account = AccountFactory(status=Account.Status.PENDING)
    endpoint_create(account=account, url=f"{URL}/0")
    change = reverse("admin:accounts_account_change", args=[account.pk])
    urls = [f"https://{i}.example/hook" for i in range(LIMIT)]

    response = admin_client.post(change, account_page_with_new_endpoints(account, urls))

    assert response.status_code == 200
    assert MESSAGE in response.content.decode()
    assert WebhookEndpoint.objects.filter(account=account).count() == 1

    response = admin_client.post(change, account_page_with_new_endpoints(account, urls[: LIMIT - 1]))
    assert response.status_code == 302, response.content.decode()[-3000:]
    assert WebhookEndpoint.objects.filter(account=account).count() == LIMIT


# --------------------------------------------------------------------------- bootstrap


def run_bootstrap(tmp_path: Path, data: Any) -> dict[str, Any]:
    path = tmp_path / "bootstrap.json"
    path.write_text(json.dumps(data))
    out = io.StringIO()
    call_command("pix_bootstrap", str(path), stdout=out, stderr=io.StringIO())
    result: dict[str, Any] = json.loads(out.getvalue())
    return result


def hooks(*refs: str) -> dict[str, Any]:
    webhooks = [{"ref": ref, "url": f"https://example.com/{ref}"} for ref in refs]
    return {"accounts": [{"ref": "acme", "name": "Acme", "webhooks": webhooks}]}


@pytest.mark.django_db
def test_bootstrap_refuses_more_webhooks_than_the_limit(tmp_path: Path) -> None:
    with pytest.raises(CommandError) as error:
        run_bootstrap(tmp_path, hooks(*(f"h{i}" for i in range(LIMIT + 1))))
    assert f"accounts[0].webhooks: {MESSAGE}" in str(error.value)
    assert not Account.objects.filter(ref="acme").exists()


@pytest.mark.django_db
def test_bootstrap_counts_the_accounts_endpoints_and_updates_its_own(tmp_path: Path) -> None:
    refs = [f"h{i}" for i in range(LIMIT - 1)]
    run_bootstrap(tmp_path, hooks(*refs))
    account = Account.objects.get(ref="acme")
    endpoint_create(account=account, url=URL)  # through the API: the last slot

    # The same refs again are updates, not creations: within the limit.
    assert set(run_bootstrap(tmp_path, hooks(*refs))["accounts"]["acme"]["webhooks"]) == set(refs)
    with pytest.raises(CommandError) as error:
        run_bootstrap(tmp_path, hooks(*refs, "one-more"))
    assert f"accounts[0].webhooks: {MESSAGE}" in str(error.value)
    assert WebhookEndpoint.objects.filter(account=account).count() == LIMIT
