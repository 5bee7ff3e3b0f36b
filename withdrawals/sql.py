"""Withdrawals' hand-written SQL: the debit of a new withdrawal (its row, its
ledger entry, the balance and the day's withdrawn total in one statement),
a reversal that gives the day's total back with its entry, and the day's
SUM the daily limit falls back on. Each runs under the account's balance
lock, so each is one round trip compiled before the lock or once per
process; each says which test holds it.
"""

from __future__ import annotations

import datetime as dt
import functools
import uuid

from django.db import connection
from django.db.models import Q, Sum

from accounts.models import AccountBalance, LedgerEntry
from accounts.services import ledger_entry_new
from accounts.sql import post_entry
from core.sql import Insert, statement_of
from withdrawals.models import NOT_COUNTED, Withdrawal

#: The balance row's (day, withdrawn total) for the daily limit (withdrawals/limits.py).
DayTotal = tuple[dt.date, int]


def _day_total_moves(withdrawn: DayTotal | None) -> dict[str, object]:
    if withdrawn is None:
        return {}
    day, total = withdrawn
    return {"withdrawn_day": day, "withdrawn_on_day": total}


def debit_new_withdrawal(
    *, withdrawal: Insert, balance: AccountBalance, amount: int, withdrawn: DayTotal | None
) -> LedgerEntry:
    """Insert ``withdrawal`` (its INSERT compiled before the lock), post its
    debit of ``amount`` (negative) on ``balance`` (locked) and set the day's
    withdrawn total, in one statement: one round trip under the balance
    lock instead of three. The reference is the new withdrawal's, so a repeat
    is a bug: the ledger's unique constraint fails the transaction, and no
    withdrawal exists without its debit. Round trips:
    tests/perf/test_query_budgets.py::test_withdrawal_request; the day's
    total: tests/withdrawals/test_daily_total.py."""
    entry, moves = ledger_entry_new(
        balance=balance,
        amount=amount,
        kind=LedgerEntry.Kind.WITHDRAWAL,
        reference=f"withdrawal:{withdrawal.instance.pk}",
    )
    post_entry(
        entry,
        balance,
        {**moves, **_day_total_moves(withdrawn)},
        repeat_is_noop=False,
        ahead=[(withdrawal.sql, withdrawal.params)],
    )
    withdrawal.instance._state.adding = False
    return entry


def post_with_day_total(
    *, balance: AccountBalance, amount: int, kind: str, reference: str, withdrawn: DayTotal | None
) -> LedgerEntry | None:
    """Post a withdrawal's movement (a reversal, a return) on ``balance``
    (locked), with the day's withdrawn total it gives back set by the same
    statement: the total moves if and only if the entry is posted. None when
    ``(kind, reference)`` was posted already. Its statement is
    :func:`accounts.sql.post_entry`'s, with two more columns:
    tests/perf/test_ledger_statements.py; the day's total:
    tests/withdrawals/test_daily_total.py and tests/property/test_money_model.py."""
    entry, moves = ledger_entry_new(balance=balance, amount=amount, kind=kind, reference=reference)
    posted = post_entry(entry, balance, {**moves, **_day_total_moves(withdrawn)}, repeat_is_noop=True)
    return entry if posted else None


@functools.cache
def _withdrawn_since_sql() -> str:
    """The SUM of :func:`withdrawn_since`, compiled once (grouped by the one
    account asked for: no withdrawal today, no row). It runs under the
    account's balance lock when the row's running total is of another day
    (withdrawals/limits.py): compiled there, the lock would be held for the
    ORM's CPU as well as the statement's. One statement a balance read:
    tests/perf/test_query_counts.py::test_balance. Immediate withdrawals
    created since the day's start, plus those scheduled for that day (index
    ``withdrawal_scheduled``); those scheduled for a later day count there."""
    account, since, day = uuid.UUID(int=1), dt.datetime(2000, 1, 2, 3, 4, 5, tzinfo=dt.UTC), dt.date(2000, 1, 2)
    query = (
        Withdrawal.objects.filter(account_id=account)
        .filter(Q(created_at__gte=since, scheduled_for__isnull=True) | Q(scheduled_for=day))
        .exclude(status__in=NOT_COUNTED)
        .values("account_id")
        .annotate(total=Sum("amount"))
        .values("total")
        .query
    )
    return statement_of(query, [account, since, day, *NOT_COUNTED], what="withdrawn today")


def withdrawn_since(account_id: uuid.UUID, since: dt.datetime, day: dt.date) -> int:
    """Sum of ``amount`` of the account's withdrawals counted on ``day``
    (whose start is ``since``): immediate ones created since ``since`` and
    those scheduled for ``day``, except failed and canceled ones."""
    with connection.cursor() as cursor:
        cursor.execute(_withdrawn_since_sql(), [account_id, since, day, *NOT_COUNTED])
        row = cursor.fetchone()
    return int(row[0]) if row is not None and row[0] is not None else 0
