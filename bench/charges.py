"""Benchmark: POST /api/transactions on the sandbox acquirer, and
GET /api/transactions/{id}, against gunicorn as deployed, each beside the
ceiling (bench/ceiling.py: a bare DRF view doing one primary-key read on the
same server) measured in the same run, rounds alternated.

    .venv/bin/python -m bench.charges [--total 600] [--concurrency 8] [--engines auto]

Prints requests/s, p50/p99 latency, SQL queries per request and the ratio
to the ceiling.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence

import requests

from bench.harness import (
    LoadResult,
    bench_env,
    combine,
    gunicorn,
    machine_lines,
    print_table,
    run_load,
    setup_django,
)

BODY = {
    "payment_method": "pix",
    "amount": 1500,
    "buyer": {"buyer_name": "Fulano de Tal", "buyer_document": "52998224725", "buyer_phone": "11999998888"},
}
CEILING_NOTE = "bench/ceiling.py, a bare DRF view doing one primary-key read (same gunicorn, middleware, renderer)"


def prepare() -> dict[str, str]:
    from accounts.models import Account
    from accounts.services import account_create, credential_issue
    from acquirers.services import acquirer_upsert

    acquirer_upsert(key="bench_sandbox", name="Bench", adapter="sandbox", options={}, default_priority=1)
    account = Account.objects.filter(ref="bench").first() or account_create(
        name="Bench Ltda", ref="bench", status=Account.Status.APPROVED, cashin_fee_bps=199
    )
    issued = credential_issue(account=account, label="bench")
    return {"X-Public-Key": issued.credential.public_key, "X-Secret-Key": issued.secret_key}


def queries_per_request(headers: dict[str, str]) -> tuple[float, float, float]:
    """SQL queries of one POST, one GET and one ceiling read (in process,
    after a first request of each so one-off writes are not counted)."""
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    client = Client(headers=headers)

    def post() -> str:
        response = client.post("/api/transactions", json.dumps(BODY), content_type="application/json")
        return str(response.json()["data"]["id"])

    charge_id = post()
    client.get(f"/api/transactions/{charge_id}")
    with CaptureQueriesContext(connection) as create:
        post()
    with CaptureQueriesContext(connection) as read:
        client.get(f"/api/transactions/{charge_id}")
    with CaptureQueriesContext(connection) as bare:
        client.get(f"/bench/ceiling/{charge_id}")
    return len(create.captured_queries), len(read.captured_queries), len(bare.captured_queries)


def run(
    env: dict[str, str], *, total: int = 600, concurrency: int = 8, rounds: int = 3, seconds: float = 40.0
) -> list[LoadResult]:
    """POST and GET rows, each with the ceiling's req/s beside it. ``total``
    POSTs (twice as many GETs and ceiling reads), split in ``rounds`` that
    alternate the three; each figure stops after ``seconds`` in all."""
    headers = prepare()
    create_queries, read_queries, ceiling_queries = queries_per_request(headers)

    created: list[str] = []
    posts: list[LoadResult] = []
    gets: list[LoadResult] = []
    bare: list[LoadResult] = []
    with gunicorn(env) as base:

        def create(session: requests.Session, index: int) -> int:
            response = session.post(f"{base}/api/transactions", json=BODY, headers=headers, timeout=30)
            if response.status_code == 201:
                created.append(response.json()["data"]["id"])
            return response.status_code

        def read(session: requests.Session, index: int) -> int:
            charge_id = created[index % len(created)]
            return session.get(f"{base}/api/transactions/{charge_id}", headers=headers, timeout=30).status_code

        def ceiling(session: requests.Session, index: int) -> int:
            charge_id = created[index % len(created)]
            return session.get(f"{base}/bench/ceiling/{charge_id}", timeout=30).status_code

        per_round = max(1, total // rounds)
        budget = seconds / rounds
        steps: dict[str, tuple[Callable[[requests.Session, int], int], int, list[LoadResult]]] = {
            "post": (create, per_round, posts),
            "get": (read, 2 * per_round, gets),
            "ceiling": (ceiling, 2 * per_round, bare),
        }
        for r in range(rounds):
            # POST first in the first round (the reads need charges), then
            # alternate so no figure always runs right after the same one.
            order = ("post", "get", "ceiling") if r % 2 == 0 else ("ceiling", "get", "post")
            for key in order:
                call, count, bucket = steps[key]
                bucket.append(
                    run_load(
                        key,
                        call,
                        total=count,
                        concurrency=concurrency,
                        warmup=20 if r == 0 else 0,
                        seconds=budget,
                        first_index=r * count,
                    )
                )

    ceiling_row = combine("ceiling: bare DRF view, one primary-key read", bare)
    ceiling_row.queries = ceiling_queries
    post = combine("POST /api/transactions (sandbox acquirer)", posts)
    get = combine("GET /api/transactions/{id}", gets)
    for row, queries in ((post, create_queries), (get, read_queries)):
        row.queries = queries
        row.ceiling = ceiling_row.rps
        row.ceiling_note = CEILING_NOTE
    return [post, get]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--total", type=int, default=600)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--engines", choices=["auto", "machine", "embedded"], default="auto")
    args = parser.parse_args(argv)

    env = bench_env(engines=args.engines)
    setup_django(env)
    rows = run(env, total=args.total, concurrency=args.concurrency, rounds=args.rounds)
    print_table(rows, args.concurrency, header_lines=machine_lines())


if __name__ == "__main__":
    main()
