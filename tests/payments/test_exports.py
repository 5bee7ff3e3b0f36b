"""CSV exports of the listings (issue 16): GET /api/transactions.csv and
GET /api/withdrawals.csv — the listing's records for the listing's filters,
as a streamed file, for a period of at most 31 days (the statement's CSV,
tests/withdrawals/test_statement.py, shares the same view)."""

from __future__ import annotations

import csv
import datetime as dt
import io
from dataclasses import dataclass
from typing import Any

import pytest
from django.db import connection
from django.http import StreamingHttpResponse
from rest_framework.test import APIClient

from accounts.models import Account, ApiCredential
from accounts.services import credential_issue
from api import exports as api_exports
from core import exports as core_exports
from payments.models import Charge
from tests.conftest import client_for
from tests.factories import AccountFactory, ChargeFactory, WithdrawalFactory
from tests.helpers import SAO_PAULO, VALIDATION, csv_rows, listing_data
from withdrawals.models import Withdrawal

NO_PERMISSION = {
    "success": False,
    "message": "Esta credencial não tem permissão para realizar esta operação.",
    "data": None,
}
MARCH = {"created_at_start": "2025-03-01 00:00:00", "created_at_end": "2025-03-31 23:59:59"}


@dataclass(frozen=True)
class Export:
    url: str
    listing: str
    collection: str
    permission: str
    refused: str  # the other credential kind
    filename: str
    required: str
    too_long: str
    component: str  # the listing record's schema
    # The listing record's fields the CSV leaves out (additive ones: docs/api/index.md).
    listing_only: frozenset[str] = frozenset({"pix"})

    def make(self, account: Account, **fields: Any) -> Charge | Withdrawal:
        factory = ChargeFactory if self.listing == "/api/transactions" else WithdrawalFactory
        return factory(account=account, **fields)


CHARGES = Export(
    url="/api/transactions.csv",
    listing="/api/transactions",
    collection="transactions",
    permission=ApiCredential.Permission.CASHIN,
    refused=ApiCredential.Permission.CASHOUT,
    filename="transacoes",
    required="Informe o período (created_at_start e created_at_end) para exportar as transações.",
    too_long="O período das transações em CSV é de no máximo 31 dias.",
    component="Charge",
)
WITHDRAWALS = Export(
    url="/api/withdrawals.csv",
    listing="/api/withdrawals",
    collection="withdrawals",
    permission=ApiCredential.Permission.CASHOUT,
    refused=ApiCredential.Permission.CASHIN,
    filename="saques",
    required="Informe o período (created_at_start e created_at_end) para exportar os saques.",
    too_long="O período dos saques em CSV é de no máximo 31 dias.",
    component="WithdrawalDetail",
    listing_only=frozenset({"scheduled_for", "external_id", "failure_reason", "batch_id", "payee"}),
)
EXPORTS = pytest.mark.parametrize("export", [CHARGES, WITHDRAWALS], ids=["transactions", "withdrawals"])

pytestmark = pytest.mark.django_db


