"""The caps on concurrent deliveries (issues 13 and 29, bulkheads):
the semaphore against the real Redis, and what a delivery does when its
destination is full (in process, a real receiver on loopback; the worker
side is ``tests/faults/test_webhook_bulkhead.py``)."""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any
from unittest import mock

import pytest
from django.conf import settings as django_settings
from django.db import transaction
from django.utils import timezone

from accounts.models import Account
from core import metrics
from tests.factories import AccountFactory
from tests.realworld import Receiver, free_port, run_concurrently, wait_for
from webhooks import capacity, checks, services
from webhooks.delivery import DeliveryOutcome, deliveries_relay, delivery_attempt
from webhooks.models import WebhookAttempt, WebhookDelivery, WebhookEvent
from webhooks.services import endpoint_create

CAP = 3
#: How far off a worker's clock is in the skew tests: more than a lease
#: (the delivery's timeouts plus 30 s, 48 s by default).
SKEW = 60.0


@pytest.fixture
def key() -> str:
    return f"pix-test:inflight:{uuid.uuid4().hex}"


@contextlib.contextmanager
def worker_clock(offset: float | None = None, *, frozen: bool = False) -> Iterator[None]:
    """This process's wall clock (``time.time``, what a worker's clock is to
    Python) ``offset`` seconds off, or stopped, for the block. Redis's clock
    and this process's monotonic one (the waits') are left alone."""
    real = time.time
    at = real()
    skewed = (lambda: at + (offset or 0.0)) if frozen else (lambda: real() + (offset or 0.0))
    with mock.patch.object(time, "time", skewed):
        yield


def ttl(key: str) -> float:
    return float(capacity._client().pttl(key)) / 1000


def members(key: str) -> set[str]:
    return {m.decode() if isinstance(m, bytes) else str(m) for m in capacity._client().zrange(key, 0, -1)}


def take(key: str, count: int, *, cap: int = CAP) -> list[str]:
    held = [capacity.acquire({key: cap}) for _ in range(count)]
    assert all(held)
    return [h for h in held if h]


# --------------------------------------------------------------------------- the semaphore


def test_acquire_up_to_the_cap_then_refuse_until_a_release(key: str) -> None:
    held = take(key, CAP)
    assert len(set(held)) == CAP
    assert capacity.acquire({key: CAP}) is None
    assert capacity.holders(key) == CAP

    capacity.release([key], held.pop())
    assert capacity.holders(key) == CAP - 1
    assert capacity.acquire({key: CAP}) is not None
    assert capacity.acquire({key: CAP}) is None


def test_a_dead_holders_slot_is_freed_when_its_lease_ends_by_redis_clock(key: str) -> None:
    """A worker killed mid-delivery never releases: its lease ends by Redis's
    clock, and the next acquire takes its slot, even from a worker whose own
    clock stands still (and lags a minute) all the while."""
    with worker_clock(-SKEW, frozen=True):
        dead = capacity.acquire({key: 1}, lease=1.0)
        assert dead is not None
        assert capacity.acquire({key: 1}) is None
        wait_for(lambda: capacity.acquire({key: 1}) is not None, timeout=10)
    assert capacity.holders(key) == 1


@pytest.mark.parametrize("offset", [SKEW, -SKEW], ids=["ahead", "behind"])
def test_a_worker_whose_clock_is_off_evicts_no_live_holder(key: str, offset: float) -> None:
    """Holders of workers whose clocks agree, then one whose clock is a minute
    off: it is refused at the cap, and the set keeps every live holder and
    its expiry (a clock ahead read their leases as ended; a clock behind
    wrote an expiry in the past, which wiped the set)."""
    held = take(key, CAP - 1)
    with worker_clock(offset):
        mine = capacity.acquire({key: CAP})
        assert mine is not None
        assert capacity.acquire({key: CAP}) is None
        assert capacity.holders(key) == CAP
    assert members(key) == {*held, mine}
    assert capacity.lease_seconds() <= ttl(key) <= capacity.lease_seconds() + 2


