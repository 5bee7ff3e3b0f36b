"""Swagger UI's "Try it out" succeeds on the fresh demo (issue 30).

The demo is what ``make run`` builds: ``pix_bootstrap demo/bootstrap.json``.
Each operation is sent as Swagger UI fills it by default: the first example
of its JSON body, and each parameter's first example (else its ``example``,
its schema's ``example``, its schema's ``default``), nothing for a parameter
with none. Its balance comes from a sandbox charge paid through the normal
path (provisioning/sandbox_charges.py), never from a bare ledger credit."""

from __future__ import annotations

import copy
import io
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.test import override_settings
from drf_spectacular.generators import SchemaGenerator
from rest_framework.test import APIClient

from accounts.models import Account, AccountBalance, LedgerEntry
from observability import heartbeat
from payments.models import Charge, ChargeStatus

pytestmark = pytest.mark.django_db

DEMO = Path(__file__).resolve().parents[2] / "demo" / "bootstrap.json"

#: Every operation of the schema, and why it is not sent (None: sent, 2xx expected).
NEEDS_AN_ID = "reads or changes a record by an id no one can know before the demo creates it"
OPERATIONS: dict[tuple[str, str], str | None] = {
    ("get", "/api/health"): None,
    ("get", "/api/health/ready"): None,
    ("get", "/api/pix-cash-in/acquirers"): None,
    ("put", "/api/pix-cash-in/acquirers"): None,
    ("get", "/api/settlements"): None,
    ("get", "/api/statement"): None,
    ("get", "/api/statement.csv"): None,
    ("get", "/api/transactions"): None,
    ("post", "/api/transactions"): None,
    ("get", "/api/transactions.csv"): None,
    ("get", "/api/due-charges"): None,
    ("post", "/api/due-charges"): None,
    ("get", "/api/due-charges.csv"): None,
    ("get", "/api/webhooks"): None,
    ("post", "/api/webhooks"): None,
    ("get", "/api/withdrawals"): None,
    ("post", "/api/withdrawals"): None,
    ("get", "/api/withdrawals.csv"): None,
    ("get", "/api/withdrawals/balance"): None,
    ("post", "/api/withdrawals/batches"): None,
    ("get", "/api/withdrawals/batches"): None,
    ("get", "/api/withdrawals/batches/{batch_id}"): NEEDS_AN_ID,
    ("get", "/api/withdrawals/batches/{batch_id}/items"): NEEDS_AN_ID,
    ("get", "/api/withdrawals/batches/{batch_id}/items.csv"): NEEDS_AN_ID,
    ("get", "/api/infractions"): None,
    ("post", "/api/due-charges/batches"): None,
    ("get", "/api/recurrences"): None,
    ("post", "/api/recurrences"): None,
    ("get", "/api/transactions/{charge_id}"): NEEDS_AN_ID,
    ("get", "/api/due-charges/{due_charge_id}"): NEEDS_AN_ID,
    ("post", "/api/due-charges/{due_charge_id}/cancel"): NEEDS_AN_ID,
    ("get", "/api/transactions/{charge_id}/qrcode"): NEEDS_AN_ID,
    ("get", "/api/transactions/{charge_id}/refund"): NEEDS_AN_ID,
    ("post", "/api/transactions/{charge_id}/refund"): NEEDS_AN_ID,
    ("post", "/api/sandbox/transactions/{charge_id}/{action}"): NEEDS_AN_ID,
    ("post", "/api/sandbox/withdrawals/{withdrawal_id}/return"): NEEDS_AN_ID,
    ("post", "/api/sandbox/transactions/{charge_id}/infraction"): NEEDS_AN_ID,
    ("post", "/api/sandbox/infractions/{infraction_id}/accept"): NEEDS_AN_ID,
    ("post", "/api/sandbox/infractions/{infraction_id}/reject"): NEEDS_AN_ID,
    ("post", "/api/sandbox/infractions/{infraction_id}/cancel"): NEEDS_AN_ID,
    ("post", "/api/sandbox/due-charges/{charge_id}/pay"): NEEDS_AN_ID,
    ("get", "/api/withdrawals/{withdrawal_id}"): NEEDS_AN_ID,
    ("post", "/api/withdrawals/{withdrawal_id}/cancel"): NEEDS_AN_ID,
    ("get", "/api/withdrawals/{withdrawal_id}/receipt"): NEEDS_AN_ID,
    ("get", "/api/withdrawals/{withdrawal_id}/receipt.pdf"): NEEDS_AN_ID,
    ("get", "/api/infractions/{infraction_id}"): NEEDS_AN_ID,
    ("post", "/api/infractions/{infraction_id}/defense"): NEEDS_AN_ID,
    ("delete", "/api/webhooks/{endpoint_id}"): NEEDS_AN_ID,
    ("get", "/api/webhooks/{endpoint_id}/deliveries"): NEEDS_AN_ID,
    ("post", "/api/webhooks/{endpoint_id}/rotate-secret"): NEEDS_AN_ID,
    ("post", "/api/webhook-events/{event_id}/redeliver"): NEEDS_AN_ID,
    ("get", "/api/due-charges/batches/{batch_id}"): NEEDS_AN_ID,
    ("get", "/api/due-charges/batches/{batch_id}/items"): NEEDS_AN_ID,
    ("get", "/api/due-charges/batches/{batch_id}/items.csv"): NEEDS_AN_ID,
    ("get", "/api/recurrences/{recurrence_id}"): NEEDS_AN_ID,
    ("post", "/api/recurrences/{recurrence_id}/cancel"): NEEDS_AN_ID,
    ("get", "/api/recurrences/{recurrence_id}/cycles"): NEEDS_AN_ID,
    ("get", "/api/recurrences/{recurrence_id}/cycles/{index}"): NEEDS_AN_ID,
    ("put", "/api/recurrences/{recurrence_id}/cycles/{index}/amount"): NEEDS_AN_ID,
    ("post", "/api/sandbox/recurrences/{recurrence_id}/approve"): NEEDS_AN_ID,
    ("post", "/api/sandbox/recurrences/{recurrence_id}/reject"): NEEDS_AN_ID,
    ("post", "/api/sandbox/recurrences/{recurrence_id}/expire"): NEEDS_AN_ID,
    ("post", "/api/sandbox/recurrences/{recurrence_id}/payer-cancel"): NEEDS_AN_ID,
    ("post", "/api/sandbox/recurrences/{recurrence_id}/cycles/{index}/pay"): NEEDS_AN_ID,
    ("post", "/api/sandbox/recurrences/{recurrence_id}/cycles/{index}/fail"): NEEDS_AN_ID,
    # What PSPs send, signed with a secret and a token of theirs: not a merchant's to try.
    ("post", "/api/acquirers/{key}/notifications"): "a PSP's signed callback",
    ("post", "/api/acquirers/{key}/notifications/{token}"): "a PSP's signed callback",
    ("post", "/api/acquirers/{key}/notifications/{token}/pix"): "a PSP's signed callback",
    ("post", "/api/acquirers/{key}/notifications/{token}/rec"): "a PSP's signed callback",
    ("post", "/api/acquirers/{key}/notifications/{token}/cobr"): "a PSP's signed callback",
}
SENT = sorted(op for op, reason in OPERATIONS.items() if reason is None)


