"""Benchmark: webhook deliveries per second of ONE Celery worker process
against a local receiver, and end-to-end latency from the status change's
commit to the receiver; beside its ceiling, the same number of bare HTTP
POSTs of a delivery's body and headers sent by as many threads of one process
to a receiver of the same kind (before and after the deliveries).

    .venv/bin/python -m bench.webhooks [--events 500] [--concurrency 8] [--engines auto]
"""

from __future__ import annotations

import argparse
import datetime as dt
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

import requests

from bench.harness import LoadResult, bench_env, combine, machine_lines, print_table, run_load, setup_django

LEGEND = (
    "webhooks: req/s = deliveries per second draining a backlog; p50/p99 = commit of a change → the receiver "
    "has it, changes committed at half that rate"
)
CEILING_NOTE = (
    "bare requests.post of a webhook delivery's body and headers to the same kind of local receiver, "
    "as many threads in one process (no Celery, database or signing)"
)


def run(env: dict[str, str], *, events: int = 500, concurrency: int = 8) -> list[LoadResult]:
    """One row: deliveries/s of a backlog drained by the worker, and commit →
    receiver latency of changes committed at half that rate; the ceiling's
    bare POSTs/s beside it."""
    from unittest import mock

    from django.db import connection, transaction
    from django.utils import timezone

    from accounts.models import Account
    from accounts.services import account_create
    from tests.realworld import celery_worker, http_receiver, wait_for
    from webhooks import services
    from webhooks.models import WebhookDelivery, WebhookEndpoint
    from webhooks.services import endpoint_create, event_emit

    account = Account.objects.filter(ref="bench-webhooks").first() or account_create(
        name="Bench Webhooks", ref="bench-webhooks", status=Account.Status.APPROVED
    )
    # Deleted, not only disabled: earlier runs' endpoints must not count
    # towards the account's limit of endpoints.
    WebhookEndpoint.objects.filter(account=account, deleted_at__isnull=True).update(
        is_active=False, deleted_at=timezone.now()
    )

    committed: dict[str, float] = {}
    with (
        http_receiver() as receiver,
        http_receiver() as bare_receiver,
        # The worker's throughput, measured on one endpoint: its cap of
        # deliveries in flight, and its account's share, are raised to the
        # worker's threads so that it is the worker, not a cap, that is measured.
        # One thread more: one destination holds at most one less than its
        # account's share (webhooks.capacity.destination_cap), so the endpoint
        # has `concurrency` deliveries in flight and the extra thread idles.
        celery_worker(
            connection.settings_dict["NAME"],
            Path(tempfile.mkdtemp()),
            concurrency=concurrency + 1,
            env={"WEBHOOK_MAX_CONCURRENT_PER_ENDPOINT": str(concurrency), "WEBHOOK_ACCOUNT_SHARE": "1"},
        ),
    ):
        endpoint_create(account=account, url=receiver.url)

        def emit() -> None:
            record = uuid.uuid4()
            with transaction.atomic():
                event = event_emit(
                    account_id=account.pk,
                    event_type="transaction",
                    record_id=record,
                    status="paid",
                    data={"id": str(record), "status": "paid", "amount": 1000},
                )
            committed[str(event.pk)] = time.time()

        def delivered() -> int:
            return sum(1 for r in receiver.requests if r.headers.get("X-Webhook-Event-ID") in committed)

        # One delivery first: the worker's first task imports and connects,
        # and its request is the template the ceiling replays.
        emit()
        wait_for(lambda: delivered() >= 1, timeout=60)
        sample = receiver.requests[0]
        replay_headers = {k: v for k, v in sample.headers.items() if k.lower() not in ("host", "content-length")}

        def bare_post(session: requests.Session, index: int) -> int:
            return session.post(bare_receiver.url, data=sample.body, headers=replay_headers, timeout=30).status_code

        ceiling_parts = [run_load("ceiling", bare_post, total=events // 2, concurrency=concurrency)]

        # Throughput: a backlog committed first (its publishes held back), then
        # published at once, so the worker alone sets the pace.
        held: list[tuple[uuid.UUID, float]] = []
        committed.clear()
        with mock.patch.object(
            services, "_enqueue", lambda delivery_id, countdown: held.append((delivery_id, countdown))
        ):
            for _ in range(events):
                emit()
        started = time.perf_counter()
        for delivery_id, countdown in held:
            services._enqueue(delivery_id, countdown)
        wait_for(lambda: delivered() >= events, timeout=300)
        elapsed = time.perf_counter() - started

        # Latency: changes committed one by one at half that rate, so what is
        # measured is the path (commit, broker, worker, HTTP), not a queue
        # building up behind a worker that cannot keep up.
        committed.clear()
        interval = 2 * elapsed / events
        paced_from = time.perf_counter()
        for n in range(events // 2):
            time.sleep(max(0.0, paced_from + n * interval - time.perf_counter()))
            emit()
        wait_for(lambda: delivered() >= events // 2, timeout=300)
        latencies = [
            r.at - committed[r.headers["X-Webhook-Event-ID"]]
            for r in receiver.requests
            if r.headers.get("X-Webhook-Event-ID") in committed
        ]

        ceiling_parts.append(run_load("ceiling", bare_post, total=events - events // 2, concurrency=concurrency))
        wait_for(
            lambda: (
                not WebhookDelivery.objects.filter(
                    event__account=account,
                    status=WebhookDelivery.Status.PENDING,
                    created_at__gte=timezone.now() - dt.timedelta(hours=1),
                ).exists()
            ),
            timeout=60,
        )

    row = LoadResult(f"webhook deliveries, 1 worker process x {concurrency} threads", events, 0, elapsed, latencies)
    row.ceiling = combine("ceiling", ceiling_parts).rps
    row.ceiling_note = CEILING_NOTE
    return [row]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=500)
    parser.add_argument("--concurrency", type=int, default=8, help="threads of the one worker process")
    parser.add_argument("--engines", choices=["auto", "machine", "embedded"], default="auto")
    args = parser.parse_args(argv)

    env = bench_env(engines=args.engines)
    setup_django(env)
    rows = run(env, events=args.events, concurrency=args.concurrency)
    print_table(rows, args.concurrency, header_lines=machine_lines())
    print(LEGEND)


if __name__ == "__main__":
    main()
