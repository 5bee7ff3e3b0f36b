"""The transactional outbox of decisions §6: events and deliveries are
committed with the status change, so a broker outage loses nothing; the
relay hands over what no worker took (SKIP LOCKED, leases respected); long
retry delays go through the relay, never as a Celery countdown that could
outlive the broker's visibility timeout; and the Celery settings that
money-moving work relies on."""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

import kombu.exceptions
import kombu.pools
import pytest
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.models import Account
from acquirers.models import Acquirer
from config.celery import app
from payments.models import Charge, ChargeStatus
from tests.factories import AccountFactory, AcquirerFactory
from tests.realworld import CeleryWorker, Receiver, wait_for
from webhooks import services
from webhooks.delivery import deliveries_relay, delivery_attempt
from webhooks.models import WebhookAttempt, WebhookDelivery, WebhookEvent
from webhooks.services import endpoint_create
from webhooks.tasks import deliver_webhook, relay_webhooks

BODY = {
    "payment_method": "pix",
    "amount": 1000,
    "buyer": {"buyer_name": "Fulano", "buyer_document": "52998224725", "buyer_phone": "11999998888"},
}
UNREACHABLE_BROKER = "redis://127.0.0.1:1/0"


@pytest.fixture
def account(db: Any) -> Account:
    return AccountFactory()


@pytest.fixture
def acquirer(db: Any) -> Acquirer:
    return AcquirerFactory(key="alpha", default_priority=1)


def create_charge(api: APIClient) -> Charge:
    response = api.post("/api/transactions", BODY, format="json")
    assert response.status_code == 201, response.content
    return Charge.objects.get(pk=response.json()["data"]["id"])


def pay(api: APIClient, charge: Charge) -> None:
    response = api.post(f"/api/sandbox/transactions/{charge.pk}/pay")
    assert response.status_code == 200, response.content


def reset_producer_pools() -> None:
    # kombu keeps pools per broker URL in global groups: drop them all, so
    # the next publish connects to whatever broker_url says now.
    kombu.pools.reset()
    app._pool = None  # type: ignore[attr-defined]
    app.amqp._producer_pool = None  # type: ignore[attr-defined]


@contextlib.contextmanager
def broker_unreachable() -> Iterator[None]:
    """This process's Celery producer points at a closed port, without
    retries; the worker keeps its own, working, broker connection."""
    conf = app.conf
    names = ("broker_url", "broker_connection_retry", "broker_connection_max_retries", "task_publish_retry")
    saved = {name: conf[name] for name in names}
    try:
        conf.update(
            broker_url=UNREACHABLE_BROKER,
            broker_connection_retry=False,
            broker_connection_max_retries=0,
            task_publish_retry=False,
        )
        reset_producer_pools()
        assert conf.broker_write_url == UNREACHABLE_BROKER  # no environment variable overrides it
        yield
    finally:
        conf.update(saved)
        reset_producer_pools()


@pytest.fixture
def recorded_enqueues(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, float]]:
    """Hand-offs to Celery, recorded instead of published."""
    calls: list[tuple[str, float]] = []
    monkeypatch.setattr(
        services, "_enqueue", lambda delivery_id, countdown: calls.append((str(delivery_id), countdown))
    )
    return calls


# --------------------------------------------------------------------------- broker outage