@pytest.mark.parametrize("offset", [SKEW, -SKEW], ids=["ahead", "behind"])
def test_the_slot_of_a_worker_whose_clock_is_off_is_kept_for_its_lease(key: str, offset: float) -> None:
    """A worker a minute off takes a slot; workers whose clocks are right
    neither drop it (behind, its lease read as ended a minute early) nor are
    refused for longer than its lease (ahead, its lease a minute too long)."""
    with worker_clock(offset):
        skewed = capacity.acquire({key: 1}, lease=2.0)
        assert skewed is not None
    assert capacity.acquire({key: 1}) is None
    assert capacity.holders(key) == 1
    assert 0 < ttl(key) <= 3
    wait_for(lambda: capacity.acquire({key: 1}) is not None, timeout=10)


def test_concurrent_acquires_take_exactly_the_cap(key: str) -> None:
    outcomes = run_concurrently([lambda: capacity.acquire({key: CAP}) for _ in range(20)])
    assert sum(1 for holder in outcomes if holder) == CAP
    assert capacity.holders(key) == CAP


def test_a_slot_is_taken_in_every_set_or_in_none(key: str) -> None:
    """A delivery needs its endpoint's slot and its account's: refused by
    either, it holds neither."""
    endpoint, account = f"{key}:endpoint", f"{key}:account"
    held = take(account, 2, cap=2)
    assert capacity.acquire({endpoint: CAP, account: 2}) is None
    assert capacity.holders(endpoint) == 0

    capacity.release([account], held[0])
    take(endpoint, CAP)
    assert capacity.acquire({endpoint: CAP, account: 2}) is None
    assert capacity.holders(account) == 1


def test_concurrent_acquires_across_endpoints_take_exactly_the_accounts_cap(key: str) -> None:
    account = f"{key}:account"
    calls: list[Callable[[], Any]] = [
        functools.partial(capacity.acquire, {f"{key}:endpoint:{i % 4}": CAP, account: CAP + 1}) for i in range(20)
    ]
    outcomes = run_concurrently(calls)
    assert sum(1 for holder in outcomes if holder) == CAP + 1
    assert capacity.holders(account) == CAP + 1
    assert sum(capacity.holders(f"{key}:endpoint:{i}") for i in range(4)) == CAP + 1


def test_the_slot_is_released_however_the_block_ends(key: str) -> None:
    caps = {key: CAP, f"{key}:account": CAP}

    def deliver() -> None:
        with capacity.slot(caps) as got:
            assert got
            assert capacity.holders(key) == capacity.holders(f"{key}:account") == 1
            raise RuntimeError("the delivery blew up")

    with pytest.raises(RuntimeError):
        deliver()
    assert capacity.holders(key) == capacity.holders(f"{key}:account") == 0


def test_the_lease_outlives_the_delivery_timeouts(settings: Any) -> None:
    settings.WEBHOOK_CONNECT_TIMEOUT, settings.WEBHOOK_TIMEOUT = 3.0, 15.0
    assert capacity.lease_seconds() > 18.0


def test_redis_down_fails_open(settings: Any, key: str) -> None:
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"
    holders = [capacity.acquire({key: 1}) for _ in range(3)]
    assert all(holders)
    capacity.release([key], holders[0] or "")  # nothing to release, and no error


