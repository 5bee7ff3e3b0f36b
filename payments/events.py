"""What an acquirer's news does to a charge (``reference`` = our txid):
pushed (inbound notifications, through :mod:`acquirers.inbound`), pulled
(:mod:`payments.status_polling`) or driven by the sandbox. Applied through
:func:`payments.services.charge_transition`, like every change of status.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction

from acquirers.adapters.base import Notification, NotificationEvent
from acquirers.inbound import ApplyResult
from acquirers.models import Acquirer
from core.exceptions import PixServiceError
from payments import services
from payments.choices import ChargeKind
from payments.due_payments import components_from_raw
from payments.exceptions import ChargeNotFound
from payments.late_evidence import late_payment_returned_there, returned_record
from payments.late_payments import LATE_FROM, late_payment_record
from payments.models import Charge, ChargeStatus, LatePayment
from payments.reports import late_returned_report

# The chargeback rule, for the acquirer's news and staff alike:
#: A charge in any of these has been paid: news of a payment is late or
#: repeated, and must never undo a chargeback or credit twice.
PAID_ONCE = frozenset({ChargeStatus.PAID, ChargeStatus.CHARGEBACK, ChargeStatus.REFUNDED})
#: Only a charge in chargeback goes back to paid by resolving it (MED in the
#: account's favour), whoever resolves it.
CHARGEBACK_RESOLVABLE_FROM = frozenset({ChargeStatus.CHARGEBACK})


#: What a Pix for a cancelled (or failed) charge came to.
LATE_DETAIL = "late payment recorded for staff"
#: What a refund or chargeback of such a Pix came to.
LATE_RETURNED_DETAIL = "late payment returned to the payer at the acquirer"
#: The acquirer's word that a Pix went back to its payer (a devolução, a MED).
RETURNED_EVENTS = frozenset({NotificationEvent.CHARGE_REFUNDED, NotificationEvent.CHARGE_CHARGEBACK})


@dataclass(frozen=True)
class EventRule:
    """What an event asks of a charge: the status it moves to and, when the
    transition table allows more than the event may do, the statuses it may
    move from (from any other it is late news: ``late`` says so)."""

    to_status: ChargeStatus
    only_from: frozenset[str] | None = None
    late: str = ""


EVENT_RULES: dict[NotificationEvent, EventRule] = {
    NotificationEvent.CHARGE_PAID: EventRule(ChargeStatus.PAID, frozenset(ChargeStatus) - PAID_ONCE, "already paid"),
    NotificationEvent.CHARGE_FAILED: EventRule(ChargeStatus.FAILED),
    NotificationEvent.CHARGE_REFUNDED: EventRule(ChargeStatus.REFUNDED),
    NotificationEvent.CHARGE_CHARGEBACK: EventRule(ChargeStatus.CHARGEBACK),
    NotificationEvent.CHARGE_CHARGEBACK_RESOLVED: EventRule(
        ChargeStatus.PAID, CHARGEBACK_RESOLVABLE_FROM, "no open chargeback"
    ),
}


def charge_event_apply(
    *, acquirer: Acquirer | None, notification: Notification, source: str, strict: bool = False
) -> ApplyResult:
    """Apply one event to our charge. ``acquirer`` None means the caller
    already resolved ownership (sandbox, staff); otherwise a charge of
    another acquirer is unknown (:class:`ChargeNotFound`).

    A confirmation that comes too late (a charge already refunded or charged
    back) is news an acquirer may send and changes nothing; with ``strict``
    (the sandbox drivers, where a client asked for exactly this change) it is
    refused like any change the status does not allow. A repeat of the change
    that made the status is a no-op either way; so is a resolution with no
    chargeback open.

    A payment of a charge cancelled or failed here (the contract refuses
    those → paid) is recorded as a late payment for staff
    (:mod:`payments.late_payments`), never refused; so is the acquirer's
    word that such a payment went back to the payer (a refund or a MED:
    :func:`_late_returned`)."""
    charge = (
        Charge.objects.filter(txid=notification.reference).only("pk", "status", "acquirer_id", "amount", "kind").first()
    )
    if charge is None or (acquirer is not None and charge.acquirer_id != acquirer.pk):
        raise ChargeNotFound()
    if notification.event in RETURNED_EVENTS and charge.status in LATE_FROM and not strict:
        return _late_returned(charge, notification, source)
    if notification.event is NotificationEvent.CHARGE_PAID and charge.status not in PAID_ONCE:
        # Judged under the charge's lock, with the payment applied in the same
        # transaction: a cancel committing meanwhile cannot make this Pix a
        # refused transition (money lost); it makes it a late payment.
        with transaction.atomic():
            locked = Charge.objects.select_for_update().get(pk=charge.pk)
            if locked.status in LATE_FROM:
                return _late(locked, notification, source)
            return _apply(locked, notification, source, strict)
    return _apply(charge, notification, source, strict)


def _late(charge: Charge, notification: Notification, source: str) -> ApplyResult:
    """A Pix for a charge cancelled or failed here: recorded for staff, once per e2e id."""
    if not notification.e2e_id:
        raise PixServiceError("Pix recebido para cobrança cancelada sem e2e id: registre com a adquirente.")
    _, created = late_payment_record(
        charge=charge,
        e2e_id=notification.e2e_id,
        amount=notification.amount if notification.amount is not None else charge.amount,
        source=source,
        paid_at=notification.occurred_at,
        raw=notification.raw,
    )
    return ApplyResult(changed=created, detail=LATE_DETAIL)


def _late_returned(charge: Charge, notification: Notification, source: str) -> ApplyResult:
    """A refund or a chargeback (MED) of a charge cancelled or failed here:
    the late payment went back to the payer. Ours (its return), nothing
    new; otherwise recorded on it (never credited after this) and an item
    for staff (:mod:`payments.late_evidence`). No late payment it can name
    (its e2e id, else the charge's only one): refused, as before (the
    inbound notification shows it)."""
    lates = LatePayment.objects.filter(charge_id=charge.pk)
    if notification.e2e_id:
        lates = lates.filter(e2e_id=notification.e2e_id)
    found = list(lates[:2])
    if len(found) != 1:  # none recorded, or several and the news names none of them
        raise PixServiceError("Devolução ou contestação de cobrança cancelada sem pagamento registrado.")
    late = found[0]
    record = returned_record(
        charge=charge, e2e_id=late.e2e_id, amount=late.amount, returned=notification.amount, raw=notification.raw
    )
    noted = late_payment_returned_there(record=record, source=source)
    if not noted.news:
        return ApplyResult(changed=False, detail=LATE_RETURNED_DETAIL)
    late_returned_report(charge=charge, record=record, noted=noted)
    return ApplyResult(changed=True, detail=LATE_RETURNED_DETAIL)


def _apply(charge: Charge, notification: Notification, source: str, strict: bool) -> ApplyResult:
    event = notification.event
    due = charge.kind == ChargeKind.DUE
    if (
        event is NotificationEvent.CHARGE_PAID
        and notification.amount is not None
        and notification.amount != charge.amount
        and not due
    ):
        # Immediate charges have a fixed value: another amount is for staff, never credited as is.
        # A due-date charge's depends on the day: what was paid is credited (payments.due_payments).
        raise PixServiceError(f"Valor pago ({notification.amount}) difere do valor da cobrança ({charge.amount}).")
    rule = EVENT_RULES.get(event)
    if rule is None:
        raise PixServiceError(f"Evento não suportado: {event}.")
    if rule.only_from is not None and charge.status not in rule.only_from:
        # A fast path, read without the lock; charge_transition judges
        # only_from again under the charge's lock.
        refused_below = strict and event is NotificationEvent.CHARGE_PAID and charge.status != rule.to_status
        if not refused_below:
            return ApplyResult(changed=False, detail=rule.late)
    changed = services.charge_transition(
        charge_id=charge.pk,
        to_status=rule.to_status,
        source=source,
        e2e_id=notification.e2e_id,
        paid_at=notification.occurred_at,
        only_from=rule.only_from,
        strict=strict,
        paid_amount=notification.amount if due else None,
        components=components_from_raw(notification.raw) if due else None,
    )
    return ApplyResult(changed=changed)