@pytest.mark.django_db(transaction=True)
def test_a_broker_outage_loses_no_event_and_the_relay_delivers_it(
    celery_worker_process: CeleryWorker,
    acquirer: Acquirer,
    api: APIClient,
    account: Account,
    receiver: Receiver,
    settings: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings.WEBHOOK_RELAY_GRACE = 0
    endpoint = endpoint_create(account=account, url=receiver.url).endpoint
    charge = create_charge(api)

    with broker_unreachable(), caplog.at_level(logging.WARNING, logger="core.dispatch"):
        pay(api, charge)

    charge.refresh_from_db()
    assert charge.status == ChargeStatus.PAID
    event = WebhookEvent.objects.get(record_id=charge.pk, status=ChargeStatus.PAID)
    delivery = WebhookDelivery.objects.get(event=event, endpoint=endpoint)
    assert (delivery.status, delivery.attempt_count, delivery.leased_until) == (WebhookDelivery.Status.PENDING, 0, None)
    assert delivery.next_attempt_at is not None
    # The hand-off failed on the broker connection: no message exists that a worker could take.
    handed = f"webhooks.tasks.deliver_webhook({str(delivery.pk)!r},) left to the relay"
    (record,) = [r for r in caplog.records if handed in r.getMessage()]
    assert record.exc_info is not None
    assert isinstance(record.exc_info[1], kombu.exceptions.OperationalError)
    assert receiver.requests == []

    assert deliveries_relay() == 1
    wait_for(lambda: WebhookDelivery.objects.get(pk=delivery.pk).status == WebhookDelivery.Status.SUCCEEDED)

    (request,) = receiver.requests
    assert request.headers["X-Webhook-Event-ID"] == str(event.id)
    assert not WebhookDelivery.objects.filter(status=WebhookDelivery.Status.PENDING).exists()
    assert deliveries_relay() == 0


@pytest.mark.django_db(transaction=True)
def test_the_relay_task_runs_on_the_worker(
    celery_worker_process: CeleryWorker,
    acquirer: Acquirer,
    api: APIClient,
    account: Account,
    receiver: Receiver,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    endpoint = endpoint_create(account=account, url=receiver.url).endpoint
    charge = create_charge(api)
    with monkeypatch.context() as lost:
        lost.setattr(services, "_enqueue", lambda delivery_id, countdown: None)  # the process died before publishing
        pay(api, charge)
    delivery = WebhookDelivery.objects.get(endpoint=endpoint)
    # The worker's grace is 1 s: make the delivery look long overdue.
    WebhookDelivery.objects.filter(pk=delivery.pk).update(next_attempt_at=timezone.now() - dt.timedelta(minutes=1))

    relay_webhooks.delay()
    wait_for(lambda: WebhookDelivery.objects.get(pk=delivery.pk).status == WebhookDelivery.Status.SUCCEEDED)

    assert len(receiver.requests) == 1


# --------------------------------------------------------------------------- relay


def in_thread(target: Callable[[], None]) -> threading.Thread:
    def run() -> None:
        try:
            target()
        finally:
            connection.close()  # each thread has its own connection

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


@pytest.mark.django_db(transaction=True)
def test_concurrent_relays_take_disjoint_deliveries_and_each_is_sent_once(
    celery_worker_process: CeleryWorker,
    acquirer: Acquirer,
    api: APIClient,
    account: Account,
    receiver: Receiver,
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings.WEBHOOK_RELAY_GRACE = 0
    endpoints = [endpoint_create(account=account, url=receiver.url).endpoint for _ in range(4)]
    charge = create_charge(api)
    with monkeypatch.context() as lost:
        lost.setattr(services, "_enqueue", lambda delivery_id, countdown: None)
        pay(api, charge)
    pending = {
        str(pk)
        for pk in WebhookDelivery.objects.filter(status=WebhookDelivery.Status.PENDING).values_list("pk", flat=True)
    }
    assert len(pending) == 4

    real_enqueue = services._enqueue
    picked: dict[str, list[str]] = {"first": [], "second": []}

    def recording(name: str) -> Callable[[Any, float], None]:
        def enqueue(delivery_id: Any, countdown: float) -> None:
            picked[name].append(str(delivery_id))
            real_enqueue(delivery_id, countdown)

        return enqueue

    first_holds_its_rows = threading.Event()
    second_done = threading.Event()
    counts: dict[str, int] = {}
    second_finished_meanwhile: list[bool] = []

    def first() -> None:
        # Keep the rows locked until the second relay has run.
        with transaction.atomic():
            monkeypatch.setattr(services, "_enqueue", recording("first"))
            counts["first"] = deliveries_relay(limit=2)
            first_holds_its_rows.set()
            second_finished_meanwhile.append(second_done.wait(timeout=5))

    def second() -> None:
        assert first_holds_its_rows.wait(timeout=10)
        monkeypatch.setattr(services, "_enqueue", recording("second"))
        counts["second"] = deliveries_relay()
        second_done.set()

    threads = [in_thread(first), in_thread(second)]
    for thread in threads:
        thread.join(timeout=20)

    # The second skipped the locked rows instead of waiting for them.
    assert second_finished_meanwhile == [True]
    assert counts == {"first": 2, "second": 2}
    assert set(picked["first"]).isdisjoint(picked["second"])
    assert set(picked["first"]) | set(picked["second"]) == pending

    requests = receiver.wait_for_requests(4)
    wait_for(lambda: WebhookDelivery.objects.filter(status=WebhookDelivery.Status.SUCCEEDED).count() == 4)
    assert sorted(r.headers["X-Webhook-Code"] for r in receiver.requests) == sorted(e.code for e in endpoints)
    assert len(requests) == len(receiver.requests) == 4


@pytest.mark.django_db
def test_the_relay_leaves_leased_and_not_yet_due_deliveries_alone(
    acquirer: Acquirer,
    api: APIClient,
    account: Account,
    settings: Any,
    recorded_enqueues: list[tuple[str, float]],
    django_capture_on_commit_callbacks: Any,
) -> None:
    settings.WEBHOOK_RELAY_GRACE = 0
    due, leased, later = (endpoint_create(account=account, url="https://example.com/h").endpoint for _ in range(3))
    pay(api, create_charge(api))
    now = timezone.now()
    WebhookDelivery.objects.filter(endpoint=due).update(next_attempt_at=now - dt.timedelta(minutes=5))
    WebhookDelivery.objects.filter(endpoint=leased).update(
        next_attempt_at=now - dt.timedelta(minutes=5), leased_until=now + dt.timedelta(minutes=1)
    )
    WebhookDelivery.objects.filter(endpoint=later).update(next_attempt_at=now + dt.timedelta(minutes=5))
    recorded_enqueues.clear()

    with django_capture_on_commit_callbacks(execute=True):
        assert deliveries_relay() == 1

    assert recorded_enqueues == [(str(WebhookDelivery.objects.get(endpoint=due).pk), 0)]
    held = WebhookDelivery.objects.get(endpoint=leased)
    assert held.next_attempt_at == now - dt.timedelta(minutes=5)
    # Once the lease has expired, the relay takes it.
    WebhookDelivery.objects.filter(pk=held.pk).update(leased_until=now - dt.timedelta(seconds=1))
    recorded_enqueues.clear()
    with django_capture_on_commit_callbacks(execute=True):
        assert deliveries_relay() == 2  # the held one, and the due one again (never taken)
    assert str(held.pk) in {delivery_id for delivery_id, _ in recorded_enqueues}


# --------------------------------------------------------------------------- countdowns and Celery settings


def test_no_webhook_countdown_can_reach_the_broker_visibility_timeout() -> None:
    visibility_timeout = settings.CELERY_BROKER_TRANSPORT_OPTIONS["visibility_timeout"]
    assert visibility_timeout > settings.WEBHOOK_MAX_COUNTDOWN
    assert app.conf.broker_transport_options["visibility_timeout"] == visibility_timeout
    # The relay looks often enough that a stored retry is not left waiting long.
    assert settings.WEBHOOK_RELAY_INTERVAL < settings.WEBHOOK_MAX_COUNTDOWN
    beat = settings.CELERY_BEAT_SCHEDULE["relay-webhooks"]
    assert (beat["task"], beat["schedule"]) == ("webhooks.tasks.relay_webhooks", settings.WEBHOOK_RELAY_INTERVAL)


def test_the_celery_settings_for_money_moving_work_are_on() -> None:
    conf = app.conf
    assert conf.task_acks_late is True
    assert conf.task_reject_on_worker_lost is True
    assert conf.worker_prefetch_multiplier == 1
    assert conf.task_serializer == "json"
    assert list(conf.accept_content) == ["json"]
    assert conf.task_time_limit
    assert conf.task_soft_time_limit
    assert 0 < conf.task_soft_time_limit < conf.task_time_limit
    # A delivery's lease outlasts its HTTP call, and the task outlasts both.
    lease = settings.WEBHOOK_CONNECT_TIMEOUT + settings.WEBHOOK_TIMEOUT + 30
    assert lease < conf.task_soft_time_limit
    assert deliver_webhook.acks_late is True
    assert relay_webhooks.acks_late is True


@pytest.mark.django_db
def test_a_long_retry_delay_is_stored_for_the_relay_not_sent_as_a_countdown(
    acquirer: Acquirer,
    api: APIClient,
    account: Account,
    receiver: Receiver,
    settings: Any,
    recorded_enqueues: list[tuple[str, float]],
    django_capture_on_commit_callbacks: Any,
) -> None:
    settings.WEBHOOK_RETRY_SCHEDULE = [0, 300]
    settings.WEBHOOK_JITTER = 0.0
    settings.WEBHOOK_RELAY_GRACE = 0
    endpoint_create(account=account, url=receiver.url)
    pay(api, create_charge(api))
    delivery = WebhookDelivery.objects.get()
    receiver.respond(500)
    recorded_enqueues.clear()

    with django_capture_on_commit_callbacks(execute=True):
        assert delivery_attempt(delivery_id=delivery.pk) == "retry"

    delivery.refresh_from_db()
    (attempt,) = WebhookAttempt.objects.filter(delivery=delivery)
    assert delivery.status == WebhookDelivery.Status.PENDING
    assert delivery.next_attempt_at is not None
    assert delivery.next_attempt_at - attempt.attempted_at == dt.timedelta(seconds=300)
    assert recorded_enqueues == []  # no countdown at all: the relay will take it when due
    with django_capture_on_commit_callbacks(execute=True):
        assert deliveries_relay() == 0  # not due yet


@pytest.mark.django_db
def test_the_default_schedule_uses_countdowns_only_up_to_the_maximum(
    acquirer: Acquirer,
    api: APIClient,
    account: Account,
    receiver: Receiver,
    recorded_enqueues: list[tuple[str, float]],
    django_capture_on_commit_callbacks: Any,
) -> None:
    schedule = settings.WEBHOOK_RETRY_SCHEDULE
    assert schedule == [0, 5, 300, 1800, 7200, 18000, 36000, 36000, 86400, 86400]  # decisions §6
    endpoint_create(account=account, url=receiver.url)
    pay(api, create_charge(api))
    delivery = WebhookDelivery.objects.get()
    receiver.respond(500)

    for number in range(1, len(schedule) + 1):
        recorded_enqueues.clear()
        WebhookDelivery.objects.filter(pk=delivery.pk).update(next_attempt_at=timezone.now())
        with django_capture_on_commit_callbacks(execute=True):
            outcome = delivery_attempt(delivery_id=delivery.pk)
        delivery.refresh_from_db()
        if number == len(schedule):
            assert (outcome, delivery.status, recorded_enqueues) == ("failed", WebhookDelivery.Status.FAILED, [])
            break
        assert outcome == "retry"
        assert delivery.next_attempt_at is not None
        assert delivery.last_attempt_at is not None
        delay = (delivery.next_attempt_at - delivery.last_attempt_at).total_seconds()
        assert schedule[number] * 0.8 <= delay <= schedule[number] * 1.2  # ±20 % jitter
        if delay <= settings.WEBHOOK_MAX_COUNTDOWN:
            ((delivery_id, countdown),) = recorded_enqueues
            assert delivery_id == str(delivery.pk)
            assert countdown == pytest.approx(delay)
        else:
            assert recorded_enqueues == []
        assert all(countdown <= settings.WEBHOOK_MAX_COUNTDOWN for _, countdown in recorded_enqueues)
    assert WebhookAttempt.objects.filter(delivery=delivery).count() == len(schedule)
    assert len(receiver.requests) == len(schedule)
