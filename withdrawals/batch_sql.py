"""The debit of a new payout batch: its row, its items, one ledger entry per
item and the balance moved once, in a handful of statements whatever the
batch's size (bulk INSERTs), all under the account's balance lock. The
round trips: tests/withdrawals/test_batches.py::test_a_batch_debits_in_a_few_statements."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from django.utils import timezone

from accounts.models import AccountBalance, LedgerEntry
from withdrawals.limits import counted_day
from withdrawals.models import PayoutBatch, Withdrawal

#: Rows per INSERT: a withdrawal binds ~35 values, PostgreSQL takes at most 65,535.
ROWS_PER_INSERT = 1000


def debit_new_batch(
    *,
    batch: PayoutBatch,
    withdrawals: Sequence[Withdrawal],
    balance: AccountBalance,
    at: dt.datetime,
    withdrawn: tuple[dt.date, int] | None,
) -> list[LedgerEntry]:
    """Insert ``batch`` and its ``withdrawals`` (new), post each item's debit
    of its ``total_debit`` (reference ``withdrawal:<id>``, as a single
    withdrawal's) with the balance after it, and move ``balance`` (locked) and
    the day's withdrawn total once. A reference already in the ledger is a
    bug: the unique constraint fails the transaction, nothing is stored.
    ``at`` is the moment the day's limit was checked for: every item counts
    on its day."""
    batch.save(force_insert=True)
    Withdrawal.objects.bulk_create(withdrawals, batch_size=ROWS_PER_INSERT)
    day = counted_day(at)
    if any(counted_day(w.created_at) != day for w in withdrawals):
        # Inserted across midnight: they count on the day checked.
        Withdrawal.objects.filter(batch=batch).update(created_at=at)
        for withdrawal in withdrawals:
            withdrawal.created_at = at
    available = balance.available
    entries = []
    for withdrawal in withdrawals:
        available -= withdrawal.total_debit
        entries.append(
            LedgerEntry(
                account_id=balance.account_id,
                kind=LedgerEntry.Kind.WITHDRAWAL,
                amount=-withdrawal.total_debit,
                balance_after=available,
                reference=f"withdrawal:{withdrawal.pk}",
            )
        )
    LedgerEntry.objects.bulk_create(entries, batch_size=ROWS_PER_INSERT)
    moves: dict[str, object] = {"available": available, "updated_at": timezone.now()}
    if withdrawn is not None:
        moves["withdrawn_day"], moves["withdrawn_on_day"] = withdrawn
    AccountBalance.objects.filter(account_id=balance.account_id).update(**moves)
    for name, value in moves.items():
        setattr(balance, name, value)
    return entries
