"""A refund's reservation ends: its amount goes back to the balance. Called
by the refund's own answer (:func:`payments.refunds.charge_refund_release`)
and by ``charge_transition`` when a charge leaves ``paid``, so it sits
below both."""

from __future__ import annotations

from django.utils import timezone

from accounts.models import LedgerEntry
from accounts.services import ledger_post
from payments.models import Charge, ChargeRefund


def charge_refund_close(*, charge: Charge, status: str, failure_reason: str = "") -> bool:
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
    refund.failure_reason = failure_reason[:500]
    if status == ChargeRefund.Status.RELEASED:
        # The acquirer may still make it: asked about until it answers for good
        # (beat's sweep hands it to charge_refund_pursue).
        refund.release_check = ChargeRefund.ReleaseCheck.PENDING
    refund.save(update_fields=["status", "finished_at", "failure_reason", "release_check"])
    ledger_post(
        account_id=charge.account_id,
        amount=refund.amount,
        kind=LedgerEntry.Kind.REFUND_RELEASE,
        reference=f"refund:{refund.pk}",
    )
    return True
