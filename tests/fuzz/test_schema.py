"""What the schemathesis run (tests/fuzz/run_schemathesis.py) relies on, held
by the suite so that a schema regression shows up without the fuzzer: every
account operation documents its error envelopes, request bodies are JSON
only, and the documented timestamp is exactly what the filters take."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from django import forms
from hypothesis import given, settings

from api.listing import TIMESTAMP_PATTERN, TimestampField
from api.schema import TIMESTAMP_FORMAT

pytestmark = pytest.mark.django_db

METHODS = ("get", "post", "put", "patch", "delete")


def account_operations(schema: dict) -> list[tuple[str, str, dict]]:
    """Operations behind the key pair (the public health and acquirer callbacks are not)."""
    return [
        (path, method, operation)
        for path, item in schema["paths"].items()
        for method, operation in item.items()
        if method in METHODS and operation.get("security")
    ]


def test_every_account_operation_documents_its_error_envelopes(schema: dict) -> None:
    operations = account_operations(schema)
    assert len(operations) >= 15
    for path, method, operation in operations:
        label = f"{method.upper()} {path}"
        expected = {"401", "403", "429", "500"}
        if "requestBody" in operation:
            expected |= {"400", "422"}
        if "{" in path:
            expected.add("404")
        assert expected <= set(operation["responses"]), label
        for status in expected:
            assert "application/json" in operation["responses"][status].get("content", {}), f"{label} {status}"
        for status, response in operation["responses"].items():
            assert response["headers"]["X-Request-ID"]["required"] is True, f"{label} {status}"
        assert operation["responses"]["429"]["headers"]["Retry-After"]["required"] is True, label


def test_request_bodies_are_documented_as_json_only_and_required(schema: dict) -> None:
    # The server also reads JSON sent without Content-Type, but documenting
    # */* invites YAML and forms, which are 400s.
    bodies = [
        (f"{method.upper()} {path}", operation["requestBody"])
        for path, method, operation in account_operations(schema)
        if "requestBody" in operation
    ]
    assert bodies
    for label, body in bodies:
        assert list(body["content"]) == ["application/json"], label
        assert body.get("required") is True, label


def test_path_ids_are_uuids(schema: dict) -> None:
    for path, method, operation in account_operations(schema):
        for parameter in operation.get("parameters", []):
            if parameter["in"] == "path" and parameter["name"].endswith("_id"):
                assert parameter["schema"].get("format") == "uuid", f"{method.upper()} {path} {parameter['name']}"


def test_returned_timestamps_are_documented_in_the_format_the_api_renders(schema: dict) -> None:
    created_at = schema["components"]["schemas"]["Charge"]["properties"]["created_at"]
    assert created_at["format"] == TIMESTAMP_FORMAT != "date-time"
    # Not the 304-character calendar regex: Swagger UI printed it under every field.
    assert "pattern" not in created_at
    filters = {p["name"]: p["schema"] for p in schema["paths"]["/api/transactions"]["get"]["parameters"]}
    assert filters["created_at_start"]["format"] == TIMESTAMP_FORMAT
    assert "pattern" not in filters["created_at_start"]


def test_the_fuzz_run_generates_timestamps_of_that_format_that_the_filters_take() -> None:
    from tests.fuzz import hooks

    assert hooks.TIMESTAMP_FORMAT == TIMESTAMP_FORMAT

    @given(hooks.TIMESTAMPS)
    @settings(max_examples=300, deadline=None)
    def accepted(value: str) -> None:
        assert re.match(TIMESTAMP_PATTERN, value), value
        assert _accepted(value), value

    accepted()


def _accepted(value: str) -> bool:
    try:
        return TimestampField().clean(value) is not None
    except forms.ValidationError:
        return False


@pytest.mark.parametrize(
    "value",
    [
        "2025-01-31 14:05:09",
        "2024-02-29 00:00:00",
        "2000-02-29 23:59:59",
        "0001-01-01 00:00:00",
        "9999-12-31 23:59:59",
        "2023-02-29 00:00:00",
        "1900-02-29 00:00:00",
        "2025-04-31 00:00:00",
        "2025-13-01 00:00:00",
        "2025-00-10 00:00:00",
        "0000-01-01 00:00:00",
        "2025-01-01 24:00:00",
        "2025-01-01 23:60:00",
        "2025-1-01 00:00:00",
        "2025-01-01 0:00:00",
        "2025-01-01T00:00:00",
        "2025-01-01 00:00:00.5",
        "٢٠٢٥-01-01 00:00:00",
        "",
    ],
)
def test_the_timestamp_pattern_is_exactly_what_the_filters_take(value: str) -> None:
    assert bool(re.match(TIMESTAMP_PATTERN, value)) == _accepted(value)


def test_the_timestamp_pattern_agrees_with_the_calendar_on_every_day_of_a_leap_cycle() -> None:
    day = dt.date(1896, 1, 1)
    while day < dt.date(1905, 1, 1):
        shown = f"{day:%Y-%m-%d} 12:00:00"
        assert re.match(TIMESTAMP_PATTERN, shown), shown
        day += dt.timedelta(days=1)
    for year in (1896, 1900, 1904, 2000, 2100, 2400):
        shown = f"{year}-02-29 12:00:00"
        assert bool(re.match(TIMESTAMP_PATTERN, shown)) == _accepted(shown), shown
