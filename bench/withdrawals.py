"""Benchmark: POST /api/withdrawals on one hot account and spread over many
accounts, each beside its ceiling: the same row-locked transaction run by
pgbench directly on PostgreSQL (bench/withdrawals.sql).

    .venv/bin/python -m bench.withdrawals [--accounts 1000] [--total 400] [--concurrency 8]
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import subprocess
from pathlib import Path

import requests

from bench.harness import LoadResult, bench_env, gunicorn, run_load, setup_django

HERE = Path(__file__).resolve().parent


def prepare(count: int) -> list[dict[str, str]]:
    """``count`` approved accounts with a large balance and high limits, one credential each."""
    from django.db import connection, transaction

    from accounts.models import Account, LedgerEntry
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
        cursor.execute("TRUNCATE bench_accounts")
        cursor.executemany(
            "INSERT INTO bench_accounts (n, account_id) VALUES (%s, %s)", [(i, a.pk) for i, a in enumerate(accounts)]
        )
    return [
        {"X-Public-Key": issued.credential.public_key, "X-Secret-Key": issued.secret_key}
        for issued in (credential_issue(account=a, label="bench") for a in accounts)
    ]


def pgbench(count: int, hot: bool, concurrency: int, seconds: int) -> float:
    """Transactions per second of bench/withdrawals.sql."""
    from django.db import connection

    settings = connection.settings_dict
    # pgserver's wheel ships pgbench next to its postgres: always there.
    from pgserver._commands import POSTGRES_BIN_PATH

    binary = shutil.which("pgbench") or str(POSTGRES_BIN_PATH / "pgbench")
    script = f"\\set n {0 if hot else f'random(0, {count - 1})'}\n" + (HERE / "withdrawals.sql").read_text()
    script_path = HERE / ".withdrawals-run.sql"
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--accounts", type=int, default=1000)
    parser.add_argument("--total", type=int, default=400)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--seconds", type=int, default=8, help="pgbench duration per scenario")
    args = parser.parse_args()

    env = bench_env()
    setup_django(env)
    headers = prepare(args.accounts)
    body = {"amount": 1000, "key_value": "52998224725"}
    rng = random.Random(7)

    rows: list[tuple[LoadResult, float]] = []
    with gunicorn(env) as base:

        def hot(session: requests.Session, index: int) -> int:
            return session.post(f"{base}/api/withdrawals", json=body, headers=headers[0], timeout=30).status_code

        def spread(session: requests.Session, index: int) -> int:
            chosen = headers[rng.randrange(len(headers))]
            return session.post(f"{base}/api/withdrawals", json=body, headers=chosen, timeout=30).status_code

        api_hot = run_load("POST /api/withdrawals, 1 hot account", hot, total=args.total, concurrency=args.concurrency)
        api_spread = run_load(
            f"POST /api/withdrawals, {args.accounts} accounts", spread, total=args.total, concurrency=args.concurrency
        )
    rows.append((api_hot, pgbench(args.accounts, True, args.concurrency, args.seconds)))
    rows.append((api_spread, pgbench(args.accounts, False, args.concurrency, args.seconds)))

    print(f"\nconcurrency {args.concurrency}, {os.cpu_count()} CPUs")
    header = (
        f"| {'scenario':<40} | {'req/s':>7} | {'p50 ms':>7} | {'p99 ms':>7} | {'errors':>6} "
        f"| {'ceiling tx/s':>12} | {'ratio':>6} |"
    )
    print(header)
    print("|" + "|".join("-" * len(cell) for cell in header.split("|")[1:-1]) + "|")
    for result, ceiling in rows:
        ratio = result.rps / ceiling if ceiling else 0.0
        print(
            f"| {result.name:<40} | {result.rps:>7.1f} | {result.percentile(0.5):>7.1f} "
            f"| {result.percentile(0.99):>7.1f} | {result.errors:>6} | {ceiling:>12.1f} | {ratio:>6.2f} |"
        )
    print("ceiling: bench/withdrawals.sql (lock balance, daily sum, insert withdrawal and ledger entry) via pgbench")


if __name__ == "__main__":
    main()
