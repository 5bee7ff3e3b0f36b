"""Sending deliveries: one attempt at a time (signed, under a lease, no
transaction open during the HTTP call), the retry schedule, what an answer does
to the delivery and its endpoint, and the relay that re-hands lost ones."""

from __future__ import annotations

import datetime as dt
import enum
import functools
import json
import random
import uuid

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from core import connections, metrics
from webhooks import capacity, http, services, signing
from webhooks.models import WebhookAttempt, WebhookDelivery, WebhookEndpoint, WebhookEvent

# Every hand-off to a worker (the outbox's, a redelivery's, a retry's, the
# relay's) is ``services._enqueue``, called through the module so that
# replacing it there (tests, bench) replaces it for every path.


class DeliveryOutcome(enum.StrEnum):
    SUCCEEDED = "succeeded"
    RETRY = "retry"
    FAILED = "failed"
    SKIPPED = "skipped"
    # The destination was at its cap of concurrent deliveries, or its account
    # at its share: nothing was sent and no attempt counted; the delivery
    # comes back shortly.
    DEFERRED = "deferred"


POSTBACK_CODE = "postback"


def _headers(delivery: WebhookDelivery, body: bytes, timestamp: int) -> dict[str, str]:
    event = delivery.event
    endpoint = delivery.endpoint
    if endpoint is None:
        account = event.account
        secrets = [account.postback_secret]
        if (
            account.previous_postback_secret
            and account.previous_postback_secret_expires_at
            and account.previous_postback_secret_expires_at > timezone.now()
        ):
            secrets.append(account.previous_postback_secret)
        code = POSTBACK_CODE
    else:
        secrets = [endpoint.secret]
        if (
            endpoint.previous_secret
            and endpoint.previous_secret_expires_at
            and endpoint.previous_secret_expires_at > timezone.now()
        ):
            secrets.append(endpoint.previous_secret)
        code = endpoint.code
    return {
        "Content-Type": "application/json",
        "X-Webhook-Event-ID": str(event.id),
        "X-Webhook-Code": code,
        "webhook-id": str(event.id),
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signing.signature_header(secrets, str(event.id), timestamp, body),
    }


def event_body(event: WebhookEvent) -> bytes:
    return json.dumps(event.body(), ensure_ascii=False, separators=(",", ":")).encode()


def next_delay(attempts_made: int, retry_after: float | None = None) -> float | None:
    """Seconds until the next attempt after ``attempts_made`` attempts, or
    None when the schedule is exhausted. ±jitter; a Retry-After is honoured
    up to twice the scheduled delay."""
    schedule = settings.WEBHOOK_RETRY_SCHEDULE
    if attempts_made >= len(schedule):
        return None
    scheduled = float(schedule[attempts_made])
    jitter = settings.WEBHOOK_JITTER
    delay = scheduled * random.uniform(1 - jitter, 1 + jitter)  # noqa: S311 - jitter, not security
    if retry_after is not None:
        # The receiver may ask for more time (up to twice the schedule), never less.
        delay = max(delay, min(retry_after, 2 * scheduled))
    return max(0.0, delay)


def delivery_attempt(*, delivery_id: uuid.UUID | str) -> str:
    outcome = _delivery_attempt(delivery_id)
    metrics.WEBHOOK_DELIVERIES.labels(outcome).inc()
    return outcome


