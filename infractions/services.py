"""Writes for infractions: what an acquirer's record of a MED infraction does
to the merchant's money, and the merchant's defence.

Every movement rests on evidence: an acquirer's record
(:class:`~acquirers.adapters.base.InfractionRecord`, from its listing) or a
record staff registered and a second staff member approved. Each change
runs in one transaction, locks in one order (the infraction, its charge,
the account's balance) and posts its ledger entries with the state change:

- **opened with a block** on a paid charge: the charge goes ``paid →
  chargeback`` (the contract's "dispute opened"), and the block,
  ``min(blocked, liquid_amount)``, is mirrored on the balance: what the
  balance covers is debited (``med_hold``), the rest is kept back from
  withdrawals and refunds (``AccountBalance.hold_uncovered``): a block
  never takes the balance below zero by itself;
- **rejected / canceled**: the covered part is credited back
  (``med_hold_release``), the kept-back part freed, the charge ``chargeback
  → paid``;
- **accepted** (the money went back to the payer): the block is released
  as above and the merchant's share of the return, ``min(returned,
  liquid_amount)``, debited (``med_return``, which may take the balance
  below zero, as a chargeback may: decisions §4); the charge becomes
  ``refunded``. A later, larger return (MED 2.0 follows the money) debits
  the difference.

An infraction without a block marks its charge all the same
(``med_open``): no refund starts and no other change moves it until the
infraction closes. Docs: docs/api/infractions.md.
"""

from __future__ import annotations

import datetime as dt
import logging
import uuid

from django.db import IntegrityError, transaction
from django.db.models import Sum
from django.utils import timezone

from accounts.models import LedgerEntry
from accounts.services import balance_holds_move, balance_lock, ledger_post
from acquirers.adapters.base import InfractionRecord
from acquirers.adapters.base import InfractionStatus as RecordStatus
from acquirers.models import Acquirer
from infractions.choices import CLOSED, InfractionSource, InfractionStatus
from infractions.models import Infraction
from infractions.payloads import infraction_payload
from payments.choices import ChargeSource
from payments.models import Charge, ChargeRefund, ChargeStatus
from payments.services import charge_transition
from webhooks.models import EventType
from webhooks.services import event_emit

logger = logging.getLogger(__name__)

#: The acquirer's status → ours (the same names).
_STATUS = {
    RecordStatus.OPEN: InfractionStatus.OPEN,
    RecordStatus.IN_DEFENSE: InfractionStatus.IN_DEFENSE,
    RecordStatus.ACCEPTED: InfractionStatus.ACCEPTED,
    RecordStatus.REJECTED: InfractionStatus.REJECTED,
    RecordStatus.CANCELED: InfractionStatus.CANCELED,
}


class Event:
    """The statuses of ``infraction`` webhook events (``infraction.<status>``)."""

    OPENED = "opened"
    DEADLINE = "deadline"
    CLOSED = "closed"
    #: More money went back after the close (MED 2.0 follows the money): debited now.
    RETURNED = "returned"


def infraction_emit(infraction: Infraction, status: str, **extra: object) -> None:
    """The ``infraction.<status>`` webhook, in the caller's transaction. An
    infraction no account owns (its Pix matched no charge) tells no one."""
    if infraction.account_id is None:
        return
    event_emit(
        account_id=infraction.account_id,
        event_type=EventType.INFRACTION,
        record_id=infraction.pk,
        status=status,
        data={"event": f"infraction.{status}", **infraction_payload(infraction), **extra},
    )


# --------------------------------------------------------------------------- the acquirer's record


def infraction_apply(
    *, acquirer: Acquirer, record: InfractionRecord, source: str = InfractionSource.ACQUIRER, actor: str = ""
) -> Infraction:
    """Apply the acquirer's record of one infraction: the first sight opens
    it (and its block), later ones follow its status to the close. The same
    record applied again changes nothing (one infraction per ``(acquirer,
    external_id)``; every entry's reference is the infraction's)."""
    if record.amount <= 0 or not record.external_id or not record.e2e_id:
        raise ValueError(f"unusable infraction record {record.external_id!r}")
    # The e2e id names one Pix (charge_unique_e2e), whichever acquirer of
    # ours took the charge: Efí lists infractions on its ``efi_pix`` acquirer
    # while the Pix was received through its API Pix one (``bacen_pix``).
    charge = Charge.objects.filter(e2e_id=record.e2e_id).only("pk").first()
    for attempt in range(2):
        try:
            with transaction.atomic():
                infraction = (
                    Infraction.objects.select_for_update()
                    .filter(acquirer=acquirer, external_id=record.external_id)
                    .first()
                )
                if infraction is None:
                    infraction = _open(acquirer, record, charge.pk if charge else None, source, actor)
                elif infraction.charge_id is None and charge is not None and not infraction.is_closed:
                    # Seen before its Pix was recorded here: linked now.
                    _link(infraction, charge.pk, source, actor)
                _follow(infraction, record, actor)
                return infraction
        except IntegrityError:
            # Seen at the same moment by the poller and a notification: the
            # other one created it; read it again (once).
            if attempt:
                raise
    raise AssertionError("unreachable")


