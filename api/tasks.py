"""Project-wide periodic work."""

from __future__ import annotations

from celery import shared_task

from api.idempotency import idempotency_purge


@shared_task(ignore_result=True)
def purge_idempotency_keys() -> int:
    """Idempotency keys are kept 24 h (decisions §7)."""
    return idempotency_purge()
