"""Inbound notifications past their retention are deleted (LGPD: they hold
payer data), except one still waiting to be processed. Run by beat, daily."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.conf import settings
from django.utils import timezone

from acquirers.models import InboundNotification
from acquirers.retention import inbound_notification_purge
from acquirers.tasks import purge_inbound_notifications
from tests.factories import AcquirerFactory

Status = InboundNotification.Status
pytestmark = pytest.mark.django_db


def received(days_ago: float, status: str = Status.PROCESSED) -> InboundNotification:
    notification = InboundNotification.objects.create(
        acquirer=AcquirerFactory(key="retained"), headers={}, body='{"pix": [{"cpf": "52998224725"}]}', status=status
    )
    InboundNotification.objects.filter(pk=notification.pk).update(
        received_at=timezone.now() - dt.timedelta(days=days_ago)
    )
    return notification


def test_old_notifications_go_and_recent_ones_stay(settings: Any) -> None:
    settings.RETENTION_DAYS_INBOUND_NOTIFICATIONS = 90
    gone = [received(90.01), received(400, Status.REJECTED), received(91, Status.FAILED)]
    kept = [received(89.9), received(1, Status.REJECTED), received(365, Status.RECEIVED)]

    assert inbound_notification_purge() == len(gone)

    # One still "received" is evidence not acted on yet: kept whatever its age.
    assert set(InboundNotification.objects.values_list("pk", flat=True)) == {n.pk for n in kept}
    assert inbound_notification_purge() == 0


def test_the_retention_is_configurable(settings: Any) -> None:
    settings.RETENTION_DAYS_INBOUND_NOTIFICATIONS = 7
    week_old, fresh = received(8), received(6)
    assert inbound_notification_purge() == 1
    assert list(InboundNotification.objects.values_list("pk", flat=True)) == [fresh.pk]
    assert not InboundNotification.objects.filter(pk=week_old.pk).exists()


def test_beat_runs_the_purge_daily() -> None:
    [entry] = [e for e in settings.CELERY_BEAT_SCHEDULE.values() if e["task"] == purge_inbound_notifications.name]
    assert float(entry["schedule"]) <= 86400  # type: ignore[arg-type]
    received(settings.RETENTION_DAYS_INBOUND_NOTIFICATIONS + 1)
    assert purge_inbound_notifications() == 1
