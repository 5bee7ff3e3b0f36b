"""Webhook delivery of decisions §6, end to end: a real Celery worker (short
retry schedule "0,1,2,2" s ±20 %, timeout 2 s, see ``WORKER_SETTINGS``) posts
to a real HTTP receiver on loopback, and every request is checked as a
receiver would check it: headers, body and a Standard Webhooks signature
verified with the independent ``standardwebhooks`` library."""

from __future__ import annotations

import contextlib
import datetime as dt
import itertools
import json
import os
import re
import socketserver
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import transaction
from django.test import override_settings
from django.utils import timezone
from rest_framework.test import APIClient
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from accounts.models import Account
from accounts.services import account_rotate_postback_secret
from acquirers.models import Acquirer
from core.tokens import new_webhook_secret
from payments.models import Charge, ChargeStatus, ChargeTransition
from payments.services import charge_transition
from tests.factories import AccountFactory, AcquirerFactory
from tests.helpers import local
from tests.realworld import CeleryWorker, ReceivedRequest, Receiver, drip_feeders, http_receiver, wait_for
from webhooks import http, services
from webhooks.delivery import delivery_attempt
from webhooks.models import WebhookAttempt, WebhookDelivery, WebhookEndpoint, WebhookEvent
from webhooks.services import endpoint_create, endpoint_rotate_secret

TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$")
BODY = {
    "payment_method": "pix",
    "amount": 1000,
    "buyer": {"buyer_name": "Fulano", "buyer_document": "52998224725", "buyer_phone": "11999998888"},
}

# The worker is another process: it sees only committed rows.
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def account(db: Any) -> Account:
    # Non-zero fees, so that liquid_amount differs from amount in the body.
    return AccountFactory(cashin_fee_fixed=30, cashin_fee_bps=150)


@pytest.fixture
def acquirer(db: Any) -> Acquirer:
    return AcquirerFactory(key="alpha", default_priority=1)


@pytest.fixture
def worker(celery_worker_process: CeleryWorker, acquirer: Acquirer) -> CeleryWorker:
    return celery_worker_process


def create_charge(api: APIClient, **fields: Any) -> Charge:
    response = api.post("/api/transactions", {**BODY, **fields}, format="json")
    assert response.status_code == 201, response.content
    return Charge.objects.get(pk=response.json()["data"]["id"])


def drive(api: APIClient, charge: Charge, action: str) -> None:
    """The sandbox driver: the same path an acquirer's notification takes."""
    response = api.post(f"/api/sandbox/transactions/{charge.pk}/{action}")
    assert response.status_code == 200, response.content


def event_of(charge: Charge, status: str) -> WebhookEvent:
    return WebhookEvent.objects.get(record_id=charge.pk, status=status)


def delivery_of(event: WebhookEvent, endpoint: WebhookEndpoint | None = None) -> WebhookDelivery:
    return WebhookDelivery.objects.get(event=event, endpoint=endpoint)


def wait_status(delivery: WebhookDelivery, status: str, timeout: float = 20.0) -> WebhookDelivery:
    def ended() -> WebhookDelivery | None:
        delivery.refresh_from_db()
        return delivery if delivery.status == status else None

    return wait_for(ended, timeout=timeout)


def attempts_of(delivery: WebhookDelivery) -> list[WebhookAttempt]:
    return list(WebhookAttempt.objects.filter(delivery=delivery).order_by("number"))


def recorded_attempt(delivery: WebhookDelivery, number: int) -> WebhookAttempt | None:
    """The attempt once its answer is recorded (its row is written before the
    call, with an "interrupted" placeholder, and completed after)."""
    return (
        WebhookAttempt.objects.filter(delivery=delivery, number=number).exclude(error__startswith="interrupted").first()
    )


def lower(headers: dict[str, str]) -> dict[str, str]:
    return {key.lower(): value for key, value in headers.items()}


def verified(request: ReceivedRequest, secret: str) -> Any:
    """What a receiver does with any Standard Webhooks library."""
    return Webhook(secret).verify(request.body, lower(request.headers))


def gaps(requests: list[ReceivedRequest]) -> list[float]:
    return [later.at - earlier.at for earlier, later in itertools.pairwise(requests)]


