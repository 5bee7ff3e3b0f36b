"""Charge actions that move an account's money only after a second staff
member approves them (``accounts.approvals``): resolving a chargeback in the
account's favour (a credit), staff's refund of a paid charge (the
merchant's money goes to the payer, whom an insider can be) and a Pix paid
after the cancel (credited, or returned to its payer). The redébito of a
refund the acquirer made after a chargeback names a reconciliation item:
:mod:`reconciliation.approvals`."""

from __future__ import annotations

from collections.abc import Callable

from django.core.exceptions import ValidationError
from django.db import transaction

from accounts import approvals
from accounts.exceptions import ActionNotExecutable
from accounts.models import MoneyActionRequest
from acquirers import adapters
from acquirers.adapters.base import AdapterError, InvalidOptions
from core.documents import format_document
from payments import exceptions as err
from payments import refunds
from payments.events import CHARGEBACK_RESOLVABLE_FROM
from payments.exceptions import TransitionNotAllowed
from payments.late_evidence import late_credit_refusal
from payments.late_payments import (
    LatePaymentNotOpen,
    LatePaymentReturnedThere,
    late_payment_credit,
    late_payment_return,
)
from payments.models import Charge, ChargeRefund, ChargeStatus, ChargeTransition, LatePayment
from payments.services import charge_transition


def _charge(target_id: str) -> Charge:
    try:
        return Charge.objects.only("pk", "status", "account_id", "liquid_amount", "med_open").get(pk=target_id)
    except (Charge.DoesNotExist, ValidationError):
        raise ActionNotExecutable("Cobrança não encontrada.") from None


def _quote_resolution(target_id: str) -> approvals.Quote:
    charge = _charge(target_id)
    if charge.status not in CHARGEBACK_RESOLVABLE_FROM:
        raise ActionNotExecutable(f"A cobrança está {ChargeStatus(charge.status).label}, não em contestação.")
    if charge.med_open:
        # Quoted again at approval: an infraction that opened meanwhile stops it.
        raise ActionNotExecutable(err.MED_OPEN)
    return approvals.Quote(account_id=charge.account_id, amount=charge.liquid_amount)


def _resolve(target_id: str, actor: str, reason: str) -> None:
    try:
        changed = charge_transition(
            charge_id=target_id,
            to_status=ChargeStatus.PAID,
            source=ChargeTransition.Source.STAFF,
            actor=actor,
            # Judged under the charge's lock: only a charge still in chargeback is credited.
            only_from=CHARGEBACK_RESOLVABLE_FROM,
        )
    except TransitionNotAllowed as exc:
        raise ActionNotExecutable(exc.message) from exc
    if not changed:
        raise ActionNotExecutable("A cobrança não está mais em contestação.")


def _late_payment(target_id: str) -> LatePayment:
    try:
        late = LatePayment.objects.select_related("acquirer").get(pk=target_id)
    except (LatePayment.DoesNotExist, ValueError, ValidationError):
        raise ActionNotExecutable("Pagamento após cancelamento não encontrado.") from None
    if late.status != LatePayment.Status.OPEN:
        raise ActionNotExecutable(f"Este pagamento já está {late.get_status_display().lower()}.")
    return late


def _quote_late_credit(target_id: str) -> approvals.Quote:
    late = _late_payment(target_id)
    if late.liquid_amount <= 0:
        raise ActionNotExecutable("O valor recebido não cobre a taxa: não há o que creditar; devolva ao pagador.")
    if refusal := late_credit_refusal(late):
        raise ActionNotExecutable(refusal)
    return approvals.Quote(account_id=late.account_id, amount=late.liquid_amount)


def _quote_late_return(target_id: str) -> approvals.Quote:
    late = _late_payment(target_id)
    try:
        can_return = adapters.adapter_class(late.acquirer.adapter).supports_refund
    except InvalidOptions:
        can_return = False
    if not can_return:
        raise ActionNotExecutable("A adquirente não faz devoluções por aqui: devolva com ela, ou credite a conta.")
    # Nothing is credited: the amount is the Pix that goes back to the payer.
    return approvals.Quote(account_id=late.account_id, amount=late.amount)


def _resolving(resolve: Callable[..., object]) -> Callable[[str, str, str], None]:
    def perform(target_id: str, actor: str, reason: str) -> None:
        try:
            resolve(late_payment_id=target_id, actor=actor, reason=reason)
        except (LatePaymentNotOpen, LatePaymentReturnedThere) as exc:
            raise ActionNotExecutable(exc.message) from exc

    return perform


