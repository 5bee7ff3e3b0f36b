"""Background work towards acquirers."""

from __future__ import annotations

import logging

from celery import shared_task

from acquirers import adapters
from acquirers.adapters.base import AdapterError
from acquirers.models import Acquirer
from acquirers.retention import inbound_notification_purge
from core import db

logger = logging.getLogger(__name__)


@shared_task(
    bind=True,
    autoretry_for=(AdapterError,),
    retry_backoff=5,
    retry_backoff_max=300,
    max_retries=8,
    acks_late=True,
)
def cancel_charge_at_acquirer(self: object, acquirer_id: int, txid: str) -> None:
    """Best effort, idempotent: ask an acquirer that timed out to withdraw the
    charge it may have created, so a payer never holds two live codes."""
    acquirer = Acquirer.objects.filter(pk=acquirer_id).first()
    if acquirer is None:
        return
    adapter = adapters.build(acquirer)
    # Not through calls.call (no breaker, no attempt row: best effort, retried
    # by Celery), but the same rule: no connection held while the PSP answers.
    db.release_connections(before=f"acquirer {acquirer.key} cancel_charge")
    adapter.cancel_charge(txid)
    logger.info("asked %s to cancel charge %s", acquirer.key, txid)


@shared_task(ignore_result=True)
def purge_inbound_notifications() -> int:
    """Beat, daily: notifications past their retention (LGPD)."""
    return inbound_notification_purge()
