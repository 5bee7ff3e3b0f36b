"""Benchmark: POST /api/withdrawals on one hot account and spread over many
accounts (wrk rotating their credentials per request), each a ratio to the
anchor (bench/anchor/) measured in the same run, rounds alternated
(bench/measure.py). The hot account is also a ratio to the same row-locked
transaction run by pgbench directly on PostgreSQL (bench/withdrawals.sql):
what one balance row's lock allows at all.

    .venv/bin/python -m bench.withdrawals [--accounts 1000] [--seconds 8] [--rounds 3] [--quick] [--engines auto]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from bench import charges, measure, wrk
from bench.accounts import first_sight_queries, prepare, scattered
from bench.harness import bench_env, drop_queue, machine_lines, setup_django

HERE = Path(__file__).resolve().parent
BODY = {"amount": 1000, "key_value": "52998224725"}
#: Of the hot account's row to pgbench's tx/s (issue 14).
HOT_TARGET = 0.5
CEILING_NOTE = (
    "bench/withdrawals.sql via pgbench on the same PostgreSQL (lock balance, insert withdrawal, "
    "balance with its day's withdrawn total and ledger entry in one statement) on the hot account, same concurrency"
)


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
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    finally:
        script_path.unlink(missing_ok=True)
    if done.returncode != 0:
        # Its stderr names the statement (a column the schema gained, say): say it, not just the exit status.
        raise RuntimeError(f"pgbench exited with {done.returncode}:\n{done.stderr[-2000:]}")
    out = done.stdout
    match = re.search(r"tps = ([0-9.]+)", out)
    return float(match.group(1)) if match else 0.0


def run(
    env: dict[str, str],
    *,
    accounts: int = 1000,
    seconds: float = measure.SECONDS,
    rounds: int = measure.ROUNDS,
    pgbench_seconds: int | None = None,
) -> list[measure.ApiResult]:
    """The hot and spread rows, each a ratio to the anchor, the hot one also
    to pgbench's tx/s of the same transaction on the same account: ``rounds``
    of API (wrk, ``seconds`` each), anchor and pgbench (``pgbench_seconds``,
    half a round by default), alternated."""
    headers = prepare(accounts)
    queries = queries_per_request(headers[-1])
    spread_queries = first_sight_queries("/api/withdrawals", BODY, headers[0], headers[1])
    ids = charges.charge_ids(charges.prepare())
    body = wrk.json_body(BODY)
    hot = [wrk.Request("POST", "/api/withdrawals", {**headers[0], **charges.JSON_HEADERS}, body)]
    spread = scattered("/api/withdrawals", body, headers, charges.JSON_HEADERS)
    pg_round = pgbench_seconds or max(1, round(seconds / 2))
    api: dict[bool, list[measure.ApiResult]] = {True: [], False: []}
    anchors: list[measure.ApiResult] = []
    ceiling: list[float] = []
    try:
        with measure.servers(env, ids, seconds=seconds) as bench:
            bench.warm_up([hot, spread])
            measure.alternate(
                [
                    ("hot", lambda: api[True].append(bench.round("hot", hot))),
                    ("spread", lambda: api[False].append(bench.round("spread", spread))),
                    ("anchor", lambda: anchors.append(bench.anchor_round())),
                    ("pgbench", lambda: ceiling.append(pgbench(accounts, True, measure.CONNECTIONS, pg_round))),
                ],
                rounds,
            )
    finally:
        drop_queue(env.get("CELERY_TASK_DEFAULT_QUEUE", "pix-bench"))

    anchor = measure.combine("anchor", anchors)
    hot_row = measure.beside(measure.combine("POST /api/withdrawals, 1 hot account", api[True]), anchor)
    hot_row.db_ceiling = sum(ceiling) / len(ceiling)
    hot_row.db_ceiling_note = CEILING_NOTE
    # One balance row's lock bounds it whatever the framework: held to pgbench, not to the anchor.
    hot_row.target = f"DB alone ratio ≥ {HOT_TARGET}"
    hot_row.passed = hot_row.failed == 0 and (hot_row.db_ratio or 0.0) >= HOT_TARGET
    spread_row = measure.combine(f"POST /api/withdrawals, {accounts:,} accounts", api[False])
    measure.beside(spread_row, anchor, target=0.25)
    hot_row.queries = queries
    spread_row.queries = spread_queries
    return [hot_row, spread_row]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--accounts", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=measure.SECONDS, help="length of each wrk round")
    parser.add_argument("--rounds", type=int, default=measure.ROUNDS)
    parser.add_argument("--pgbench-seconds", type=int, help="pgbench's length per round (default: half a round)")
    parser.add_argument("--quick", action="store_true", help="a third of each round: a smoke run, not figures")
    parser.add_argument("--engines", choices=["auto", "machine", "embedded"], default="auto")
    args = parser.parse_args(argv)

    env = bench_env(engines=args.engines)
    setup_django(env)
    rows = run(
        env,
        accounts=args.accounts,
        seconds=args.seconds / 3 if args.quick else args.seconds,
        rounds=args.rounds,
        pgbench_seconds=args.pgbench_seconds,
    )
    measure.print_table(rows, header_lines=machine_lines())


if __name__ == "__main__":
    main()
