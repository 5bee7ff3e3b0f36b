"""Background work towards acquirers."""

from __future__ import annotations

import logging

from celery import shared_task

from acquirers import calls
from acquirers.adapters.base import AdapterError
from acquirers.models import Acquirer
from acquirers.retention import inbound_notification_purge

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
    # The one guarded call: its deadline cut at the socket, a slot of the
    # reconcile pool and of the acquirer's cap, no connection held meanwhile.
    # No attempt row: best effort, retried by Celery on any adapter error
    # (busy, timeout, unavailable); anything else is a bug calls.call logged.
    done = calls.call(acquirer, "cancel_charge", lambda adapter: adapter.cancel_charge(txid))
    if done.error is not None:
        raise done.error
    logger.info("asked %s to cancel charge %s", acquirer.key, txid)


@shared_task(ignore_result=True)
def purge_inbound_notifications() -> int:
    """Beat, daily: notifications past their retention (LGPD)."""
    return inbound_notification_purge()
