"""The sandbox's payer (decisions §8): what ``POST
/api/sandbox/transactions/{id}/{action}`` does to a charge held by a sandbox
acquirer, shared with the demo bootstrap (provisioning.sandbox_charges), so
that a demo balance comes from a charge paid the way any sandbox charge is."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.utils import timezone

from acquirers import adapters
from acquirers.adapters.base import Notification, NotificationEvent
from acquirers.adapters.sandbox import SandboxAdapter, new_e2e_id
from core.redis import UNAVAILABLE as REDIS_UNAVAILABLE
from payments import exceptions as err
from payments.choices import ChargeKind
from payments.events import LATE_DETAIL, charge_event_apply
from payments.models import Charge

logger = logging.getLogger(__name__)

SANDBOX_EVENTS = {
    "pay": NotificationEvent.CHARGE_PAID,
    "fail": NotificationEvent.CHARGE_FAILED,
    "refund": NotificationEvent.CHARGE_REFUNDED,
    "chargeback": NotificationEvent.CHARGE_CHARGEBACK,
}


@dataclass(frozen=True)
class SandboxOutcome:
    charge: Charge
    #: A payment of a charge cancelled or failed here, recorded for staff.
    late: bool


def sandbox_charge_drive(*, charge: Charge, action: str) -> SandboxOutcome:
    """Apply ``action`` (a key of :data:`SANDBOX_EVENTS`) to a charge the
    sandbox drivers may move (``payments.selectors.sandbox_charge_get``), as
    the acquirer's notification would: the same ``charge_event_apply``,
    strict (:class:`~payments.exceptions.TransitionNotAllowed` when the
    status does not allow it; a repeat changes nothing)."""
    if action in ("pay", "fail") and charge.kind == ChargeKind.RECURRING:
        # Settled at the payer's bank, as the cobr says (the recurrences' sandbox routes drive it).
        raise err.TransitionNotAllowed(err.CYCLE_PAID_BY_PAYERS_BANK)
    sandbox = adapters.build(charge.acquirer)
    if action == "pay" and isinstance(sandbox, SandboxAdapter) and not _payable_there(sandbox, charge.txid):
        # Withdrawn at the sandbox (a cancel that reached it): no payer can pay it.
        raise err.TransitionNotAllowed(err.REMOVED_AT_ACQUIRER)
    notification = Notification(
        event=SANDBOX_EVENTS[action],
        reference=charge.txid,
        e2e_id=new_e2e_id() if action == "pay" else None,
    )
    applied = charge_event_apply(acquirer=None, notification=notification, source="sandbox", strict=True)
    charge.refresh_from_db()
    late = applied.detail == LATE_DETAIL
    # The sandbox keeps the Pix as a real PSP would: its evidence for
    # reconciliation (GET /pix's counterpart, SandboxAdapter.list_received).
    # The change is committed already: a sandbox that cannot keep its
    # record (Redis down) fails nothing; reconciliation then reports the
    # charge as paid here, unknown there, as it would for a real PSP.
    if isinstance(sandbox, SandboxAdapter):
        try:
            if action == "pay" and charge.e2e_id and charge.paid_at is not None:
                sandbox.receive(txid=charge.txid, amount=charge.amount, e2e_id=charge.e2e_id, at=charge.paid_at)
            elif action == "pay" and late and notification.e2e_id:
                sandbox.receive(txid=charge.txid, amount=charge.amount, e2e_id=notification.e2e_id, at=timezone.now())
            elif action == "refund":
                sandbox.received_refunded(charge.txid)
        except REDIS_UNAVAILABLE:
            logger.warning("sandbox: the Pix of charge %s was not recorded at the sandbox", charge.pk)
    return SandboxOutcome(charge=charge, late=late)


def _payable_there(sandbox: SandboxAdapter, txid: str) -> bool:
    """Whether the payer can still pay at the sandbox (marking it paid there)."""
    try:
        return sandbox.charge_paid(txid)
    except REDIS_UNAVAILABLE:
        logger.warning("sandbox: state of charge %s unknown (Redis); paid as asked", txid)
        return True
