"""Beat's safety net for payouts: withdrawals nothing moved for a while are
handed back to the payout engine, and an account that may cash out again
has its held withdrawals processed."""

from __future__ import annotations

import datetime as dt
import uuid

from django.db.models import Q
from django.utils import timezone

from accounts.models import Account
from withdrawals import limits, services
from withdrawals.models import HoldReason, Withdrawal, WithdrawalStatus


def withdrawals_resume_held(account_id: uuid.UUID | str) -> int:
    """The account may cash out again: its withdrawals held because of it
    are processed now (not those whose runs kept dying: staff's)."""
    ids = list(
        Withdrawal.objects.filter(account_id=account_id, status=WithdrawalStatus.APPROVED)
        .exclude(hold_reason="")
        .exclude(hold_reason=HoldReason.PAYOUT_INTERRUPTED)
        .values_list("pk", flat=True)
    )
    for withdrawal_id in ids:
        services._enqueue_processing(withdrawal_id)
    return len(ids)


def payouts_poll(*, older_than: dt.timedelta = dt.timedelta(minutes=2), limit: int = 200) -> int:
    """Beat: withdrawals left approved (worker died, acquirer still
    processing, broker down) get processed again; pending ones of accounts
    without manual approval too. Held ones wait until their account may cash
    out again, or staff resume them (runs that kept dying); undetermined ones
    past the settle window are only asked about."""
    now = timezone.now()
    cutoff = now - older_than
    stuck = (
        Withdrawal.objects.filter(updated_at__lt=cutoff)
        .filter(
            Q(status=WithdrawalStatus.APPROVED)
            | Q(status=WithdrawalStatus.PENDING, account__withdrawals_need_approval=False)
        )
        .filter(Q(payout_leased_until__isnull=True) | Q(payout_leased_until__lt=now))
        .filter(Q(hold_reason="") | Q(account__is_blocked=False, account__status=Account.Status.APPROVED))
        .exclude(hold_reason=HoldReason.PAYOUT_INTERRUPTED)
        # Scheduled for a later day: beat sends them on it (withdrawals.schedule).
        .exclude(scheduled_for__gt=limits.sao_paulo_today(now))
    )
    ids = list(stuck.order_by("updated_at").values_list("pk", flat=True)[:limit])
    for withdrawal_id in ids:
        services._enqueue_processing(withdrawal_id)
    return len(ids)
