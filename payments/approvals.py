"""Charge actions that move an account's money only after a second staff
member approves them (``accounts.approvals``): resolving a chargeback in the
account's favour (a credit) and staff's refund of a paid charge (the
merchant's money goes to the payer, whom an insider can be)."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import transaction

from accounts import approvals
from accounts.exceptions import ActionNotExecutable
from accounts.models import MoneyActionRequest
from acquirers import adapters
from acquirers.adapters.base import AdapterError
from payments import exceptions as err
from payments import refunds
from payments.events import CHARGEBACK_RESOLVABLE_FROM
from payments.exceptions import TransitionNotAllowed
from payments.models import Charge, ChargeRefund, ChargeStatus, ChargeTransition
from payments.services import charge_transition


def _charge(target_id: str) -> Charge:
    try:
        return Charge.objects.only("pk", "status", "account_id", "liquid_amount").get(pk=target_id)
    except (Charge.DoesNotExist, ValidationError):
        raise ActionNotExecutable("Cobrança não encontrada.") from None


def _quote_resolution(target_id: str) -> approvals.Quote:
    charge = _charge(target_id)
    if charge.status not in CHARGEBACK_RESOLVABLE_FROM:
        raise ActionNotExecutable(f"A cobrança está {ChargeStatus(charge.status).label}, não em contestação.")
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


def _quote_refund(target_id: str) -> approvals.Quote:
    charge = _charge(target_id)
    if charge.status != ChargeStatus.PAID:
        raise ActionNotExecutable(err.REFUND_NOT_PAID.format(status=ChargeStatus(charge.status).label.lower()))
    statuses = set(charge.refunds.values_list("status", flat=True))
    if ChargeRefund.Status.PROCESSING in statuses:
        raise ActionNotExecutable(err.REFUND_IN_PROGRESS)
    if ChargeRefund.Status.FAILED in statuses:
        # The devolução id is the charge's: asking again would get the same "not made".
        raise ActionNotExecutable(err.REFUND_ALREADY_FAILED)
    # What the account is debited: the charge's liquid amount (decisions §4).
    return approvals.Quote(account_id=charge.account_id, amount=charge.liquid_amount)


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
        )
    )
