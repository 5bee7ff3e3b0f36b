"""Index guards for the listings (issue #6): the SQL that every filter of
``GET /transactions`` and ``GET /withdrawals`` really sends (captured from
the request: the COUNT of the pagination and the page) never scans its table
sequentially, and reads it only for the page's rows: the COUNT and the
page's keys come from one index alone (index-only scans), the rows by
primary key. A missing index, a covering column dropped from one, or the
page query losing its shape (api.listing) shows up as a sequential,
bitmap or non-unique index scan of the table.

``bench/listing.py`` measures the same scenarios on 1,000,000 charges. Here
each table gets 20,000 rows, 5,000 per account (binary COPY; the charges
from the benchmark's own generator), then VACUUM ANALYZE, as autovacuum
leaves a table in production: enough rows that the planner scans the table
wherever no index serves a filter, so a dropped or mis-shaped index fails
here in seconds.
"""

from __future__ import annotations

import datetime as dt
import random
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from django.db import connection, transaction
from django.test import Client

from accounts.services import credential_issue
from bench.listing import (
    CHARGE_COLUMNS,
    HISTORY,
    ISPB,
    Fixture,
    QueryPlan,
    Scenario,
    capture,
    charge_rows,
    copy_rows,
    local,
    scenarios,
)
from payments.models import Charge
from tests.factories import AccountFactory, AcquirerFactory

# VACUUM, which sets the visibility map index-only scans rely on, cannot run
# inside the transaction a plain django_db test is wrapped in.
pytestmark = pytest.mark.django_db(transaction=True)

ACCOUNTS, PER_ACCOUNT = 4, 5_000

WITHDRAWAL_COLUMNS = (
    ("id", "uuid"), ("account_id", "uuid"), ("amount", "int8"), ("fee", "int8"), ("discount_fee", "bool"),
    ("total_debit", "int8"), ("liquid_amount", "int8"), ("pix_key_type", "varchar"), ("pix_key", "varchar"),
    ("status", "varchar"), ("version", "int4"), ("idempotency_id", "varchar"), ("provider_payout_id", "varchar"),
    ("e2e_id", "varchar"), ("failure_reason", "varchar"), ("approved_at", "timestamptz"),
    ("paid_at", "timestamptz"), ("created_at", "timestamptz"), ("updated_at", "timestamptz"),
    ("payout_lease_token", "varchar"), ("hold_reason", "varchar"),
)  # fmt: skip


def withdrawal_rows(accounts: Sequence[tuple[uuid.UUID, int]], end: dt.datetime) -> Iterator[tuple[Any, ...]]:
    """Withdrawals over the same history as the charges: mostly paid, the
    last minutes still pending or approved."""
    rng = random.Random(2)
    owners = [account for account, count in accounts for _ in range(count)]
    rng.shuffle(owners)
    slot = HISTORY / len(owners)
    settled = ["paid"] * 85 + ["failed"] * 5 + ["canceled"] * 5 + ["refunded"] * 5
    for n, account in enumerate(owners):
        created = end - HISTORY + slot * (n + rng.random())
        recent = end - created < dt.timedelta(minutes=10)
        status = ("pending", "approved")[n % 2] if recent else settled[int(rng.random() * 100)]
        amount = 1_000 + int(rng.random() * 499_000)
        fee = 100
        approved = created + dt.timedelta(seconds=1) if status != "pending" else None
        paid = created + dt.timedelta(seconds=rng.randrange(2, 60)) if status in {"paid", "refunded"} else None
        e2e = f"E{ISPB}{paid:%Y%m%d%H%M}W{n:010d}" if paid else None
        yield (
            uuid.UUID(int=rng.getrandbits(128), version=4),
            account,
            amount,
            fee,
            True,
            amount,
            amount - fee,
            "cpf",
            "52998224725",
            status,
            0 if status == "pending" else 1,
            f"bench{n:030d}",
            "",
            e2e,
            "",
            approved,
            paid,
            created,
            paid or approved or created,
            "",
            "",
        )


def vacuum_analyze(table: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"VACUUM (ANALYZE) {table}")


def unique_indexes(table: str) -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexrelid::regclass::text FROM pg_index WHERE indrelid = %s::regclass AND indisunique", [table]
        )
        return {name for (name,) in cursor.fetchall()}


def table_reads(plan: QueryPlan, unique: set[str]) -> list[str]:
    """How the plan reads rows of the table beyond what the rules allow: the
    COUNT and the page's keys come from an index alone (Index Only Scan), and
    the table is read only by a unique key (the page's rows by primary key, a
    lookup by id or e2e_id)."""
    return [
        f"{node.node} {node.index or node.relation}"
        for node in plan.nodes
        if (node.node == "Seq Scan" and node.relation == plan.table)
        or node.node == "Bitmap Heap Scan"
        or (node.node == "Index Scan" and node.index not in unique)
    ]


