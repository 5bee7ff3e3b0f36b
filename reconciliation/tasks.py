"""Reconciliation with acquirers in the background: beat's daily entry
(yesterday, for every acquirer that lists) and one task per acquirer and day."""

from __future__ import annotations

import datetime as dt

from celery import shared_task

from reconciliation.items import reconciliation_items_follow_approvals
from reconciliation.run import AlreadyRunning, acquirer_reconcile, reconcilable_acquirers, yesterday


# Every page of a day's listings, each under the acquirer's deadline: longer
# than the default limits allow (a run cut short is recorded as failed).
@shared_task(acks_late=True, soft_time_limit=1500, time_limit=1620)
def reconcile_acquirer_day(acquirer_id: int, day: str) -> str:
    """Reconcile one acquirer's day (``YYYY-MM-DD``, America/Sao_Paulo) with
    its listings. Idempotent: a rerun heals nothing twice, adds no item
    twice; a day another process is reconciling is left to it."""
    try:
        run = acquirer_reconcile(acquirer_id=acquirer_id, day=dt.date.fromisoformat(day))
    except AlreadyRunning:
        return "already running"
    return str(run.status)


@shared_task(acks_late=True)
def reconcile_acquirers_yesterday() -> int:
    """Beat's daily entry: one task per enabled acquirer with listings, for
    yesterday (America/Sao_Paulo). Returns how many were enqueued."""
    reconciliation_items_follow_approvals()
    day = yesterday().isoformat()
    acquirers = reconcilable_acquirers()
    for acquirer in acquirers:
        reconcile_acquirer_day.delay(acquirer.pk, day)
    return len(acquirers)
