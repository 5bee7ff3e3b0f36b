"""Retention of webhook attempts (LGPD: a receiver's answer may echo the
payer data we sent it)."""

from __future__ import annotations

import datetime as dt

from django.conf import settings

from core.retention import retention_cutoff, update_in_batches
from webhooks.models import WebhookAttempt


def webhook_attempt_bodies_purge(*, now: dt.datetime | None = None) -> int:
    """Blank the response bodies of attempts older than
    ``RETENTION_DAYS_WEBHOOK_ATTEMPT_BODIES`` days. The rows stay: when, which
    status, how long and which error remain the delivery's history."""
    cutoff = retention_cutoff(days=settings.RETENTION_DAYS_WEBHOOK_ATTEMPT_BODIES, now=now)
    old = WebhookAttempt.objects.filter(attempted_at__lt=cutoff).exclude(response_body="")
    return update_in_batches(old, response_body="")
