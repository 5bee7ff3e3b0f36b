"""The benchmarks' many accounts: approved, with a large balance and high
limits, one credential each, kept in the bench database so later runs reuse
them. The withdrawals spread over them (bench/withdrawals.py), and so do the
charges of the row that takes each account's snapshots again (bench/charges.py).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from bench import wrk


def credit(account_id: Any, amount: int, *, reference: str) -> None:
    """Money for a benchmarked account to withdraw (a ledger credit, in the bench database only)."""
    from django.db import transaction

    from accounts.models import LedgerEntry
    from accounts.services import ledger_post

    with transaction.atomic():
        ledger_post(account_id=account_id, amount=amount, kind=LedgerEntry.Kind.CHARGE_PAID, reference=reference)


def scattered(path: str, body: str, headers: Sequence[dict[str, str]], extra: Mapping[str, str]) -> list[wrk.Request]:
    """One POST of ``body`` per account, in a fixed scatter (7919 is prime to
    the count): consecutive requests, and the two wrk threads, never meet on
    one account's rows, and each account comes back every len(headers) requests."""
    return [
        wrk.Request("POST", path, {**headers[(n * 7919) % len(headers)], **extra}, body) for n in range(len(headers))
    ]


def prepare(count: int) -> list[dict[str, str]]:
    """``count`` approved accounts with a large balance and high limits, one
    credential each. Accounts and keys are kept in the bench database's
    ``bench_accounts`` (pgbench reads it too), so later runs reuse them."""
    from django.db import connection

    from accounts.models import Account, ApiCredential
    from accounts.services import account_create, credential_issue

    existing = list(Account.objects.filter(ref__startswith="bench-w-").order_by("ref"))
    for index in range(len(existing), count):
        account = account_create(
            name=f"Bench W {index}",
            ref=f"bench-w-{index:05d}",
            status=Account.Status.APPROVED,
            withdrawal_per_request_limit=10**12,
            withdrawal_daily_limit=10**15,
        )
        credit(account.pk, 10**13, reference=f"bench-w:{account.pk}")
        existing.append(account)
    accounts = existing[:count]
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE IF NOT EXISTS bench_accounts (n int PRIMARY KEY, account_id uuid NOT NULL)")
        # The database stores only a secret's hash: the bench keeps its own copy.
        cursor.execute("ALTER TABLE bench_accounts ADD COLUMN IF NOT EXISTS public_key text")
        cursor.execute("ALTER TABLE bench_accounts ADD COLUMN IF NOT EXISTS secret_key text")
        cursor.execute("SELECT n, account_id, public_key, secret_key FROM bench_accounts")
        kept = {n: (str(account_id), pk, sk) for n, account_id, pk, sk in cursor.fetchall()}
    active = set(
        ApiCredential.objects.filter(
            public_key__in=[pk for _, pk, _ in kept.values() if pk], is_active=True
        ).values_list("public_key", flat=True)
    )
    keys: list[tuple[str, str]] = []
    for n, account in enumerate(accounts):
        account_id, public_key, secret_key = kept.get(n, ("", None, None))
        if account_id != str(account.pk) or public_key not in active or not secret_key:
            issued = credential_issue(account=account, label="bench")
            public_key, secret_key = issued.credential.public_key, issued.secret_key
        keys.append((public_key, secret_key))
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE bench_accounts")
        cursor.executemany(
            "INSERT INTO bench_accounts (n, account_id, public_key, secret_key) VALUES (%s, %s, %s, %s)",
            [(n, a.pk, pk, sk) for n, (a, (pk, sk)) in enumerate(zip(accounts, keys, strict=True))],
        )
    return [{"X-Public-Key": pk, "X-Secret-Key": sk} for pk, sk in keys]


def first_sight_queries(path: str, body: dict[str, Any], first: dict[str, str], other: dict[str, str]) -> int:
    """SQL statements of a POST by an account this process last saw more
    than a snapshot's TTL ago (its credential, and a charge's chain, read
    again; every acquirer already read for another account's request), as
    each request of the spread rows is under load."""
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from core import snapshots

    def post(headers: dict[str, str]) -> None:
        response = Client(headers=headers).post(path, json.dumps(body), content_type="application/json")
        if response.status_code != 201:
            raise RuntimeError(f"POST {path}: {response.status_code} {response.content[:300]!r}")

    post(other)  # its last use recorded: that informative UPDATE comes once a minute, not per request
    snapshots.forget_all()
    post(first)
    with CaptureQueriesContext(connection) as captured:
        post(other)
    return len(captured.captured_queries)
