"""One hanging receiver holds at most its endpoint's cap of the webhook
worker's threads (issue 13, bulkheads), and one account at most its share
(issue 29 §6).

A real Celery worker (4 threads, a cap of 2 deliveries per endpoint) gets
many deliveries for an endpoint whose receiver hangs until the test lets it
go. The receiver never sees more than 2 requests at once, the deliveries
past the cap wait without an attempt, and another account's endpoint keeps
getting its deliveries within seconds. Once the receiver answers, every
delivery succeeds with exactly one attempt: none lost, none sent twice.

A real worker as deployed (8 threads) and an account whose two endpoints and
whose postbacks all hang: with only a cap per endpoint it held every thread
(2 endpoints x 4, plus postbacks), and another account's delivery waited for
the whole hang. Its deliveries together now hold at most its share of the
worker's threads (half), the rest wait without an attempt, and another
account's deliveries arrive within seconds while the hang lasts a minute.
Once the receivers answer, every delivery of the account succeeds with
exactly one attempt: deferring lost none and counted none as a failure.

The same worker, the default caps (4 per endpoint, half of 8 threads per
account), and an account with one endpoint that hangs: with the endpoint's
cap equal to the account's share, that one endpoint held the whole share and
the account's healthy endpoint and postbacks waited for the whole hang. One
destination now holds one less than its account's share (3), and the
account's healthy endpoint and postbacks are delivered within seconds while
the other hangs.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from django.db import transaction

from accounts.models import Account
from tests.factories import AccountFactory
from tests.realworld import Receiver, celery_worker, http_receiver, serving, wait_for
from webhooks.models import WebhookAttempt, WebhookDelivery
from webhooks.services import endpoint_create, event_emit

CAP = 2
THREADS = 4
HELD = 12  # deliveries to the hanging receiver
PROMPT = 10  # deliveries to the healthy one
PROMPTLY = 5.0  # seconds: the healthy receiver's bound while the other hangs
DEPLOYED_THREADS = 8  # the webhook worker as deployed (WEBHOOK_WORKER_CONCURRENCY)
SHARE = 0.5  # of the worker, one account's (WEBHOOK_ACCOUNT_SHARE)
HELD_EVENTS = 12  # of the account whose receivers hang: each to two endpoints and a postback
HANG = 120.0  # seconds the receivers hang unless the test lets them go first
#: Long enough that a hang is the receiver's, not cut by our timeout; a
#: deferred delivery comes back soon.
HANGING = {"WEBHOOK_TIMEOUT": "60", "WEBHOOK_DEFER_SECONDS": "0.5"}

# The worker is another process: it sees only committed rows.
pytestmark = pytest.mark.django_db(transaction=True)


@dataclass
class HangingReceiver:
    """Answers 200 only once ``released`` is set; counts the requests it
    holds at once."""

    url: str = ""
    released: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    in_flight: int = 0
    most_in_flight: int = 0
    event_ids: list[str] = field(default_factory=list)


@contextlib.contextmanager
def hanging_receiver() -> Iterator[HangingReceiver]:
    receiver = HangingReceiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            with receiver.lock:
                receiver.in_flight += 1
                receiver.most_in_flight = max(receiver.most_in_flight, receiver.in_flight)
                receiver.event_ids.append(self.headers.get("X-Webhook-Event-ID", ""))
            try:
                receiver.released.wait(120)
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")
            finally:
                with receiver.lock:
                    receiver.in_flight -= 1

        def log_message(self, format: str, *args: Any) -> None:
            pass

    with serving(Handler, on_stop=receiver.released.set) as port:
        receiver.url = f"http://127.0.0.1:{port}/hook"
        yield receiver


def emit(account: Account, postback_url: str = "") -> str:
    with transaction.atomic():
        event = event_emit(
            account_id=account.pk,
            event_type="transaction",
            record_id=uuid.uuid4(),
            status="paid",
            data={"status": "paid"},
            postback_url=postback_url,
        )
    return str(event.pk)


def received(receiver: Receiver, event_id: str, times: int = 1) -> bool:
    return sum(r.headers.get("X-Webhook-Event-ID") == event_id for r in receiver.requests) >= times


def test_a_hanging_receiver_holds_only_its_endpoints_cap_and_loses_nothing(database_name: str, tmp_path: Path) -> None:
    slow_account, other_account = AccountFactory(), AccountFactory()
    # The whole pool for one account: this is the endpoint's cap alone (a
    # destination's is also one less than its account's share, 1 of 4 at 0.5).
    env = {**HANGING, "WEBHOOK_MAX_CONCURRENT_PER_ENDPOINT": str(CAP), "WEBHOOK_ACCOUNT_SHARE": "1"}
    with (
        hanging_receiver() as hanging,
        http_receiver() as healthy,
        celery_worker(database_name, tmp_path, concurrency=THREADS, env=env),
    ):
        slow = endpoint_create(account=slow_account, url=hanging.url).endpoint
        endpoint_create(account=other_account, url=healthy.url)
        held = [emit(slow_account) for _ in range(HELD)]

        # The cap is reached, and stays the most the receiver ever holds.
        wait_for(lambda: hanging.in_flight >= CAP, timeout=30)
        # Meanwhile, another account's deliveries arrive one after the other,
        # each within seconds, on the threads the hanging receiver cannot take.
        for _ in range(PROMPT):
            event_id = emit(other_account)
            started = time.monotonic()
            wait_for(functools.partial(received, healthy, event_id), timeout=PROMPTLY * 3)
            assert time.monotonic() - started <= PROMPTLY
        assert hanging.most_in_flight == CAP
        # Past the cap nothing is attempted: only the held requests have attempts.
        slow_deliveries = WebhookDelivery.objects.filter(endpoint=slow)
        assert WebhookAttempt.objects.filter(delivery__endpoint=slow).count() == CAP
        assert slow_deliveries.filter(status=WebhookDelivery.Status.PENDING).count() == HELD

        hanging.released.set()
        wait_for(lambda: slow_deliveries.filter(status=WebhookDelivery.Status.SUCCEEDED).count() == HELD, timeout=60)

    assert hanging.most_in_flight == CAP
    # Every delivery once: one request per event, one attempt per delivery.
    assert sorted(hanging.event_ids) == sorted(held)
    assert list(slow_deliveries.values_list("attempt_count", flat=True)) == [1] * HELD
    assert WebhookAttempt.objects.filter(delivery__endpoint=slow).count() == HELD
    assert len(healthy.requests) == PROMPT


def test_an_account_whose_receivers_hang_holds_its_share_and_another_account_is_served_at_once(
    database_name: str, tmp_path: Path
) -> None:
    hanging_account, other_account = AccountFactory(), AccountFactory()
    share = int(DEPLOYED_THREADS * SHARE)
    env = {
        **HANGING,
        "WEBHOOK_ACCOUNT_SHARE": str(SHARE),
        "WEBHOOK_MAX_CONCURRENT_PER_ENDPOINT": "4",
        # Not what the worker runs: its share is of the threads it was started
        # with (--concurrency 8), not of a setting that says otherwise.
        "WEBHOOK_WORKER_CONCURRENCY": "64",
    }
    with (
        http_receiver() as hanging,
        http_receiver() as healthy,
        celery_worker(database_name, tmp_path, concurrency=DEPLOYED_THREADS, env=env),
    ):
        hanging.respond((200, {}, HANG))
        for name in ("first", "second"):
            endpoint_create(account=hanging_account, url=f"{hanging.url}?endpoint={name}")
        endpoint_create(account=other_account, url=healthy.url)
        held = [emit(hanging_account, postback_url=f"{hanging.url}?postback") for _ in range(HELD_EVENTS)]
        deliveries = WebhookDelivery.objects.filter(event__account=hanging_account)
        assert deliveries.count() == 3 * HELD_EVENTS

        # The account's share is taken (all its deliveries were queued first)...
        wait_for(lambda: hanging.in_flight >= share, timeout=30)
        # ... and another account's deliveries arrive one after the other,
        # each within seconds, on the threads the account cannot take.
        for _ in range(PROMPT):
            wait_for(functools.partial(received, healthy, emit(other_account)), timeout=PROMPTLY)
        assert hanging.most_in_flight == share
        # Past the share nothing was attempted, nothing failed.
        assert WebhookAttempt.objects.filter(delivery__event__account=hanging_account).count() == share
        assert deliveries.filter(status=WebhookDelivery.Status.PENDING).count() == 3 * HELD_EVENTS

        hanging.released.set()
        succeeded = deliveries.filter(status=WebhookDelivery.Status.SUCCEEDED)
        wait_for(lambda: succeeded.count() == 3 * HELD_EVENTS, timeout=120)

    assert hanging.most_in_flight == share
    # Every delivery once: three requests per event, one attempt per delivery.
    assert sorted(r.headers["X-Webhook-Event-ID"] for r in hanging.requests) == sorted(held * 3)
    assert set(deliveries.values_list("attempt_count", flat=True)) == {1}
    assert WebhookAttempt.objects.filter(delivery__event__account=hanging_account).count() == 3 * HELD_EVENTS
    assert len(healthy.requests) == PROMPT


def test_an_endpoint_that_hangs_leaves_its_own_accounts_other_endpoint_and_postbacks_a_slot(
    database_name: str, tmp_path: Path
) -> None:
    account = AccountFactory()
    share = int(DEPLOYED_THREADS * SHARE)
    # The defaults: 4 per endpoint, half of the worker's 8 threads per account.
    env = {**HANGING, "WEBHOOK_ACCOUNT_SHARE": str(SHARE), "WEBHOOK_MAX_CONCURRENT_PER_ENDPOINT": "4"}
    with (
        hanging_receiver() as hanging,
        http_receiver() as healthy,
        celery_worker(database_name, tmp_path, concurrency=DEPLOYED_THREADS, env=env),
    ):
        endpoint_create(account=account, url=hanging.url)
        held = [emit(account) for _ in range(HELD)]
        # The hanging endpoint takes all a destination may (before: the whole share).
        wait_for(lambda: hanging.in_flight >= share - 1, timeout=30)
        # The account's other endpoint and its postbacks are delivered one
        # event after the other, each within seconds, while the first hangs
        # (its receiver answers after a minute at the earliest).
        endpoint_create(account=account, url=healthy.url)
        prompt = []
        for n in range(PROMPT):
            event_id = emit(account, postback_url=f"{healthy.url}?postback={n}")
            wait_for(functools.partial(received, healthy, event_id, times=2), timeout=PROMPTLY)
            prompt.append(event_id)
        assert hanging.most_in_flight == share - 1
        assert not hanging.released.is_set()
        deliveries = WebhookDelivery.objects.filter(event__account=account)
        # A delivery is recorded as succeeded just after its receiver has the
        # request: wait for the records of the prompt ones, then count the rest.
        succeeded = deliveries.filter(status=WebhookDelivery.Status.SUCCEEDED)
        wait_for(lambda: succeeded.count() == 2 * PROMPT, timeout=PROMPTLY)
        assert deliveries.filter(status=WebhookDelivery.Status.PENDING).count() == HELD + PROMPT

        hanging.released.set()
        wait_for(lambda: succeeded.count() == HELD + 3 * PROMPT, timeout=120)

    assert hanging.most_in_flight == share - 1
    # Every delivery once: the hanging endpoint got every event, the healthy
    # one and the postbacks those emitted after it was added.
    assert sorted(hanging.event_ids) == sorted(held + prompt)
    assert sorted(r.headers["X-Webhook-Event-ID"] for r in healthy.requests) == sorted(prompt * 2)
    assert set(deliveries.values_list("attempt_count", flat=True)) == {1}