def schema() -> dict[str, Any]:
    schema: dict[str, Any] = SchemaGenerator().get_schema(request=None, public=True)
    return schema


def parameter_default(parameter: dict[str, Any]) -> Any:
    """What Swagger UI puts in a parameter's field (its ParameterRow), or None."""
    if parameter.get("examples"):
        return next(iter(parameter["examples"].values()))["value"]
    for value in (parameter.get("example"), parameter.get("schema", {}).get("example")):
        if value is not None:
            return value
    return parameter.get("schema", {}).get("default")


def swagger_request(operation: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], Any]:
    """(query, headers, body) as "Try it out" sends them by default."""
    query: dict[str, Any] = {}
    headers: dict[str, Any] = {}
    for parameter in operation.get("parameters", []):
        value = parameter_default(parameter)
        if value is None:
            assert not parameter.get("required"), f"{parameter['name']} is required and has no example"
        elif parameter["in"] == "query":
            query[parameter["name"]] = value
        elif parameter["in"] == "header":
            headers["HTTP_" + parameter["name"].upper().replace("-", "_")] = str(value)
    content = operation.get("requestBody", {}).get("content", {}).get("application/json", {})
    body = next(iter(content["examples"].values()))["value"] if content.get("examples") else content.get("example")
    return query, headers, body