def sp(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> dt.datetime:
    """A Sao Paulo wall time."""
    return dt.datetime(year, month, day, hour, minute, second, tzinfo=SAO_PAULO)


def api_for(account: Account, permission: str) -> APIClient:
    return client_for(credential_issue(account=account, permission=permission))


#: What the listing adds to the record and the file leaves out: the charge's
#: ``pix`` object (issue 30), not a cell; the file's columns stay as they were.
def as_csv(records: list[dict[str, Any]], listing_only: frozenset[str]) -> list[list[str]]:
    """The listing's JSON records as the CSV writes them (null is empty)."""
    return [["" if v is None else str(v) for k, v in record.items() if k not in listing_only] for record in records]


def ids(rows: list[list[str]]) -> list[str]:
    return [row[0] for row in rows[1:]]


@EXPORTS
def test_the_file_is_the_listing_for_the_same_filters(account: Account, export: Export) -> None:
    """Header: the listing record's names; rows: its values (centavos,
    Sao Paulo times), newest first, for every filter the listing takes."""
    api = api_for(account, export.permission)
    export.make(account, amount=1000, created_at=sp(2025, 3, 2, 9, 0, 0))
    export.make(account, amount=5000, status="paid", paid_at=sp(2025, 3, 5, 10, 1, 2), created_at=sp(2025, 3, 5, 10))
    export.make(account, amount=7000, status="failed", created_at=sp(2025, 3, 20, 23, 59, 59))
    export.make(account, amount=9000, created_at=sp(2025, 4, 1, 0, 0, 0))  # after the period

    for filters in (
        {},
        {"status": "paid"},
        {"amount_min": "5000"},
        {"amount_max": "5000", "amount_min": "1000"},
        {"status": "failed", "amount_max": "6999"},
        {"paid_at_start": "2025-03-05 10:01:02", "paid_at_end": "2025-03-05 10:01:02"},
    ):
        listed = listing_data(api, export.listing, **MARCH, **filters, per_page=100)[export.collection]
        rows = csv_rows(api.get(export.url, {**MARCH, **filters}))
        header = list(listing_data(api, export.listing, per_page=1)[export.collection][0])
        assert rows[0] == [name for name in header if name not in export.listing_only]
        assert rows[1:] == as_csv(listed, export.listing_only), filters
    assert len(csv_rows(api.get(export.url, MARCH))) == 1 + 3
    assert [row[2 if export is WITHDRAWALS else 3] for row in csv_rows(api.get(export.url, MARCH))[1:]] == [
        "7000",
        "5000",
        "1000",
    ]
    paid = csv_rows(api.get(export.url, {**MARCH, "status": "paid"}))
    assert dict(zip(paid[0], paid[1], strict=True))["paid_at"] == "2025-03-05 10:01:02"


@EXPORTS
def test_the_period_is_inclusive_at_both_ends_in_sao_paulo_time(account: Account, export: Export) -> None:
    api = api_for(account, export.permission)
    export.make(account, created_at=sp(2025, 3, 9, 23, 59, 59))
    first = export.make(account, created_at=sp(2025, 3, 10, 0, 0, 0))
    last = export.make(account, created_at=dt.datetime(2025, 3, 11, 2, 59, 59, 999999, tzinfo=dt.UTC))
    export.make(account, created_at=dt.datetime(2025, 3, 11, 3, 0, 0, tzinfo=dt.UTC))  # 00:00:00 in Sao Paulo

    response = api.get(export.url, {"created_at_start": "2025-03-10 00:00:00", "created_at_end": "2025-03-10 23:59:59"})
    assert response["Content-Disposition"] == f'attachment; filename="{export.filename}-20250310-20250310.csv"'
    rows = csv_rows(response)
    assert ids(rows) == [str(last.pk), str(first.pk)]
    created = rows[0].index("created_at")
    assert [row[created] for row in rows[1:]] == ["2025-03-10 23:59:59", "2025-03-10 00:00:00"]


@EXPORTS
def test_a_period_of_exactly_31_days_is_exported(account: Account, export: Export) -> None:
    api = api_for(account, export.permission)
    edge = export.make(account, created_at=sp(2025, 4, 1, 0, 0, 0))
    rows = csv_rows(
        api.get(export.url, {"created_at_start": "2025-03-01 00:00:00", "created_at_end": "2025-04-01 00:00:00"})
    )
    assert ids(rows) == [str(edge.pk)]


@EXPORTS
def test_another_accounts_records_never_appear(account: Account, export: Export) -> None:
    api = api_for(account, export.permission)
    mine = export.make(account, created_at=sp(2025, 3, 10, 12))
    other = AccountFactory()
    theirs = export.make(other, created_at=sp(2025, 3, 10, 12))
    assert ids(csv_rows(api.get(export.url, MARCH))) == [str(mine.pk)]
    assert ids(csv_rows(api.get(export.url, {**MARCH, "id": str(theirs.pk)}))) == []


@EXPORTS
@pytest.mark.parametrize(
    ("params", "errors"),
    [
        ({}, {"created_at_start": ["required"], "created_at_end": ["required"]}),
        ({"created_at_start": "2025-03-01 00:00:00"}, {"created_at_end": ["required"]}),
        ({"created_at_end": "2025-03-01 00:00:00", "status": "paid"}, {"created_at_start": ["required"]}),
        ({**MARCH, "created_at_end": "2025-04-01 00:00:01"}, {"created_at_end": ["too_long"]}),
        ({**MARCH, "created_at_end": "2025-03-31"}, {"created_at_end": ["Use o formato AAAA-MM-DD HH:mm:ss."]}),
        ({**MARCH, "created_at_start": ""}, {"created_at_start": ["Este campo não pode ser em branco."]}),
        (
            {**MARCH, "status": "pago"},
            {"status": ["Faça uma escolha válida. pago não é uma das escolhas disponíveis."]},
        ),
        ({**MARCH, "amount_min": "10.5"}, {"amount_min": ["Informe um número inteiro."]}),
        ({**MARCH, "id": "nope"}, {"id": ["Insira um UUID válido."]}),
    ],
)
def test_bad_filters_and_periods_are_422s(
    account: Account, export: Export, params: dict[str, str], errors: dict[str, list[str]]
) -> None:
    export.make(account, created_at=sp(2025, 3, 10, 12))
    expected = {
        field: [{"required": export.required, "too_long": export.too_long}.get(m, m) for m in messages]
        for field, messages in errors.items()
    }
    response = api_for(account, export.permission).get(export.url, params, HTTP_ACCEPT="text/csv")
    assert response.status_code == 422
    assert response["Content-Type"] == "application/json"
    assert response.json() == {"success": False, "message": VALIDATION, "data": {"errors": expected}}


@EXPORTS
def test_filter_errors_are_the_listings(account: Account, export: Export) -> None:
    api = api_for(account, export.permission)
    bad = {**MARCH, "status": "x", "amount_max": "\uff11\uff10", "paid_at_start": "ontem", "e2e_id": " "}
    exported = api.get(export.url, bad).json()
    listed = api.get(export.listing, bad).json()
    assert exported == listed
    assert set(exported["data"]["errors"]) == {"status", "amount_max", "paid_at_start", "e2e_id"}


@EXPORTS
@pytest.mark.django_db(transaction=True)
def test_rows_are_read_in_batches_and_no_connection_is_held_while_the_client_reads(
    export: Export, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batches of CSV_CHUNK rows (here 2), each a query of its own that starts
    past the last row of the one before (no server-side cursor left open);
    every chunk is handed to the server with the thread's database
    connection given back, so a client that stops reading pins no pooled
    connection. Rows that share a created_at are each written once, in id
    order."""
    account = AccountFactory()
    api = api_for(account, export.permission)
    monkeypatch.setattr(api_exports, "CSV_CHUNK", 2)
    monkeypatch.setattr(core_exports, "CHUNK_BYTES", 1)  # a chunk per line: a write after every row
    same = sp(2025, 3, 10, 12)
    made = [export.make(account, created_at=at) for at in (sp(2025, 3, 9), same, same, same, sp(2025, 3, 11))]
    expected = sorted(made, key=lambda r: (r.created_at, r.pk.hex), reverse=True)

    response = api.get(export.url, MARCH)
    assert isinstance(response, StreamingHttpResponse)
    chunks = []
    for chunk in response.streaming_content:
        assert connection.connection is None, "a connection is held while the client reads"
        chunks.append(chunk)
    rows = list(csv.reader(io.StringIO(b"".join(chunks).decode()), delimiter=";"))
    assert ids(rows) == [str(record.pk) for record in expected]


@EXPORTS
def test_credentials(account: Account, export: Export) -> None:
    assert APIClient().get(export.url, MARCH).status_code == 401
    refused = api_for(account, export.refused).get(export.url, MARCH)
    assert refused.status_code == 403
    assert refused.json() == NO_PERMISSION
    for permission in (export.permission, ApiCredential.Permission.ALL):
        assert csv_rows(api_for(account, permission).get(export.url, MARCH))[0][0] == "id"


@EXPORTS
def test_the_export_is_documented_like_the_statements_csv(schema: dict[str, Any], export: Export) -> None:
    operation = schema["paths"][export.url]["get"]
    listing = schema["paths"][export.listing]["get"]
    assert operation["tags"] == listing["tags"]
    assert f"`{export.permission}` or `all`" in operation["description"]
    ok = operation["responses"]["200"]["content"]["text/csv"]
    [example] = ok["examples"].values()
    header = example["value"].splitlines()[0].split(";")
    properties = schema["components"]["schemas"][export.component]["properties"]
    assert header == [name for name in properties if name not in export.listing_only]
    assert f"`{';'.join(header)}`" in operation["description"]
    assert set(operation["responses"]) >= {"200", "401", "403", "422"}
    required = {p["name"] for p in operation["parameters"] if p.get("required")}
    assert required == {"created_at_start", "created_at_end"}
    listing_filters = {p["name"] for p in listing["parameters"]} - {"page", "per_page"}
    assert {p["name"] for p in operation["parameters"]} == listing_filters
