"""Charge actions that move an account's money only after a second staff
member approves them (``accounts.approvals``)."""

from __future__ import annotations

from django.core.exceptions import ValidationError

from accounts import approvals
from accounts.exceptions import ActionNotExecutable
from accounts.models import MoneyActionRequest
from payments.events import CHARGEBACK_RESOLVABLE_FROM
from payments.exceptions import TransitionNotAllowed
from payments.models import Charge, ChargeStatus, ChargeTransition
from payments.refunds_released import charge_refund_redebit
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


def _quote_refund_redebit(target_id: str) -> approvals.Quote:
    charge = _charge(target_id)
    if charge.status != ChargeStatus.CHARGEBACK:
        raise ActionNotExecutable(f"A cobrança está {ChargeStatus(charge.status).label}, não contestada.")
    # What the refund would have debited (the request's amount: see MoneyActionRequest.amount).
    return approvals.Quote(account_id=charge.account_id, amount=charge.liquid_amount)


def _refund_redebit(target_id: str, actor: str, reason: str) -> None:
    if not charge_refund_redebit(charge_id=target_id, actor=actor, reason=reason):
        raise ActionNotExecutable("O estorno desta cobrança já foi debitado.")


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
    # The acquirer made a refund after a chargeback had returned the money
    # (reconciliation, or the check of the released refund): the refund's
    # debit is taken only once a second staff member approves.
    approvals.register(
        approvals.MoneyAction(
            action=MoneyActionRequest.Action.REDEBIT_REFUND_AFTER_CHARGEBACK,
            target_type="payments.charge",
            approve_permission="accounts.approve_refund_after_chargeback_redebit",
            quote=_quote_refund_redebit,
            perform=_refund_redebit,
        )
    )