def test_an_accounts_cap_is_its_share_of_the_workers_threads(settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    settings.WEBHOOK_ACCOUNT_SHARE, settings.WEBHOOK_WORKER_CONCURRENCY = 0.5, 8
    monkeypatch.setattr(capacity, "worker_threads", None)
    assert capacity.account_cap() == 4
    # In a worker, of the threads it was started with, whatever the setting says.
    monkeypatch.setattr(capacity, "worker_threads", 6)
    assert capacity.account_cap() == 3
    # Never none at all: a small pool still delivers every account's events.
    monkeypatch.setattr(capacity, "worker_threads", 1)
    assert capacity.account_cap() == 1
    settings.WEBHOOK_ACCOUNT_SHARE = 1.0
    monkeypatch.setattr(capacity, "worker_threads", 8)
    assert capacity.account_cap() == 8


def test_one_destination_stays_below_its_accounts_cap(settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """An endpoint (or an account's postbacks) never holds its account's
    whole share: a healthy endpoint of the same account keeps a slot."""
    settings.WEBHOOK_ACCOUNT_SHARE, settings.WEBHOOK_WORKER_CONCURRENCY = 0.5, 8
    settings.WEBHOOK_MAX_CONCURRENT_PER_ENDPOINT = 4
    monkeypatch.setattr(capacity, "worker_threads", None)
    # The defaults: the endpoint's 4 was the account's 4.
    assert (capacity.destination_cap(), capacity.account_cap()) == (3, 4)
    # A smaller endpoint cap is kept; none of its own is still one below the account's.
    settings.WEBHOOK_MAX_CONCURRENT_PER_ENDPOINT = 2
    assert capacity.destination_cap() == 2
    settings.WEBHOOK_MAX_CONCURRENT_PER_ENDPOINT = 0
    assert capacity.destination_cap() == 3
    # Of the threads the worker runs; an account's cap of 1 leaves one to take turns.
    monkeypatch.setattr(capacity, "worker_threads", 2)
    assert (capacity.destination_cap(), capacity.account_cap()) == (1, 1)
    caps = capacity.delivery_caps(endpoint_id=uuid.uuid4(), account_id=uuid.uuid4())
    assert sorted(caps.values()) == [1, 1]


@pytest.mark.parametrize("share", [0.0, -0.5, 1.5])
def test_a_share_outside_0_to_1_fails_the_system_checks(settings: Any, share: float) -> None:
    settings.WEBHOOK_ACCOUNT_SHARE = share
    assert [message.id for message in checks.account_share_in_range(None)] == ["webhooks.E001"]
    settings.WEBHOOK_ACCOUNT_SHARE = 0.5
    assert checks.account_share_in_range(None) == []


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


def fill(key: str, cap: int | None = None) -> list[str]:
    """Every slot of ``key`` held (by default a destination's), as by
    deliveries in flight elsewhere."""
    cap = django_settings.WEBHOOK_MAX_CONCURRENT_PER_ENDPOINT if cap is None else cap
    held = take(key, cap, cap=cap)
    assert capacity.acquire({key: cap}) is None
    return held


@pytest.mark.django_db
def test_a_delivery_to_a_full_endpoint_is_deferred_without_an_attempt(
    settings: Any, account: Account, receiver: Receiver, enqueued: list[tuple[str, float]]
) -> None:
    settings.WEBHOOK_MAX_CONCURRENT_PER_ENDPOINT, settings.WEBHOOK_DEFER_SECONDS = 2, 3.0
    endpoint = endpoint_create(account=account, url=receiver.url).endpoint
    key = capacity.destination_key(endpoint_id=endpoint.pk, account_id=account.pk)
    held = fill(key)
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
    capacity.release([key], held[0])
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
    fill(capacity.destination_key(endpoint_id=endpoint.pk, account_id=account.pk))
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
    fill(capacity.destination_key(endpoint_id=None, account_id=uuid.uuid4()))
    other = endpoint_create(account=account, url=receiver.url).endpoint
    fill(capacity.destination_key(endpoint_id=other.pk, account_id=account.pk))
    first = WebhookDelivery.objects.get(event=emit(account, postback_url=receiver.url), endpoint=None)
    assert delivery_attempt(delivery_id=first.pk) == DeliveryOutcome.SUCCEEDED

    fill(capacity.destination_key(endpoint_id=None, account_id=account.pk))
    second = WebhookDelivery.objects.get(event=emit(account, postback_url=f"{receiver.url}?c=2"), endpoint=None)
    assert delivery_attempt(delivery_id=second.pk) == DeliveryOutcome.DEFERRED
    assert len(receiver.requests) == 1


@pytest.mark.django_db
def test_with_redis_down_deliveries_go_out(
    settings: Any, account: Account, receiver: Receiver, enqueued: list[tuple[str, float]]
) -> None:
    endpoint = endpoint_create(account=account, url=receiver.url).endpoint
    fill(capacity.destination_key(endpoint_id=endpoint.pk, account_id=account.pk))
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"

    delivery = WebhookDelivery.objects.get(event=emit(account))
    assert delivery_attempt(delivery_id=delivery.pk) == DeliveryOutcome.SUCCEEDED
    assert len(receiver.requests) == 1


@pytest.mark.django_db
def test_an_account_at_its_share_defers_its_endpoints_and_postbacks_and_no_one_elses(
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
    account: Account,
    receiver: Receiver,
    enqueued: list[tuple[str, float]],
) -> None:
    """An account whose deliveries hold its share of the worker (elsewhere:
    other endpoints, other postbacks) waits, every endpoint and postback of
    it, without an attempt; another account's deliveries go out."""
    settings.WEBHOOK_ACCOUNT_SHARE, settings.WEBHOOK_WORKER_CONCURRENCY = 0.5, 4
    monkeypatch.setattr(capacity, "worker_threads", None)
    endpoint = endpoint_create(account=account, url=receiver.url).endpoint
    neighbour = AccountFactory()
    endpoint_create(account=neighbour, url=receiver.url)
    held = fill(capacity.account_key(account.pk), capacity.account_cap())
    assert len(held) == 2
    event = emit(account, postback_url=f"{receiver.url}?postback=1")
    deliveries = list(WebhookDelivery.objects.filter(event=event).order_by("endpoint_id"))
    assert [d.endpoint_id for d in deliveries] == [endpoint.pk, None]

    for delivery in deliveries:
        assert delivery_attempt(delivery_id=delivery.pk) == DeliveryOutcome.DEFERRED
    # Nothing sent, nothing counted, no endpoint's or postbacks' slot taken meanwhile.
    assert receiver.requests == []
    assert not WebhookAttempt.objects.filter(delivery__event=event).exists()
    assert set(WebhookDelivery.objects.filter(event=event).values_list("status", "attempt_count")) == {("pending", 0)}
    assert capacity.holders(capacity.destination_key(endpoint_id=endpoint.pk, account_id=account.pk)) == 0
    assert capacity.holders(capacity.destination_key(endpoint_id=None, account_id=account.pk)) == 0
    assert sorted(delivery_id for delivery_id, _ in enqueued[-2:]) == sorted(str(d.pk) for d in deliveries)

    other = WebhookDelivery.objects.get(event=emit(neighbour))
    assert delivery_attempt(delivery_id=other.pk) == DeliveryOutcome.SUCCEEDED

    # The account's deliveries elsewhere end: its waiting ones go out, one attempt each.
    capacity.release([capacity.account_key(account.pk)], held[0])
    capacity.release([capacity.account_key(account.pk)], held[1])
    WebhookDelivery.objects.filter(event=event).update(leased_until=timezone.now() - dt.timedelta(seconds=0.01))
    for delivery in deliveries:
        assert delivery_attempt(delivery_id=delivery.pk) == DeliveryOutcome.SUCCEEDED
    assert WebhookAttempt.objects.filter(delivery__event=event).count() == 2
    assert len(receiver.requests) == 3
    assert capacity.holders(capacity.account_key(account.pk)) == 0


@pytest.mark.django_db
def test_a_destination_at_its_cap_defers_alone_its_account_still_delivers_elsewhere(
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
    account: Account,
    receiver: Receiver,
    enqueued: list[tuple[str, float]],
) -> None:
    """With the defaults, an endpoint whose receiver hangs holds 3 of its
    account's 4 slots; the account's other endpoint and its postbacks go out
    on the fourth."""
    settings.WEBHOOK_ACCOUNT_SHARE, settings.WEBHOOK_WORKER_CONCURRENCY = 0.5, 8
    settings.WEBHOOK_MAX_CONCURRENT_PER_ENDPOINT = 4
    monkeypatch.setattr(capacity, "worker_threads", None)
    hanging = endpoint_create(account=account, url=f"{receiver.url}?hangs").endpoint
    caps = capacity.delivery_caps(endpoint_id=hanging.pk, account_id=account.pk)
    # The hanging endpoint's deliveries in flight elsewhere, as many as it may take.
    assert len([h for h in (capacity.acquire(caps) for _ in range(5)) if h]) == 3
    assert capacity.holders(capacity.account_key(account.pk)) == 3
    healthy = endpoint_create(account=account, url=f"{receiver.url}?healthy").endpoint
    event = emit(account, postback_url=f"{receiver.url}?postback")
    by_endpoint = {d.endpoint_id: d for d in WebhookDelivery.objects.filter(event=event)}

    assert delivery_attempt(delivery_id=by_endpoint[hanging.pk].pk) == DeliveryOutcome.DEFERRED
    assert delivery_attempt(delivery_id=by_endpoint[healthy.pk].pk) == DeliveryOutcome.SUCCEEDED
    assert delivery_attempt(delivery_id=by_endpoint[None].pk) == DeliveryOutcome.SUCCEEDED
    assert sorted(r.path for r in receiver.requests) == ["/hook?healthy", "/hook?postback"]
