"""Scheduled withdrawals (docs/api/scheduled-withdrawals.md): beat hands the
day's due ones to the payout engine, and the merchant (or staff) cancels one
until it is sent.

A scheduled withdrawal is debited when requested and stays ``pending`` until
its America/Sao_Paulo day (approved before it when staff approve early): the
payout engine does nothing with it before that day
(:func:`withdrawals.payouts.withdrawal_process`), and the poller of stuck
payouts skips it (:func:`withdrawals.polling.payouts_poll`). On its day
:func:`scheduled_payouts_release` enqueues it; from then on it is an ordinary
withdrawal, which the poller also picks up when the release's message is lost.
"""

from __future__ import annotations

import datetime as dt
import uuid

from django.db.models import Q

from accounts.models import Account
from core import dispatch
from core.selectors import get_by_uuid
from withdrawals import exceptions as err
from withdrawals.limits import sao_paulo_today
from withdrawals.models import Withdrawal, WithdrawalStatus
from withdrawals.selectors import day_start, withdrawals_of
from withdrawals.services import withdrawal_transition

#: Withdrawals enqueued by one release at most; the next beat tick takes the rest.
RELEASE_BATCH = 2000


def scheduled_payouts_release(*, now: dt.datetime | None = None, limit: int = RELEASE_BATCH) -> int:
    """Beat: enqueue the payout of withdrawals scheduled for today (or an
    earlier day, when beat was down) that nothing touched today yet: pending
    ones of accounts without manual approval, and approved ones (staff
    approved them before their day). Repeating it is harmless: a payout run
    is idempotent, and one that moved today (approved, sent) is the poller's.
    ``now``: an injected clock. Returns how many were enqueued."""
    today = sao_paulo_today(now)
    due = (
        Withdrawal.objects.filter(
            scheduled_for__isnull=False,
            scheduled_for__lte=today,
            status__in=(WithdrawalStatus.PENDING, WithdrawalStatus.APPROVED),
            updated_at__lt=day_start(now),
        )
        .filter(Q(status=WithdrawalStatus.APPROVED) | Q(account__withdrawals_need_approval=False))
        .order_by("scheduled_for", "created_at")
    )
    ids = list(due.values_list("pk", flat=True)[:limit])
    for withdrawal_id in ids:
        dispatch.enqueue("withdrawals.tasks.process_withdrawal", str(withdrawal_id), left_to="beat's payout poller")
    return len(ids)


def withdrawal_cancel_scheduled(
    *, account: Account | None, withdrawal_id: uuid.UUID | str, source: str, actor: str = ""
) -> Withdrawal:
    """Cancel a scheduled withdrawal not yet sent: its total debit is
    credited back (the transition's ledger effect) and a ``withdrawal``
    webhook goes out. A pending one may be canceled until it is approved and
    sent; an approved one (staff approved it early) only before its day with
    no send on record (checked by ``withdrawal_transition``).
    Anything else: :class:`~withdrawals.exceptions.WithdrawalTransitionNotAllowed`
    (409). ``account``: the merchant's (another account's id is a 404); None for staff."""
    rows = withdrawals_of(account) if account is not None else Withdrawal.objects.all()
    withdrawal = get_by_uuid(rows, withdrawal_id, err.WithdrawalNotFound)
    # An approved one's day and sends are checked by the transition, under the row lock.
    if withdrawal.scheduled_for is None or withdrawal.status not in (
        WithdrawalStatus.PENDING,
        WithdrawalStatus.APPROVED,
    ):
        raise err.WithdrawalTransitionNotAllowed(err.SCHEDULED_CANCEL_REFUSED)
    withdrawal_transition(
        withdrawal_id=withdrawal.pk,
        to_status=WithdrawalStatus.CANCELED,
        source=source,
        actor=actor,
        reason="agendamento cancelado",
    )
    withdrawal.refresh_from_db()
    return withdrawal


__all__ = ["scheduled_payouts_release", "withdrawal_cancel_scheduled"]
