"""Every request body example of the API docs succeeds as it stands against
the demo account of ``make run`` (issue 15: Swagger UI's "Try it out" sends
the first example by default, and an integrator copies the others)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from drf_spectacular.generators import SchemaGenerator
from rest_framework.test import APIClient

from payments import examples as payments_examples
from payments import exceptions as payments_err
from recurrences import examples as recurrences_examples
from webhooks import examples as webhooks_examples
from withdrawals import examples as withdrawals_examples
from withdrawals import exceptions as withdrawals_err

pytestmark = pytest.mark.django_db

DEMO = Path(__file__).resolve().parents[2] / "demo" / "bootstrap.json"
#: The write operations that take a JSON body: each must show examples.
DOCUMENTED = {
    ("post", "/api/transactions"),
    ("post", "/api/due-charges"),
    ("post", "/api/recurrences"),
    ("put", "/api/recurrences/{recurrence_id}/cycles/{index}/amount"),
    ("post", "/api/withdrawals"),
    ("put", "/api/pix-cash-in/acquirers"),
    ("post", "/api/webhooks"),
    ("post", "/api/infractions/{infraction_id}/defense"),
}


def request_examples() -> list[tuple[str, str, str, Any]]:
    schema = SchemaGenerator().get_schema(request=None, public=True)
    found = []
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            content = operation.get("requestBody", {}).get("content", {}).get("application/json", {})
            for name, example in content.get("examples", {}).items():
                found.append((method, path, name, example["value"]))
    return found


@pytest.fixture
def demo() -> APIClient:
    out = io.StringIO()
    call_command("pix_bootstrap", str(DEMO), stdout=out, stderr=io.StringIO())
    credential = json.loads(out.getvalue())["accounts"]["demo"]["credentials"]["main"]
    client = APIClient()
    client.credentials(HTTP_X_PUBLIC_KEY=credential["public_key"], HTTP_X_SECRET_KEY=credential["secret_key"])
    return client


def test_every_write_operation_shows_examples() -> None:
    shown = {(method, path) for method, path, _, _ in request_examples()}
    assert shown >= DOCUMENTED


@pytest.mark.parametrize(("method", "path", "name"), [e[:3] for e in request_examples()])
def test_each_documented_example_succeeds_on_the_demo_account(
    demo: APIClient, method: str, path: str, name: str
) -> None:
    [body] = [value for m, p, n, value in request_examples() if (m, p, n) == (method, path, name)]
    response = getattr(demo, method)(concrete(demo, path), body, format="json")
    assert response.status_code in (200, 201, 202), response.content.decode()
    assert response.json()["success"] is True


def concrete(demo: APIClient, path: str) -> str:
    """The path with its record: a charge of the demo account, paid (what a
    refund needs), for ``{charge_id}``; an open MED infraction on such a
    charge, as its acquirer reports one, for ``{infraction_id}``; the
    variable-amount recurrence of the examples and its first cycle for
    ``{recurrence_id}`` and ``{index}``."""
    if "{recurrence_id}" in path:
        variable = recurrences_examples.RECURRENCE[1].value
        recurrence = demo.post("/api/recurrences", variable, format="json").json()["data"]
        return path.replace("{recurrence_id}", recurrence["id"]).replace("{index}", "0")
    if "{charge_id}" not in path and "{infraction_id}" not in path:
        return path
    charge = demo.post("/api/transactions", payments_examples.CHARGE[0].value, format="json").json()["data"]
    assert demo.post(f"/api/sandbox/transactions/{charge['id']}/pay", format="json").status_code == 200
    if "{infraction_id}" in path:
        return path.replace("{infraction_id}", str(_infraction_on(charge["id"]).pk))
    return path.replace("{charge_id}", charge["id"])


def _infraction_on(charge_id: str) -> Any:
    import datetime as dt
    import uuid

    from django.utils import timezone

    from acquirers.adapters.base import InfractionRecord, InfractionStatus
    from infractions.services import infraction_apply
    from payments.models import Charge

    charge = Charge.objects.get(pk=charge_id)
    record = InfractionRecord(
        external_id=uuid.uuid4().hex,
        e2e_id=charge.e2e_id or "",
        status=InfractionStatus.OPEN,
        amount=charge.amount,
        blocked_amount=charge.amount,
        defense_deadline=timezone.now() + dt.timedelta(days=7),
    )
    return infraction_apply(acquirer=charge.acquirer, record=record)


def test_a_new_charges_pix_code_is_documented_by_name() -> None:
    schema = SchemaGenerator().get_schema(request=None, public=True)
    created = schema["components"]["schemas"]["ChargeCreated"]
    pix = created["properties"]["pix"]
    if "$ref" in pix:
        pix = schema["components"]["schemas"][pix["$ref"].rsplit("/", 1)[-1]]
    assert pix["properties"]["emv"]["type"] == "string"
    assert "additionalProperties" not in pix


def test_tags_follow_a_merchants_work_and_psp_callbacks_come_last() -> None:
    schema = SchemaGenerator().get_schema(request=None, public=True)
    order = [tag["name"] for tag in schema["tags"]]
    assert order[:5] == ["transactions", "withdrawals", "balance", "acquirers", "webhooks"]
    assert order[-1] == "psp-callbacks"
    used = {tag for operations in schema["paths"].values() for op in operations.values() for tag in op["tags"]}
    assert used <= set(order)
    notifications = [op for path, ops in schema["paths"].items() if "/notifications" in path for op in ops.values()]
    assert notifications
    assert all(op["tags"] == ["psp-callbacks"] for op in notifications)


def test_the_two_names_of_a_withdrawals_key_type_are_explained() -> None:
    schemas = SchemaGenerator().get_schema(request=None, public=True)["components"]["schemas"]
    assert "pix_type" in schemas["WithdrawalCreated"]["properties"]["pix_key_type"]["description"]
    assert "pix_key_type" in schemas["WithdrawalDetail"]["properties"]["pix_type"]["description"]


@pytest.mark.parametrize(
    ("path", "messages"),
    [
        (
            "/api/transactions",
            {
                "Corpo da requisição inválido.",
                payments_err.METHOD_NOT_ENABLED,
                payments_err.AMOUNT_ABOVE_MAX,
                payments_err.NET_BELOW_MIN,
                payments_err.ALL_ACQUIRERS_FAILED,
            },
        ),
        (
            "/api/withdrawals",
            {
                "Corpo da requisição inválido.",
                withdrawals_err.PER_REQUEST_LIMIT,
                withdrawals_err.SAME_OWNERSHIP_ONLY,
                withdrawals_err.KEY_NOT_PAYEE,
                withdrawals_err.DAILY_LIMIT,
                withdrawals_err.INSUFFICIENT_BALANCE,
            },
        ),
    ],
)
def test_every_business_rule_message_is_shown_under_400(path: str, messages: set[str]) -> None:
    schema = SchemaGenerator().get_schema(request=None, public=True)
    examples = schema["paths"][path]["post"]["responses"]["400"]["content"]["application/json"]["examples"]
    assert {example["value"]["message"] for example in examples.values()} == messages


def _component(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node or "allOf" in node:
        ref = node["$ref"] if "$ref" in node else node["allOf"][0]["$ref"]
        node = schema["components"]["schemas"][ref.rsplit("/", 1)[-1]]
    return node


def _documented_event(path: str) -> tuple[set[str], set[str]]:
    """The envelope's and the data's property names of the event callback of ``POST path``."""
    schema = SchemaGenerator().get_schema(request=None, public=True)
    callbacks = schema["paths"][path]["post"]["callbacks"]
    [callback] = [c for name, c in callbacks.items() if "postback" not in name]
    [operation] = [ops["post"] for ops in callback.values()]
    body = _component(schema, operation["requestBody"]["content"]["application/json"]["schema"])
    data = _component(schema, body["properties"]["data"])
    return set(body["properties"]), set(data["properties"])


def test_the_documented_events_are_what_receivers_get(demo: APIClient) -> None:
    from webhooks.models import WebhookEvent
    from withdrawals.tasks import process_withdrawal

    assert demo.post("/api/webhooks", webhooks_examples.WEBHOOK_ENDPOINT[0].value, format="json").status_code == 201
    charge = demo.post("/api/transactions", payments_examples.CHARGE[0].value, format="json").json()["data"]
    assert demo.post(f"/api/sandbox/transactions/{charge['id']}/pay", format="json").status_code == 200
    withdrawal = demo.post("/api/withdrawals", withdrawals_examples.WITHDRAWAL[0].value, format="json").json()["data"]
    process_withdrawal(withdrawal["id"])  # the payout worker's task, here: its events are emitted
    for event_type, path in (("transaction", "/api/transactions"), ("withdrawal", "/api/withdrawals")):
        sent = WebhookEvent.objects.filter(event_type=event_type).latest("created_at").body()
        envelope, data = _documented_event(path)
        assert set(sent) == envelope
        assert isinstance(sent["data"], dict)
        assert set(sent["data"]) == data


def test_the_201_examples_are_what_the_demo_answers(demo: APIClient) -> None:
    from acquirers import brcode

    for path, request, documented in (
        ("/api/transactions", payments_examples.CHARGE[0], payments_examples.CHARGE_CREATED),
        ("/api/withdrawals", withdrawals_examples.WITHDRAWAL[0], withdrawals_examples.WITHDRAWAL_CREATED),
    ):
        answer = demo.post(path, request.value, format="json").json()
        shown = documented.value
        assert (shown["success"], shown["message"]) == (answer["success"], answer["message"])
        assert set(shown["data"]) == set(answer["data"])
        same = {k for k in answer["data"] if k not in ("id", "created_at", "pix")}
        assert {k: shown["data"][k] for k in same} == {k: answer["data"][k] for k in same}
    # A BR Code a payer's app would accept, for the example's amount.
    assert brcode.check(payments_examples.CHARGE_CREATED.value["data"]["pix"]["emv"], amount=4990)
    # A recurrence: its ids, times and code are the acquirer's of the day.
    answer = demo.post("/api/recurrences", recurrences_examples.RECURRENCE[0].value, format="json").json()
    shown = recurrences_examples.RECURRENCE_CREATED.value
    assert (shown["success"], shown["message"]) == (answer["success"], answer["message"])
    assert set(shown["data"]) == set(answer["data"])
    varying = ("id", "id_rec", "qr_code", "created_at", "updated_at")
    same = {k for k in answer["data"] if k not in varying}
    assert {k: shown["data"][k] for k in same} == {k: answer["data"][k] for k in same}
    assert set(shown["data"]["qr_code"]) == set(answer["data"]["qr_code"])
    brcode.parse(shown["data"]["qr_code"]["emv"])


def test_the_202_refund_example_is_what_the_demo_answers(demo: APIClient) -> None:
    path = concrete(demo, "/api/transactions/{charge_id}/refund")
    answer = demo.post(path, payments_examples.REFUND[0].value, format="json").json()
    shown = payments_examples.REFUND_REQUESTED.value
    assert (shown["success"], shown["message"]) == (answer["success"], answer["message"])
    assert set(shown["data"]) == set(answer["data"])
    same = {k for k in answer["data"] if k not in ("id", "transaction_id", "created_at")}
    assert {k: shown["data"][k] for k in same} == {k: answer["data"][k] for k in same}
    schema = SchemaGenerator().get_schema(request=None, public=True)
    content = schema["paths"]["/api/transactions/{charge_id}/refund"]["post"]["responses"]["202"]["content"]
    assert len(content["application/json"]["examples"]) == 1


def test_the_201_examples_are_in_the_schema() -> None:
    schema = SchemaGenerator().get_schema(request=None, public=True)
    for path in ("/api/transactions", "/api/withdrawals"):
        content = schema["paths"][path]["post"]["responses"]["201"]["content"]["application/json"]
        assert len(content["examples"]) == 1


def _texts(node: Any, path: str = "") -> list[tuple[str, str]]:
    """Every description, summary and title of the schema, with where it is."""
    found: list[tuple[str, str]] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("description", "summary", "title") and isinstance(value, str):
                found.append((f"{path}/{key}", value))
            elif key not in ("example", "examples", "value", "enum", "default"):
                found.extend(_texts(value, f"{path}/{key}"))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found.extend(_texts(value, f"{path}[{index}]"))
    return found


def test_the_documentation_speaks_one_language() -> None:
    """English throughout; the contract's pt-BR messages appear only as the
    values they are (examples), never as a field's or an enum's description."""
    schema = SchemaGenerator().get_schema(request=None, public=True)
    portuguese = [(where, text) for where, text in _texts(schema) if set(text) & set("ãõçáéíóúâêôàÃÕÇÁÉÍÓÚ")]
    assert portuguese == []
