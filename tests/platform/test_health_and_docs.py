"""OpenAPI schema and Swagger UI (health: test_observability)."""

from __future__ import annotations

import json

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def test_schema_describes_both_auth_headers(schema: dict) -> None:
    schemes = schema["components"]["securitySchemes"]
    assert schemes["PublicKey"] == {
        "type": "apiKey",
        "in": "header",
        "name": "X-Public-Key",
        "description": "Public key (`pk_…`).",
    }
    assert schemes["SecretKey"]["name"] == "X-Secret-Key"


def test_schema_documents_envelopes_and_error_statuses(schema: dict) -> None:
    balance = schema["paths"]["/api/withdrawals/balance"]["get"]
    assert {"200", "401", "403", "429", "500"} <= set(balance["responses"])
    assert balance["security"] == [{"PublicKey": [], "SecretKey": []}]
    ok_schema = balance["responses"]["200"]["content"]["application/json"]["schema"]
    assert ok_schema["$ref"].endswith("/BalanceResponse")
    envelope = schema["components"]["schemas"]["BalanceResponse"]
    assert set(envelope["properties"]) == {"success", "message", "data"}


def test_health_is_public_in_the_schema(schema: dict) -> None:
    assert not schema.get("security")
    assert not schema["paths"]["/api/health"]["get"].get("security")
    assert not schema["paths"]["/api/health/ready"]["get"].get("security")


def test_schema_generates_without_warnings_and_validates() -> None:
    from django.core.management import call_command

    # --fail-on-warn turns any ambiguity drf-spectacular finds into a failure.
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", "/dev/null")


def test_swagger_ui_is_served() -> None:
    response = Client().get("/api/docs/")
    assert response.status_code == 200
    assert b"swagger" in response.content.lower()


def test_the_schema_is_built_once_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    # It was rebuilt on every request: ~170 ms of CPU, for anyone who asks.
    from drf_spectacular.generators import SchemaGenerator

    from observability.views import SchemaView

    monkeypatch.setattr(SchemaView, "_built", None)  # as in a fresh process
    builds = []
    build = SchemaGenerator.get_schema

    def counted(self: SchemaGenerator, *args: object, **kwargs: object) -> object:
        builds.append(1)
        return build(self, *args, **kwargs)

    monkeypatch.setattr(SchemaGenerator, "get_schema", counted)
    client = Client(HTTP_ACCEPT="application/vnd.oai.openapi+json")
    first = client.get("/api/schema/")
    again = [client.get("/api/schema/"), Client().get("/api/schema/"), client.get("/api/schema/?lang=en&version=9")]

    assert len(builds) == 1
    assert first.status_code == 200
    assert json.loads(first.content)["paths"]["/api/transactions"]
    assert [r.status_code for r in again] == [200, 200, 200]
    assert again[0].content == first.content
    assert again[1]["Content-Type"].startswith("application/vnd.oai.openapi")  # YAML, by default


@pytest.mark.parametrize("path", ["/api/schema/", "/api/docs/"])
def test_the_schema_and_docs_refuse_other_methods_in_the_json_envelope(path: str) -> None:
    response = Client().delete(path)
    assert response.status_code == 405
    assert response.json() == {"success": False, "message": "Método não permitido.", "data": None}
    assert response["Allow"] == "GET, HEAD"
