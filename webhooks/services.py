"""Writes for webhooks: events in the caller's transaction (the outbox), the
hand-off of their deliveries to workers, and endpoint management. Sending a
delivery (attempts, schedule, relay) is ``webhooks.delivery``'s job."""

from __future__ import annotations

import datetime as dt
import functools
import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from accounts.models import Account
from core import dispatch
from webhooks import selectors
from webhooks.exceptions import EndpointLimitReached
from webhooks.models import WebhookDelivery, WebhookEndpoint, WebhookEvent

logger = logging.getLogger(__name__)


# --------------------------------------------------------------------------- outbox


def event_emit(
    *,
    account_id: Any,
    event_type: str,
    record_id: uuid.UUID,
    status: str,
    data: Mapping[str, Any],
    postback_url: str = "",
) -> WebhookEvent:
    """Write the event and one delivery per active endpoint (plus the
    postback), in the caller's transaction. Each delivery is handed to a
    worker after commit; if that hand-off is lost, the relay finds it."""
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("event_emit must run in the transaction of the change it reports")
    event = WebhookEvent.objects.create(
        account_id=account_id, event_type=event_type, record_id=record_id, status=status, data=dict(data)
    )
    now = timezone.now()
    endpoints = WebhookEndpoint.objects.filter(account_id=account_id, is_active=True, deleted_at__isnull=True)
    deliveries = [WebhookDelivery(event=event, endpoint=e, url=e.url, next_attempt_at=now) for e in endpoints]
    if postback_url:
        deliveries.append(WebhookDelivery(event=event, endpoint=None, url=postback_url, next_attempt_at=now))
    WebhookDelivery.objects.bulk_create(deliveries)
    for delivery in deliveries:
        transaction.on_commit(functools.partial(_enqueue, delivery.pk, 0))
    return event


def _enqueue(delivery_id: uuid.UUID, countdown: float) -> None:
    # The app's one hand-off to its worker (``webhooks.delivery`` calls it
    # through this module, so replacing it here replaces it everywhere). By
    # the task's name: ``webhooks.tasks`` imports this module, not the reverse.
    # A broker that is down is no error: the row is committed and due, and the
    # relay sends it once the broker is back.
    dispatch.enqueue("webhooks.tasks.deliver_webhook", str(delivery_id), countdown=countdown, left_to="the relay")


def event_resend(*, event: WebhookEvent) -> int:
    """Staff: send the event again to every destination that still accepts
    webhooks, delivered or not (receivers deduplicate on the event id)."""
    return _restart(event, WebhookDelivery.objects.filter(event=event))


def event_redeliver(*, event: WebhookEvent) -> int:
    """Send the event again, with a fresh schedule, to every destination
    whose delivery failed for good and that still accepts webhooks."""
    return _restart(event, WebhookDelivery.objects.filter(event=event, status=WebhookDelivery.Status.FAILED))


def _restart(event: WebhookEvent, deliveries: QuerySet[WebhookDelivery]) -> int:
    now = timezone.now()
    with transaction.atomic():
        ids = list(
            deliveries.select_for_update(of=("self",))
            .filter(Q(endpoint__isnull=True) | Q(endpoint__is_active=True, endpoint__deleted_at__isnull=True))
            .values_list("pk", flat=True)
        )
        WebhookDelivery.objects.filter(pk__in=ids).update(
            status=WebhookDelivery.Status.PENDING, attempt_count=0, next_attempt_at=now, leased_until=None
        )
        for delivery_id in ids:
            transaction.on_commit(functools.partial(_enqueue, delivery_id, 0))
    return len(ids)


# --------------------------------------------------------------------------- endpoints


@dataclass(frozen=True)
class CreatedEndpoint:
    endpoint: WebhookEndpoint
    secret: str  # shown once


def endpoint_create(*, account: Account, url: str, description: str = "", ref: str = "") -> CreatedEndpoint:
    """Register an endpoint; the caller has checked the URL with ``http.url_refusal``.

    Raises :class:`EndpointLimitReached` when the account already has
    ``WEBHOOK_MAX_ENDPOINTS_PER_ACCOUNT`` endpoints."""
    with transaction.atomic():
        endpoint_limit_check(account_id=account.pk)
        endpoint = WebhookEndpoint.objects.create(account=account, url=url, description=description, ref=ref)
    return CreatedEndpoint(endpoint=endpoint, secret=endpoint.secret)


def endpoint_limit_check(*, account_id: Any, adding: int = 1) -> None:
    """Lock the account's row and refuse when ``adding`` more endpoints (net
    of any the same change deletes) would take it past ``WEBHOOK_MAX_ENDPOINTS_PER_ACCOUNT`` (deleted endpoints not
    counted, disabled ones counted: staff may enable them again).

    Call it in the transaction that creates them: the lock serialises the
    account's creations (API, admin, bootstrap), so concurrent ones cannot
    each count the same free slot."""
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("endpoint_limit_check must run in the transaction that creates the endpoints")
    list(Account.objects.select_for_update().filter(pk=account_id).values_list("pk", flat=True))
    limit = settings.WEBHOOK_MAX_ENDPOINTS_PER_ACCOUNT
    if selectors.endpoints_counted(account_id=account_id) + adding > limit:
        raise EndpointLimitReached(limit)


def endpoint_delete(*, endpoint: WebhookEndpoint) -> None:
    """Stop sending to it; its history stays for support."""
    now = timezone.now()
    with transaction.atomic():
        WebhookEndpoint.objects.filter(pk=endpoint.pk).update(is_active=False, deleted_at=now)
        _fail_pending(endpoint, "endpoint deleted")


def endpoint_disable(*, endpoint: WebhookEndpoint, reason: str) -> None:
    with transaction.atomic():
        WebhookEndpoint.objects.filter(pk=endpoint.pk).update(
            is_active=False, disabled_at=timezone.now(), disabled_reason=reason[:200]
        )
        _fail_pending(endpoint, f"endpoint disabled: {reason}")
    logger.warning("webhook endpoint %s disabled: %s", endpoint.pk, reason)


def endpoint_enable(*, endpoint: WebhookEndpoint) -> None:
    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(
        is_active=True, disabled_at=None, disabled_reason="", failing_since=None
    )


def _fail_pending(endpoint: WebhookEndpoint, reason: str) -> None:
    WebhookDelivery.objects.filter(endpoint=endpoint, status=WebhookDelivery.Status.PENDING).update(
        status=WebhookDelivery.Status.FAILED, next_attempt_at=None, last_error=reason[:500]
    )


def endpoint_rotate_secret(*, endpoint: WebhookEndpoint) -> str:
    """A new secret; the old one keeps signing alongside it for
    ``WEBHOOK_SECRET_ROTATION_HOURS`` so receivers can switch without a gap."""
    from core.tokens import new_webhook_secret

    secret = new_webhook_secret()
    with transaction.atomic():
        # Locked: two rotations at once must chain (old → previous), not race.
        current = WebhookEndpoint.objects.select_for_update().values_list("secret", flat=True).get(pk=endpoint.pk)
        WebhookEndpoint.objects.filter(pk=endpoint.pk).update(
            previous_secret=current,
            previous_secret_expires_at=timezone.now() + dt.timedelta(hours=settings.WEBHOOK_SECRET_ROTATION_HOURS),
            secret=secret,
        )
    return secret
