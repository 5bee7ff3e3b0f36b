"""Benchmark: POST /api/transactions on the sandbox acquirer, and
GET /api/transactions/{id}, against gunicorn as deployed.

    .venv/bin/python -m bench.charges [--total 600] [--concurrency 8]

Prints requests/s, p50/p99 latency and SQL queries per request.
"""

from __future__ import annotations

import argparse
import json

import requests

from bench.harness import LoadResult, bench_env, gunicorn, print_table, run_load, setup_django

BODY = {
    "payment_method": "pix",
    "amount": 1500,
    "buyer": {"buyer_name": "Fulano de Tal", "buyer_document": "52998224725", "buyer_phone": "11999998888"},
}


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


def queries_per_request(headers: dict[str, str]) -> tuple[float, float]:
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    client = Client(headers=headers)
    with CaptureQueriesContext(connection) as create:
        response = client.post("/api/transactions", json.dumps(BODY), content_type="application/json")
    charge_id = response.json()["data"]["id"]
    with CaptureQueriesContext(connection) as read:
        client.get(f"/api/transactions/{charge_id}")
    return len(create.captured_queries), len(read.captured_queries)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--total", type=int, default=600)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()

    env = bench_env()
    setup_django(env)
    headers = prepare()
    create_queries, read_queries = queries_per_request(headers)

    created: list[str] = []
    with gunicorn(env) as base:

        def create(session: requests.Session, index: int) -> int:
            response = session.post(f"{base}/api/transactions", json=BODY, headers=headers, timeout=30)
            if response.status_code == 201:
                created.append(response.json()["data"]["id"])
            return response.status_code

        def read(session: requests.Session, index: int) -> int:
            charge_id = created[index % len(created)]
            return session.get(f"{base}/api/transactions/{charge_id}", headers=headers, timeout=30).status_code

        results: list[LoadResult] = []
        post = run_load("POST /api/transactions (sandbox)", create, total=args.total, concurrency=args.concurrency)
        post.queries = create_queries
        results.append(post)
        get = run_load("GET /api/transactions/{id}", read, total=args.total * 2, concurrency=args.concurrency)
        get.queries = read_queries
        results.append(get)
    print_table(results, args.concurrency)


if __name__ == "__main__":
    main()
