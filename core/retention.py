"""Retention (LGPD): what beat purges, and how, for every app.

Each app owns its purge (``acquirers/retention.py``, ``webhooks/retention.py``,
``api/idempotency.py``); this holds what they share. Work goes in
batches, each its own short transaction, so a first run over years of rows
neither holds locks for long nor loses its progress to the task time limit.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db import models, transaction
from django.utils import timezone

BATCH = 1000


def retention_cutoff(*, days: int, now: dt.datetime | None = None) -> dt.datetime:
    """Rows older than this are past a retention of ``days`` days."""
    return (now or timezone.now()) - dt.timedelta(days=days)


def delete_in_batches(queryset: models.QuerySet[Any]) -> int:
    """Delete every row of ``queryset``; returns how many went."""
    total = 0
    while True:
        with transaction.atomic():
            ids = list(queryset.values_list("pk", flat=True)[:BATCH])
            if not ids:
                return total
            _, per_model = queryset.model._default_manager.filter(pk__in=ids).delete()
        total += per_model.get(queryset.model._meta.label, 0)


def update_in_batches(queryset: models.QuerySet[Any], **values: Any) -> int:
    """Apply ``values`` to every row of ``queryset`` (which must stop matching
    a row once updated); returns how many rows changed."""
    total = 0
    while True:
        with transaction.atomic():
            ids = list(queryset.values_list("pk", flat=True)[:BATCH])
            if not ids:
                return total
            total += queryset.model._default_manager.filter(pk__in=ids).update(**values)
