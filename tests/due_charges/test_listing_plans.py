"""Index guard for GET /api/due-charges: every filter's COUNT and page (the
SQL the request really sends) reads charges and their terms through an
index, never by scanning either table, on 20,000 charges of four accounts
(a fifth of them due-date charges) after VACUUM ANALYZE, as production's
tables stand. A dropped or mis-shaped index shows as a Seq Scan or a
Bitmap Heap Scan (tests/perf/test_listing_plans.py does the same for the
other listings)."""

from __future__ import annotations

import datetime as dt
import random
import uuid
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from accounts.services import credential_issue
from payments.due_models import DueCharge
from payments.models import Charge
from tests.factories import AccountFactory, AcquirerFactory

# VACUUM cannot run inside the transaction a plain django_db test is wrapped in.
pytestmark = pytest.mark.django_db(transaction=True)

CHARGES, ACCOUNTS = 20_000, 4


def seed() -> tuple[Any, str]:
    """The charges; the first account and the txid of one of its due charges."""
    acquirer = AcquirerFactory(key="plans")
    accounts = [AccountFactory() for _ in range(ACCOUNTS)]
    rng = random.Random(1)
    now = timezone.now()
    charges, dues = [], []
    for n in range(CHARGES):
        charge_id = uuid.uuid4()
        due = n % 5 == 0
        charge = Charge(
            id=charge_id,
            account=accounts[n % ACCOUNTS],
            kind="due" if due else "immediate",
            payment_method="pix",
            amount=1000,
            platform_tax=10,
            liquid_amount=990,
            txid=charge_id.hex,
            emv="x",
            acquirer=acquirer,
            buyer_name="A",
            buyer_document=f"{rng.randrange(10**10):011d}",
            status=rng.choice(["pending", "paid", "canceled"]),
            expires_at=now,
        )
        charges.append(charge)
        if due:
            day = dt.date(2026, 1, 1) + dt.timedelta(days=rng.randrange(400))
            terms = {"calendario": {"dataDeVencimento": day.isoformat(), "validadeAposVencimento": 30}}
            dues.append(
                DueCharge(
                    charge=charge,
                    terms={**terms, "valor": {"original": "10.00"}},
                    original=1000,
                    due_date=day,
                    last_payable_date=day + dt.timedelta(days=30),
                )
            )
    Charge.objects.bulk_create(charges, batch_size=2000)
    DueCharge.objects.bulk_create(dues, batch_size=2000)
    with connection.cursor() as cursor:
        cursor.execute("VACUUM (ANALYZE) payments_charge")
        cursor.execute("VACUUM (ANALYZE) payments_duecharge")
    return accounts[0], charges[0].txid


def scans(sql: str) -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + sql)
        plan = [line for (line,) in cursor.fetchall()]
    return [line.strip() for line in plan if "Seq Scan" in line or "Bitmap Heap Scan" in line]


def test_every_due_charge_filter_reads_an_index() -> None:
    account, txid = seed()
    issued = credential_issue(account=account)
    client = Client(headers={"X-Public-Key": issued.credential.public_key, "X-Secret-Key": issued.secret_key})
    cases: list[dict[str, Any]] = [
        {"page": 3},
        {"status": "pending", "page": 2},
        {"due_date_from": "2026-03-01", "due_date_to": "2026-03-31", "page": 2},
        {"document": "12345678901"},
        {"txid": txid},
        {"created_at_start": "2026-01-01 00:00:00", "page": 2},
    ]
    # Not overdue=true: it matches most of the platform's due charges (all
    # accounts' terms are in one table, DueCharge has no account), so the
    # planner rightly scans payments_duecharge here; an account-leading index
    # needs the account on DueCharge (a model change, reported to the lead).
    wrong = []
    for params in cases:
        with CaptureQueriesContext(connection) as queries:
            assert client.get("/api/due-charges", params).status_code == 200
        sql_sent = [q["sql"] for q in queries.captured_queries]
        sent = [sql for sql in sql_sent if sql.startswith("SELECT") and "payments_charge" in sql]
        assert sent, params
        wrong += [(params, scan) for sql in sent for scan in scans(sql)]
    assert wrong == []
