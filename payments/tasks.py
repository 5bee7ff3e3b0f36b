"""Periodic work on charges (scheduled by beat)."""

from __future__ import annotations

import datetime as dt

from celery import shared_task

from payments.conversion import acquirers_conversion_measure
from payments.reconcile_acquirer import AlreadyRunning, acquirer_reconcile, reconcilable_acquirers, yesterday
from payments.reconcile_items import reconciliation_items_follow_approvals
from payments.reconciliation import charges_reconcile
from payments.services import charges_expire


@shared_task(acks_late=True)
def expire_charges() -> int:
    """Cancel pending charges past their account's expiry. Idempotent."""
    return charges_expire()


@shared_task(acks_late=True)
def reconcile_charges() -> int:
    """Ask acquirers that can answer (``GET /cob/{txid}``) about charges left
    pending, in case their notification was lost. Idempotent."""
    return charges_reconcile()


@shared_task(ignore_result=True)
def measure_acquirer_conversion() -> int:
    """Beat, every 10 minutes: the acquirer listing's measured conversion
    (payments.conversion). Idempotent: a run repeated measures the same."""
    return acquirers_conversion_measure()


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