def _source(source: str) -> str:
    return ChargeSource.STAFF if source == InfractionSource.STAFF else ChargeSource.ACQUIRER


def _open(
    acquirer: Acquirer, record: InfractionRecord, charge_id: uuid.UUID | None, source: str, actor: str
) -> Infraction:
    infraction = Infraction.objects.create(
        acquirer=acquirer,
        external_id=record.external_id[:100],
        e2e_id=record.e2e_id[:64],
        status=InfractionStatus.IN_DEFENSE if record.status == RecordStatus.IN_DEFENSE else InfractionStatus.OPEN,
        source=source,
        reason=record.reason[:500],
        amount=record.amount,
        blocked_amount=max(0, min(record.blocked_amount, record.amount)),
        opened_at=record.opened_at or timezone.now(),
        defense_deadline=record.defense_deadline,
        raw=dict(record.raw),
    )
    if charge_id is None:
        infraction.note = "O Pix contestado não corresponde a nenhuma cobrança: nada foi bloqueado."
        infraction.save()
        return infraction
    _link(infraction, charge_id, source, actor)
    return infraction


def _link(infraction: Infraction, charge_id: uuid.UUID, source: str, actor: str) -> None:
    """Tie the infraction to the charge its Pix paid, and block its money:
    when it opens, or later, once the charge's payment is recorded here (a
    lost notification reconciled since: the infraction came first)."""
    charge = Charge.objects.select_for_update().get(pk=charge_id)
    infraction.account_id, infraction.charge = charge.account_id, charge
    infraction.note = ""
    if charge.med_open:
        infraction.note = "Outra infração já suspende esta cobrança: nada mais foi bloqueado."
    elif charge.status != ChargeStatus.PAID:
        infraction.note = (
            f"A cobrança estava {ChargeStatus(charge.status).label.lower()} quando a infração chegou: "
            "nada foi bloqueado."
        )
    elif charge.refunds.filter(status=ChargeRefund.Status.PROCESSING).exists():
        # A refund in flight already keeps the money back and the acquirer may
        # be making it: it goes on as it would (releasing its reservation for
        # a block would leave a devolução made meanwhile with nothing to debit).
        infraction.note = "Estorno em processamento: a reserva dele já retém o valor; nada foi bloqueado."
    else:
        infraction.holds_charge = True
        target = min(infraction.blocked_amount, charge.liquid_amount)
        if target > 0:
            charge_transition(
                charge_id=charge.pk,
                to_status=ChargeStatus.CHARGEBACK,
                source=_source(source),
                actor=actor,
                med=lambda locked: _hold(infraction, locked, target),
            )
        else:
            # No block (nothing was left at the acquirer): the charge is marked, its money untouched.
            Charge.objects.filter(pk=charge.pk).update(med_open=True, updated_at=timezone.now())
    infraction.save()
    infraction_emit(infraction, Event.OPENED)


def _hold(infraction: Infraction, charge: Charge, target: int) -> None:
    """The block on the balance: what it covers debited, the rest kept back."""
    balance = balance_lock(account_id=charge.account_id)
    covered = min(target, max(balance.available, 0))
    if covered:
        ledger_post(
            account_id=charge.account_id,
            amount=-covered,
            kind=LedgerEntry.Kind.MED_HOLD,
            reference=f"infraction:{infraction.pk}:hold",
            locked=balance,
        )
    balance_holds_move(balance=balance, held=target, uncovered=target - covered)
    infraction.hold, infraction.hold_covered = target, covered
    charge.med_open = True


def _follow(infraction: Infraction, record: InfractionRecord, actor: str) -> None:
    """What changed at the acquirer since we last looked."""
    status = _STATUS[record.status]
    if infraction.is_closed:
        if status == InfractionStatus.ACCEPTED and infraction.status == InfractionStatus.ACCEPTED:
            _return_more(infraction, record.returned_amount)
        return
    fields: list[str] = []
    if record.defense_deadline is not None and record.defense_deadline != infraction.defense_deadline:
        infraction.defense_deadline = record.defense_deadline
        fields.append("defense_deadline")
    if status == InfractionStatus.IN_DEFENSE and infraction.status == InfractionStatus.OPEN:
        infraction.status = status
        fields.append("status")
    if fields:
        infraction.save(update_fields=[*fields, "updated_at"])
    if status in CLOSED:
        infraction_close(
            infraction=infraction,
            status=status,
            returned=record.returned_amount,
            closed_at=record.closed_at,
            actor=actor,
        )