def _delivery_attempt(delivery_id: uuid.UUID | str) -> str:
    """Make the delivery's next attempt if it is due and nobody else holds it.

    Idempotent: a delivery that already succeeded (or failed for good) is
    never sent again. No transaction is open during the HTTP call; a lease on
    the row keeps the relay from handing it to a second worker meanwhile.
    """
    now = timezone.now()
    lease = dt.timedelta(seconds=settings.WEBHOOK_CONNECT_TIMEOUT + settings.WEBHOOK_TIMEOUT + 30)
    claimed = (
        WebhookDelivery.objects.filter(pk=delivery_id, status=WebhookDelivery.Status.PENDING)
        .filter(next_attempt_at__lte=now + dt.timedelta(seconds=1))
        .filter(Q(leased_until__isnull=True) | Q(leased_until__lt=now))
        .update(leased_until=now + lease)
    )
    if not claimed:
        return DeliveryOutcome.SKIPPED

    delivery = WebhookDelivery.objects.select_related("event__account", "endpoint").get(pk=delivery_id)
    endpoint = delivery.endpoint
    if endpoint is not None and (not endpoint.is_active or endpoint.deleted_at is not None):
        WebhookDelivery.objects.filter(pk=delivery.pk).update(
            status=WebhookDelivery.Status.FAILED,
            next_attempt_at=None,
            leased_until=None,
            last_error="endpoint disabled",
        )
        return DeliveryOutcome.FAILED

    # One receiver that hangs holds at most its destination's slots of the
    # worker pool, and one account's receivers together at most its share:
    # the rest stays free for every other destination and account.
    caps = capacity.delivery_caps(endpoint_id=delivery.endpoint_id, account_id=delivery.event.account_id)
    with capacity.slot(caps) as got:
        if not got:
            return _defer(delivery)
        body = event_body(delivery.event)
        timestamp = int(timezone.now().timestamp())
        # Written before the call, like payout attempts: if this worker dies
        # mid-request, the history still shows the attempt the receiver may have seen.
        attempt = WebhookAttempt.objects.create(
            delivery=delivery,
            number=WebhookAttempt.objects.filter(delivery=delivery).count() + 1,
            attempted_at=timezone.now(),
            latency_ms=0,
            error="interrupted: the worker stopped before an answer was recorded",
            succeeded=False,
        )
        headers = _headers(delivery, body, timestamp)
        # The receiver may take its whole timeout: nobody else's database connection waits on it.
        connections.release_connections(before=f"webhook delivery {delivery.pk}")
        result = http.post(delivery.url, body, headers)
        return _record(delivery.pk, attempt.pk, result)


def _defer(delivery: WebhookDelivery) -> str:
    """The destination is at its cap, or the account at its share: try again
    shortly, with no attempt made or counted, so the delivery keeps its place
    in the schedule (``attempt_count`` and ``next_attempt_at`` are left as
    they are)."""
    due = delivery.next_attempt_at  # set on every pending delivery (a constraint)
    waited = (timezone.now() - due).total_seconds() if due else 0.0
    # WEBHOOK_DEFER_SECONDS at first, then half the time it has waited so far
    # (at most WEBHOOK_MAX_COUNTDOWN): a backlog of N deliveries to a receiver
    # that hangs for T seconds costs about N * log(T) cheap runs, not N * T / 3.
    base = min(max(settings.WEBHOOK_DEFER_SECONDS, waited / 2), settings.WEBHOOK_MAX_COUNTDOWN)
    # Spread widely: the deliveries deferred together must not all come back
    # at the same instant to find the same slots still taken.
    delay = min(base * random.uniform(0.5, 1.5), settings.WEBHOOK_MAX_COUNTDOWN)  # noqa: S311 - jitter, not security
    # The row stays leased until the new message is due, so the relay does not
    # hand it out again meanwhile; if that message is lost, the relay takes
    # the delivery once the lease ends (it is still due).
    WebhookDelivery.objects.filter(pk=delivery.pk).update(leased_until=timezone.now() + dt.timedelta(seconds=delay))
    services._enqueue(delivery.pk, delay)
    return DeliveryOutcome.DEFERRED


