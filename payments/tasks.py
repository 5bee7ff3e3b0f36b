"""Periodic work on charges (scheduled by beat)."""

from __future__ import annotations

from celery import shared_task

from payments.services import charges_expire


@shared_task(acks_late=True)
def expire_charges() -> int:
    """Cancel pending charges past their account's expiry. Idempotent."""
    return charges_expire()
