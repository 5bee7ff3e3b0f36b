"""Refunds of charges: asked of the acquirer, and the reservation of a
refund the acquirer is still processing.

:func:`charge_refund` asks the charge's acquirer to return the Pix (a
devolução) and applies ``refunded`` once it says the money went back.

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

import enum
import uuid

from django.db import transaction
from django.utils import timezone

from accounts.models import LedgerEntry
from accounts.services import ledger_post
from acquirers import adapters, calls
from acquirers.adapters.base import AdapterError, RefundRequest, RefundStatus
from payments.exceptions import RefundFailed, TransitionNotAllowed
from payments.models import Charge, ChargeRefund, ChargeStatus, ChargeTransition


class RefundOutcome(enum.StrEnum):
    REFUNDED = "refunded"  # the acquirer returned the money; the charge is refunded
    PROCESSING = "processing"  # asked; the acquirer's callback (or asking again) finishes it
    MARKED = "marked"  # no money to move at the acquirer: marked refunded here only


def refund_id_for(charge_id: uuid.UUID | str) -> str:
    """The devolução id of a charge's full refund: derived from the charge, so
    asking again names the same devolução (idempotent at the acquirer)."""
    return "D" + uuid.UUID(str(charge_id)).hex


def charge_refund(*, charge_id: uuid.UUID | str, actor: str, reason: str = "") -> RefundOutcome:
    """Refund a paid charge: ask its acquirer to return the Pix (when the
    adapter can) and apply ``refunded`` once the acquirer says it is done.
    Asking again for the same charge is idempotent and reports the current
    state. A charge in chargeback (MED already returned the money), or at an
    acquirer without refunds, is only marked refunded. A refund the acquirer
    is still processing reserves its amount at once
    (:func:`charge_refund_reserve`); a failed one gives it back. Never refused
    for want of balance: a refund may take it below zero (decisions §4)."""
    # services imports this module (a transition out of "paid" closes the
    # reservation): it is reached at call time, not at import.
    from payments import services

    charge = Charge.objects.select_related("acquirer").get(pk=charge_id)
    if charge.status not in (ChargeStatus.PAID, ChargeStatus.CHARGEBACK):
        raise TransitionNotAllowed("Só cobranças pagas ou contestadas podem ser estornadas.")
    try:
        adapter = adapters.build(charge.acquirer)
    except AdapterError as exc:  # an adapter this process lacks (the sandbox, switched off)
        raise RefundFailed(f"Adquirente indisponível para a devolução: {exc}"[:500]) from exc

    def mark() -> None:
        services.charge_transition(
            charge_id=charge.pk, to_status=ChargeStatus.REFUNDED, source=ChargeTransition.Source.STAFF, actor=actor
        )

    if charge.status == ChargeStatus.CHARGEBACK or not adapter.supports_refund:
        mark()
        return RefundOutcome.MARKED
    if not charge.e2e_id:
        raise RefundFailed("Cobrança paga sem e2e id: a devolução não pode ser pedida à adquirente.")
    request = RefundRequest(
        charge_id=charge.pk,
        txid=charge.txid,
        e2e_id=charge.e2e_id,
        refund_id=refund_id_for(charge.pk),
        amount=charge.amount,
        reason=reason,
    )
    # The one guarded call: deadline, outcome, latency metric and breaker as
    # for a charge or a payout.
    call = calls.call(charge.acquirer, "refund", lambda adapter: adapter.refund_charge(request))
    if call.result is None:
        raise RefundFailed(f"Adquirente indisponível para a devolução: {call.error}"[:500]) from call.error
    result = call.result
    if result.status is RefundStatus.FAILED:
        charge_refund_release(charge_id=charge.pk)  # the reservation of an earlier "processing", if any
        raise RefundFailed(f"Devolução não realizada pela adquirente: {result.reason or 'sem motivo'}"[:500])
    if result.status is RefundStatus.PROCESSING:
        # The money is the payer's already: reserved now, so it cannot be
        # withdrawn while the acquirer finishes (its callback, or asking again).
        charge_refund_reserve(charge_id=charge.pk)
        return RefundOutcome.PROCESSING
    mark()
    return RefundOutcome.REFUNDED


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
