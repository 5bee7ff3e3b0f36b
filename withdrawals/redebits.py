"""Staff's resolution of a payout the acquirer made although its withdrawal
failed here (reconciliation's "sent there, failed here" item): the debit
taken again, once a second staff member approved it
(:mod:`withdrawals.approvals`)."""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction

from accounts.exceptions import ActionNotExecutable
from accounts.models import LedgerKind
from accounts.services import ledger_post
from withdrawals.models import Withdrawal, WithdrawalStatus

logger = logging.getLogger(__name__)


def withdrawal_sent_payout_redebit(*, withdrawal_id: Any, actor: str, reason: str) -> bool:
    """Debit again a withdrawal that failed here (its debit given back) but
    that the acquirer paid (reconciliation's "sent there, failed here"),
    once a second staff member approved it (``accounts.approvals``). The
    withdrawal keeps its status (the contract has no failed → paid); the
    ledger says why. Never overdraws (:class:`InsufficientBalance`); False
    when already debited again."""
    with transaction.atomic():
        withdrawal = Withdrawal.objects.select_for_update().get(pk=withdrawal_id)
        if withdrawal.status != WithdrawalStatus.FAILED:
            raise ActionNotExecutable(f"O saque está {WithdrawalStatus(withdrawal.status).label}, não falho.")
        entry = ledger_post(
            account_id=withdrawal.account_id,
            amount=-withdrawal.total_debit,
            kind=LedgerKind.WITHDRAWAL,
            reference=f"withdrawal:{withdrawal.pk}:redebit",
        )
        if entry is not None:
            logger.warning("withdrawal %s debited again by %s: %s", withdrawal.pk, actor, reason)
        return entry is not None