def stays(predicate: Callable[[], bool], seconds: float) -> None:
    """The one bounded wait: assert that nothing more happens for a while."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert predicate()
        time.sleep(0.05)


# --------------------------------------------------------------------------- one delivery


def test_paid_charge_is_delivered_once_with_spec_headers_body_and_signature(
    worker: CeleryWorker, api: APIClient, account: Account, receiver: Receiver
) -> None:
    created = endpoint_create(account=account, url=receiver.url)
    charge = create_charge(api)
    assert not WebhookEvent.objects.exists()  # creation (the initial pending) emits nothing

    before = time.time()
    drive(api, charge, "pay")
    event = event_of(charge, ChargeStatus.PAID)
    delivery = wait_status(delivery_of(event, created.endpoint), WebhookDelivery.Status.SUCCEEDED)

    (request,) = receiver.requests
    headers = lower(request.headers)
    assert request.path == "/hook"
    assert headers["content-type"] == "application/json"
    assert headers["x-webhook-event-id"] == str(event.id) == str(uuid.UUID(headers["x-webhook-event-id"]))
    assert headers["x-webhook-code"] == created.endpoint.code
    assert headers["user-agent"] == "PixService-Webhook/1.0.0"
    assert headers["webhook-id"] == str(event.id)
    assert before - 2 <= int(headers["webhook-timestamp"]) <= time.time() + 1
    assert verified(request, created.secret) == json.loads(request.body)

    charge.refresh_from_db()
    assert charge.e2e_id
    assert charge.paid_at
    assert json.loads(request.body) == {
        "id": str(event.id),
        "event_type": "transaction",
        "data": {
            "id": str(charge.pk),
            "payment_method": "pix",
            "e2e_id": charge.e2e_id,
            "amount": 1000,
            "platform_tax": 45,
            "liquid_amount": 955,
            "status": "paid",
            "paid_at": local(charge.paid_at),
            "created_at": local(charge.created_at),
        },
    }
    data = json.loads(request.body)["data"]
    assert TIMESTAMP.match(data["paid_at"])
    assert TIMESTAMP.match(data["created_at"])
    # The webhook carries the same record as the API, but for `expires_at` and
    # `pix`: added to the API's record (issues 15 and 30), while the webhook
    # body stays as the spec fixes it.
    record = api.get(f"/api/transactions/{charge.pk}").json()["data"]
    assert record.pop("expires_at") == local(charge.expires_at)
    assert record.pop("pix") == {"emv": charge.emv}
    assert record == data

    assert (delivery.attempt_count, delivery.last_status_code, delivery.next_attempt_at) == (1, 200, None)
    (attempt,) = attempts_of(delivery)
    assert (attempt.number, attempt.status_code, attempt.succeeded, attempt.error) == (1, 200, True, "")
    assert attempt.latency_ms >= 0
    assert attempt.response_body == "ok"
    assert len(receiver.requests) == 1


def test_each_later_transition_emits_one_event_and_a_repeat_emits_none(
    worker: CeleryWorker, api: APIClient, account: Account, receiver: Receiver
) -> None:
    created = endpoint_create(account=account, url=receiver.url)
    charge = create_charge(api)
    assert not WebhookDelivery.objects.exists()

    statuses = []
    for count, action in enumerate(["pay", "chargeback", "refund"], start=1):
        drive(api, charge, action)
        request = receiver.wait_for_requests(count)[-1]
        statuses.append(verified(request, created.secret)["data"]["status"])
    assert statuses == ["paid", "chargeback", "refunded"]

    # A repeated notification of the same transition is a no-op: no event.
    assert charge_transition(charge_id=charge.pk, to_status=ChargeStatus.REFUNDED, source="sandbox") is False
    events = WebhookEvent.objects.filter(record_id=charge.pk)
    assert sorted(e.status for e in events) == ["chargeback", "paid", "refunded"]
    assert len({r.headers["X-Webhook-Event-ID"] for r in receiver.requests}) == 3
    assert {str(e.id) for e in events} == {r.headers["X-Webhook-Event-ID"] for r in receiver.requests}

    # The service itself (expiry here) emits too: pending -> canceled.
    other = create_charge(api)
    assert charge_transition(charge_id=other.pk, to_status=ChargeStatus.CANCELED, source=ChargeTransition.Source.EXPIRY)
    assert verified(receiver.wait_for_requests(4)[-1], created.secret)["data"]["status"] == "canceled"
    wait_for(lambda: WebhookDelivery.objects.filter(status=WebhookDelivery.Status.SUCCEEDED).count() == 4)
    assert WebhookDelivery.objects.count() == 4
    assert len(receiver.requests) == 4


def test_every_active_endpoint_gets_the_event_and_an_inactive_one_none(
    worker: CeleryWorker, api: APIClient, account: Account, receiver: Receiver
) -> None:
    first = endpoint_create(account=account, url=receiver.url).endpoint
    second = endpoint_create(account=account, url=receiver.url).endpoint
    inactive = endpoint_create(account=account, url=receiver.url).endpoint
    WebhookEndpoint.objects.filter(pk=inactive.pk).update(is_active=False)
    charge = create_charge(api)

    drive(api, charge, "pay")
    event = event_of(charge, ChargeStatus.PAID)
    requests = receiver.wait_for_requests(2)

    assert {r.headers["X-Webhook-Code"] for r in requests} == {first.code, second.code}
    assert {r.headers["X-Webhook-Event-ID"] for r in requests} == {str(event.id)}
    assert json.loads(requests[0].body) == json.loads(requests[1].body)
    assert {d.endpoint_id for d in WebhookDelivery.objects.filter(event=event)} == {first.pk, second.pk}
    wait_for(lambda: WebhookDelivery.objects.filter(event=event, status=WebhookDelivery.Status.SUCCEEDED).count() == 2)
    assert len(receiver.requests) == 2


# --------------------------------------------------------------------------- retries


def test_failures_are_retried_on_the_schedule_with_the_same_event_id(
    worker: CeleryWorker, api: APIClient, account: Account, receiver: Receiver
) -> None:
    created = endpoint_create(account=account, url=receiver.url)
    receiver.respond(500, 500, 200)
    charge = create_charge(api)

    drive(api, charge, "pay")
    event = event_of(charge, ChargeStatus.PAID)
    delivery = wait_status(delivery_of(event, created.endpoint), WebhookDelivery.Status.SUCCEEDED)

    requests = receiver.requests
    assert len(requests) == 3
    assert {r.headers["X-Webhook-Event-ID"] for r in requests} == {str(event.id)}
    assert {r.headers["webhook-id"] for r in requests} == {str(event.id)}
    for request in requests:
        verified(request, created.secret)  # each attempt signed afresh
    # Schedule "0,1,2,2" with ±20 %: 1 s then 2 s, plus scheduling slack.
    gap1, gap2 = gaps(requests)
    assert 0.8 <= gap1 <= 2.5
    assert 1.6 <= gap2 <= 3.5
    assert [(a.number, a.status_code, a.succeeded) for a in attempts_of(delivery)] == [
        (1, 500, False),
        (2, 500, False),
        (3, 200, True),
    ]
    assert delivery.attempt_count == 3


def test_exhausted_schedule_fails_the_delivery_after_four_attempts(
    worker: CeleryWorker, api: APIClient, account: Account, receiver: Receiver
) -> None:
    created = endpoint_create(account=account, url=receiver.url)
    receiver.respond(500)
    charge = create_charge(api)

    drive(api, charge, "pay")
    delivery = delivery_of(event_of(charge, ChargeStatus.PAID), created.endpoint)
    wait_for(lambda: WebhookAttempt.objects.filter(delivery=delivery).count() == 4)
    delivery = wait_status(delivery, WebhookDelivery.Status.FAILED)

    assert [(a.number, a.status_code, a.succeeded) for a in attempts_of(delivery)] == [
        (n, 500, False) for n in (1, 2, 3, 4)
    ]
    assert (delivery.attempt_count, delivery.next_attempt_at) == (4, None)
    assert len(receiver.requests) == 4
    stays(lambda: len(receiver.requests) == 4, seconds=3)
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempt_count) == (WebhookDelivery.Status.FAILED, 4)


def test_a_redirect_is_a_failure_and_is_not_followed(
    worker: CeleryWorker, api: APIClient, account: Account, receiver: Receiver
) -> None:
    created = endpoint_create(account=account, url=receiver.url)
    receiver.respond((302, {"Location": "http://127.0.0.1:1/x"}, 0), 200)
    charge = create_charge(api)

    drive(api, charge, "pay")
    delivery = wait_status(
        delivery_of(event_of(charge, ChargeStatus.PAID), created.endpoint), WebhookDelivery.Status.SUCCEEDED
    )

    assert [r.path for r in receiver.requests] == ["/hook", "/hook"]
    assert [(a.status_code, a.succeeded) for a in attempts_of(delivery)] == [(302, False), (200, True)]


def test_a_timeout_is_a_failed_attempt_with_an_error(
    worker: CeleryWorker, api: APIClient, account: Account, receiver: Receiver
) -> None:
    created = endpoint_create(account=account, url=receiver.url)
    receiver.respond((200, {}, 3.5), 200)  # the worker gives up after 2 s
    charge = create_charge(api)

    drive(api, charge, "pay")
    delivery = wait_status(
        delivery_of(event_of(charge, ChargeStatus.PAID), created.endpoint), WebhookDelivery.Status.SUCCEEDED
    )

    first, second = attempts_of(delivery)
    assert (first.status_code, first.succeeded) == (None, False)
    assert "timed out" in first.error.lower() or "timeout" in first.error.lower()
    assert 1900 <= first.latency_ms < 3500
    assert (second.status_code, second.succeeded, second.error) == (200, True, "")
    assert len(receiver.requests) == 2


def test_410_disables_the_endpoint_at_once(
    worker: CeleryWorker, api: APIClient, account: Account, receiver: Receiver
) -> None:
    endpoint = endpoint_create(account=account, url=receiver.url).endpoint
    receiver.respond(410)
    charge = create_charge(api)

    drive(api, charge, "pay")
    delivery = wait_status(delivery_of(event_of(charge, ChargeStatus.PAID), endpoint), WebhookDelivery.Status.FAILED)

    endpoint.refresh_from_db()
    assert endpoint.is_active is False
    assert endpoint.disabled_at is not None
    assert "410" in endpoint.disabled_reason
    assert [(a.status_code, a.succeeded) for a in attempts_of(delivery)] == [(410, False)]

    drive(api, charge, "refund")
    assert not WebhookDelivery.objects.filter(event=event_of(charge, ChargeStatus.REFUNDED)).exists()
    assert len(receiver.requests) == 1


def test_retry_after_on_429_is_honoured(
    worker: CeleryWorker, api: APIClient, account: Account, receiver: Receiver
) -> None:
    created = endpoint_create(account=account, url=receiver.url)
    receiver.respond((429, {"Retry-After": "1"}, 0), 200)
    charge = create_charge(api)

    drive(api, charge, "pay")
    delivery = wait_status(
        delivery_of(event_of(charge, ChargeStatus.PAID), created.endpoint), WebhookDelivery.Status.SUCCEEDED
    )

    (gap,) = gaps(receiver.requests)
    assert gap >= 0.8
    assert [(a.status_code, a.succeeded) for a in attempts_of(delivery)] == [(429, False), (200, True)]


def test_retry_after_is_capped_at_twice_the_scheduled_delay(
    worker: CeleryWorker, api: APIClient, account: Account, receiver: Receiver
) -> None:
    created = endpoint_create(account=account, url=receiver.url)
    receiver.respond((503, {"Retry-After": "100"}, 0), 200)
    charge = create_charge(api)

    drive(api, charge, "pay")
    delivery = delivery_of(event_of(charge, ChargeStatus.PAID), created.endpoint)
    first = wait_for(lambda: recorded_attempt(delivery, 1))
    delivery.refresh_from_db()

    # Scheduled 1 s after the first attempt: at most 2 s, not 100 s.
    assert delivery.status == WebhookDelivery.Status.PENDING
    assert delivery.next_attempt_at is not None
    wait_seconds = (delivery.next_attempt_at - first.attempted_at).total_seconds()
    assert 0.8 <= wait_seconds <= 2.0
    wait_status(delivery, WebhookDelivery.Status.SUCCEEDED)
    (gap,) = gaps(receiver.requests)
    assert gap <= 3.0


def test_a_short_retry_after_does_not_shorten_the_schedule(
    worker: CeleryWorker, api: APIClient, account: Account, receiver: Receiver
) -> None:
    created = endpoint_create(account=account, url=receiver.url)
    receiver.respond((429, {"Retry-After": "0"}, 0), 200)
    charge = create_charge(api)

    drive(api, charge, "pay")
    wait_status(delivery_of(event_of(charge, ChargeStatus.PAID), created.endpoint), WebhookDelivery.Status.SUCCEEDED)

    # Scheduled 1 s ±20 %: "retry after 0 s" is no reason to retry sooner.
    (gap,) = gaps(receiver.requests)
    assert gap >= 0.8


@contextlib.contextmanager
def trickling_server(seconds: float) -> Iterator[str]:
    """Answers 200, but sends its status line one byte at a time over
    ``seconds``: every read gets data well within the read timeout."""
    status_line = b"HTTP/1.1 200 OK\r\n"

    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            sock = self.request
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = sock.recv(65536)
                if not chunk:
                    return
                data += chunk
            head, _, body = data.partition(b"\r\n\r\n")
            length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))  # type: ignore[union-attr]
            while len(body) < length:
                body += sock.recv(65536)
            with contextlib.suppress(OSError):
                for byte in status_line:
                    time.sleep(seconds / len(status_line))
                    sock.sendall(bytes([byte]))
                sock.sendall(b"Content-Length: 2\r\nConnection: close\r\n\r\nok")

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook"
    finally:
        server.shutdown()
        server.server_close()


def test_an_answer_slower_than_the_total_timeout_is_a_failure(
    worker: CeleryWorker, api: APIClient, account: Account
) -> None:
    with trickling_server(seconds=3.5) as url:  # the worker's total timeout is 2 s
        endpoint = endpoint_create(account=account, url=url).endpoint
        charge = create_charge(api)
        drive(api, charge, "pay")
        delivery = delivery_of(event_of(charge, ChargeStatus.PAID), endpoint)
        first = wait_for(lambda: recorded_attempt(delivery, 1), timeout=10)

    assert (first.status_code, first.succeeded) == (None, False)
    assert first.error
    assert first.latency_ms < 3000


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


@override_settings(WEBHOOK_CONNECT_TIMEOUT=1.0, WEBHOOK_TIMEOUT=2.0)
def test_a_drip_feeding_receiver_is_cut_at_the_total_timeout_and_nothing_outlives_the_attempt(
    account: Account, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In process (no worker): a receiver sending one header byte a second
    never trips the 1 s read timeout; the attempt still ends at the 2 s total
    timeout, with its connection closed, no thread still reading it and no
    socket left open."""
    monkeypatch.setattr(services, "_enqueue", lambda delivery_id, countdown: None)
    with drip_feeders(1) as drip:
        endpoint = endpoint_create(account=account, url=drip.urls[0]).endpoint
        with transaction.atomic():
            event = services.event_emit(
                account_id=account.pk,
                event_type="transaction",
                record_id=uuid.uuid4(),
                status="paid",
                data={"status": "paid"},
            )
        delivery = delivery_of(event, endpoint)
        threads, descriptors = set(threading.enumerate()), open_descriptors()

        started = time.monotonic()
        outcome = delivery_attempt(delivery_id=delivery.pk)
        elapsed = time.monotonic() - started

        assert set(threading.enumerate()) - threads == set()  # no thread left reading
        # The receiver sees its connection closed at our deadline, not
        # whenever it would stop dripping.
        wait_for(lambda: drip.closed == 1, timeout=1.0)
        assert open_descriptors() == descriptors
        assert drip.accepted == 1

    assert 2.0 <= elapsed < 3.0
    delivery.refresh_from_db()
    assert (outcome, delivery.status, delivery.attempt_count) == ("retry", WebhookDelivery.Status.PENDING, 1)
    assert delivery.last_status_code is None
    (attempt,) = attempts_of(delivery)
    assert (attempt.status_code, attempt.succeeded) == (None, False)
    assert attempt.error == "Timeout: no complete answer within 2s"
    assert 2000 <= attempt.latency_ms < 3000


