"""Periodic work on charges (scheduled by beat)."""

from __future__ import annotations

from celery import shared_task

from payments.conversion import acquirers_conversion_measure
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
