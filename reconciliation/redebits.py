"""The redébito of a refund the acquirer made after a chargeback: the payer
got the Pix back twice (by the MED and by the devolução), and the account is
debited what the payer got beyond the Pix, once a second staff member
approves (``accounts.approvals``, registered in :mod:`reconciliation.approvals`).

The request names the reconciliation item that holds the evidence (the
check of a released refund that found it made, or the day's listing): what
went back by MED and by refund (:func:`~reconciliation.items.repaid_excess`).
The debit is that excess pro rata to the charge's liquid amount, rounded down
to the centavo (never more than the evidence): the whole liquid amount when
the payer got the Pix twice.

One devolução is debited once. The devolução id is the charge's
(``D<charge>``), so the redébito is once per charge (ledger reference
``charge:<id>:refund-redebit``), and it closes the charge: a charge still in
``chargeback`` becomes ``refunded`` (the contract's chargeback → refunded,
no ledger effect) in the redébito's transaction. A refunded charge cannot be
refunded again, by API or by staff, nor resolved back to ``paid`` (which
would let a later refund, answered "done" for the same devolução, debit it a
second time). A charge refunded after its chargeback (a refund's answer, the
acquirer's notice, the MED completing: no refund debit was taken) may still
be redebited; one refunded from ``paid`` already paid its devolução."""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass

from django.core.exceptions import ValidationError
from django.db import transaction

from accounts.exceptions import ActionNotExecutable
from accounts.models import LedgerEntry
from accounts.services import ledger_post
from payments.exceptions import MED_OPEN
from payments.models import Charge, ChargeStatus, ChargeTransition
from payments.services import charge_transition
from reconciliation.items import repaid_excess
from reconciliation.models import ReconciliationItem

logger = logging.getLogger(__name__)

ALREADY_DEBITED = "O estorno desta cobrança já foi debitado."
NO_EXCESS = (
    "A adquirente não mostra o pagador recebendo mais que o valor do Pix (MED e estorno somados): não há o que debitar."
)


@dataclass(frozen=True)
class RedebitQuote:
    charge_id: uuid.UUID
    account_id: uuid.UUID
    amount: int  # centavos debited


def _item(item_id: str) -> ReconciliationItem:
    items = ReconciliationItem.objects.all()
    if transaction.get_connection().in_atomic_block:
        # Approving: the evidence quoted is the evidence debited (a run
        # refreshing the item meanwhile waits for the approval's commit).
        items = items.select_for_update()
    try:
        return items.get(
            pk=item_id, kind=ReconciliationItem.Kind.REFUNDED_THERE_CHARGEBACK_HERE, target_type="payments.charge"
        )
    except (ReconciliationItem.DoesNotExist, ValueError, ValidationError):
        raise ActionNotExecutable("Divergência de estorno após contestação não encontrada.") from None


def _reference(charge: Charge) -> str:
    return f"charge:{charge.pk}:refund-redebit"


def _refuse_unless_redebitable(charge: Charge) -> None:
    """A charge in chargeback, or refunded from it (no refund debit taken);
    never one an open MED infraction holds (it alone moves the charge: the
    debit would post while the charge stayed where it is)."""
    if charge.med_open:
        raise ActionNotExecutable(MED_OPEN)
    if charge.status == ChargeStatus.CHARGEBACK:
        return
    if charge.status == ChargeStatus.REFUNDED:
        came_from = (
            ChargeTransition.objects.filter(charge=charge, to_status=ChargeStatus.REFUNDED)
            .order_by("-id")
            .values_list("from_status", flat=True)
            .first()
        )
        if came_from == ChargeStatus.CHARGEBACK:
            return
        raise ActionNotExecutable("A cobrança foi estornada depois de paga: o estorno já debitou a devolução.")
    raise ActionNotExecutable(
        f"A cobrança está {ChargeStatus(charge.status).label}: só se debita o estorno de uma cobrança contestada, "
        "ou estornada depois da contestação."
    )


def refund_redebit_quote(*, item_id: str, charge: Charge | None = None) -> RedebitQuote:
    """What approving the redébito of ``item_id`` debits, and from whom;
    :class:`~accounts.exceptions.ActionNotExecutable` when nothing may be
    debited (the charge's state, no excess in the evidence, already debited).
    ``charge``: the charge, already locked by the caller."""
    item = _item(item_id)
    if charge is None:
        try:
            charge = Charge.objects.get(pk=item.target_id)
        except (Charge.DoesNotExist, ValidationError):
            raise ActionNotExecutable("Cobrança não encontrada.") from None
    _refuse_unless_redebitable(charge)
    if LedgerEntry.objects.filter(kind=LedgerEntry.Kind.CHARGE_REFUND, reference=_reference(charge)).exists():
        raise ActionNotExecutable(ALREADY_DEBITED)
    excess = repaid_excess(amount=charge.amount, by_med=item.returned_by_med, by_refund=item.returned_by_refund)
    # Pro rata to what the charge credited, rounded down: never more than the evidence.
    amount = excess * charge.liquid_amount // charge.amount
    if amount <= 0:
        raise ActionNotExecutable(NO_EXCESS)
    return RedebitQuote(charge_id=charge.pk, account_id=charge.account_id, amount=amount)


def charge_refund_redebit(*, item_id: str, actor: str, reason: str) -> int:
    """Carry out the approved redébito of ``item_id`` under the charge's lock
    then the balance's: the charge leaves ``chargeback`` for ``refunded``
    (if it has not yet) and the excess is debited (ledger ``charge_refund``),
    which like any refund may take the balance below zero (decisions §4).
    Returns the centavos debited; refused as :func:`refund_redebit_quote`."""
    target = _item(item_id).target_id
    with transaction.atomic():
        try:
            charge = Charge.objects.select_for_update().get(pk=target)
        except (Charge.DoesNotExist, ValidationError):
            raise ActionNotExecutable("Cobrança não encontrada.") from None
        quote = refund_redebit_quote(item_id=item_id, charge=charge)
        if charge.status == ChargeStatus.CHARGEBACK:
            # Closed with the debit: a refunded charge is never refunded again nor resolved to paid.
            charge_transition(
                charge_id=charge.pk,
                to_status=ChargeStatus.REFUNDED,
                source=ChargeTransition.Source.STAFF,
                actor=actor,
                only_from=(ChargeStatus.CHARGEBACK,),
            )
        entry = ledger_post(
            account_id=charge.account_id,
            amount=-quote.amount,
            kind=LedgerEntry.Kind.CHARGE_REFUND,
            reference=_reference(charge),
        )
        if entry is None:  # posted meanwhile: the lock makes this unreachable, the reference makes it safe
            raise ActionNotExecutable(ALREADY_DEBITED)
    logger.warning("refund of charge %s debited after its chargeback by %s: %s", charge.pk, actor, reason)
    return quote.amount