def plans_of(cases: list[Scenario], account: Any, url: str, table: str) -> list[str]:
    """Explain every scenario's SQL; what is wrong with each, plan included."""
    issued = credential_issue(account=account)
    client = Client(headers={"X-Public-Key": issued.credential.public_key, "X-Secret-Key": issued.secret_key})
    unique = unique_indexes(table)
    wrong = []
    for case in cases:
        capture(case, client, url=url, table=table, measure=False)
        if not case.plans:
            wrong.append(f"{case.name}: no SQL on {table} captured")
        for plan in case.plans:
            reads = table_reads(plan, unique)
            if reads or not plan.uses_index:
                wrong.append(f"{case.name} ({plan.kind}): {reads or 'no index'}\n{plan.sql}\n{plan.text}")
    return wrong


def test_every_charge_filter_reads_an_index() -> None:
    account, *others = (AccountFactory() for _ in range(ACCOUNTS))
    acquirers = [AcquirerFactory(key=f"plans_{n}").pk for n in range(3)]
    end = dt.datetime.now(dt.UTC).replace(microsecond=0)
    owners = [(a.pk, PER_ACCOUNT) for a in (account, *others)]
    with transaction.atomic(), connection.cursor() as cursor:
        copy_rows(cursor, "payments_charge", CHARGE_COLUMNS, charge_rows(owners, acquirers, end))
    vacuum_analyze("payments_charge")

    cases = scenarios(Fixture(account.pk, PER_ACCOUNT, end, 0.0, reused=False))

    assert plans_of(cases, account, "/api/transactions", "payments_charge") == []
    # Every filter matched something: the plans are of real work.
    assert all(case.total > 0 for case in cases if "past the end" not in case.name)


def test_every_withdrawal_filter_reads_an_index() -> None:
    account, *others = (AccountFactory() for _ in range(ACCOUNTS))
    end = dt.datetime.now(dt.UTC).replace(microsecond=0)
    owners = [(a.pk, PER_ACCOUNT) for a in (account, *others)]
    with transaction.atomic(), connection.cursor() as cursor:
        copy_rows(cursor, "withdrawals_withdrawal", WITHDRAWAL_COLUMNS, withdrawal_rows(owners, end))
    vacuum_analyze("withdrawals_withdrawal")

    cases = scenarios(
        Fixture(account.pk, PER_ACCOUNT, end, 0.0, reused=False),
        table="withdrawals_withdrawal",
        common="paid",
        rare="refunded",
        recent="pending",
    )

    # (Some amount scenarios match no withdrawal: the minimum is 1000.)
    assert plans_of(cases, account, "/api/withdrawals", "withdrawals_withdrawal") == []


@pytest.mark.django_db
def test_a_paid_at_window_in_the_past_pages_in_the_same_order() -> None:
    """A paid_at window that ended in the past has its page keys sorted
    rather than walked (api.listing): same records, same order
    (created_at ties broken by id), same pages."""
    account = AccountFactory()
    end = dt.datetime.now(dt.UTC).replace(microsecond=0) - dt.timedelta(days=10)
    acquirers = [AcquirerFactory(key="plans_order").pk]
    with transaction.atomic(), connection.cursor() as cursor:
        copy_rows(cursor, "payments_charge", CHARGE_COLUMNS, charge_rows([(account.pk, 300)], acquirers, end, seed=3))
    # Ties: the charges of a week share one created_at, so id decides.
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE payments_charge SET created_at = date_trunc('week', created_at) WHERE account_id = %s", [account.pk]
        )
    issued = credential_issue(account=account)
    client = Client(headers={"X-Public-Key": issued.credential.public_key, "X-Secret-Key": issued.secret_key})
    since = local(end - dt.timedelta(days=100))

    def pages(**params: Any) -> list[str]:
        return [
            item["id"]
            for page in (1, 2, 3, 4, 5)
            for item in client.get("/api/transactions", {**params, "page": page, "per_page": 15}).json()["data"][
                "transactions"
            ]
        ]

    walked = pages(paid_at_start=since)
    # An end past every payment (a charge is paid within the hour): the same set.
    sorted_ = pages(paid_at_start=since, paid_at_end=local(end + dt.timedelta(hours=2)))
    expected = [
        str(pk)
        for pk in Charge.objects.filter(account=account, paid_at__gte=end - dt.timedelta(days=100))
        .order_by("-created_at", "-id")
        .values_list("pk", flat=True)[:75]
    ]
    assert walked == sorted_ == expected
    assert len(expected) == 75
