"""The per-destination cap on concurrent deliveries (issue 13, bulkheads):
the semaphore against the real Redis, and what a delivery does when its
destination is full (in process, a real receiver on loopback; the worker
side is ``tests/faults/test_webhook_bulkhead.py``)."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone

from accounts.models import Account
from core import metrics
from tests.realworld import Receiver, free_port, run_concurrently
from webhooks import capacity, services
from webhooks.delivery import DeliveryOutcome, deliveries_relay, delivery_attempt
from webhooks.models import WebhookAttempt, WebhookDelivery, WebhookEvent
from webhooks.services import endpoint_create

CAP = 3


@pytest.fixture
def key() -> str:
    return f"pix-test:inflight:{uuid.uuid4().hex}"


@pytest.fixture
def now(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The semaphore's clock, moved by the test (``now[0] += seconds``)."""
    current = [capacity.clock()]
    monkeypatch.setattr(capacity, "clock", lambda: current[0])
    return current


# --------------------------------------------------------------------------- the semaphore


def test_acquire_up_to_the_cap_then_refuse_until_a_release(key: str) -> None:
    held = [capacity.acquire(key, cap=CAP) for _ in range(CAP)]
    assert all(held)
    assert len(set(held)) == CAP
    assert capacity.acquire(key, cap=CAP) is None
    assert capacity.holders(key) == CAP

    holder = held.pop()
    assert holder is not None
    capacity.release(key, holder)
    assert capacity.holders(key) == CAP - 1
    assert capacity.acquire(key, cap=CAP) is not None
    assert capacity.acquire(key, cap=CAP) is None


def test_a_dead_holders_slot_is_freed_when_its_lease_ends(key: str, now: list[float]) -> None:
    """A worker killed mid-delivery never releases: its lease (the delivery's
    timeouts plus a margin) ends, and the next acquire takes its slot."""
    dead = capacity.acquire(key, cap=1, lease=20.0)
    assert dead is not None
    now[0] += 19.9
    assert capacity.acquire(key, cap=1) is None
    now[0] += 0.2
    assert capacity.holders(key) == 0
    assert capacity.acquire(key, cap=1) is not None


def test_concurrent_acquires_take_exactly_the_cap(key: str) -> None:
    outcomes = run_concurrently([lambda: capacity.acquire(key, cap=CAP) for _ in range(20)])
    assert sum(1 for holder in outcomes if holder) == CAP
    assert capacity.holders(key) == CAP


def test_the_slot_is_released_however_the_block_ends(key: str) -> None:
    def deliver() -> None:
        with capacity.slot(key) as got:
            assert got
            assert capacity.holders(key) == 1
            raise RuntimeError("the delivery blew up")

    with pytest.raises(RuntimeError):
        deliver()
    assert capacity.holders(key) == 0


def test_the_lease_outlives_the_delivery_timeouts(settings: Any) -> None:
    settings.WEBHOOK_CONNECT_TIMEOUT, settings.WEBHOOK_TIMEOUT = 3.0, 15.0
    assert capacity.lease_seconds() > 18.0


def test_redis_down_fails_open(settings: Any, key: str) -> None:
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"
    holders = [capacity.acquire(key, cap=1) for _ in range(3)]
    assert all(holders)
    capacity.release(key, holders[0] or "")  # nothing to release, and no error


# --------------------------------------------------------------------------- deliveries


@pytest.fixture
def enqueued(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, float]]:
    """The hand-offs to workers (no worker here)."""
    calls: list[tuple[str, float]] = []
    monkeypatch.setattr(
        services, "_enqueue", lambda delivery_id, countdown: calls.append((str(delivery_id), countdown))
    )
    return calls


def emit(account: Account, postback_url: str = "") -> WebhookEvent:
    with transaction.atomic():
        return services.event_emit(
            account_id=account.pk,
            event_type="transaction",
            record_id=uuid.uuid4(),
            status="paid",
            data={"status": "paid"},
            postback_url=postback_url,
        )


def deferred_count() -> float:
    return metrics.WEBHOOK_DELIVERIES.labels(DeliveryOutcome.DEFERRED)._value.get()


def fill(key: str, settings: Any) -> list[str]:
    held = [capacity.acquire(key) for _ in range(settings.WEBHOOK_MAX_CONCURRENT_PER_ENDPOINT)]
    assert all(held)
    assert capacity.acquire(key) is None
    return [h for h in held if h]


