"""Benchmark: webhook deliveries per second of ONE Celery worker process
against a local receiver, and end-to-end latency from the status change's
commit to the receiver.

    .venv/bin/python -m bench.webhooks [--events 500] [--concurrency 8]
"""

from __future__ import annotations

import argparse
import datetime as dt
import tempfile
import time
from pathlib import Path

from bench.harness import LoadResult, bench_env, print_table, setup_django


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=500)
    parser.add_argument("--concurrency", type=int, default=8, help="threads of the one worker process")
    args = parser.parse_args()

    env = bench_env()
    setup_django(env)
    import uuid

    from django.db import connection, transaction
    from django.utils import timezone

    from accounts.models import Account
    from accounts.services import account_create
    from tests.realworld import celery_worker, http_receiver, wait_for
    from webhooks.models import WebhookDelivery, WebhookEndpoint
    from webhooks.services import endpoint_create, event_emit

    account = Account.objects.filter(ref="bench-webhooks").first() or account_create(
        name="Bench Webhooks", ref="bench-webhooks", status=Account.Status.APPROVED
    )
    WebhookEndpoint.objects.filter(account=account).update(is_active=False)

    with (
        http_receiver() as receiver,
        celery_worker(connection.settings_dict["NAME"], Path(tempfile.mkdtemp()), concurrency=args.concurrency),
    ):
        endpoint_create(account=account, url=receiver.url)
        committed: dict[str, float] = {}
        started = time.perf_counter()
        for _ in range(args.events):
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
        receiver.wait_for_requests(args.events, timeout=300)
        elapsed = time.perf_counter() - started
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

    latencies = [
        r.at - committed[r.headers["X-Webhook-Event-ID"]]
        for r in receiver.requests
        if r.headers.get("X-Webhook-Event-ID") in committed
    ]
    result = LoadResult(
        f"webhook deliveries (1 worker, {args.concurrency} threads)", len(latencies), 0, elapsed, latencies
    )
    print_table([result], args.concurrency)
    print("req/s = deliveries per second; p50/p99 = commit of the change → receiver has the request")


if __name__ == "__main__":
    main()
