"""Benchmark: POST /api/withdrawals on one hot account and spread over many
accounts, each beside its ceiling: the same row-locked transaction run by
pgbench directly on PostgreSQL (bench/withdrawals.sql), rounds alternated.

    .venv/bin/python -m bench.withdrawals [--accounts 1000] [--total 400] [--concurrency 8] [--engines auto]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

import requests

from bench.harness import (
    LoadResult,
    bench_env,
    combine,
    drop_queue,
    gunicorn,
    machine_lines,
    print_table,
    run_load,
    setup_django,
)

HERE = Path(__file__).resolve().parent
BODY = {"amount": 1000, "key_value": "52998224725"}
CEILING_NOTE = (
    "bench/withdrawals.sql via pgbench on the same PostgreSQL (lock balance, daily sum, "
    "insert withdrawal and ledger entry, update balance), same concurrency"
)


def prepare(count: int) -> list[dict[str, str]]:
    """``count`` approved accounts with a large balance and high limits, one
    credential each. Accounts and keys are kept in the bench database's
    ``bench_accounts`` (pgbench reads it too), so later runs reuse them."""
    from django.db import connection, transaction

    from accounts.models import Account, ApiCredential, LedgerEntry
    from accounts.services import account_create, credential_issue, ledger_post

    existing = list(Account.objects.filter(ref__startswith="bench-w-").order_by("ref"))
    for index in range(len(existing), count):
        account = account_create(
            name=f"Bench W {index}",
            ref=f"bench-w-{index:05d}",
            status=Account.Status.APPROVED,
            withdrawal_per_request_limit=10**12,
            withdrawal_daily_limit=10**15,
        )
        with transaction.atomic():
            ledger_post(
                account_id=account.pk,
                amount=10**13,
                kind=LedgerEntry.Kind.CHARGE_PAID,
                reference=f"bench-w:{account.pk}",
            )
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


def queries_per_request(headers: dict[str, str]) -> int:
    """SQL queries of one POST (in process, after a first one)."""
    import json

    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    client = Client(headers=headers)
    client.post("/api/withdrawals", json.dumps(BODY), content_type="application/json")
    with CaptureQueriesContext(connection) as post:
        client.post("/api/withdrawals", json.dumps(BODY), content_type="application/json")
    return len(post.captured_queries)


def pgbench(count: int, hot: bool, concurrency: int, seconds: int) -> float:
    """Transactions per second of bench/withdrawals.sql."""
    from django.db import connection

    settings = connection.settings_dict
    binary = shutil.which("pgbench")
    if binary is None:
        # pgserver's wheel ships pgbench next to its postgres.
        from pgserver._commands import POSTGRES_BIN_PATH

        binary = str(POSTGRES_BIN_PATH / "pgbench")
    script = f"\\set n {0 if hot else f'random(0, {count - 1})'}\n" + (HERE / "withdrawals.sql").read_text()
    script_path = HERE / ".withdrawals-run.sql"  # git-ignored
    script_path.write_text(script)
    env = {**os.environ, "PGPASSWORD": settings.get("PASSWORD") or ""}
    command = [
        binary, "-n", "-M", "extended", "-c", str(concurrency), "-j", "2", "-T", str(seconds), "-f", str(script_path),
        "-h", settings["HOST"] or "localhost", "-U", settings["USER"], settings["NAME"],
    ]  # fmt: skip
    if settings.get("PORT"):
        command[-1:-1] = ["-p", str(settings["PORT"])]
    try:
        out = subprocess.run(command, env=env, capture_output=True, text=True, check=True).stdout
    finally:
        script_path.unlink(missing_ok=True)
    match = re.search(r"tps = ([0-9.]+)", out)
    return float(match.group(1)) if match else 0.0


def run(
    env: dict[str, str],
    *,
    accounts: int = 1000,
    total: int = 400,
    concurrency: int = 8,
    rounds: int = 3,
    pgbench_seconds: int = 9,
    seconds: float = 40.0,
) -> list[LoadResult]:
    """The hot and spread rows, each beside pgbench's tx/s of the same
    transaction. ``total`` requests and ``pgbench_seconds`` per scenario are
    split in ``rounds`` that alternate API and pgbench."""
    headers = prepare(accounts)
    queries = queries_per_request(headers[-1])
    per_round = max(1, total // rounds)
    pg_round = max(1, pgbench_seconds // rounds)
    budget = seconds / rounds
    api: dict[bool, list[LoadResult]] = {True: [], False: []}
    ceiling: dict[bool, list[float]] = {True: [], False: []}
    try:
        with gunicorn(env) as base:

            def hot(session: requests.Session, index: int) -> int:
                return session.post(f"{base}/api/withdrawals", json=BODY, headers=headers[0], timeout=30).status_code

            def spread(session: requests.Session, index: int) -> int:
                # A fixed scatter of the index: the same accounts every run, no shared RNG between threads.
                chosen = headers[(index * 7919) % len(headers)]
                return session.post(f"{base}/api/withdrawals", json=BODY, headers=chosen, timeout=30).status_code

            for r in range(rounds):
                for is_hot, call in ((True, hot), (False, spread)):
                    # Alternate which goes first, so neither always meets the other's aftermath.
                    api_first = r % 2 == 0
                    if not api_first:
                        ceiling[is_hot].append(pgbench(accounts, is_hot, concurrency, pg_round))
                    api[is_hot].append(
                        run_load(
                            "api",
                            call,
                            total=per_round,
                            concurrency=concurrency,
                            warmup=20 if r == 0 else 0,
                            seconds=budget,
                            first_index=r * per_round,
                        )
                    )
                    if api_first:
                        ceiling[is_hot].append(pgbench(accounts, is_hot, concurrency, pg_round))
    finally:
        drop_queue(env.get("CELERY_TASK_DEFAULT_QUEUE", "pix-bench"))

    rows = []
    names = {True: "POST /api/withdrawals, 1 hot account", False: f"POST /api/withdrawals, {accounts:,} accounts"}
    for is_hot, name in names.items():
        row = combine(name, api[is_hot])
        row.queries = queries
        row.ceiling = sum(ceiling[is_hot]) / len(ceiling[is_hot])
        row.ceiling_note = CEILING_NOTE
        rows.append(row)
    return rows


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--accounts", type=int, default=1000)
    parser.add_argument("--total", type=int, default=400)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=9, help="pgbench seconds per scenario, split in rounds")
    parser.add_argument("--engines", choices=["auto", "machine", "embedded"], default="auto")
    args = parser.parse_args(argv)

    env = bench_env(engines=args.engines)
    setup_django(env)
    rows = run(
        env,
        accounts=args.accounts,
        total=args.total,
        concurrency=args.concurrency,
        rounds=args.rounds,
        pgbench_seconds=args.seconds,
    )
    print_table(rows, args.concurrency, header_lines=machine_lines())


if __name__ == "__main__":
    main()