@pytest.mark.django_db
def test_a_delivery_to_a_full_endpoint_is_deferred_without_an_attempt(
    settings: Any, account: Account, receiver: Receiver, enqueued: list[tuple[str, float]]
) -> None:
    settings.WEBHOOK_MAX_CONCURRENT_PER_ENDPOINT, settings.WEBHOOK_DEFER_SECONDS = 2, 3.0
    endpoint = endpoint_create(account=account, url=receiver.url).endpoint
    key = capacity.destination_key(endpoint_id=endpoint.pk, account_id=account.pk)
    held = fill(key, settings)
    delivery = WebhookDelivery.objects.get(event=emit(account))
    due = delivery.next_attempt_at
    enqueued.clear()
    deferred_before = deferred_count()

    assert delivery_attempt(delivery_id=delivery.pk) == DeliveryOutcome.DEFERRED

    # Nothing sent, nothing counted: its place in the schedule is kept.
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempt_count, delivery.next_attempt_at) == ("pending", 0, due)
    assert not WebhookAttempt.objects.filter(delivery=delivery).exists()
    assert receiver.requests == []
    assert deferred_count() == deferred_before + 1
    # Back in a few seconds, and the relay leaves it alone meanwhile.
    [(delivery_id, countdown)] = enqueued
    assert delivery_id == str(delivery.pk)
    assert 1.5 <= countdown <= 4.5
    assert delivery.leased_until is not None
    assert delivery.leased_until <= timezone.now() + dt.timedelta(seconds=countdown)
    assert deliveries_relay() == 0
    # The same message again before it is due finds the row held: no second deferral.
    assert delivery_attempt(delivery_id=delivery.pk) == DeliveryOutcome.SKIPPED

    # A slot frees up; the re-enqueued message arrives once the lease is over.
    capacity.release(key, held[0])
    WebhookDelivery.objects.filter(pk=delivery.pk).update(leased_until=timezone.now() - dt.timedelta(seconds=0.01))
    assert delivery_attempt(delivery_id=delivery.pk) == DeliveryOutcome.SUCCEEDED
    assert list(WebhookAttempt.objects.filter(delivery=delivery).values_list("number", flat=True)) == [1]
    assert len(receiver.requests) == 1
    # Its own slot was given back; the other holder's is still held.
    assert capacity.holders(key) == 1


@pytest.mark.django_db
def test_a_long_wait_is_deferred_longer(
    settings: Any, account: Account, receiver: Receiver, enqueued: list[tuple[str, float]]
) -> None:
    """A delivery that has waited for a full endpoint a while comes back
    after half that time (at most WEBHOOK_MAX_COUNTDOWN), so a large backlog
    behind a hanging receiver does not keep the workers busy re-deferring."""
    settings.WEBHOOK_MAX_CONCURRENT_PER_ENDPOINT, settings.WEBHOOK_DEFER_SECONDS = 1, 3.0
    endpoint = endpoint_create(account=account, url=receiver.url).endpoint
    fill(capacity.destination_key(endpoint_id=endpoint.pk, account_id=account.pk), settings)
    delivery = WebhookDelivery.objects.get(event=emit(account))
    countdowns = []
    for waited, bound in ((40, 60), (1000, 60)):
        due = timezone.now() - dt.timedelta(seconds=waited)
        WebhookDelivery.objects.filter(pk=delivery.pk).update(next_attempt_at=due, leased_until=None)
        enqueued.clear()
        assert delivery_attempt(delivery_id=delivery.pk) == DeliveryOutcome.DEFERRED
        [(_, countdown)] = enqueued
        countdowns.append(countdown)
        assert min(waited / 4, bound / 2) <= countdown <= bound
        delivery.refresh_from_db()
        assert delivery.next_attempt_at == due  # its place in the schedule is kept
    assert countdowns[1] >= 30  # half of 1000 s, capped at 60 s, ±50 %
    assert not WebhookAttempt.objects.filter(delivery=delivery).exists()


@pytest.mark.django_db
def test_postbacks_share_one_cap_per_account(
    settings: Any, account: Account, receiver: Receiver, enqueued: list[tuple[str, float]]
) -> None:
    settings.WEBHOOK_MAX_CONCURRENT_PER_ENDPOINT = 1
    # Another account's full postbacks, and this account's full endpoint, are not this one's.
    fill(capacity.destination_key(endpoint_id=None, account_id=uuid.uuid4()), settings)
    other = endpoint_create(account=account, url=receiver.url).endpoint
    fill(capacity.destination_key(endpoint_id=other.pk, account_id=account.pk), settings)
    first = WebhookDelivery.objects.get(event=emit(account, postback_url=receiver.url), endpoint=None)
    assert delivery_attempt(delivery_id=first.pk) == DeliveryOutcome.SUCCEEDED

    fill(capacity.destination_key(endpoint_id=None, account_id=account.pk), settings)
    second = WebhookDelivery.objects.get(event=emit(account, postback_url=f"{receiver.url}?c=2"), endpoint=None)
    assert delivery_attempt(delivery_id=second.pk) == DeliveryOutcome.DEFERRED
    assert len(receiver.requests) == 1


@pytest.mark.django_db
def test_with_redis_down_deliveries_go_out(
    settings: Any, account: Account, receiver: Receiver, enqueued: list[tuple[str, float]]
) -> None:
    endpoint = endpoint_create(account=account, url=receiver.url).endpoint
    fill(capacity.destination_key(endpoint_id=endpoint.pk, account_id=account.pk), settings)
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"

    delivery = WebhookDelivery.objects.get(event=emit(account))
    assert delivery_attempt(delivery_id=delivery.pk) == DeliveryOutcome.SUCCEEDED
    assert len(receiver.requests) == 1
