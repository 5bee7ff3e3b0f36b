"""One hanging receiver holds at most its endpoint's cap of the webhook
worker's threads (issue 13, bulkheads).

A real Celery worker (4 threads, a cap of 2 deliveries per endpoint) gets
many deliveries for an endpoint whose receiver hangs until the test lets it
go. The receiver never sees more than 2 requests at once, the deliveries
past the cap wait without an attempt, and another account's endpoint keeps
getting its deliveries within seconds. Once the receiver answers, every
delivery succeeds with exactly one attempt: none lost, none sent twice.
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


def emit(account: Account) -> str:
    with transaction.atomic():
        event = event_emit(
            account_id=account.pk,
            event_type="transaction",
            record_id=uuid.uuid4(),
            status="paid",
            data={"status": "paid"},
        )
    return str(event.pk)


def received(receiver: Receiver, event_id: str) -> bool:
    return any(r.headers.get("X-Webhook-Event-ID") == event_id for r in receiver.requests)


def test_a_hanging_receiver_holds_only_its_endpoints_cap_and_loses_nothing(database_name: str, tmp_path: Path) -> None:
    slow_account, other_account = AccountFactory(), AccountFactory()
    env = {
        "WEBHOOK_MAX_CONCURRENT_PER_ENDPOINT": str(CAP),
        # Long enough that the hang is the receiver's, not cut by our timeout.
        "WEBHOOK_TIMEOUT": "60",
        "WEBHOOK_DEFER_SECONDS": "0.5",
    }
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
