"""The reservation of a refund the acquirer is still processing.

The money of a refund answered "processing" is the payer's already: it is
reserved at once (``refund_hold``, a debit), so the merchant cannot withdraw
it meanwhile. A failed refund releases it (``refund_release``, the credit
back); a refund that is done turns it into the refund: the transition to
``refunded`` releases the reservation and posts the refund's own debit in one
transaction, so the balance moves once. Like a refund, a reservation may
take the balance below zero (decisions §4): refunds are never refused for
want of balance.

Every change here runs under the charge's row lock, then the balance's (the
order of ``charge_transition``), in the transaction that changes the
:class:`~payments.models.ChargeRefund` row.
"""

from __future__ import annotations

import uuid

from django.db import transaction
from django.utils import timezone

from accounts.models import LedgerEntry
from accounts.services import ledger_post
from payments.models import Charge, ChargeRefund, ChargeStatus


def charge_refund_reserve(*, charge_id: uuid.UUID | str) -> bool:
    """Reserve the refund of a paid charge that its acquirer is processing.
    False, changing nothing, when the charge is no longer paid (the refund
    finished first, or a chargeback took the money) or its refund is already
    reserved (asked again)."""
    with transaction.atomic():
        charge = Charge.objects.select_for_update().get(pk=charge_id)
        if charge.status != ChargeStatus.PAID or charge.refunds.filter(status=ChargeRefund.Status.PROCESSING).exists():
            return False
        refund = ChargeRefund.objects.create(charge=charge, amount=charge.liquid_amount)
        ledger_post(
            account_id=charge.account_id,
            amount=-refund.amount,
            kind=LedgerEntry.Kind.REFUND_HOLD,
            reference=f"refund:{refund.pk}",
        )
    return True


def charge_refund_release(*, charge_id: uuid.UUID | str) -> bool:
    """The acquirer says the refund was not made: give the reserved amount
    back. False when nothing was reserved."""
    with transaction.atomic():
        charge = Charge.objects.select_for_update().get(pk=charge_id)
        return charge_refund_close(charge=charge, status=ChargeRefund.Status.FAILED)


def charge_refund_close(*, charge: Charge, status: str) -> bool:
    """End the charge's reserved refund, if any, with ``status``, giving its
    amount back. For callers already holding the charge's lock in their
    transaction: :func:`charge_refund_release`, and ``charge_transition`` when
    a charge leaves ``paid`` (refunded: the refund's own debit follows;
    charged back: the chargeback's does)."""
    refund = charge.refunds.select_for_update().filter(status=ChargeRefund.Status.PROCESSING).first()
    if refund is None:
        return False
    refund.status = status
    refund.finished_at = timezone.now()
    refund.save(update_fields=["status", "finished_at"])
    ledger_post(
        account_id=charge.account_id,
        amount=refund.amount,
        kind=LedgerEntry.Kind.REFUND_RELEASE,
        reference=f"refund:{refund.pk}",
    )
    return True
