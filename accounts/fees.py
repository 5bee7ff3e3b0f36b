"""Fees of an account's plan: ``fixed + round_half_up(amount * bps / 10000)``
(decisions §1), in integer arithmetic so no float ever touches money."""

from __future__ import annotations

from accounts.models import Account


def fee(amount: int, *, fixed: int, bps: int) -> int:
    # amount, bps >= 0: adding half the divisor before floor division is round-half-up.
    return fixed + (amount * bps + 5_000) // 10_000


def cashin_fee(account: Account, amount: int) -> int:
    return fee(amount, fixed=account.cashin_fee_fixed, bps=account.cashin_fee_bps)


def withdrawal_fee(account: Account, amount: int) -> int:
    return fee(amount, fixed=account.withdrawal_fee_fixed, bps=account.withdrawal_fee_bps)