@override_settings(WEBHOOK_CONNECT_TIMEOUT=5.0, WEBHOOK_TIMEOUT=2.0)
def test_a_drip_fed_tls_handshake_is_cut_at_the_total_timeout_too() -> None:
    # A handshake record announcing 16 KiB, then one byte a second: the
    # client is still reading the server's hello when the deadline passes.
    # (The handshake runs under the connect timeout, longer here on purpose,
    # so only the cut can end it at 2 s.)
    with drip_feeders(1, answer=b"\x16\x03\x03\x40\x00") as drip:
        threads = set(threading.enumerate())
        started = time.monotonic()
        result = http.post(drip.urls[0].replace("http://", "https://"), b"{}", {"Content-Type": "application/json"})
        elapsed = time.monotonic() - started
        assert set(threading.enumerate()) - threads == set()
        wait_for(lambda: drip.closed == 1, timeout=1.0)

    assert (result.status_code, result.error) == (None, "Timeout: no complete answer within 2s")
    assert 2.0 <= elapsed < 3.0


# --------------------------------------------------------------------------- endpoint health


def test_an_endpoint_failing_for_five_days_is_disabled_and_a_success_clears_the_run(
    worker: CeleryWorker, api: APIClient, account: Account, receiver: Receiver
) -> None:
    failing = endpoint_create(account=account, url=receiver.url).endpoint
    receiver.respond(500)
    with http_receiver() as healthy_receiver:
        recovering = endpoint_create(account=account, url=healthy_receiver.url).endpoint
        WebhookEndpoint.objects.filter(pk=failing.pk).update(failing_since=timezone.now() - dt.timedelta(days=6))
        WebhookEndpoint.objects.filter(pk=recovering.pk).update(failing_since=timezone.now() - dt.timedelta(days=2))
        charge = create_charge(api)

        drive(api, charge, "pay")
        event = event_of(charge, ChargeStatus.PAID)
        wait_status(delivery_of(event, recovering), WebhookDelivery.Status.SUCCEEDED)
        failed = wait_status(delivery_of(event, failing), WebhookDelivery.Status.FAILED)

    failing.refresh_from_db()
    recovering.refresh_from_db()
    assert failing.is_active is False
    assert "5 days" in failing.disabled_reason
    assert recovering.is_active is True
    assert recovering.failing_since is None
    # One real attempt: the endpoint was disabled by it, nothing more is sent.
    assert [(a.status_code, a.succeeded) for a in attempts_of(failed)] == [(500, False)]
    assert len(receiver.requests) == 1


