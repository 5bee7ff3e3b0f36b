"""The daily withdrawal limit (decisions §5): the amounts of an account's
withdrawals created on the current America/Sao_Paulo day, except failed and
canceled ones, may not pass ``withdrawal_daily_limit``.

The day's total is kept on the account's balance row (``withdrawn_day``,
``withdrawn_on_day``) and moved by the statement that debits a withdrawal or
reverses one, under the balance lock every withdrawal takes anyway: checking
the limit costs no statement and does not grow with the day. Summing the
day's withdrawals under that lock instead cost a statement on every request,
and a scan of all of the account's withdrawals of the day: with 50,000 of
them each next withdrawal of the account held the lock about 75 ms more
(measured on PostgreSQL 15), so a busy account slowed down as its day went on.

A withdrawal counts on the day of its ``created_at``. The row's total is of
the day the row names; when it names another day (the account's first
withdrawal of the day, the first after this was deployed, or a withdrawal
created just before midnight that reached the lock after one created just
after it), the day is summed from the withdrawals themselves
(:func:`~withdrawals.selectors.withdrawn_today`) and the row moves to that
day, unless it already names a later one. So, for the day the row names, its
total equals that sum; a test of the money model holds it there after every
step.
"""

from __future__ import annotations

import datetime as dt

from accounts.models import Account, AccountBalance
from accounts.settlement import SAO_PAULO
from withdrawals.models import Withdrawal
from withdrawals.selectors import withdrawn_today


def counted_day(at: dt.datetime) -> dt.date:
    """The America/Sao_Paulo day a withdrawal created at ``at`` counts on."""
    return at.astimezone(SAO_PAULO).date()


def withdrawn_before(balance: AccountBalance, account: Account, at: dt.datetime) -> int:
    """What counts against the limit of ``at``'s day before a withdrawal
    created at ``at``; ``balance`` is the account's row, locked."""
    if balance.withdrawn_day == counted_day(at):
        return balance.withdrawn_on_day
    # Another day's total: the sum since ``at``'s midnight (also counting any
    # later day's withdrawals when the row is ahead: stricter, never looser).
    return withdrawn_today(account, now=at)


def total_after_request(balance: AccountBalance, at: dt.datetime, total: int) -> tuple[dt.date, int] | None:
    """The row's (day, total) once a withdrawal created at ``at`` is accepted
    with ``total`` on its day; None leaves the row alone (it is of a later day,
    which this withdrawal is not part of)."""
    day = counted_day(at)
    if balance.withdrawn_day is not None and balance.withdrawn_day > day:
        return None
    return day, total


def total_after_reversal(balance: AccountBalance, withdrawal: Withdrawal) -> tuple[dt.date, int] | None:
    """The row's (day, total) once ``withdrawal`` fails or is canceled; None
    when the row is of another day (whose total never had it)."""
    day = counted_day(withdrawal.created_at)
    if balance.withdrawn_day != day:
        return None
    # Never below zero: a row moved by a process of an older release during a
    # deploy may lack an amount it now gives back.
    return day, max(0, balance.withdrawn_on_day - withdrawal.amount)