def infraction_close(
    *,
    infraction: Infraction,
    status: str,
    returned: int,
    closed_at: dt.datetime | None = None,
    actor: str = "",
    source: str = ChargeSource.ACQUIRER,
) -> None:
    """Close ``infraction`` (locked by the caller, in its transaction) with
    ``status``; ``returned``: what went back to the payer (accepted only).
    ``source``: who the charge's change is recorded as coming from (staff,
    for a close a second staff member approved)."""
    returned = max(0, returned) if status == InfractionStatus.ACCEPTED else 0
    charge = Charge.objects.select_for_update().get(pk=infraction.charge_id) if infraction.charge_id else None
    share = others = 0
    if charge is not None and infraction.holds_charge:
        others = _debited_by_others(infraction)
        share = max(0, min(returned, charge.liquid_amount - others))
    infraction.returned_amount = returned
    if charge is not None and infraction.holds_charge:

        def settle(locked: Charge) -> None:
            _settle(infraction, locked, share)

        if share > 0 or others > 0:
            # Something of its Pix went back (by this infraction, or by another
            # one while this one held it): the charge is refunded.
            charge_transition(
                charge_id=charge.pk,
                to_status=ChargeStatus.REFUNDED,
                source=source,
                actor=actor,
                med=settle,
            )
        elif charge.status == ChargeStatus.CHARGEBACK:
            charge_transition(
                charge_id=charge.pk,
                to_status=ChargeStatus.PAID,
                source=source,
                actor=actor,
                med=settle,
            )
        else:  # paid, no block: nothing returned, the mark goes
            settle(charge)
            charge.save(update_fields=["med_open", "updated_at"])
    elif returned > 0:
        infraction.note = (
            "Devolvido ao pagador sem bloqueio nesta cobrança: a conta não foi debitada; a equipe decide."
        )[:300]
        logger.warning("infraction %s: returned %s with no block of its own", infraction.pk, returned)
    infraction.status = status
    infraction.closed_at = closed_at or timezone.now()
    infraction.save()
    infraction_emit(infraction, Event.CLOSED)


def _settle(infraction: Infraction, charge: Charge, share: int) -> None:
    """Release the block and debit the merchant's share of the return."""
    balance = balance_lock(account_id=charge.account_id)
    if infraction.hold_covered:
        ledger_post(
            account_id=charge.account_id,
            amount=infraction.hold_covered,
            kind=LedgerEntry.Kind.MED_HOLD_RELEASE,
            reference=f"infraction:{infraction.pk}:release",
            locked=balance,
        )
    balance_holds_move(balance=balance, held=-infraction.hold, uncovered=-infraction.hold_uncovered)
    infraction.hold_released = True
    if share > 0:
        ledger_post(
            account_id=charge.account_id,
            amount=-share,
            kind=LedgerEntry.Kind.MED_RETURN,
            reference=f"infraction:{infraction.pk}:returned:{share}",
            locked=balance,
        )
        infraction.debited_amount = share
    charge.med_open = False


def _return_more(infraction: Infraction, returned: int) -> None:
    """A larger return reported after the close: the difference is debited."""
    if returned <= infraction.returned_amount:
        return
    infraction.returned_amount = returned
    if infraction.holds_charge and infraction.charge_id is not None:
        charge = Charge.objects.select_for_update().get(pk=infraction.charge_id)
        others = _debited_by_others(infraction)
        share = max(infraction.debited_amount, min(returned, charge.liquid_amount - others))

        def debit(locked: Charge) -> None:
            ledger_post(
                account_id=locked.account_id,
                amount=-(share - infraction.debited_amount),
                kind=LedgerEntry.Kind.MED_RETURN,
                reference=f"infraction:{infraction.pk}:returned:{share}",
            )
            infraction.debited_amount = share

        if share > infraction.debited_amount and charge.status == ChargeStatus.PAID and not charge.med_open:
            # Accepted before any money went back, the charge was paid again:
            # now its money is gone, so it is refunded (no refund of it may
            # take the same money a second time).
            charge_transition(
                charge_id=charge.pk, to_status=ChargeStatus.REFUNDED, source=ChargeSource.ACQUIRER, med=debit
            )
        elif share > infraction.debited_amount and (
            charge.med_open or (charge.status == ChargeStatus.REFUNDED and infraction.debited_amount + others > 0)
        ):
            # Another infraction holds the charge (it moves with that one), or
            # a MED return refunded it: the same Pix, capped per charge above.
            debit(charge)
        elif share > infraction.debited_amount:
            # Refunded or charged back another way meanwhile: that debit took
            # the money already. Staff decide with the acquirer's evidence.
            infraction.note = "Devolução posterior sem débito automático: a cobrança já tinha outro desfecho."
    infraction.save(update_fields=["returned_amount", "debited_amount", "note", "updated_at"])
    infraction_emit(infraction, Event.RETURNED)


def _debited_by_others(infraction: Infraction) -> int:
    """What the charge's other infractions debited for their returns: with
    this one's, never more than the charge's ``liquid_amount`` (one Pix,
    credited once, returned at most once in all)."""
    others = Infraction.objects.filter(charge=infraction.charge).exclude(pk=infraction.pk)
    return int(others.aggregate(total=Sum("debited_amount"))["total"] or 0)