@pytest.fixture
def demo() -> APIClient:
    out = io.StringIO()
    call_command("pix_bootstrap", str(DEMO), stdout=out, stderr=io.StringIO())
    credential = json.loads(out.getvalue())["accounts"]["demo"]["credentials"]["main"]
    client = APIClient()
    client.credentials(HTTP_X_PUBLIC_KEY=credential["public_key"], HTTP_X_SECRET_KEY=credential["secret_key"])
    return client


def test_every_operation_is_listed_here() -> None:
    """A new operation must be sent below, or say why it cannot be."""
    operations = {(method, path) for path, ops in schema()["paths"].items() for method in ops}
    assert operations == set(OPERATIONS)


@pytest.mark.parametrize(("method", "path"), SENT)
def test_each_default_example_succeeds_on_the_fresh_demo(
    demo: APIClient, method: str, path: str, settings: Any
) -> None:
    if path == "/api/health/ready":
        # make run's Celery worker beats; here, a heartbeat set of this test's own.
        settings.WORKER_HEARTBEAT_KEY = f"pix-test:workers:{uuid.uuid4().hex}"
        heartbeat.beat("worker-1@demo")
    query, headers, body = swagger_request(schema()["paths"][path][method])
    if method == "get":
        response = demo.get(path, query, **headers)
    else:
        url = path + ("?" + "&".join(f"{k}={v}" for k, v in query.items()) if query else "")
        response = getattr(demo, method)(url, body, format="json", **headers)
    answer: Any = response  # a CSV export streams
    content = b"".join(answer.streaming_content) if answer.streaming else answer.content
    if path == "/api/health/ready":
        heartbeat._redis().delete(settings.WORKER_HEARTBEAT_KEY)
    assert 200 <= response.status_code < 300, content.decode()


def test_the_demo_balance_is_a_paid_sandbox_charge_and_a_rerun_adds_nothing(demo: APIClient) -> None:
    account = Account.objects.get(ref="demo")
    [charge] = Charge.objects.filter(account=account)
    assert (charge.status, charge.amount, charge.metadata) == (
        ChargeStatus.PAID,
        100000,
        {"pix_bootstrap": "saldo-inicial"},
    )
    assert charge.acquirer.adapter == "sandbox"
    assert charge.e2e_id
    [entry] = LedgerEntry.objects.filter(account=account)
    assert (entry.kind, entry.amount) == (LedgerEntry.Kind.CHARGE_PAID, charge.liquid_amount)
    assert AccountBalance.objects.get(account=account).available == charge.liquid_amount

    out = io.StringIO()
    call_command("pix_bootstrap", str(DEMO), stdout=out, stderr=io.StringIO())

    assert json.loads(out.getvalue())["accounts"]["demo"]["sandbox_paid_charges"] == {"saldo-inicial": str(charge.pk)}
    assert Charge.objects.filter(account=account).count() == 1
    assert LedgerEntry.objects.filter(account=account).count() == 1


def _demo_file(tmp_path: Path, change: Any) -> str:
    data = json.loads(DEMO.read_text())
    change(data)
    path = tmp_path / "bootstrap.json"
    path.write_text(json.dumps(data))
    return str(path)


def test_paid_charges_only_at_sandbox_acquirers(tmp_path: Path) -> None:
    def real_acquirer(data: dict[str, Any]) -> None:
        extra = copy.deepcopy(data["acquirers"][0])
        extra.update(key="real_one", adapter="efi_pix", options={})
        data["acquirers"].append(extra)
        data["accounts"][0]["available_acquirers"].append("real_one")
        data["accounts"][0]["active_acquirers"] = ["real_one"]

    with pytest.raises(CommandError, match=r"accounts\[0\]\.active_acquirers\[0\]: .*sandbox"):
        call_command("pix_bootstrap", _demo_file(tmp_path, real_acquirer), stdout=io.StringIO())
    assert not Account.objects.exists()
    assert not Charge.objects.exists()


@override_settings(PIX_SANDBOX=False)
def test_paid_charges_only_with_the_sandbox_on(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match=r"accounts\[0\]\.sandbox_paid_charges: .*PIX_SANDBOX"):
        call_command("pix_bootstrap", _demo_file(tmp_path, lambda data: None), stdout=io.StringIO())
    assert not Account.objects.exists()
