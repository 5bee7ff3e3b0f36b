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

A withdrawal counts on its ``scheduled_for`` day when it has one, else on
the day of its ``created_at`` (:func:`counted_day`; docs/api/scheduled-withdrawals.md).
A scheduled withdrawal never moves the row to its (future) day: the row
stays today's, and the future day's total is summed from the withdrawals
scheduled for it (index ``withdrawal_scheduled``); on that day the row's
first SUM includes them. The row's total is of
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

from django.utils import timezone

from accounts.models import Account, AccountBalance
from accounts.settlement import SAO_PAULO
from withdrawals.models import Withdrawal
from withdrawals.selectors import withdrawn_scheduled_for, withdrawn_today

#: A withdrawal may be scheduled up to this many days after today (America/Sao_Paulo).
SCHEDULE_MAX_DAYS = 60
SCHEDULE_NOT_FUTURE = "A data agendada deve ser posterior a hoje (horário de Brasília)."
SCHEDULE_TOO_FAR = f"A data agendada deve ser em até {SCHEDULE_MAX_DAYS} dias."


def sao_paulo_today(now: dt.datetime | None = None) -> dt.date:
    """Today in America/Sao_Paulo (``now``: an injected clock)."""
    return (now or timezone.now()).astimezone(SAO_PAULO).date()


def schedule_error(day: dt.date, now: dt.datetime | None = None) -> str | None:
    """Why ``day`` cannot be a withdrawal's scheduled day; None when it can."""
    today = sao_paulo_today(now)
    if day <= today:
        return SCHEDULE_NOT_FUTURE
    if day > today + dt.timedelta(days=SCHEDULE_MAX_DAYS):
        return SCHEDULE_TOO_FAR
    return None


def waits_for_its_day(withdrawal: Withdrawal, now: dt.datetime | None = None) -> bool:
    """Scheduled for a later day than today: not sent yet (withdrawals.schedule)."""
    return withdrawal.scheduled_for is not None and withdrawal.scheduled_for > sao_paulo_today(now)


def counted_day(at: dt.datetime, scheduled_for: dt.date | None = None) -> dt.date:
    """The America/Sao_Paulo day a withdrawal created at ``at`` counts on:
    its scheduled day when it has one."""
    return scheduled_for if scheduled_for is not None else at.astimezone(SAO_PAULO).date()


def withdrawn_before(
    balance: AccountBalance, account: Account, at: dt.datetime, scheduled_for: dt.date | None = None
) -> int:
    """What counts against the limit of the withdrawal's day before a
    withdrawal created at ``at`` (scheduled for ``scheduled_for``);
    ``balance`` is the account's row, locked."""
    if balance.withdrawn_day == counted_day(at, scheduled_for):
        return balance.withdrawn_on_day
    if scheduled_for is not None:
        # A later day: only withdrawals scheduled for it count there yet.
        return withdrawn_scheduled_for(account, scheduled_for)
    # Another day's total: the sum since ``at``'s midnight (also counting any
    # later day's immediate withdrawals when the row is ahead: stricter, never looser).
    return withdrawn_today(account, now=at)


def total_after_request(
    balance: AccountBalance, at: dt.datetime, total: int, scheduled_for: dt.date | None = None
) -> tuple[dt.date, int] | None:
    """The row's (day, total) once a withdrawal created at ``at`` is accepted
    with ``total`` on its day; None leaves the row alone (it is of a later day,
    which this withdrawal is not part of, or the withdrawal is scheduled for a
    day the row does not name: the row stays on today)."""
    day = counted_day(at, scheduled_for)
    if scheduled_for is not None:
        return (day, total) if balance.withdrawn_day == day else None
    if balance.withdrawn_day is not None and balance.withdrawn_day > day:
        return None
    return day, total


def total_after_reversal(balance: AccountBalance, withdrawal: Withdrawal) -> tuple[dt.date, int] | None:
    """The row's (day, total) once ``withdrawal`` fails or is canceled; None
    when the row is of another day (whose total never had it)."""
    day = counted_day(withdrawal.created_at, withdrawal.scheduled_for)
    if balance.withdrawn_day != day:
        return None
    # Never below zero: a row moved by a process of an older release during a
    # deploy may lack an amount it now gives back.
    return day, max(0, balance.withdrawn_on_day - withdrawal.amount)