def _record(delivery_id: uuid.UUID, attempt_id: int, result: http.HttpResult) -> str:
    countdown: float | None = None
    with transaction.atomic():
        delivery = (
            WebhookDelivery.objects.select_for_update(of=("self",)).select_related("endpoint").get(pk=delivery_id)
        )
        now = timezone.now()
        # attempt_count is this round's (a redelivery starts a fresh schedule);
        # attempt numbers run on across rounds.
        number = delivery.attempt_count + 1
        WebhookAttempt.objects.filter(pk=attempt_id).update(
            attempted_at=now,  # the schedule counts from here, as the next delay does
            status_code=result.status_code,
            latency_ms=result.latency_ms,
            response_body=result.body,
            error=result.error,
            succeeded=result.succeeded,
        )
        delivery.attempt_count = number
        delivery.last_attempt_at = now
        delivery.last_status_code = result.status_code
        delivery.last_error = result.error
        delivery.leased_until = None
        endpoint = delivery.endpoint

        if result.succeeded:
            outcome = DeliveryOutcome.SUCCEEDED
            delivery.status, delivery.next_attempt_at = WebhookDelivery.Status.SUCCEEDED, None
            if endpoint is not None and endpoint.failing_since is not None:
                WebhookEndpoint.objects.filter(pk=endpoint.pk).update(failing_since=None)
        elif result.status_code == 410 and endpoint is not None:
            # 410 Gone: the receiver says this endpoint is gone for good.
            outcome = DeliveryOutcome.FAILED
            delivery.status, delivery.next_attempt_at = WebhookDelivery.Status.FAILED, None
            services.endpoint_disable(endpoint=endpoint, reason="410 Gone")
        else:
            delay = next_delay(number, result.retry_after)
            if delay is None:
                outcome = DeliveryOutcome.FAILED
                delivery.status, delivery.next_attempt_at = WebhookDelivery.Status.FAILED, None
            else:
                outcome = DeliveryOutcome.RETRY
                delivery.next_attempt_at = now + dt.timedelta(seconds=delay)
                if delay <= settings.WEBHOOK_MAX_COUNTDOWN:
                    countdown = delay
            if endpoint is not None and _note_failure(endpoint, now):
                # This attempt disabled the endpoint: the delivery ends here.
                outcome, countdown = DeliveryOutcome.FAILED, None
                delivery.status, delivery.next_attempt_at = WebhookDelivery.Status.FAILED, None
        delivery.save()
        if countdown is not None:
            transaction.on_commit(functools.partial(services._enqueue, delivery.pk, countdown))
    return outcome


def _note_failure(endpoint: WebhookEndpoint, now: dt.datetime) -> bool:
    """Start or extend the endpoint's failing run; True when it disabled it."""
    if endpoint.failing_since is None:
        WebhookEndpoint.objects.filter(pk=endpoint.pk, failing_since__isnull=True).update(failing_since=now)
        return False
    if now - endpoint.failing_since >= dt.timedelta(days=settings.WEBHOOK_DISABLE_AFTER_DAYS):
        services.endpoint_disable(
            endpoint=endpoint, reason=f"every delivery failed for {settings.WEBHOOK_DISABLE_AFTER_DAYS} days"
        )
        return True
    return False


def deliveries_relay(*, limit: int = 500) -> int:
    """Hand to workers every pending delivery that is due and was not taken
    (process died before publishing, broker down, long retry delay). Several
    relays may run at once: SKIP LOCKED gives each its own rows."""
    now = timezone.now()
    grace = dt.timedelta(seconds=settings.WEBHOOK_RELAY_GRACE)
    with transaction.atomic():
        ids = list(
            WebhookDelivery.objects.select_for_update(skip_locked=True)
            .filter(status=WebhookDelivery.Status.PENDING, next_attempt_at__lte=now - grace)
            .filter(Q(leased_until__isnull=True) | Q(leased_until__lt=now))
            .order_by("next_attempt_at")
            .values_list("pk", flat=True)[:limit]
        )
        # Due now: the workers take them; the relay looks again only if they
        # are still pending a grace period later (a message lost again).
        WebhookDelivery.objects.filter(pk__in=ids).update(next_attempt_at=now)
        for delivery_id in ids:
            transaction.on_commit(functools.partial(services._enqueue, delivery_id, 0))
    return len(ids)
