"""Redis, the broker (and the cache and rate limiter), killed while charges
are paid and withdrawals are requested, then started again empty: the API
keeps answering, because every event and delivery is written in the
transaction of its change (the outbox) and a failed hand-off to the broker
fails nothing; once Redis is back, beat's relay and poller hand over what
was never published, and every event reaches the receiver.

The Redis killed is a private one (see ``redis_server``): the web side of
this process, a real worker and a real beat all use it for everything.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import signal
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from accounts.models import Account, ApiCredential, LedgerEntry
from accounts.selectors import available_balance, ledger_sum
from accounts.services import credential_issue
from payments.models import Charge, ChargeStatus
from tests.conftest import client_for
from tests.factories import AcquirerFactory
from tests.faults import blocking_task
from tests.faults.conftest import SEED
from tests.realworld import (
    Receiver,
    celery_beat,
    celery_broker,
    celery_worker,
    free_port,
    redis_server,
    reset_producer_pools,
    run_concurrently,
    wait_for,
)
from webhooks.models import WebhookDelivery, WebhookEvent
from webhooks.services import endpoint_create
from withdrawals.models import Withdrawal, WithdrawalStatus
from withdrawals.tasks import poll_stuck_payouts

CPF = "52998224725"
CHARGE = {
    "payment_method": "pix",
    "amount": 2000,
    "buyer": {"buyer_name": "Fulano", "buyer_document": CPF, "buyer_phone": "11999998888"},
}
WITHDRAWAL_AMOUNT = 3000
WITHDRAWAL = {"amount": WITHDRAWAL_AMOUNT, "key_value": CPF}
# gunicorn's default worker timeout: an answer later than this never reaches
# the client (the worker is killed).
WEB_TIMEOUT = 30.0

# The worker and beat are other processes: they see only committed rows.
pytestmark = pytest.mark.django_db(transaction=True)


def timed(call: Callable[[], Any]) -> Callable[[], tuple[Any, float]]:
    def run() -> tuple[Any, float]:
        started = time.monotonic()
        return call(), time.monotonic() - started

    return run


def test_a_redis_outage_loses_no_event_and_the_outbox_drains(
    database_name: str, account: Account, receiver: Receiver, settings: Any, tmp_path: Path
) -> None:
    AcquirerFactory(key=f"sbx_outage_{uuid.uuid4().hex[:8]}", default_priority=1)
    endpoint_create(account=account, url=receiver.url)
    issued = credential_issue(account=account, permission=ApiCredential.Permission.ALL)
    clients = [client_for(issued) for _ in range(4)]  # one per thread

    with redis_server(tmp_path) as redis, celery_broker(redis.url):
        # All of this process's Redis: broker, cache (the sandbox acquirer
        # keeps its charges there) and the rate limiter's counters.
        settings.REDIS_URL = redis.url
        settings.CACHES = {"default": {**settings.CACHES["default"], "LOCATION": redis.url}}
        # REDIS_URL gives the worker and beat their broker and cache. The
        # relay is run as in production, by a real beat (every second here
        # instead of every 10 s), not by the test.
        env = {"REDIS_URL": redis.url, "WEBHOOK_RELAY_INTERVAL": "1"}
        queue = f"pix-test-outage-{uuid.uuid4().hex[:8]}"
        with (
            celery_beat(database_name, tmp_path, queue, env=env),
            celery_worker(database_name, tmp_path, env=env, queue=queue),
        ):
            created = [clients[0].post("/api/transactions", CHARGE, format="json") for _ in range(2)]
            assert [r.status_code for r in created] == [201, 201]
            charges = [Charge.objects.get(pk=r.json()["data"]["id"]) for r in created]

            redis.stop()  # SIGKILL, no persistence: every queued message is lost too

            def pay(client: Any, charge: Charge) -> Callable[[], Any]:
                return timed(lambda: client.post(f"/api/sandbox/transactions/{charge.pk}/pay"))

            def withdraw(client: Any) -> Callable[[], Any]:
                return timed(lambda: client.post("/api/withdrawals", WITHDRAWAL, format="json"))

            outcomes = run_concurrently(
                [pay(clients[0], charges[0]), withdraw(clients[1]), pay(clients[2], charges[1]), withdraw(clients[3])]
            )
            assert not [o for o in outcomes if isinstance(o, BaseException)], outcomes
            # Every request succeeded: the change and its outbox rows were
            # committed, the failed hand-offs after commit failed nothing, and
            # the rate limiter, unable to count, let them through (it fails open).
            assert [response.status_code for response, _ in outcomes] == [200, 201, 200, 201]
            assert all(elapsed < WEB_TIMEOUT for _, elapsed in outcomes), [elapsed for _, elapsed in outcomes]
            assert [outcomes[i][0].json()["data"]["status"] for i in (0, 2)] == ["paid", "paid"]
            withdrawals = [Withdrawal.objects.get(pk=outcomes[i][0].json()["data"]["id"]) for i in (1, 3)]
            assert not redis.answers()
            # Written in the outbox, waiting: nothing could be handed to a worker.
            pending = WebhookDelivery.objects.filter(status=WebhookDelivery.Status.PENDING, attempt_count=0)
            assert sorted(pending.values_list("event__record_id", flat=True)) == sorted(c.pk for c in charges)
            assert receiver.requests == []

            redis.start()  # same port, empty
            # Their hand-off to a worker was lost: beat's poller takes
            # withdrawals nothing moved for 2 minutes. Rather than wait, they
            # are aged and the poll task is sent as beat sends it.
            Withdrawal.objects.filter(pk__in=[w.pk for w in withdrawals]).update(
                updated_at=timezone.now() - dt.timedelta(minutes=3)
            )
            poll_stuck_payouts.delay()

            def drained() -> bool:
                paid = (
                    Withdrawal.objects.filter(pk__in=[w.pk for w in withdrawals], status=WithdrawalStatus.PAID).count()
                    == 2
                )
                return paid and not WebhookDelivery.objects.exclude(status=WebhookDelivery.Status.SUCCEEDED).exists()

            wait_for(drained, timeout=60)

    # Every event of the account, delivered: the two payments, and each
    # withdrawal's approval and payout.
    events = WebhookEvent.objects.filter(account=account)
    assert sorted((e.record_id, e.status) for e in events) == sorted(
        [(c.pk, ChargeStatus.PAID) for c in charges]
        + [(w.pk, s) for w in withdrawals for s in (WithdrawalStatus.APPROVED, WithdrawalStatus.PAID)]
    )
    assert {r.headers["X-Webhook-Event-ID"] for r in receiver.requests} == {str(e.id) for e in events}
    for request in receiver.requests:
        body = json.loads(request.body)
        assert body["id"] == request.headers["X-Webhook-Event-ID"]
    assert WebhookDelivery.objects.filter(event__in=events, status=WebhookDelivery.Status.SUCCEEDED).count() == len(
        events
    )
    # The money moved once per change.
    liquid = sum(Charge.objects.get(pk=c.pk).liquid_amount for c in charges)
    assert available_balance(account) == SEED + liquid - 2 * WITHDRAWAL_AMOUNT == ledger_sum(account)
    kinds = sorted(LedgerEntry.objects.filter(account=account).values_list("kind", flat=True))
    assert kinds == sorted([LedgerEntry.Kind.CHARGE_PAID] * 3 + [LedgerEntry.Kind.WITHDRAWAL] * 2)


# Only the call is timed: a request held by retries is cut short instead of costing the suite ~10 s.
@pytest.mark.timeout(4, func_only=True)
@pytest.mark.django_db  # nothing leaves this process: a rolled-back test is enough
def test_a_request_during_a_redis_outage_answers_without_waiting_out_client_retries(
    api: Any, settings: Any, django_capture_on_commit_callbacks: Any
) -> None:
    nothing_listens = f"redis://127.0.0.1:{free_port()}/0"
    settings.REDIS_URL = nothing_listens  # the rate limiter's Redis
    with celery_broker(nothing_listens):
        started = time.monotonic()
        with django_capture_on_commit_callbacks(execute=True):  # the hand-off to the broker
            response = api.post("/api/withdrawals", WITHDRAWAL, format="json")
        elapsed = time.monotonic() - started

    assert response.status_code == 201, response.content
    assert elapsed < 2.0


RESTARTS = 3


# As deployed: prefork for the default and payout queues, threads for webhooks.
@pytest.mark.parametrize("pool", ["prefork", "threads"])
def test_a_worker_survives_the_broker_restarting_under_a_task_in_flight(
    pool: str, database_name: str, tmp_path: Path
) -> None:
    """The broker restarts (SIGTERM, down a moment, up again on the same
    port) while the worker holds a task delivered and not yet acknowledged:
    the worker reconnects instead of dying, and runs what is sent next.
    Without config/broker.py it died on the first restart with
    ``Unrecoverable error: AttributeError(... 'hostname')``."""
    from config.celery import app

    markers = tmp_path / "markers"
    markers.mkdir()

    def send(tag: str) -> None:
        reset_producer_pools()  # the pool's connection died with the old server
        app.send_task(blocking_task.NAME, args=[str(markers), tag], queue=worker.queue)

    with (
        redis_server(tmp_path) as redis,
        celery_broker(redis.url),
        # Two slots, one busy: the consumer still waits on the broker when it goes.
        celery_worker(
            database_name,
            tmp_path,
            concurrency=2,
            env={"REDIS_URL": redis.url},
            pool=pool,
            include=[blocking_task.__name__],
        ) as worker,
    ):

        def dying() -> bool:
            return "Unrecoverable error" in worker.output() or worker.process.poll() is not None

        def reconnected_or_dying(times: int) -> bool:
            return worker.output().count("Connected to") > times or dying()

        def alive_after(marker: Path, timeout: float = 30) -> None:
            wait_for(lambda: marker.exists() or worker.process.poll() is not None, timeout=timeout)
            assert worker.process.poll() is None, worker.output()[-4000:]

        for n in range(1, RESTARTS + 1):
            send(f"held{n}")
            alive_after(markers / f"held{n}.started")

            redis.stop(signal.SIGTERM)
            redis.start()
            # Its n-th reconnection (the first "Connected to" is its start), or
            # its end: a dying worker first waits for the held task.
            wait_for(functools.partial(reconnected_or_dying, n), timeout=30)
            assert not dying(), worker.output()[-4000:]

            (markers / f"held{n}.release").touch()
            (markers / f"next{n}.release").touch()
            send(f"next{n}")
            alive_after(markers / f"next{n}.done")
        assert not dying(), worker.output()[-4000:]
