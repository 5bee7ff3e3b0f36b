"""Background work towards acquirers."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from celery import shared_task

from acquirers import adapters, calls
from acquirers.adapters.base import AcquirerAdapter, AdapterError, Capability, InvalidOptions
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
    charge it may have created, so a payer never holds two live codes. No
    charge row exists here (the client never got it): a cancel of a charge
    we keep is ``payments.cancellation``'s, tracked until the answer is known.
    An adapter that cannot cancel leaves its own expiry to stop the payer."""
    _withdraw(acquirer_id, txid, "cancel", "cancel_charge", lambda adapter: adapter.cancel_charge(txid))


@shared_task(
    bind=True,
    autoretry_for=(AdapterError,),
    retry_backoff=5,
    retry_backoff_max=300,
    max_retries=8,
    acks_late=True,
)
def cancel_due_charge_at_acquirer(self: object, acquirer_id: int, txid: str) -> None:
    """:func:`cancel_charge_at_acquirer` for a due-date charge (cobv) whose
    creation was abandoned at an acquirer that timed out or answered badly
    while another took it: its ``cancel_due_charge``. Paid there meanwhile
    (CONCLUIDA), the Pix is reconciliation's to find, as a charge's is."""
    _withdraw(acquirer_id, txid, "due_charge", "cancel_due_charge", lambda adapter: adapter.cancel_due_charge(txid))


def _withdraw(
    acquirer_id: int, txid: str, capability: Capability, operation: str, func: Callable[[AcquirerAdapter], Any]
) -> None:
    acquirer = Acquirer.objects.filter(pk=acquirer_id).first()
    if acquirer is None:
        return
    try:
        if not adapters.adapter_class(acquirer.adapter).supports(capability):
            return
    except InvalidOptions:
        return  # an adapter this process lacks: nothing to call
    # The one guarded call: its deadline cut at the socket, a slot of the
    # reconcile pool and of the acquirer's cap, no connection held meanwhile.
    # No attempt row: best effort, retried by Celery on any adapter error
    # (busy, timeout, unavailable); anything else is a bug calls.call logged.
    done = calls.call(acquirer, operation, func)
    if done.error is not None:
        raise done.error
    logger.info("asked %s to %s %s", acquirer.key, operation.replace("_", " "), txid)


@shared_task(ignore_result=True)
def purge_inbound_notifications() -> int:
    """Beat, daily: notifications past their retention (LGPD)."""
    return inbound_notification_purge()