def _quote_refund(target_id: str) -> approvals.Quote:
    charge = _charge(target_id)
    if charge.status != ChargeStatus.PAID:
        raise ActionNotExecutable(err.REFUND_NOT_PAID.format(status=ChargeStatus(charge.status).label.lower()))
    if charge.med_open:
        # Quoted again at approval: asked before an infraction opened, it must not send the money twice.
        raise ActionNotExecutable(err.REFUND_MED_OPEN)
    statuses = set(charge.refunds.values_list("status", flat=True))
    if ChargeRefund.Status.PROCESSING in statuses:
        raise ActionNotExecutable(err.REFUND_IN_PROGRESS)
    if ChargeRefund.Status.FAILED in statuses:
        # The devolução id is the charge's: asking again would get the same "not made".
        raise ActionNotExecutable(err.REFUND_ALREADY_FAILED)
    # What the account is debited: the charge's liquid amount (decisions §4).
    return approvals.Quote(account_id=charge.account_id, amount=charge.liquid_amount)


#: A devolução goes back to the account the Pix came from, which the acquirer
#: knows; what this platform can show the approver is who the records name.
_RETURNED = "a devolução volta à conta que pagou o Pix"


def _refund_destination(target_id: str) -> str:
    try:
        charge = Charge.objects.only("buyer_name", "buyer_document").get(pk=target_id)
    except (Charge.DoesNotExist, ValidationError):
        return "Cobrança não encontrada."
    document = charge.buyer_document
    kind = "CPF" if len(document) == 11 else "CNPJ" if len(document) == 14 else "Documento"
    shown = f"{kind} {format_document(document)}" if document else "documento não informado"
    return f"Ao pagador: {charge.buyer_name or 'nome não informado'}, {shown} (como a cobrança o informa; {_RETURNED})"


def _late_return_destination(target_id: str) -> str:
    late = LatePayment.objects.filter(pk=target_id).only("payer_info").first() if target_id.isdigit() else None
    if late is None:
        return "Pagamento após cancelamento não encontrado."
    payer = late.payer_info or "não informado pela adquirente"
    return f"Ao pagador: {payer} (como a adquirente o informou; {_RETURNED})"


def _refund(target_id: str, actor: str, reason: str) -> None:
    """Approved: the refund is reserved now, in the approval's transaction
    (it may take the balance below zero, as every staff refund: decisions
    §4), and its acquirer is asked after the commit by the task that pursues
    refunds asked by API, never while this transaction is open. An acquirer
    without refunds has nothing to be asked: the charge is marked refunded
    here (its debit), as staff refunds there always were."""
    charge = Charge.objects.select_related("acquirer").get(pk=target_id)
    try:
        adapter = adapters.build(charge.acquirer)
    except AdapterError as exc:  # an adapter this process lacks (the sandbox, switched off)
        raise ActionNotExecutable(f"Adquirente indisponível para a devolução: {exc}"[:500]) from exc
    if not adapter.supports_refund:
        if not charge_transition(
            charge_id=charge.pk,
            to_status=ChargeStatus.REFUNDED,
            source=ChargeTransition.Source.STAFF,
            actor=actor,
            only_from=(ChargeStatus.PAID,),
        ):
            raise ActionNotExecutable("A cobrança não está mais paga.")
        return
    if adapter.refund_needs_e2e_id and not charge.e2e_id:
        raise ActionNotExecutable("Cobrança paga sem e2e id: a devolução não pode ser pedida à adquirente.")
    if not refunds.charge_refund_reserve(charge_id=charge.pk, reason=reason):
        raise ActionNotExecutable("A cobrança não está mais paga, ou já tem um estorno em processamento.")
    refund_id = ChargeRefund.objects.get(charge_id=charge.pk, status=ChargeRefund.Status.PROCESSING).pk
    # Looked up when called: the hand-off is the refunds module's (tests record it there).
    transaction.on_commit(lambda: refunds.refund_pursue_later(refund_id=refund_id))


def register() -> None:
    # A Pix received after the cancel: credited, or returned to the payer,
    # only once a second staff member approves (payments.late_payments).
    for action, quote, resolve, destination in (
        (MoneyActionRequest.Action.CREDIT_LATE_PAYMENT, _quote_late_credit, late_payment_credit, None),
        (
            MoneyActionRequest.Action.RETURN_LATE_PAYMENT,
            _quote_late_return,
            late_payment_return,
            _late_return_destination,
        ),
    ):
        approvals.register(
            approvals.MoneyAction(
                action=action,
                target_type="payments.latepayment",
                approve_permission="accounts.approve_late_payment_resolution",
                quote=quote,
                perform=_resolving(resolve),
                destination=destination,
            )
        )
    approvals.register(
        approvals.MoneyAction(
            action=MoneyActionRequest.Action.RESOLVE_CHARGEBACK,
            target_type="payments.charge",
            approve_permission="accounts.approve_chargeback_resolution",
            quote=_quote_resolution,
            perform=_resolve,
        )
    )
    # The merchant's money goes to the payer: only once a second staff member approves.
    approvals.register(
        approvals.MoneyAction(
            action=MoneyActionRequest.Action.REFUND_CHARGE,
            target_type="payments.charge",
            approve_permission="accounts.approve_charge_refund",
            quote=_quote_refund,
            perform=_refund,
            destination=_refund_destination,
        )
    )
