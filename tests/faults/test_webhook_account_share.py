"""One account cannot starve everyone's webhooks (issue 29 §6).

A real webhook worker as deployed (8 threads) and an account whose two
endpoints and whose postbacks all hang: with only a cap per endpoint it held
every thread (2 endpoints x 4, plus postbacks), and another account's
delivery waited for the whole hang. Its deliveries together now hold at
most its share of the worker's threads (WEBHOOK_ACCOUNT_SHARE, half), the
rest wait without an attempt, and another account's deliveries arrive
within seconds while the hang lasts a minute. Once the receivers answer,
every delivery of the account succeeds with exactly one attempt: deferring
lost none and counted none as a failure.
"""

from __future__ import annotations

import functools
import uuid
from pathlib import Path

import pytest
from django.db import transaction

from accounts.models import Account
from tests.factories import AccountFactory
from tests.realworld import Receiver, celery_worker, http_receiver, wait_for
from webhooks.models import WebhookAttempt, WebhookDelivery
from webhooks.services import endpoint_create, event_emit

THREADS = 8  # the webhook worker as deployed (WEBHOOK_WORKER_CONCURRENCY)
SHARE = 0.5
HELD_EVENTS = 12  # each: a delivery to each of two endpoints, and a postback
PROMPT = 5  # events of the other account, one after another
PROMPTLY = 5.0  # seconds each may take; the hang is WEBHOOK_TIMEOUT, 60 s
HANG = 120.0  # the receivers answer when the test lets them, or after this

# The worker is another process: it sees only committed rows.
pytestmark = pytest.mark.django_db(transaction=True)


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


def received(receiver: Receiver, event_id: str) -> bool:
    return any(r.headers.get("X-Webhook-Event-ID") == event_id for r in receiver.requests)


def test_an_account_whose_receivers_hang_holds_its_share_and_another_account_is_served_at_once(
    database_name: str, tmp_path: Path
) -> None:
    hanging_account, other_account = AccountFactory(), AccountFactory()
    share = int(THREADS * SHARE)
    env = {
        "WEBHOOK_ACCOUNT_SHARE": str(SHARE),
        "WEBHOOK_MAX_CONCURRENT_PER_ENDPOINT": "4",
        # Long enough that the hang is the receivers', not cut by our timeout.
        "WEBHOOK_TIMEOUT": "60",
        "WEBHOOK_DEFER_SECONDS": "0.5",
        # Not what the worker runs: its share is of the threads it was started
        # with (--concurrency 8), not of a setting that says otherwise.
        "WEBHOOK_WORKER_CONCURRENCY": "64",
    }
    with (
        http_receiver() as hanging,
        http_receiver() as healthy,
        celery_worker(database_name, tmp_path, concurrency=THREADS, env=env),
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
