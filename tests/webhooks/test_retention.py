"""Webhook attempts past their retention lose their response bodies (LGPD);
the rows stay as the delivery's history. Run by beat, daily."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import pytest
from django.conf import settings
from django.utils import timezone

from tests.factories import AccountFactory
from webhooks.models import EventType, WebhookAttempt, WebhookDelivery, WebhookEvent
from webhooks.retention import webhook_attempt_bodies_purge
from webhooks.tasks import purge_webhook_attempt_bodies

pytestmark = pytest.mark.django_db


def attempts_aged(*days: float) -> list[WebhookAttempt]:
    event = WebhookEvent.objects.create(
        account=AccountFactory(), event_type=EventType.TRANSACTION, record_id=uuid.uuid4(), status="paid", data={}
    )
    delivery = WebhookDelivery.objects.create(
        event=event, url="https://example.com/hook", status=WebhookDelivery.Status.FAILED
    )
    return [
        WebhookAttempt.objects.create(
            delivery=delivery,
            number=number,
            attempted_at=timezone.now() - dt.timedelta(days=age),
            status_code=500,
            latency_ms=10,
            response_body=f'{{"echo": "cpf 52998224725", "n": {number}}}',
            error="HTTP 500",
            succeeded=False,
        )
        for number, age in enumerate(days, start=1)
    ]


def test_old_attempt_bodies_are_blanked_and_recent_ones_kept(settings: Any) -> None:
    settings.RETENTION_DAYS_WEBHOOK_ATTEMPT_BODIES = 30
    old, older, recent = attempts_aged(30.01, 400, 29.9)

    assert webhook_attempt_bodies_purge() == 2

    rows = {a.pk: a for a in WebhookAttempt.objects.all()}
    assert set(rows) == {old.pk, older.pk, recent.pk}  # the history stays
    assert (rows[old.pk].response_body, rows[older.pk].response_body) == ("", "")
    assert rows[recent.pk].response_body == recent.response_body
    for attempt in (old, older):
        kept = rows[attempt.pk]
        assert (kept.status_code, kept.latency_ms, kept.error, kept.attempted_at) == (
            attempt.status_code,
            attempt.latency_ms,
            attempt.error,
            attempt.attempted_at,
        )
    assert webhook_attempt_bodies_purge() == 0


def test_the_retention_is_configurable(settings: Any) -> None:
    settings.RETENTION_DAYS_WEBHOOK_ATTEMPT_BODIES = 7
    [week_old] = attempts_aged(8)
    assert webhook_attempt_bodies_purge() == 1
    week_old.refresh_from_db()
    assert week_old.response_body == ""


def test_beat_runs_the_purge_daily() -> None:
    [entry] = [e for e in settings.CELERY_BEAT_SCHEDULE.values() if e["task"] == purge_webhook_attempt_bodies.name]
    assert float(entry["schedule"]) <= 86400  # type: ignore[arg-type]
    attempts_aged(settings.RETENTION_DAYS_WEBHOOK_ATTEMPT_BODIES + 1)
    assert purge_webhook_attempt_bodies() == 1
