"""Reads for accounts: balance and limits."""

from __future__ import annotations

from django.db.models import Sum

from accounts.models import Account, AccountBalance, LedgerEntry

# The request rule of the spec; an account may only raise it (decisions §5).
PLATFORM_MINIMUM_WITHDRAWAL = 1000


def effective_minimum_withdrawal(account: Account) -> int:
    return max(PLATFORM_MINIMUM_WITHDRAWAL, account.withdrawal_minimum)


def available_balance(account: Account) -> int:
    row = AccountBalance.objects.filter(account=account).values_list("available", flat=True).first()
    return row or 0


def ledger_sum(account: Account) -> int:
    return LedgerEntry.objects.filter(account=account).aggregate(total=Sum("amount"))["total"] or 0
