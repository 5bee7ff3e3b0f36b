"""What the schemathesis run found in the service itself (not in its schema),
kept as plain regression tests: each was a 500 or a value the schema called
invalid and the service took."""

from __future__ import annotations

import json
from typing import Any

import pytest
from rest_framework.test import APIClient

from payments.models import Charge
from tests.helpers import listing_errors

pytestmark = pytest.mark.django_db

CHARGE_BODY: dict[str, Any] = {
    "payment_method": "pix",
    "amount": 1000,
    "buyer": {"buyer_name": "Fulano de Tal", "buyer_document": "52998224725", "buyer_phone": "11999998888"},
}


@pytest.mark.parametrize(
    "metadata",
    [{"note": "a\u0000b"}, {"a\u0000": 1}, {"list": ["\ud800"]}, {"\udfff": {"deep": "x"}}],
    ids=["nul-value", "nul-key", "lone-surrogate-value", "lone-surrogate-key"],
)
def test_metadata_postgresql_cannot_store_is_a_422_before_any_acquirer_is_called(
    api: APIClient, metadata: dict
) -> None:
    # Was a 500 from the INSERT, after the acquirer had already issued the code.
    body = json.dumps({**CHARGE_BODY, "metadata": metadata})  # \u escapes: the JSON itself is valid
    response = api.post("/api/transactions", body, content_type="application/json")
    assert response.status_code == 422
    assert list(response.json()["data"]["errors"]) == ["metadata"]
    assert not Charge.objects.exists()


@pytest.mark.parametrize("body", ["[" * 5000, '{"a":' * 5000], ids=["arrays", "objects"])
@pytest.mark.parametrize("path", ["/api/transactions", "/api/withdrawals", "/api/webhooks"])
def test_a_body_nested_past_the_parsers_limit_is_the_invalid_body_400(api: APIClient, path: str, body: str) -> None:
    # Was a RecursionError, hence a 500.
    response = api.post(path, body, content_type="application/json")
    assert response.status_code == 400
    assert response.json() == {"success": False, "message": "Corpo da requisição inválido.", "data": None}


@pytest.mark.parametrize("url", ["/api/transactions", "/api/withdrawals"])
@pytest.mark.parametrize("param", ["id", "e2e_id", "status", "amount_min", "created_at_end", "page", "per_page"])
def test_a_listing_parameter_sent_without_a_value_is_a_422(api: APIClient, url: str, param: str) -> None:
    # Was read as "not given": `?id=` listed everything.
    assert listing_errors(api, url, **{param: ""}) == {param: ["Este campo não pode ser em branco."]}


@pytest.mark.parametrize("param", ["created_at_end", "paid_at_end"])
@pytest.mark.parametrize("url", ["/api/transactions", "/api/withdrawals"])
def test_the_last_representable_second_is_a_valid_end_bound(api: APIClient, url: str, param: str) -> None:
    # Was an OverflowError (the end bound adds a second), hence a 500.
    response = api.get(url, {param: "9999-12-31 23:59:59"})
    assert response.status_code == 200


@pytest.mark.parametrize("value", ["2025-1-01 00:00:00", "2025-01-01 0:00:00", "٢٠٢٥-01-01 00:00:00"])
def test_timestamps_need_every_digit_and_ascii_digits(api: APIClient, value: str) -> None:
    # strptime alone took these; the schema's pattern does not.
    assert listing_errors(api, "/api/transactions", created_at_start=value) == {
        "created_at_start": ["Use o formato AAAA-MM-DD HH:mm:ss."]
    }


def test_an_unknown_post_under_api_is_the_404_envelope_even_with_csrf_checks() -> None:
    # Was Django's CSRF 403 page: the catch-all view was not CSRF-exempt.
    from django.test import Client

    response = Client(enforce_csrf_checks=True).post("/api/sandbox/transactions/x/AAA", "{}", "application/json")
    assert response.status_code == 404
    assert response.json() == {"success": False, "message": "Recurso não encontrado.", "data": None}


def test_a_notification_with_a_nul_byte_is_stored_and_refused_not_a_500() -> None:
    from acquirers.models import InboundNotification
    from tests.factories import AcquirerFactory

    acquirer = AcquirerFactory(key="nul_sbx", options={"notification_secret": "s" * 20})
    response = APIClient().post(
        f"/api/acquirers/{acquirer.key}/notifications", b'{"event":"\x00"}', content_type="application/json"
    )
    assert response.status_code == 401
    (stored,) = InboundNotification.objects.filter(acquirer=acquirer)
    assert "\ufffd" in stored.body


def test_a_deep_body_with_an_idempotency_key_is_the_invalid_body_400(api: APIClient) -> None:
    # The key's request hash parsed the body again and hit the recursion limit.
    response = api.post("/api/withdrawals", "[" * 5000, content_type="application/json", HTTP_IDEMPOTENCY_KEY="deep-1")
    assert response.status_code == 400
    assert response.json()["message"] == "Corpo da requisição inválido."


FULL_WIDTH = {ord("0") + d: 0xFF10 + d for d in range(10)}
ARABIC_INDIC = {ord("0") + d: 0x0660 + d for d in range(10)}


@pytest.mark.parametrize("digits", [FULL_WIDTH, ARABIC_INDIC], ids=["full-width", "arabic-indic"])
@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("buyer_phone", "11999998888", "Informe DDD e número, apenas dígitos (10 ou 11)."),
        ("buyer_zipcode", "01310100", "Informe o CEP com 8 dígitos."),
    ],
)
def test_digits_are_ascii_digits(api: APIClient, digits: dict[int, int], field: str, value: str, message: str) -> None:
    # \d took them: stored as typed, unreadable to any acquirer.
    body = {**CHARGE_BODY, "buyer": {**CHARGE_BODY["buyer"], field: value.translate(digits)}}
    response = api.post("/api/transactions", body, format="json")
    assert response.status_code == 422
    assert response.json()["data"]["errors"] == {f"buyer.{field}": [message]}
    assert not Charge.objects.exists()


@pytest.mark.parametrize("param", ["amount_min", "amount_max", "page", "per_page"])
def test_listing_integers_are_ascii_digits(api: APIClient, param: str) -> None:
    # int() took U+0665 (Arabic-Indic five) as 5.
    errors = listing_errors(api, "/api/transactions", **{param: "5".translate(ARABIC_INDIC)})
    assert list(errors) == [param]
