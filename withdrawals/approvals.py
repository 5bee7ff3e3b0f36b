"""Staff's decisions on withdrawals: approving one (the Pix is sent), which
segregation of duties may refuse, and the actions that credit an account
only after a second staff member approves them (``accounts.approvals``)."""

from __future__ import annotations

import uuid

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError

from accounts import approvals
from accounts.exceptions import ActionNotExecutable, ApprovalRefused, SegregationOfDuties
from accounts.models import MoneyActionRequest
from accounts.segregation import withdrawal_approval_conflict
from core.exceptions import AccessDenied, InsufficientBalance, ValidationFailed
from withdrawals import exceptions as err
from withdrawals.exceptions import WithdrawalTransitionNotAllowed
from withdrawals.models import Withdrawal, WithdrawalStatus, WithdrawalTransition
from withdrawals.redebits import withdrawal_sent_payout_redebit
from withdrawals.services import RESOLVE_REASON_MIN_LENGTH, withdrawal_payout_resolve, withdrawal_transition

APPROVE_PERMISSION = "withdrawals.approve_withdrawal"


def withdrawal_staff_approve(*, withdrawal_id: uuid.UUID | str, staff: User) -> bool:
    """A staff member approves a pending withdrawal; its payout is sent after
    commit (``withdrawal_transition``). Refused, nothing changed, when
    ``staff`` may not approve withdrawals (:class:`AccessDenied`) or, for
    ``STAFF_SEGREGATION_DAYS``, this account's ones: they sent a claim link
    of one of its credentials that can cash out, or asked for or approved a
    change of its contact e-mail (:class:`SegregationOfDuties`,
    ``accounts.segregation``). False when it was approved already."""
    if not staff.is_active or not staff.has_perm(APPROVE_PERMISSION):
        raise AccessDenied("Sem permissão para aprovar saques.")
    account_id = Withdrawal.objects.values_list("account_id", flat=True).get(pk=withdrawal_id)
    conflict = withdrawal_approval_conflict(user_id=staff.pk, account_id=account_id)
    if conflict is not None:
        raise SegregationOfDuties(conflict)
    return withdrawal_transition(
        withdrawal_id=withdrawal_id,
        to_status=WithdrawalStatus.APPROVED,
        source=WithdrawalTransition.Source.STAFF,
        actor=staff.get_username(),
    )


def _withdrawal(target_id: str, *fields: str) -> Withdrawal:
    try:
        return Withdrawal.objects.only("pk", "status", "account_id", *fields).get(pk=target_id)
    except (Withdrawal.DoesNotExist, ValidationError):
        raise ActionNotExecutable("Saque não encontrado.") from None


def _quote_return(target_id: str) -> approvals.Quote:
    withdrawal = _withdrawal(target_id, "liquid_amount")
    if withdrawal.status != WithdrawalStatus.PAID:
        raise ActionNotExecutable(f"O saque está {WithdrawalStatus(withdrawal.status).label}, não pago.")
    return approvals.Quote(account_id=withdrawal.account_id, amount=withdrawal.liquid_amount)


def _mark_returned(target_id: str, actor: str, reason: str) -> None:
    try:
        changed = withdrawal_transition(
            withdrawal_id=target_id,
            to_status=WithdrawalStatus.REFUNDED,
            source=WithdrawalTransition.Source.STAFF,
            actor=actor,
            reason="returned by its destination (approved by a second staff member)",
        )
    except WithdrawalTransitionNotAllowed as exc:
        raise ActionNotExecutable(exc.message) from exc
    if not changed:
        raise ActionNotExecutable("O saque já estava marcado como devolvido.")


def _quote_undetermined_failure(target_id: str) -> approvals.Quote:
    withdrawal = _withdrawal(target_id, "total_debit", "payout_unclear_since")
    if withdrawal.status != WithdrawalStatus.APPROVED or withdrawal.payout_unclear_since is None:
        raise ActionNotExecutable(err.RESOLVE_NOT_UNDETERMINED)
    # Failing it gives back everything the withdrawal debited.
    return approvals.Quote(account_id=withdrawal.account_id, amount=withdrawal.total_debit)


def _check_resolve_reason(reason: str) -> None:
    # Refused when asked: an approval would only fail on it later.
    if len(reason.strip()) < RESOLVE_REASON_MIN_LENGTH:
        raise ApprovalRefused(err.RESOLVE_REASON_REQUIRED)


def _fail_undetermined(target_id: str, actor: str, reason: str) -> None:
    try:
        changed = withdrawal_payout_resolve(
            withdrawal_id=target_id, to_status=WithdrawalStatus.FAILED, reason=reason, actor=actor
        )
    except WithdrawalTransitionNotAllowed as exc:  # PayoutUnsettled too: a send may still land
        raise ActionNotExecutable(exc.message) from exc
    except ValidationFailed as exc:
        raise ActionNotExecutable(" ".join(m for messages in exc.errors.values() for m in messages)) from exc
    if not changed:
        raise ActionNotExecutable(err.RESOLVE_NOT_UNDETERMINED)


def _quote_redebit(target_id: str) -> approvals.Quote:
    withdrawal = _withdrawal(target_id, "total_debit")
    if withdrawal.status != WithdrawalStatus.FAILED:
        raise ActionNotExecutable(f"O saque está {WithdrawalStatus(withdrawal.status).label}, não falho.")
    # What the account is debited again (the request's amount: see MoneyActionRequest.amount).
    return approvals.Quote(account_id=withdrawal.account_id, amount=withdrawal.total_debit)


def _redebit(target_id: str, actor: str, reason: str) -> None:
    try:
        changed = withdrawal_sent_payout_redebit(withdrawal_id=target_id, actor=actor, reason=reason)
    except InsufficientBalance as exc:
        raise ActionNotExecutable(f"Saldo insuficiente para debitar de novo: {exc.message}") from exc
    if not changed:
        raise ActionNotExecutable("O saque já foi debitado de novo.")


def register() -> None:
    approvals.register(
        approvals.MoneyAction(
            action=MoneyActionRequest.Action.MARK_WITHDRAWAL_RETURNED,
            target_type="withdrawals.withdrawal",
            approve_permission="accounts.approve_withdrawal_return",
            quote=_quote_return,
            perform=_mark_returned,
        )
    )
    # The acquirer told staff, outside the service, that it never paid: the
    # debit goes back only once a second staff member approves.
    approvals.register(
        approvals.MoneyAction(
            action=MoneyActionRequest.Action.FAIL_UNDETERMINED_PAYOUT,
            target_type="withdrawals.withdrawal",
            approve_permission="accounts.approve_undetermined_payout_failure",
            quote=_quote_undetermined_failure,
            perform=_fail_undetermined,
            check_reason=_check_resolve_reason,
        )
    )
    # Reconciliation found the payout made by the acquirer although it failed
    # here: the debit given back is taken again only once a second staff member approves.
    approvals.register(
        approvals.MoneyAction(
            action=MoneyActionRequest.Action.REDEBIT_SENT_PAYOUT,
            target_type="withdrawals.withdrawal",
            approve_permission="accounts.approve_sent_payout_redebit",
            quote=_quote_redebit,
            perform=_redebit,
        )
    )
