"""Benchmark: POST /api/transactions on the instant sandbox acquirer (one
account, and spread over many accounts, each calling every few seconds, so
its credential and chain are taken again on each request, as for most
merchants), and GET /api/transactions/{id} over many charges, against gunicorn as
deployed, each a ratio to the anchor (bench/anchor/: a bare Django + DRF app
reading the same rows) measured in the same run, wrk rounds alternated
(bench/measure.py).

    .venv/bin/python -m bench.charges [--accounts 1000] [--seconds 8] [--rounds 3] [--quick] [--engines auto]

Prints requests/s, p50/p99 latency, SQL statements per request (captured in
process), server CPU per request of the service and the anchor, and the ratio.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence

from bench import accounts, measure, wrk
from bench.anchor import COLUMNS
from bench.harness import bench_env, drop_queue, machine_lines, setup_django

BODY = {
    "payment_method": "pix",
    "amount": 1500,
    "buyer": {"buyer_name": "Fulano de Tal", "buyer_document": "52998224725", "buyer_phone": "11999998888"},
}
#: Charges the GET rows (and the anchor) read in turn.
READ_IDS = 200
JSON_HEADERS = {"Content-Type": "application/json", "Accept": "application/json"}


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


def charge_ids(headers: dict[str, str], count: int = READ_IDS) -> list[str]:
    """``count`` charges of the bench account (created in process when
    missing): what the GET rows and the anchor read in turn."""
    from django.test import Client

    from payments.models import Charge
    from payments.serializers import ChargeSerializer

    # The anchor must not import the project: its columns are a copy, checked here.
    if tuple(ChargeSerializer.Meta.fields) != COLUMNS:
        raise RuntimeError("bench/anchor COLUMNS no longer match ChargeSerializer.Meta.fields: update the anchor")
    ids = [str(i) for i in Charge.objects.filter(account__ref="bench").values_list("id", flat=True)[:count]]
    client = Client(headers=headers)
    while len(ids) < count:
        response = client.post("/api/transactions", json.dumps(BODY), content_type="application/json")
        if response.status_code != 201:
            raise RuntimeError(f"POST /api/transactions: {response.status_code} {response.content[:300]!r}")
        ids.append(str(response.json()["data"]["id"]))
    return ids


def queries_per_request(headers: dict[str, str]) -> tuple[int, int]:
    """SQL statements of one POST and one GET (in process, after a first
    request of each so one-off writes are not counted)."""
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
    return len(create.captured_queries), len(read.captured_queries)


def run(
    env: dict[str, str], *, accounts_count: int = 1000, seconds: float = measure.SECONDS, rounds: int = measure.ROUNDS
) -> list[measure.ApiResult]:
    """The POST rows (one account, and ``accounts_count``) and the GET row,
    each beside the anchor: ``rounds`` of ``seconds`` each, alternated."""
    headers = prepare()
    create_queries, read_queries = queries_per_request(headers)
    many = accounts.prepare(accounts_count)
    spread_queries = accounts.first_sight_queries("/api/transactions", BODY, many[0], many[1])
    ids = charge_ids(headers)
    body = wrk.json_body(BODY)
    post = [wrk.Request("POST", "/api/transactions", {**headers, **JSON_HEADERS}, body)]
    spread = accounts.scattered("/api/transactions", body, many, JSON_HEADERS)  # each account every few seconds
    get = [wrk.Request("GET", f"/api/transactions/{charge_id}", headers) for charge_id in ids]
    health = [wrk.Request("GET", "/api/health", {})]
    posts: list[measure.ApiResult] = []
    spread_posts: list[measure.ApiResult] = []
    gets: list[measure.ApiResult] = []
    floors: list[measure.ApiResult] = []
    anchors: list[measure.ApiResult] = []
    try:
        with measure.servers(env, ids, seconds=seconds) as bench:
            bench.warm_up([post, spread, get, health])
            measure.alternate(
                [
                    ("post", lambda: posts.append(bench.round("post", post))),
                    ("spread", lambda: spread_posts.append(bench.round("spread", spread))),
                    ("get", lambda: gets.append(bench.round("get", get))),
                    ("floor", lambda: floors.append(bench.round("floor", health))),
                    ("anchor", lambda: anchors.append(bench.anchor_round())),
                ],
                rounds,
            )
    finally:
        drop_queue(env.get("CELERY_TASK_DEFAULT_QUEUE", "pix-bench"))

    anchor = measure.combine("anchor", anchors)
    post_row = measure.combine("POST /api/transactions (instant sandbox acquirer)", posts)
    get_row = measure.combine(f"GET /api/transactions/{{id}} ({len(ids)} ids in turn)", gets)
    # The floor: the service's server shape, middleware and DRF answering a
    # request that authenticates nothing, counts nothing and reads nothing.
    # No endpoint can cost less; it says how much of each ratio is the stack.
    floor_row = measure.combine("GET /api/health (floor: no auth, no rate limit, no SQL)", floors)
    # No target of its own (issue 14's is the one account's): what most merchants' charges cost.
    spread_row = measure.combine(
        f"POST /api/transactions, {accounts_count:,} accounts (snapshots taken again)", spread_posts
    )
    post_row.queries, get_row.queries, floor_row.queries = create_queries, read_queries, 0
    spread_row.queries = spread_queries
    return [
        measure.beside(post_row, anchor, target=0.25),
        measure.beside(spread_row, anchor),
        measure.beside(get_row, anchor, target=0.5),
        measure.beside(floor_row, anchor),
    ]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--accounts", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=measure.SECONDS, help="length of each wrk round")
    parser.add_argument("--rounds", type=int, default=measure.ROUNDS)
    parser.add_argument("--quick", action="store_true", help="a third of each round: a smoke run, not figures")
    parser.add_argument("--engines", choices=["auto", "machine", "embedded"], default="auto")
    args = parser.parse_args(argv)

    env = bench_env(engines=args.engines)
    setup_django(env)
    seconds = args.seconds / 3 if args.quick else args.seconds
    rows = run(env, accounts_count=args.accounts, seconds=seconds, rounds=args.rounds)
    measure.print_table(rows, header_lines=machine_lines())


if __name__ == "__main__":
    main()
