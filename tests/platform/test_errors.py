"""Every error leaves in the contract's envelope; nothing leaks a trace."""

from __future__ import annotations

import logging

import pytest
from rest_framework.test import APIClient

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.platform.urls")]

VALID = {"amount": 10, "buyer": {"buyer_document": "123"}, "acquirers": [{"priority": 1}]}


def test_unknown_route_is_404_envelope(api: APIClient) -> None:
    response = api.get("/api/does-not-exist")
    assert response.status_code == 404
    assert response.json() == {"success": False, "message": "Recurso não encontrado.", "data": None}


def test_unknown_route_without_credentials_is_still_envelope() -> None:
    response = APIClient().post("/api/nope/deeper", {}, format="json")
    assert response.status_code == 404
    assert response.json()["success"] is False


def test_method_not_allowed_is_405_envelope(api: APIClient) -> None:
    response = api.delete("/api/withdrawals/balance")
    assert response.status_code == 405
    assert response.json() == {"success": False, "message": "Método não permitido.", "data": None}


def test_invalid_json_is_400(api: APIClient) -> None:
    response = api.post("/api/_test/echo", "{not json", content_type="application/json")
    assert response.status_code == 400
    assert response.json() == {"success": False, "message": "Corpo da requisição inválido.", "data": None}


@pytest.mark.parametrize("body", ["[1, 2]", '"text"', "42", "null"])
def test_json_that_is_not_an_object_is_400(api: APIClient, body: str) -> None:
    response = api.post("/api/_test/echo", body, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["message"] == "Corpo da requisição inválido."


def test_json_without_content_type_is_parsed(api: APIClient) -> None:
    # curl -d sends form encoding by default; the body is still JSON.
    import json

    response = api.post("/api/_test/echo", json.dumps(VALID), content_type="application/x-www-form-urlencoded")
    assert response.status_code == 201


def test_form_body_is_400(api: APIClient) -> None:
    response = api.post("/api/_test/echo", "amount=1&x=2", content_type="application/x-www-form-urlencoded")
    assert response.status_code == 400
    assert response.json()["message"] == "Corpo da requisição inválido."


def test_validation_errors_use_dotted_keys_and_portuguese(api: APIClient) -> None:
    body = {"amount": "abc", "buyer": {"buyer_document": "123456"}, "acquirers": [{"priority": 1}, {}]}
    response = api.post("/api/_test/echo", body, format="json")
    assert response.status_code == 422
    payload = response.json()
    assert payload["success"] is False
    assert payload["message"] == "Erro de validação nos dados fornecidos"
    errors = payload["data"]["errors"]
    assert set(errors) == {"amount", "buyer.buyer_document", "acquirers.1.priority"}
    assert errors["acquirers.1.priority"] == ["Este campo é obrigatório."]
    assert all(isinstance(m, str) for messages in errors.values() for m in messages)


def test_business_rule_is_400_envelope(api: APIClient) -> None:
    response = api.post("/api/_test/echo", {**VALID, "amount": 1000}, format="json")
    assert response.status_code == 400
    assert response.json() == {"success": False, "message": "Valor alto demais.", "data": None}


def test_unexpected_error_is_500_without_trace(api: APIClient, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR, logger="pix_service.errors"):
        response = api.get("/api/_test/boom", HTTP_X_REQUEST_ID="req-123")
    assert response.status_code == 500
    assert response.json() == {"success": False, "message": "Erro interno do servidor.", "data": None}
    assert "hunter2" not in response.content.decode()
    assert response["X-Request-ID"] == "req-123"
    # The trace goes to the log, tagged with the request id.
    record = next(r for r in caplog.records if r.name == "pix_service.errors")
    assert record.exc_info is not None
    assert getattr(record, "request_id", None) == "req-123"


def test_unexpected_error_on_a_create_endpoint_uses_its_message(api: APIClient) -> None:
    response = api.post("/api/_test/create-boom", {}, format="json")
    assert response.status_code == 500
    assert response.json() == {"success": False, "message": "Ocorreu um erro ao criar o pagamento.", "data": None}


def test_view_without_declared_permission_is_denied() -> None:
    from rest_framework.views import APIView

    from api.base import AccountAPIView

    # Defaults deny: a view that forgets to declare what it needs serves nobody.
    assert getattr(APIView.permission_classes[0], "__name__", None) == "DenyAll"
    assert "required_permission" not in AccountAPIView.__dict__


def test_account_view_without_required_permission_serves_nobody(api: APIClient) -> None:
    response = api.get("/api/_test/forgetful")  # an `all` credential of an approved account
    assert response.status_code == 403
    assert response.json() == {
        "success": False,
        "message": "Esta credencial não tem permissão para realizar esta operação.",
        "data": None,
    }


def test_request_id_is_generated_when_absent_or_unsafe(api: APIClient) -> None:
    generated = api.get("/api/withdrawals/balance")["X-Request-ID"]
    assert len(generated) == 32
    unsafe = api.get("/api/withdrawals/balance", HTTP_X_REQUEST_ID="bad id\nInjected: 1")["X-Request-ID"]
    assert "Injected" not in unsafe
    assert len(unsafe) == 32
