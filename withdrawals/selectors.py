"""Reads for withdrawals: balance, limits, whether a payout may go out."""

from __future__ import annotations

import datetime as dt
import zoneinfo
from collections.abc import Sequence
from typing import Any

import django_filters
from django.db.models import OuterRef, QuerySet, Subquery, UUIDField
from django.db.models.functions import Cast, Substr
from django.utils import timezone

from accounts.models import Account, LedgerEntry, LedgerKind
from accounts.selectors import balance_amounts, effective_minimum_withdrawal
from accounts.settlement import SettlementFee, local_midnight
from acquirers.adapters.sandbox import SandboxAdapter
from api.listing import ListingFilterSet, RecordFilterSet, timestamp_filter
from api.listing_statements import Scope
from core.selectors import get_by_uuid, owned_by_uuid
from withdrawals.exceptions import WithdrawalNotFound
from withdrawals.models import HoldReason, Withdrawal, WithdrawalStatus
from withdrawals.sql import withdrawn_since

SAO_PAULO = zoneinfo.ZoneInfo("America/Sao_Paulo")


def day_start(now: dt.datetime | None = None) -> dt.datetime:
    """Midnight of the current America/Sao_Paulo day."""
    local = (now or timezone.now()).astimezone(SAO_PAULO)
    return local.replace(hour=0, minute=0, second=0, microsecond=0)


def withdrawn_today(account: Account, now: dt.datetime | None = None) -> int:
    """Sum of ``amount`` of the account's withdrawals counted on the current
    America/Sao_Paulo day (created on it and not scheduled, or scheduled for
    it), except failed and canceled ones (decisions §5)."""
    start = day_start(now)
    return withdrawn_since(account.pk, start, start.date())


def withdrawn_scheduled_for(account: Account, day: dt.date) -> int:
    """Sum of ``amount`` of the account's withdrawals scheduled for ``day``
    (a later day: nothing was created on it yet), except failed and canceled
    ones: that day's total for its limit (withdrawals.limits). The day's SUM
    of :func:`withdrawn_today`, compiled once, as it runs under the balance lock."""
    return withdrawn_since(account.pk, local_midnight(day), day)


def withdrawals_of(account: Account) -> QuerySet[Withdrawal]:
    return Withdrawal.objects.filter(account=account)


def withdrawals_scope(account: Account, fields: Sequence[str]) -> Scope[Withdrawal]:
    """:func:`withdrawals_of` as a listing's shape, loading ``fields``."""
    return Scope(Withdrawal, {"account_id": account.pk}, tuple(fields))


def withdrawal_get(*, account: Account, withdrawal_id: Any, fields: Sequence[str] | None = None) -> Withdrawal:
    """The account's withdrawal, or :class:`WithdrawalNotFound` for unknown,
    malformed or someone else's ids. ``fields``: only these are loaded."""
    if fields is not None:
        return owned_by_uuid(Withdrawal, account.pk, withdrawal_id, WithdrawalNotFound, fields)
    return get_by_uuid(withdrawals_of(account), withdrawal_id, WithdrawalNotFound)


def sandbox_withdrawal_get(*, account: Account, withdrawal_id: Any) -> Withdrawal:
    """A withdrawal the sandbox driver may return: the account's, sent
    through an acquirer using the sandbox adapter. Any other (not sent yet,
    or sent by a real acquirer) is :class:`WithdrawalNotFound`, like an
    unknown id: only the acquirer that paid can say the money came back."""
    return get_by_uuid(
        withdrawals_of(account).filter(acquirer__adapter=SandboxAdapter.name), withdrawal_id, WithdrawalNotFound
    )


class WithdrawalFilterSet(RecordFilterSet):
    status = django_filters.ChoiceFilter(field_name="status", choices=WithdrawalStatus.choices)

    class Meta:
        model = Withdrawal
        fields: list[str] = []


def balance_summary(account: Account) -> dict[str, Any]:
    """The Balance object of the spec (decisions §5), and the MED blocks.

    ``available_balance`` is what a withdrawal may take now: the balance less
    the part of open MED blocks the balance could not cover when they came
    (kept back from withdrawals and refunds, never debited), at least 0: a
    block is not a debt. A balance already below zero (a chargeback, a MED
    return) is shown as it is, as before.
    ``blocked_balance``: every open block, covered or not (the covered part
    already left the balance as a ``med_hold`` entry)."""
    per_day = account.withdrawal_daily_limit
    available, held, uncovered = balance_amounts(account)
    return {
        "available_balance": min(available, max(0, available - uncovered)),
        "blocked_balance": held,
        "daily_limit_remaining": max(0, per_day - withdrawn_today(account)),
        "minimum_withdrawal": effective_minimum_withdrawal(account),
        "limits": {"per_request": account.withdrawal_per_request_limit, "per_day_total": per_day},
    }


def payout_hold_reason(account: Account) -> str:
    """Why the account's approved withdrawals are not sent now; "" when they may be."""
    if account.is_blocked:
        return HoldReason.ACCOUNT_BLOCKED
    if not account.is_approved:
        return HoldReason.ACCOUNT_NOT_APPROVED
    return ""


class StatementFilterSet(ListingFilterSet):
    """The statement's filters (GET /api/statement and its CSV)."""

    created_at_start = timestamp_filter("created_at", "gte")
    created_at_end = timestamp_filter("created_at", "lte")
    kind = django_filters.ChoiceFilter(field_name="kind", choices=LedgerKind.choices)

    class Meta:
        model = LedgerEntry
        fields: list[str] = []


_UUID = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"


def _withdrawal_fee() -> Subquery:
    """The fee of the withdrawal a ``withdrawal:<uuid>[:<version>]`` ledger
    reference names (only evaluated where the patterns below match)."""
    withdrawal = Cast(Substr(OuterRef("reference"), len("withdrawal:") + 1, 36), UUIDField())
    return Subquery(Withdrawal.objects.filter(pk=withdrawal).order_by().values("fee")[:1])


#: A withdrawal's debit is its total_debit, fee included; a failed or canceled
#: one gives the total back, fee included. A return (paid → refunded) credits
#: the liquid amount only: the fee stays charged.
SETTLEMENT_WITHDRAWAL_FEES = (
    SettlementFee(kind=LedgerKind.WITHDRAWAL, pattern=rf"^withdrawal:{_UUID}$", fee=_withdrawal_fee),
    SettlementFee(
        kind=LedgerKind.WITHDRAWAL_REVERSAL, pattern=rf"^withdrawal:{_UUID}:[0-9]+$", fee=lambda: -_withdrawal_fee()
    ),
    # Reconciliation's re-debit of a payout the acquirer made after all: the total again, fee included.
    SettlementFee(kind=LedgerKind.WITHDRAWAL, pattern=rf"^withdrawal:{_UUID}:redebit$", fee=_withdrawal_fee),
)
