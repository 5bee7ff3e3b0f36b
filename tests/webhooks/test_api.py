"""Webhook management by the account holder (decisions §2, §6): listing,
registering (with the outbound URL filter), deleting and rotating endpoints,
reading an endpoint's deliveries, and asking for an event's redelivery."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable
from typing import Any

import pytest
import requests
import yaml
from django.db import connection, transaction
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.models import Account, ApiCredential
from accounts.services import IssuedCredential, account_set_blocked
from acquirers.models import Acquirer
from tests.conftest import client_for
from tests.factories import AccountFactory, AcquirerFactory
from tests.helpers import local
from webhooks import services
from webhooks.delivery import DeliveryOutcome, delivery_attempt
from webhooks.models import EventType, WebhookAttempt, WebhookDelivery, WebhookEndpoint, WebhookEvent

WEBHOOKS = "/api/webhooks"
ENDPOINT_FIELDS = {"id", "url", "description", "code", "is_active", "disabled_reason", "created_at"}
DELIVERY_FIELDS = {
    "id",
    "event_id",
    "event_type",
    "status",
    "attempt_count",
    "next_attempt_at",
    "last_status_code",
    "created_at",
    "attempts",
}
CHARGE = {
    "payment_method": "pix",
    "amount": 1000,
    "buyer": {"buyer_name": "Fulano", "buyer_document": "52998224725", "buyer_phone": "11999998888"},
}
VALIDATION = "Erro de validação nos dados fornecidos"
URL_NOT_ALLOWED = "URL não permitida: o endereço é local, privado ou reservado."
URL_INVALID = "Informe uma URL http ou https válida."
PUBLIC_URL = "https://8.8.8.8/hook"


def envelope(message: str) -> dict[str, object]:
    return {"success": False, "message": message, "data": None}


NO_PERMISSION = envelope("Esta credencial não tem permissão para realizar esta operação.")
NOT_APPROVED = envelope("Sua conta precisa estar aprovada para usar esta funcionalidade.")
BLOCKED = envelope("Sua conta está bloqueada. Não é permitido realizar esta ação.")
MISSING = {"error": "Credenciais inválidas", "message": "Chave pública e chave privada são obrigatórias"}
INVALID = {"error": "Credenciais inválidas", "message": "Chave não encontrada ou inativa"}
ENDPOINT_NOT_FOUND = envelope("Webhook não encontrado.")
EVENT_NOT_FOUND = envelope("Evento não encontrado.")
BAD_BODY = envelope("Corpo da requisição inválido.")

# (method, path) of every endpoint of this file; ids are random: the
# permission checks answer before any lookup.
ROUTES = [
    ("get", WEBHOOKS),
    ("post", WEBHOOKS),
    ("delete", f"{WEBHOOKS}/{uuid.uuid4()}"),
    ("post", f"{WEBHOOKS}/{uuid.uuid4()}/rotate-secret"),
    ("get", f"{WEBHOOKS}/{uuid.uuid4()}/deliveries"),
    ("post", f"/api/webhook-events/{uuid.uuid4()}/redeliver"),
]

pytestmark = pytest.mark.django_db


@pytest.fixture
def acquirer(db: Any) -> Acquirer:
    return AcquirerFactory(key="alpha", default_priority=1)


@pytest.fixture
def other_api(issue_credential: Callable[..., IssuedCredential]) -> APIClient:
    """A full credential of a second, unrelated account."""
    return client_for(issue_credential(AccountFactory()))


def call(client: APIClient, method: str, path: str) -> Any:
    if method == "post" and path == WEBHOOKS:
        return client.post(path, {"url": PUBLIC_URL}, format="json")
    return getattr(client, method)(path)


def register(api: APIClient, url: str = PUBLIC_URL, description: str = "") -> dict[str, Any]:
    response = api.post(WEBHOOKS, {"url": url, "description": description}, format="json")
    assert response.status_code == 201, response.json()
    data: dict[str, Any] = response.json()["data"]
    return data


def listed(api: APIClient) -> list[dict[str, Any]]:
    response = api.get(WEBHOOKS)
    assert response.status_code == 200
    webhooks: list[dict[str, Any]] = response.json()["data"]["webhooks"]
    return webhooks


def endpoint_of(account: Account, url: str = PUBLIC_URL) -> WebhookEndpoint:
    return services.endpoint_create(account=account, url=url).endpoint


def paid_charge(api: APIClient, action: str = "") -> str:
    """A charge created and paid through the API (then ``action``ed if given);
    each status change writes one event and its deliveries."""
    created = api.post("/api/transactions", CHARGE, format="json")
    assert created.status_code == 201, created.json()
    charge_id: str = created.json()["data"]["id"]
    assert api.post(f"/api/sandbox/transactions/{charge_id}/pay").status_code == 200
    if action:
        assert api.post(f"/api/sandbox/transactions/{charge_id}/{action}").status_code == 200
    return charge_id


def emit(account: Account, event_type: str = EventType.TRANSACTION, status: str = "paid") -> WebhookEvent:
    with transaction.atomic():
        return services.event_emit(
            account_id=account.pk, event_type=event_type, record_id=uuid.uuid4(), status=status, data={"x": 1}
        )


def deliveries(api: APIClient, endpoint_id: Any, **params: Any) -> dict[str, Any]:
    response = api.get(f"{WEBHOOKS}/{endpoint_id}/deliveries", params)
    assert response.status_code == 200, response.json()
    data: dict[str, Any] = response.json()["data"]
    return data


def enqueued(callbacks: list[Callable[[], Any]]) -> set[str]:
    """Delivery ids handed to the workers by the captured on-commit callbacks."""
    return {str(cb.args[0]) for cb in callbacks if getattr(cb, "func", None) is services._enqueue}  # type: ignore[attr-defined]


# --------------------------------------------------------------------------- authentication and permissions


@pytest.mark.parametrize(("method", "path"), ROUTES)
def test_missing_credentials_is_401(method: str, path: str) -> None:
    response = call(APIClient(), method, path)
    assert response.status_code == 401
    assert response.json() == MISSING


@pytest.mark.parametrize(("method", "path"), ROUTES)
def test_unknown_credentials_is_401(method: str, path: str) -> None:
    client = APIClient()
    client.credentials(HTTP_X_PUBLIC_KEY="pk_nope", HTTP_X_SECRET_KEY="sk_nope")
    response = call(client, method, path)
    assert response.status_code == 401
    assert response.json() == INVALID


@pytest.mark.parametrize("permission", [ApiCredential.Permission.CASHIN, ApiCredential.Permission.CASHOUT])
@pytest.mark.parametrize(("method", "path"), ROUTES)
def test_only_a_full_credential_manages_webhooks(
    account: Account, issue_credential: Callable[..., IssuedCredential], method: str, path: str, permission: str
) -> None:
    response = call(client_for(issue_credential(account, permission)), method, path)
    assert response.status_code == 403
    assert response.json() == NO_PERMISSION
    assert not WebhookEndpoint.objects.exists()


@pytest.mark.parametrize("status", [Account.Status.PENDING, Account.Status.REJECTED])
@pytest.mark.parametrize(("method", "path"), ROUTES)
def test_account_not_approved_is_403(
    issue_credential: Callable[..., IssuedCredential], method: str, path: str, status: str
) -> None:
    response = call(client_for(issue_credential(AccountFactory(status=status))), method, path)
    assert response.status_code == 403
    assert response.json() == NOT_APPROVED
    assert not WebhookEndpoint.objects.exists()


@pytest.mark.parametrize(("method", "path"), ROUTES)
def test_blocked_account_is_403(account: Account, api: APIClient, method: str, path: str) -> None:
    account_set_blocked(account=account, blocked=True)
    response = call(api, method, path)
    assert response.status_code == 403
    assert response.json() == BLOCKED
    assert not WebhookEndpoint.objects.exists()


def test_blocked_account_cannot_touch_an_existing_endpoint(account: Account, api: APIClient) -> None:
    endpoint = endpoint_of(account)
    account_set_blocked(account=account, blocked=True)
    assert api.delete(f"{WEBHOOKS}/{endpoint.pk}").json() == BLOCKED
    assert api.post(f"{WEBHOOKS}/{endpoint.pk}/rotate-secret").json() == BLOCKED
    endpoint.refresh_from_db()
    assert endpoint.is_active
    assert endpoint.deleted_at is None
    assert not endpoint.previous_secret


def test_permission_is_checked_before_the_account_state(issue_credential: Callable[..., IssuedCredential]) -> None:
    account = AccountFactory(status=Account.Status.PENDING, is_blocked=True)
    client = client_for(issue_credential(account, ApiCredential.Permission.CASHIN))
    assert client.get(WEBHOOKS).json() == NO_PERMISSION


def test_approval_is_checked_before_blocking(issue_credential: Callable[..., IssuedCredential]) -> None:
    account = AccountFactory(status=Account.Status.PENDING, is_blocked=True)
    assert client_for(issue_credential(account)).get(WEBHOOKS).json() == NOT_APPROVED


@pytest.mark.parametrize("body", [None, {"url": "nope"}])
def test_account_state_is_checked_before_the_body(account: Account, api: APIClient, body: Any) -> None:
    account_set_blocked(account=account, blocked=True)
    response = api.post(WEBHOOKS, body, format="json") if body else api.post(WEBHOOKS)
    assert response.status_code == 403
    assert response.json() == BLOCKED


# --------------------------------------------------------------------------- GET /webhooks


def test_empty_listing(api: APIClient) -> None:
    response = api.get(WEBHOOKS)
    assert response.status_code == 200
    body = response.json()
    assert body["success"] is True
    assert isinstance(body["message"], str)
    assert body["message"]
    assert body["data"] == {"webhooks": []}


def test_listing_shape_never_shows_a_secret(account: Account, api: APIClient) -> None:
    first = endpoint_of(account, "https://example.com/one")
    second = services.endpoint_create(account=account, url="https://example.com/two", description="Loja").endpoint
    services.endpoint_rotate_secret(endpoint=second)
    second.refresh_from_db()

    response = api.get(WEBHOOKS)

    webhooks = response.json()["data"]["webhooks"]
    assert [w["id"] for w in webhooks] == [str(second.pk), str(first.pk)]
    assert all(set(w) == ENDPOINT_FIELDS for w in webhooks)
    assert webhooks[0] == {
        "id": str(second.pk),
        "url": "https://example.com/two",
        "description": "Loja",
        "code": second.code,
        "is_active": True,
        "disabled_reason": "",
        "created_at": local(second.created_at),
    }
    content = response.content.decode()
    for secret in (first.secret, second.secret, second.previous_secret):
        assert secret
        assert secret not in content
    assert "whsec_" not in content


def test_disabled_endpoint_is_listed_with_its_reason(account: Account, api: APIClient) -> None:
    endpoint = endpoint_of(account)
    services.endpoint_disable(endpoint=endpoint, reason="410 Gone")
    [item] = listed(api)
    assert item["id"] == str(endpoint.pk)
    assert item["is_active"] is False
    assert item["disabled_reason"] == "410 Gone"


def test_deleted_and_other_accounts_endpoints_are_not_listed(account: Account, api: APIClient) -> None:
    kept = endpoint_of(account)
    services.endpoint_delete(endpoint=endpoint_of(account, "https://example.com/gone"))
    endpoint_of(AccountFactory(), "https://example.com/someone-else")
    assert [w["id"] for w in listed(api)] == [str(kept.pk)]


# --------------------------------------------------------------------------- POST /webhooks


def test_register_returns_the_endpoint_and_its_secret_once(account: Account, api: APIClient) -> None:
    response = api.post(WEBHOOKS, {"url": "https://example.com/hook", "description": "Pedidos"}, format="json")

    assert response.status_code == 201
    body = response.json()
    assert body["success"] is True
    assert isinstance(body["message"], str)
    assert body["message"]
    data = body["data"]
    assert set(data) == ENDPOINT_FIELDS | {"secret"}
    endpoint = WebhookEndpoint.objects.get(pk=data["id"])
    assert endpoint.account == account
    assert data == {
        "id": str(endpoint.pk),
        "url": "https://example.com/hook",
        "description": "Pedidos",
        "code": endpoint.code,
        "is_active": True,
        "disabled_reason": "",
        "created_at": local(endpoint.created_at),
        "secret": endpoint.secret,
    }
    assert data["secret"].startswith("whsec_")
    assert endpoint.is_active
    assert endpoint.deleted_at is None
    # Shown once: never again in the listing.
    assert data["secret"] not in api.get(WEBHOOKS).content.decode()


def test_every_endpoint_gets_its_own_secret_and_code(api: APIClient) -> None:
    first, second = register(api), register(api)
    assert first["secret"] != second["secret"]
    assert first["code"] != second["code"]
    assert WebhookEndpoint.objects.count() == 2


def test_description_is_optional(api: APIClient) -> None:
    response = api.post(WEBHOOKS, {"url": PUBLIC_URL}, format="json")
    assert response.status_code == 201
    assert response.json()["data"]["description"] == ""


def test_unknown_fields_are_ignored(api: APIClient) -> None:
    response = api.post(WEBHOOKS, {"url": PUBLIC_URL, "secret": "whsec_mine", "is_active": False}, format="json")
    assert response.status_code == 201
    endpoint = WebhookEndpoint.objects.get()
    assert endpoint.secret != "whsec_mine"
    assert endpoint.is_active


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"description": "sem url"},
        {"url": ""},
        {"url": None},
        {"url": "example.com/hook"},
        {"url": "ftp://x"},
        {"url": "ftp://example.com/hook"},
        {"url": "javascript:alert(1)"},
        {"url": "http://"},
        {"url": 123},
        {"url": True},
        {"url": ["https://example.com/hook"]},
        {"url": {"href": "https://example.com/hook"}},
        {"url": "https://example.com/" + "a" * 2000},
    ],
)
def test_invalid_url_is_422(api: APIClient, body: dict[str, Any]) -> None:
    response = api.post(WEBHOOKS, body, format="json")
    assert response.status_code == 422
    payload = response.json()
    assert payload["success"] is False
    assert payload["message"] == VALIDATION
    assert set(payload["data"]["errors"]) == {"url"}
    assert not WebhookEndpoint.objects.exists()


@pytest.mark.parametrize("description", [123, ["x"], "x" * 201])
def test_invalid_description_is_422(api: APIClient, description: Any) -> None:
    response = api.post(WEBHOOKS, {"url": PUBLIC_URL, "description": description}, format="json")
    assert response.status_code == 422
    assert response.json()["message"] == VALIDATION
    assert set(response.json()["data"]["errors"]) == {"description"}
    assert not WebhookEndpoint.objects.exists()


@pytest.mark.parametrize("raw", ["[1, 2]", '"https://example.com"', "1", "null", "{not json"])
def test_body_that_is_not_an_object_is_400(api: APIClient, raw: str) -> None:
    response = api.post(WEBHOOKS, raw, content_type="application/json")
    assert response.status_code == 400
    assert response.json() == BAD_BODY
    assert not WebhookEndpoint.objects.exists()


def test_empty_body_is_400(api: APIClient) -> None:
    response = api.post(WEBHOOKS)
    assert response.status_code == 400
    assert response.json() == BAD_BODY
    assert not WebhookEndpoint.objects.exists()


# Decimal and hex hosts are what browsers and curl turn into 127.0.0.1; the
# URL validator already refuses them as malformed (no top-level domain), which
# refuses them just the same.
FORBIDDEN_URLS = [
    ("http://127.0.0.1/x", URL_NOT_ALLOWED),
    ("http://localhost/x", URL_NOT_ALLOWED),
    ("http://169.254.169.254/latest/meta-data", URL_NOT_ALLOWED),
    ("http://10.0.0.1/x", URL_NOT_ALLOWED),
    ("http://192.168.0.10/x", URL_NOT_ALLOWED),
    ("http://172.16.0.1/x", URL_NOT_ALLOWED),
    ("http://[::1]/x", URL_NOT_ALLOWED),
    ("http://[::ffff:127.0.0.1]/x", URL_NOT_ALLOWED),
    ("http://2130706433/", URL_INVALID),
    ("http://0x7f000001/", URL_INVALID),
    ("http://100.64.0.1/", URL_NOT_ALLOWED),
    ("http://[fd00::1]/", URL_NOT_ALLOWED),
    ("http://[fe80::1]/", URL_NOT_ALLOWED),
    ("http://224.0.0.1/", URL_NOT_ALLOWED),
    ("http://0.0.0.0/", URL_NOT_ALLOWED),
    ("http://240.0.0.1/", URL_NOT_ALLOWED),
    ("https://user:pw@127.0.0.1:8443/x", URL_NOT_ALLOWED),
]


@pytest.mark.parametrize(("url", "message"), FORBIDDEN_URLS)
def test_local_private_or_reserved_url_is_refused(api: APIClient, settings: Any, url: str, message: str) -> None:
    settings.WEBHOOKS_ALLOW_PRIVATE_NETWORKS = False
    response = api.post(WEBHOOKS, {"url": url}, format="json")
    assert response.status_code == 422
    assert response.json() == {"success": False, "message": VALIDATION, "data": {"errors": {"url": [message]}}}
    assert not WebhookEndpoint.objects.exists()


@pytest.mark.parametrize("url", ["http://127.0.0.1/x", "http://[::1]/x", "http://0.0.0.0/"])
def test_refused_url_message_is_the_documented_one(api: APIClient, settings: Any, url: str) -> None:
    settings.WEBHOOKS_ALLOW_PRIVATE_NETWORKS = False
    errors = api.post(WEBHOOKS, {"url": url}, format="json").json()["data"]["errors"]
    assert errors == {"url": [URL_NOT_ALLOWED]}


def test_public_ip_is_accepted_without_connecting(api: APIClient, settings: Any, monkeypatch: Any) -> None:
    settings.WEBHOOKS_ALLOW_PRIVATE_NETWORKS = False

    def no_request(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("registration must not send any request")

    monkeypatch.setattr(requests.Session, "send", no_request)
    data = register(api, PUBLIC_URL)
    assert WebhookEndpoint.objects.get(pk=data["id"]).url == PUBLIC_URL


@pytest.mark.parametrize("url", ["http://8.8.8.8/hook", "http://example.com/hook"])
def test_plain_http_is_refused_where_private_networks_are(api: APIClient, settings: Any, url: str) -> None:
    # Production: payloads carry PIX keys (CPF, phone, e-mail).
    settings.WEBHOOKS_ALLOW_PRIVATE_NETWORKS = False
    response = api.post(WEBHOOKS, {"url": url}, format="json")
    assert response.status_code == 422
    assert response.json() == {
        "success": False,
        "message": VALIDATION,
        "data": {"errors": {"url": ["A URL deve usar https: os eventos levam dados do pagador."]}},
    }
    assert not WebhookEndpoint.objects.exists()


def test_plain_http_is_accepted_where_private_networks_are(api: APIClient, settings: Any) -> None:
    settings.WEBHOOKS_ALLOW_PRIVATE_NETWORKS = True  # development and tests
    assert register(api, "http://example.com/hook")["url"] == "http://example.com/hook"


def test_loopback_is_accepted_when_private_networks_are_allowed(api: APIClient, settings: Any) -> None:
    settings.WEBHOOKS_ALLOW_PRIVATE_NETWORKS = True
    data = register(api, "http://127.0.0.1:9/x")
    assert data["url"] == "http://127.0.0.1:9/x"
    assert WebhookEndpoint.objects.filter(pk=data["id"]).exists()


PORT_OUT_OF_RANGE = ["http://example.com:99999/hook", "http://8.8.8.8:65536/hook"]


@pytest.mark.parametrize("url", PORT_OUT_OF_RANGE)
def test_port_out_of_range_is_422_with_the_filter_on(api: APIClient, settings: Any, url: str) -> None:
    settings.WEBHOOKS_ALLOW_PRIVATE_NETWORKS = False
    response = api.post(WEBHOOKS, {"url": url}, format="json")
    assert response.status_code == 422
    assert response.json() == {"success": False, "message": VALIDATION, "data": {"errors": {"url": [URL_INVALID]}}}
    assert not WebhookEndpoint.objects.exists()


@pytest.mark.parametrize("url", PORT_OUT_OF_RANGE)
def test_port_out_of_range_is_422_with_the_filter_off(api: APIClient, settings: Any, url: str) -> None:
    settings.WEBHOOKS_ALLOW_PRIVATE_NETWORKS = True
    response = api.post(WEBHOOKS, {"url": url}, format="json")
    assert response.status_code == 422
    assert set(response.json()["data"]["errors"]) == {"url"}
    assert not WebhookEndpoint.objects.exists()


# --------------------------------------------------------------------------- DELETE /webhooks/{id}


def test_delete_stops_the_endpoint_and_fails_its_pending_deliveries(
    account: Account, api: APIClient, acquirer: Acquirer
) -> None:
    endpoint = endpoint_of(account)
    other = endpoint_of(account, "https://example.com/other")
    paid_charge(api)
    assert WebhookDelivery.objects.filter(endpoint=endpoint, status="pending").count() == 1

    response = api.delete(f"{WEBHOOKS}/{endpoint.pk}")

    assert response.status_code == 200
    assert response.json() == {"success": True, "message": "Webhook removido com sucesso.", "data": None}
    assert [w["id"] for w in listed(api)] == [str(other.pk)]
    endpoint.refresh_from_db()
    assert endpoint.is_active is False
    assert endpoint.deleted_at is not None
    delivery = WebhookDelivery.objects.get(endpoint=endpoint)
    assert delivery.status == WebhookDelivery.Status.FAILED
    assert delivery.next_attempt_at is None
    # The other endpoint is untouched.
    assert WebhookDelivery.objects.get(endpoint=other).status == WebhookDelivery.Status.PENDING
    other.refresh_from_db()
    assert other.is_active
    assert other.deleted_at is None


def test_deleted_endpoint_gets_no_new_deliveries(account: Account, api: APIClient, acquirer: Acquirer) -> None:
    endpoint = endpoint_of(account)
    assert api.delete(f"{WEBHOOKS}/{endpoint.pk}").status_code == 200
    paid_charge(api)
    assert WebhookEvent.objects.count() == 1
    assert not WebhookDelivery.objects.filter(endpoint=endpoint).exists()


def test_delete_twice_is_404(account: Account, api: APIClient) -> None:
    endpoint = endpoint_of(account)
    assert api.delete(f"{WEBHOOKS}/{endpoint.pk}").status_code == 200
    response = api.delete(f"{WEBHOOKS}/{endpoint.pk}")
    assert response.status_code == 404
    assert response.json() == ENDPOINT_NOT_FOUND


@pytest.mark.parametrize("endpoint_id", [str(uuid.uuid4()), "not-a-uuid", "123", "%20"])
def test_delete_unknown_or_malformed_is_404(api: APIClient, endpoint_id: str) -> None:
    response = api.delete(f"{WEBHOOKS}/{endpoint_id}")
    assert response.status_code == 404
    assert response.json() == ENDPOINT_NOT_FOUND


def test_delete_another_accounts_endpoint_is_404_and_changes_nothing(other_api: APIClient, account: Account) -> None:
    endpoint = endpoint_of(account)
    response = other_api.delete(f"{WEBHOOKS}/{endpoint.pk}")
    assert response.status_code == 404
    assert response.json() == ENDPOINT_NOT_FOUND
    endpoint.refresh_from_db()
    assert endpoint.is_active
    assert endpoint.deleted_at is None


# --------------------------------------------------------------------------- rotate-secret


def test_rotate_secret_keeps_the_old_one_for_24_hours(account: Account, api: APIClient) -> None:
    created = register(api)
    old_secret = created["secret"]

    before = timezone.now()
    response = api.post(f"{WEBHOOKS}/{created['id']}/rotate-secret")
    after = timezone.now()

    assert response.status_code == 200
    body = response.json()
    assert body["success"] is True
    assert set(body["data"]) == {"id", "secret"}
    assert body["data"]["id"] == created["id"]
    new_secret = body["data"]["secret"]
    assert new_secret.startswith("whsec_")
    assert new_secret != old_secret
    endpoint = WebhookEndpoint.objects.get(pk=created["id"])
    assert endpoint.secret == new_secret
    assert endpoint.previous_secret == old_secret
    assert endpoint.previous_secret_expires_at is not None
    day = dt.timedelta(hours=24)
    assert before + day <= endpoint.previous_secret_expires_at <= after + day
    # Code and everything else stay.
    assert endpoint.code == created["code"]
    assert endpoint.is_active


def test_second_rotation_keeps_only_the_latest_previous_secret(api: APIClient) -> None:
    created = register(api)
    first = api.post(f"{WEBHOOKS}/{created['id']}/rotate-secret").json()["data"]["secret"]
    second = api.post(f"{WEBHOOKS}/{created['id']}/rotate-secret").json()["data"]["secret"]
    endpoint = WebhookEndpoint.objects.get(pk=created["id"])
    assert len({created["secret"], first, second}) == 3
    assert (endpoint.secret, endpoint.previous_secret) == (second, first)


@pytest.mark.parametrize("endpoint_id", [str(uuid.uuid4()), "not-a-uuid"])
def test_rotate_unknown_or_malformed_is_404(api: APIClient, endpoint_id: str) -> None:
    response = api.post(f"{WEBHOOKS}/{endpoint_id}/rotate-secret")
    assert response.status_code == 404
    assert response.json() == ENDPOINT_NOT_FOUND


def test_rotate_deleted_endpoint_is_404(account: Account, api: APIClient) -> None:
    endpoint = endpoint_of(account)
    services.endpoint_delete(endpoint=endpoint)
    response = api.post(f"{WEBHOOKS}/{endpoint.pk}/rotate-secret")
    assert response.status_code == 404
    assert response.json() == ENDPOINT_NOT_FOUND


def test_rotate_another_accounts_endpoint_is_404_and_changes_nothing(other_api: APIClient, account: Account) -> None:
    endpoint = endpoint_of(account)
    response = other_api.post(f"{WEBHOOKS}/{endpoint.pk}/rotate-secret")
    assert response.status_code == 404
    assert response.json() == ENDPOINT_NOT_FOUND
    stored = WebhookEndpoint.objects.get(pk=endpoint.pk)
    assert (stored.secret, stored.previous_secret) == (endpoint.secret, "")


# --------------------------------------------------------------------------- GET /webhooks/{id}/deliveries


def test_deliveries_listing_shape(account: Account, api: APIClient, acquirer: Acquirer) -> None:
    endpoint = endpoint_of(account)
    charge_id = paid_charge(api, "refund")
    paid, refunded = (WebhookEvent.objects.get(record_id=charge_id, status=s) for s in ("paid", "refunded"))
    newest = WebhookDelivery.objects.get(event=refunded)
    attempted_at = timezone.now()
    WebhookAttempt.objects.create(
        delivery=newest,
        number=1,
        attempted_at=attempted_at,
        status_code=500,
        latency_ms=12,
        response_body="secret internals",
        error="",
        succeeded=False,
    )
    WebhookDelivery.objects.filter(pk=newest.pk).update(attempt_count=1, last_status_code=500)
    newest.refresh_from_db()

    response = api.get(f"{WEBHOOKS}/{endpoint.pk}/deliveries")

    assert response.status_code == 200
    body = response.json()
    assert body["success"] is True
    assert isinstance(body["message"], str)
    assert body["message"]
    data = body["data"]
    assert set(data) == {"deliveries", "pagination"}
    assert data["pagination"] == {"current_page": 1, "last_page": 1, "per_page": 15, "total": 2}
    items = data["deliveries"]
    assert [d["event_id"] for d in items] == [str(refunded.pk), str(paid.pk)]
    assert all(set(d) == DELIVERY_FIELDS for d in items)
    assert items[0] == {
        "id": str(newest.pk),
        "event_id": str(refunded.pk),
        "event_type": "transaction",
        "status": "pending",
        "attempt_count": 1,
        "next_attempt_at": local(newest.next_attempt_at),
        "last_status_code": 500,
        "created_at": local(newest.created_at),
        "attempts": [
            {
                "number": 1,
                "attempted_at": local(attempted_at),
                "status_code": 500,
                "latency_ms": 12,
                "error": "",
                "succeeded": False,
            }
        ],
    }
    assert items[1]["attempts"] == []
    assert items[1]["attempt_count"] == 0
    assert "secret internals" not in response.content.decode()


def test_deliveries_only_of_that_endpoint(account: Account, api: APIClient, acquirer: Acquirer) -> None:
    endpoint = endpoint_of(account)
    other = endpoint_of(account, "https://example.com/other")
    paid_charge(api)
    mine = deliveries(api, endpoint.pk)["deliveries"]
    assert [d["id"] for d in mine] == [str(WebhookDelivery.objects.get(endpoint=endpoint).pk)]
    assert [d["id"] for d in deliveries(api, other.pk)["deliveries"]] == [
        str(WebhookDelivery.objects.get(endpoint=other).pk)
    ]


def test_attempts_are_listed_in_order(account: Account, api: APIClient) -> None:
    endpoint = endpoint_of(account)
    emit(account)
    delivery = WebhookDelivery.objects.get(endpoint=endpoint)
    now = timezone.now()
    for number in (2, 3, 1):
        WebhookAttempt.objects.create(
            delivery=delivery,
            number=number,
            attempted_at=now + dt.timedelta(minutes=number),
            status_code=None,
            latency_ms=1,
            error="ConnectionError: refused",
            succeeded=False,
        )
    [item] = deliveries(api, endpoint.pk)["deliveries"]
    assert [a["number"] for a in item["attempts"]] == [1, 2, 3]
    assert item["attempts"][0]["status_code"] is None
    assert item["attempts"][0]["error"] == "ConnectionError: refused"


def test_filter_by_status(account: Account, api: APIClient) -> None:
    endpoint = endpoint_of(account)
    for _ in range(3):
        emit(account)
    rows = list(WebhookDelivery.objects.filter(endpoint=endpoint).order_by("created_at"))
    WebhookDelivery.objects.filter(pk=rows[0].pk).update(status="failed", next_attempt_at=None)
    WebhookDelivery.objects.filter(pk=rows[1].pk).update(status="succeeded", next_attempt_at=None)

    def ids(status: str) -> list[str]:
        return [d["id"] for d in deliveries(api, endpoint.pk, status=status)["deliveries"]]

    assert ids("failed") == [str(rows[0].pk)]
    assert ids("succeeded") == [str(rows[1].pk)]
    assert ids("pending") == [str(rows[2].pk)]
    assert deliveries(api, endpoint.pk, status="failed")["pagination"]["total"] == 1


def test_filter_by_event_type(account: Account, api: APIClient, acquirer: Acquirer) -> None:
    endpoint = endpoint_of(account)
    paid_charge(api)
    withdrawal = emit(account, EventType.WITHDRAWAL, status="completed")
    by_type = {
        kind: [d["event_id"] for d in deliveries(api, endpoint.pk, event_type=kind)["deliveries"]]
        for kind in ("transaction", "withdrawal")
    }
    assert by_type["withdrawal"] == [str(withdrawal.pk)]
    [transaction_event] = by_type["transaction"]
    assert WebhookEvent.objects.get(pk=transaction_event).event_type == "transaction"


def test_created_at_filters_are_sao_paulo_time_and_inclusive(account: Account, api: APIClient) -> None:
    endpoint = endpoint_of(account)
    for _ in range(3):
        emit(account)
    rows = list(WebhookDelivery.objects.filter(endpoint=endpoint).order_by("created_at"))
    # 12:00:00.5 UTC is 09:00:00 in São Paulo; the others are a minute before and after.
    moments = [
        dt.datetime(2026, 1, 10, 11, 59, 0, tzinfo=dt.UTC),
        dt.datetime(2026, 1, 10, 12, 0, 0, 500000, tzinfo=dt.UTC),
        dt.datetime(2026, 1, 10, 12, 1, 0, tzinfo=dt.UTC),
    ]
    for row, moment in zip(rows, moments, strict=True):
        WebhookDelivery.objects.filter(pk=row.pk).update(created_at=moment)

    def ids(**params: str) -> list[str]:
        return [d["id"] for d in deliveries(api, endpoint.pk, **params)["deliveries"]]

    exact = "2026-01-10 09:00:00"
    assert ids(created_at_start=exact, created_at_end=exact) == [str(rows[1].pk)]
    assert ids(created_at_start=exact) == [str(rows[2].pk), str(rows[1].pk)]
    assert ids(created_at_end=exact) == [str(rows[1].pk), str(rows[0].pk)]
    assert ids(created_at_start="2026-01-10 09:00:01", created_at_end="2026-01-10 09:00:59") == []
    assert deliveries(api, endpoint.pk)["deliveries"][0]["created_at"] == "2026-01-10 09:01:00"


@pytest.mark.parametrize(
    ("param", "value"),
    [
        ("status", "nope"),
        ("status", "PENDING"),
        ("event_type", "charge"),
        ("created_at_start", "2026-01-10"),
        ("created_at_start", "10/01/2026 09:00:00"),
        ("created_at_end", "2026-01-10T09:00:00"),
        ("created_at_end", "2026-01-10 09:00:00-03:00"),
        ("per_page", "0"),
        ("per_page", "101"),
        ("per_page", "abc"),
        ("page", "0"),
        ("page", "-1"),
        ("page", "1.5"),
    ],
)
def test_invalid_parameter_is_422_under_its_name(account: Account, api: APIClient, param: str, value: str) -> None:
    endpoint = endpoint_of(account)
    response = api.get(f"{WEBHOOKS}/{endpoint.pk}/deliveries", {param: value})
    assert response.status_code == 422
    assert response.json()["success"] is False
    assert response.json()["message"] == VALIDATION
    assert set(response.json()["data"]["errors"]) == {param}


def test_every_invalid_parameter_is_reported(account: Account, api: APIClient) -> None:
    endpoint = endpoint_of(account)
    params = {"status": "x", "event_type": "x", "created_at_start": "x", "created_at_end": "x", "page": "x"}
    response = api.get(f"{WEBHOOKS}/{endpoint.pk}/deliveries", params)
    assert response.status_code == 422
    assert set(response.json()["data"]["errors"]) == set(params)


def test_pagination(account: Account, api: APIClient) -> None:
    endpoint = endpoint_of(account)
    for _ in range(17):
        emit(account)
    newest_first = [
        str(pk)
        for pk in WebhookDelivery.objects.filter(endpoint=endpoint)
        .order_by("-created_at", "-id")
        .values_list("pk", flat=True)
    ]

    first, second = deliveries(api, endpoint.pk), deliveries(api, endpoint.pk, page=2)
    assert first["pagination"] == {"current_page": 1, "last_page": 2, "per_page": 15, "total": 17}
    assert second["pagination"] == {"current_page": 2, "last_page": 2, "per_page": 15, "total": 17}
    assert [d["id"] for d in first["deliveries"] + second["deliveries"]] == newest_first

    small = deliveries(api, endpoint.pk, per_page=5, page=4)
    assert small["pagination"] == {"current_page": 4, "last_page": 4, "per_page": 5, "total": 17}
    assert [d["id"] for d in small["deliveries"]] == newest_first[15:]
    assert len(deliveries(api, endpoint.pk, per_page=100)["deliveries"]) == 17
    assert len(deliveries(api, endpoint.pk, per_page=1)["deliveries"]) == 1

    past = deliveries(api, endpoint.pk, page=9)
    assert past == {
        "deliveries": [],
        "pagination": {"current_page": 9, "last_page": 2, "per_page": 15, "total": 17},
    }


def test_empty_deliveries(account: Account, api: APIClient) -> None:
    endpoint = endpoint_of(account)
    assert deliveries(api, endpoint.pk) == {
        "deliveries": [],
        "pagination": {"current_page": 1, "last_page": 1, "per_page": 15, "total": 0},
    }


def _with_attempts(account: Account, endpoint: WebhookEndpoint, events: int, attempts: int) -> None:
    for _ in range(events):
        emit(account)
    now = timezone.now()
    WebhookAttempt.objects.bulk_create(
        WebhookAttempt(
            delivery=delivery, number=n, attempted_at=now, status_code=500, latency_ms=1, error="", succeeded=False
        )
        for delivery in WebhookDelivery.objects.filter(endpoint=endpoint, attempts__isnull=True)
        for n in range(1, attempts + 1)
    )


def test_deliveries_listing_query_count_does_not_grow(
    account: Account, api: APIClient, django_assert_max_num_queries: Any
) -> None:
    endpoint = endpoint_of(account)
    _with_attempts(account, endpoint, events=1, attempts=1)
    with CaptureQueriesContext(connection) as small:
        assert len(deliveries(api, endpoint.pk)["deliveries"]) == 1

    _with_attempts(account, endpoint, events=14, attempts=3)
    with django_assert_max_num_queries(len(small.captured_queries)):
        data = deliveries(api, endpoint.pk)
    assert len(data["deliveries"]) == 15
    assert sum(len(d["attempts"]) for d in data["deliveries"]) > 15


@pytest.mark.parametrize("endpoint_id", [str(uuid.uuid4()), "not-a-uuid"])
def test_deliveries_of_unknown_or_malformed_endpoint_is_404(api: APIClient, endpoint_id: str) -> None:
    response = api.get(f"{WEBHOOKS}/{endpoint_id}/deliveries")
    assert response.status_code == 404
    assert response.json() == ENDPOINT_NOT_FOUND


def test_deliveries_of_another_accounts_endpoint_is_404(other_api: APIClient, account: Account) -> None:
    endpoint = endpoint_of(account)
    emit(account)
    response = other_api.get(f"{WEBHOOKS}/{endpoint.pk}/deliveries")
    assert response.status_code == 404
    assert response.json() == ENDPOINT_NOT_FOUND


def test_deliveries_of_a_deleted_endpoint_is_404(account: Account, api: APIClient) -> None:
    endpoint = endpoint_of(account)
    emit(account)
    services.endpoint_delete(endpoint=endpoint)
    response = api.get(f"{WEBHOOKS}/{endpoint.pk}/deliveries")
    assert response.status_code == 404
    assert response.json() == ENDPOINT_NOT_FOUND


# --------------------------------------------------------------------------- POST /webhook-events/{id}/redeliver


def _fail(delivery: WebhookDelivery) -> None:
    WebhookDelivery.objects.filter(pk=delivery.pk).update(
        status="failed", next_attempt_at=None, attempt_count=10, last_status_code=500, last_error="HTTP 500"
    )


def test_redeliver_restarts_failed_deliveries_to_active_endpoints(
    account: Account, api: APIClient, acquirer: Acquirer, django_capture_on_commit_callbacks: Any
) -> None:
    active = endpoint_of(account, "https://example.com/active")
    succeeded = endpoint_of(account, "https://example.com/succeeded")
    deleted = endpoint_of(account, "https://example.com/deleted")
    disabled = endpoint_of(account, "https://example.com/disabled")
    charge_id = paid_charge(api)
    event = WebhookEvent.objects.get(record_id=charge_id)
    by_endpoint = {d.endpoint_id: d for d in WebhookDelivery.objects.filter(event=event)}
    assert set(by_endpoint) == {active.pk, succeeded.pk, deleted.pk, disabled.pk}
    for endpoint in (active, deleted, disabled):
        _fail(by_endpoint[endpoint.pk])
    WebhookDelivery.objects.filter(pk=by_endpoint[succeeded.pk].pk).update(
        status="succeeded", next_attempt_at=None, attempt_count=1, last_status_code=200
    )
    services.endpoint_delete(endpoint=deleted)
    services.endpoint_disable(endpoint=disabled, reason="410 Gone")
    untouched_before = {
        pk: WebhookDelivery.objects.values().get(pk=by_endpoint[pk].pk)
        for pk in (succeeded.pk, deleted.pk, disabled.pk)
    }

    before = timezone.now()
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = api.post(f"/api/webhook-events/{event.pk}/redeliver")
    after = timezone.now()

    assert response.status_code == 202
    body = response.json()
    assert body["success"] is True
    assert isinstance(body["message"], str)
    assert body["message"]
    assert body["data"] == {"redelivered": 1}
    redelivered = WebhookDelivery.objects.get(pk=by_endpoint[active.pk].pk)
    assert redelivered.status == WebhookDelivery.Status.PENDING
    assert redelivered.attempt_count == 0
    assert redelivered.next_attempt_at is not None
    assert before <= redelivered.next_attempt_at <= after
    assert redelivered.leased_until is None
    assert enqueued(callbacks) == {str(redelivered.pk)}
    for pk, row in untouched_before.items():
        assert WebhookDelivery.objects.values().get(pk=by_endpoint[pk].pk) == row
    # The same event id is kept: no new event or delivery rows.
    assert WebhookEvent.objects.count() == 1
    assert WebhookDelivery.objects.filter(event=event).count() == 4


def test_redeliver_includes_a_failed_postback(
    account: Account, api: APIClient, acquirer: Acquirer, django_capture_on_commit_callbacks: Any
) -> None:
    created = api.post("/api/transactions", {**CHARGE, "postback_url": "https://example.com/pb"}, format="json")
    assert created.status_code == 201
    charge_id = created.json()["data"]["id"]
    assert api.post(f"/api/sandbox/transactions/{charge_id}/pay").status_code == 200
    event = WebhookEvent.objects.get(record_id=charge_id)
    postback = WebhookDelivery.objects.get(event=event, endpoint__isnull=True)
    _fail(postback)

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = api.post(f"/api/webhook-events/{event.pk}/redeliver")

    assert response.status_code == 202
    assert response.json()["data"] == {"redelivered": 1}
    postback.refresh_from_db()
    assert (postback.status, postback.attempt_count) == ("pending", 0)
    assert enqueued(callbacks) == {str(postback.pk)}


def test_redeliver_with_nothing_failed_is_zero(
    account: Account, api: APIClient, acquirer: Acquirer, django_capture_on_commit_callbacks: Any
) -> None:
    endpoint_of(account)
    charge_id = paid_charge(api)
    event = WebhookEvent.objects.get(record_id=charge_id)
    before = WebhookDelivery.objects.values().get(event=event)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = api.post(f"/api/webhook-events/{event.pk}/redeliver")
    assert response.status_code == 202
    assert response.json()["data"] == {"redelivered": 0}
    assert enqueued(callbacks) == set()
    assert WebhookDelivery.objects.values().get(event=event) == before


def test_redelivered_delivery_is_sent_again(account: Account, api: APIClient, receiver: Any) -> None:
    # The delivery itself is called directly (no worker): what is under test
    # is that a redelivered row can take a new attempt after its old ones.
    endpoint = endpoint_of(account, receiver.url)
    emit(account)
    delivery = WebhookDelivery.objects.get(endpoint=endpoint)
    receiver.respond(500)
    assert delivery_attempt(delivery_id=delivery.pk) == DeliveryOutcome.RETRY
    WebhookDelivery.objects.filter(pk=delivery.pk).update(status="failed", next_attempt_at=None)
    event = delivery.event
    assert api.post(f"/api/webhook-events/{event.pk}/redeliver").json()["data"] == {"redelivered": 1}

    receiver.respond(200)
    outcome = delivery_attempt(delivery_id=delivery.pk)

    assert outcome == DeliveryOutcome.SUCCEEDED
    assert len(receiver.requests) == 2
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempt_count) == (WebhookDelivery.Status.SUCCEEDED, 1)
    # Attempt numbers run on across rounds: the history of the first round stays.
    assert list(delivery.attempts.values_list("number", "status_code")) == [(1, 500), (2, 200)]


@pytest.mark.parametrize("event_id", [str(uuid.uuid4()), "not-a-uuid"])
def test_redeliver_unknown_or_malformed_event_is_404(api: APIClient, event_id: str) -> None:
    response = api.post(f"/api/webhook-events/{event_id}/redeliver")
    assert response.status_code == 404
    assert response.json() == EVENT_NOT_FOUND


def test_redeliver_another_accounts_event_is_404_and_changes_nothing(
    account: Account, other_api: APIClient, django_capture_on_commit_callbacks: Any
) -> None:
    endpoint_of(account)
    event = emit(account)
    delivery = WebhookDelivery.objects.get(event=event)
    _fail(delivery)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = other_api.post(f"/api/webhook-events/{event.pk}/redeliver")
    assert response.status_code == 404
    assert response.json() == EVENT_NOT_FOUND
    assert enqueued(callbacks) == set()
    assert WebhookDelivery.objects.get(pk=delivery.pk).status == WebhookDelivery.Status.FAILED


# --------------------------------------------------------------------------- OpenAPI


@pytest.fixture(scope="module")
def schema(django_db_blocker: Any) -> Any:
    with django_db_blocker.unblock():
        response = Client().get("/api/schema/")
    assert response.status_code == 200
    return yaml.safe_load(response.content)


@pytest.mark.parametrize(
    ("path", "method", "success"),
    [
        ("/api/webhooks", "get", "200"),
        ("/api/webhooks", "post", "201"),
        ("/api/webhooks/{endpoint_id}", "delete", "200"),
        ("/api/webhooks/{endpoint_id}/rotate-secret", "post", "200"),
        ("/api/webhooks/{endpoint_id}/deliveries", "get", "200"),
        ("/api/webhook-events/{event_id}/redeliver", "post", "202"),
    ],
)
def test_schema_documents_the_webhook_endpoints(schema: Any, path: str, method: str, success: str) -> None:
    operation = schema["paths"][path][method]
    assert {success, "401", "403"} <= set(operation["responses"])
    assert operation["security"] == [{"PublicKey": [], "SecretKey": []}]
    if "{" in path:
        assert "404" in operation["responses"]


def test_schema_documents_the_registration_body_and_refusal(schema: Any) -> None:
    operation = schema["paths"]["/api/webhooks"]["post"]
    assert "422" in operation["responses"]
    assert "private" in operation["description"]
    ref = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    body = schema["components"]["schemas"][ref.rsplit("/", 1)[1]]
    assert set(body["properties"]) == {"url", "description"}
    assert body["required"] == ["url"]


def test_schema_documents_the_delivery_filters(schema: Any) -> None:
    operation = schema["paths"]["/api/webhooks/{endpoint_id}/deliveries"]["get"]
    names = {p["name"] for p in operation["parameters"] if p["in"] == "query"}
    assert names == {"status", "event_type", "created_at_start", "created_at_end", "page", "per_page"}
    assert "422" in operation["responses"]
