"""What a withdrawal of an amount costs and debits: its fee, the total taken
from the balance and what reaches the key, after the amount's field rules."""

from __future__ import annotations

from dataclasses import dataclass

from accounts.fees import withdrawal_fee
from accounts.models import Account
from accounts.selectors import effective_minimum_withdrawal
from core.exceptions import ValidationFailed
from core.money import brl
from withdrawals import exceptions as err


@dataclass(frozen=True)
class Quote:
    fee: int
    total_debit: int
    liquid_amount: int


def withdrawal_quote(*, account: Account, amount: int, discount_fee: bool) -> Quote:
    """Field rules of the amount (422 under ``amount``): the effective minimum
    and, with ``discount_fee``, something left after the fee."""
    minimum = effective_minimum_withdrawal(account)
    if amount < minimum:
        raise ValidationFailed({"amount": [err.BELOW_MINIMUM.format(amount=brl(minimum))]})
    fee = withdrawal_fee(account, amount)
    if discount_fee:
        if amount - fee < 1:
            raise ValidationFailed({"amount": [err.NOTHING_LEFT_AFTER_FEE]})
        return Quote(fee=fee, total_debit=amount, liquid_amount=amount - fee)
    return Quote(fee=fee, total_debit=amount + fee, liquid_amount=amount)
