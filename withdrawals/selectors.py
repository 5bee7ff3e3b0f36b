"""Reads for withdrawals: balance and limits."""

from __future__ import annotations

from typing import Any

from accounts.models import Account
from accounts.selectors import available_balance, effective_minimum_withdrawal


def withdrawn_today(account: Account) -> int:
    """Sum of today's (America/Sao_Paulo) withdrawals that count against the
    daily limit. No withdrawal exists yet (the cash-out issue adds them), so
    nothing counts."""
    return 0


def balance_summary(account: Account) -> dict[str, Any]:
    """The Balance object of the spec (decisions §5)."""
    per_day = account.withdrawal_daily_limit
    return {
        "available_balance": available_balance(account),
        "daily_limit_remaining": max(0, per_day - withdrawn_today(account)),
        "minimum_withdrawal": effective_minimum_withdrawal(account),
        "limits": {"per_request": account.withdrawal_per_request_limit, "per_day_total": per_day},
    }