@override_settings(WEBHOOK_RETRY_SCHEDULE=[0, 1, 2], WEBHOOK_JITTER=0.0)
def test_the_attempt_that_disables_an_endpoint_ends_its_delivery(
    api: APIClient, account: Account, acquirer: Acquirer, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In process (no worker): the attempt that finds the endpoint failing
    for 5 days disables it, and with it every pending delivery to it."""
    enqueued: list[tuple[Any, float]] = []
    monkeypatch.setattr(services, "_enqueue", lambda delivery_id, countdown: enqueued.append((delivery_id, countdown)))
    endpoint = endpoint_create(account=account, url=receiver.url).endpoint
    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(failing_since=timezone.now() - dt.timedelta(days=6))
    receiver.respond(500)
    charge = create_charge(api)
    drive(api, charge, "pay")
    delivery = delivery_of(event_of(charge, ChargeStatus.PAID), endpoint)
    enqueued.clear()

    delivery_attempt(delivery_id=delivery.pk)

    endpoint.refresh_from_db()
    delivery.refresh_from_db()
    assert endpoint.is_active is False
    assert (delivery.status, delivery.next_attempt_at) == (WebhookDelivery.Status.FAILED, None)
    assert enqueued == []


# --------------------------------------------------------------------------- postback, idempotency, rotation


def test_the_postback_url_gets_the_event_signed_with_the_account_postback_secret(
    worker: CeleryWorker, api: APIClient, account: Account, receiver: Receiver
) -> None:
    charge = create_charge(api, postback_url=receiver.url)

    drive(api, charge, "pay")
    event = event_of(charge, ChargeStatus.PAID)
    delivery = wait_status(delivery_of(event, None), WebhookDelivery.Status.SUCCEEDED)

    (request,) = receiver.requests
    assert request.headers["X-Webhook-Code"] == "postback"
    assert request.headers["X-Webhook-Event-ID"] == str(event.id)
    assert verified(request, account.postback_secret)["data"]["status"] == "paid"
    assert delivery.url == receiver.url
    assert delivery.is_postback


def test_after_a_postback_secret_rotation_both_secrets_sign_for_a_while(
    worker: CeleryWorker, api: APIClient, account: Account, receiver: Receiver
) -> None:
    old = account.postback_secret
    new = account_rotate_postback_secret(account=account)
    charge = create_charge(api, postback_url=receiver.url)

    drive(api, charge, "pay")
    wait_status(delivery_of(event_of(charge, ChargeStatus.PAID), None), WebhookDelivery.Status.SUCCEEDED)

    (request,) = receiver.requests
    assert len(request.headers["webhook-signature"].split(" ")) == 2
    assert verified(request, new)["data"]["status"] == "paid"
    assert verified(request, old)["data"]["status"] == "paid"


def test_a_succeeded_delivery_is_never_sent_again(
    worker: CeleryWorker, api: APIClient, account: Account, receiver: Receiver
) -> None:
    from webhooks.tasks import deliver_webhook

    created = endpoint_create(account=account, url=receiver.url)
    charge = create_charge(api)
    drive(api, charge, "pay")
    delivery = wait_status(
        delivery_of(event_of(charge, ChargeStatus.PAID), created.endpoint), WebhookDelivery.Status.SUCCEEDED
    )

    assert delivery_attempt(delivery_id=delivery.pk) == "skipped"
    # And through the worker: the task runs and reports it skipped.
    task = deliver_webhook.delay(str(delivery.pk))
    wait_for(lambda: re.search(rf"{task.id}\] succeeded in [\d.]+s: 'skipped'", worker.output()))

    assert len(receiver.requests) == 1
    assert WebhookAttempt.objects.filter(delivery=delivery).count() == 1


@override_settings(WEBHOOK_RETRY_SCHEDULE=[0], WEBHOOK_JITTER=0.0)
def test_a_redelivered_event_is_sent_and_recorded(
    api: APIClient, account: Account, acquirer: Acquirer, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In process (no worker): one attempt fails for good, the account asks
    for redelivery, and the next attempt succeeds and is recorded."""
    monkeypatch.setattr(services, "_enqueue", lambda delivery_id, countdown: None)
    endpoint = endpoint_create(account=account, url=receiver.url).endpoint
    receiver.respond(500, 200)
    charge = create_charge(api)
    drive(api, charge, "pay")
    event = event_of(charge, ChargeStatus.PAID)
    delivery = delivery_of(event, endpoint)
    assert delivery_attempt(delivery_id=delivery.pk) == "failed"

    assert services.event_redeliver(event=event) == 1
    outcome = delivery_attempt(delivery_id=delivery.pk)

    delivery.refresh_from_db()
    assert (outcome, delivery.status) == ("succeeded", WebhookDelivery.Status.SUCCEEDED)
    assert [(a.number, a.status_code, a.succeeded) for a in attempts_of(delivery)] == [
        (1, 500, False),
        (2, 200, True),
    ]
    assert len(receiver.requests) == 2


def test_after_a_secret_rotation_both_secrets_verify(
    worker: CeleryWorker, api: APIClient, account: Account, receiver: Receiver
) -> None:
    created = endpoint_create(account=account, url=receiver.url)
    new_secret = endpoint_rotate_secret(endpoint=created.endpoint)
    assert new_secret != created.secret
    charge = create_charge(api)

    drive(api, charge, "pay")
    (request,) = receiver.wait_for_requests(1)

    signatures = request.headers["webhook-signature"].split(" ")
    assert len(signatures) == 2
    assert all(s.startswith("v1,") for s in signatures)
    assert verified(request, new_secret) == verified(request, created.secret) == json.loads(request.body)
    with pytest.raises(WebhookVerificationError):
        verified(request, new_webhook_secret())
