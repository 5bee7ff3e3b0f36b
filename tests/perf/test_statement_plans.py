"""Index guard for the statement (issue 16): a created_at-filtered page of
``GET /api/statement`` — the COUNT and the page its request really sends —
and a week of ``GET /api/settlements`` (the opening balance and the days)
read the ledger through the account's indexes, never by a sequential scan,
on a few thousand entries per account (then VACUUM ANALYZE, as autovacuum
leaves a table in production)."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from accounts.models import Account, ApiCredential
from accounts.services import credential_issue
from tests.conftest import client_for
from tests.factories import AccountFactory

# VACUUM cannot run inside the transaction a plain django_db test is wrapped in.
pytestmark = pytest.mark.django_db(transaction=True)

TABLE = "accounts_ledgerentry"
ACCOUNTS, PER_ACCOUNT = 4, 5_000


def nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    found = [plan]
    for child in plan.get("Plans", []):
        found += nodes(child)
    return found


def explain(sql: str) -> list[dict[str, Any]]:
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}")
        (raw,) = cursor.fetchone()
    document = raw if isinstance(raw, list) else json.loads(raw)
    return nodes(document[0]["Plan"])


@pytest.fixture
def accounts() -> list[Account]:
    made: list[Account] = [AccountFactory() for _ in range(ACCOUNTS)]
    end = dt.datetime(2026, 1, 31, 12, 0, tzinfo=dt.UTC)
    # The accounts' entries interleaved in time, as many merchants' are in
    # production: written one account after another, each account's rows sat
    # together on disk, and the planner, seeing the account_id column
    # perfectly correlated with the heap, sometimes (1 run in 6 to 12)
    # preferred the plain account_id index with a filter on created_at.
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            """INSERT INTO accounts_ledgerentry (account_id, kind, amount, balance_after, reference, created_at)
            SELECT a.id, 'charge_paid', 100, 100 * n, 'plan:' || a.id || ':' || n, %s - n * interval '10 minutes'
            FROM generate_series(1, %s) AS n CROSS JOIN unnest(%s::uuid[]) WITH ORDINALITY AS a(id, k)
            ORDER BY n, k""",
            [end, PER_ACCOUNT, [account.pk for account in made]],
        )
    with connection.cursor() as cursor:
        cursor.execute(f"VACUUM (ANALYZE) {TABLE}")
    return made


def assert_read_by_index(ledger_sql: list[str]) -> None:
    for sql in ledger_sql:
        plan = explain(sql)
        ledger_reads = [
            n for n in plan if n.get("Relation Name") == TABLE or n.get("Index Name", "").startswith("ledger")
        ]
        assert ledger_reads, plan
        assert not [n for n in ledger_reads if n["Node Type"] == "Seq Scan"], (sql, plan)
        assert any(n.get("Index Name") == "ledger_account_created" for n in ledger_reads), (sql, plan)


def test_a_period_page_of_the_statement_reads_the_ledger_by_index(accounts: list[Account]) -> None:
    api = client_for(credential_issue(account=accounts[0], permission=ApiCredential.Permission.CASHOUT))
    # One day, about 3 % of the account's entries, a month back.
    params = {"created_at_start": "2026-01-01 00:00:00", "created_at_end": "2026-01-01 23:59:59", "per_page": "50"}
    with CaptureQueriesContext(connection) as captured:
        response = api.get("/api/statement", params)
    assert response.status_code == 200
    assert response.json()["data"]["pagination"]["total"] == 144

    ledger_sql = [q["sql"] for q in captured.captured_queries if TABLE in q["sql"]]
    assert len(ledger_sql) == 2, ledger_sql  # the COUNT and the page
    assert_read_by_index(ledger_sql)


def test_a_week_of_the_settlement_reads_the_ledger_by_index(accounts: list[Account]) -> None:
    api = client_for(credential_issue(account=accounts[0], permission=ApiCredential.Permission.CASHOUT))
    with CaptureQueriesContext(connection) as captured:
        response = api.get("/api/settlements", {"date_start": "2026-01-01", "date_end": "2026-01-07"})
    assert response.status_code == 200
    assert response.json()["data"]["totals"]["entries"] == 7 * 144

    ledger_sql = [q["sql"] for q in captured.captured_queries if TABLE in q["sql"]]
    assert len(ledger_sql) == 2, ledger_sql  # the opening balance and the days
    assert_read_by_index(ledger_sql)
