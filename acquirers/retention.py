"""Retention of inbound notifications (LGPD: they hold payer data)."""

from __future__ import annotations

import datetime as dt

from django.conf import settings

from acquirers.models import InboundNotification
from core.retention import delete_in_batches, retention_cutoff


def inbound_notification_purge(*, now: dt.datetime | None = None) -> int:
    """Delete notifications received more than ``RETENTION_DAYS_INBOUND_NOTIFICATIONS``
    days ago. One still ``received`` (not processed yet) is evidence waiting
    to be acted on and stays whatever its age."""
    cutoff = retention_cutoff(days=settings.RETENTION_DAYS_INBOUND_NOTIFICATIONS, now=now)
    old = InboundNotification.objects.filter(received_at__lt=cutoff).exclude(status=InboundNotification.Status.RECEIVED)
    return delete_in_batches(old)
