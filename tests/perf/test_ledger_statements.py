"""Round trips of a posting under the balance lock (accounts/sql.py,
withdrawals/sql.py): once the lock is held, an entry with the balance it
moves is one statement, a repeat of one already posted is that same
statement and moves nothing, and a withdrawal's reversal moves the day's
withdrawn total in it too. Every money movement of an account waits behind
these while the lock is held."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone

from accounts.models import Account, AccountBalance, LedgerEntry
from accounts.services import balance_lock, ledger_post
from core.exceptions import InsufficientBalance
from tests.factories import AccountFactory
from withdrawals.sql import post_with_day_total

pytestmark = pytest.mark.django_db


@pytest.fixture
def account() -> Account:
    account: Account = AccountFactory()
    with transaction.atomic():
        ledger_post(account_id=account.pk, amount=10_000, kind=LedgerEntry.Kind.CHARGE_PAID, reference="seed:ledger")
    return account


def test_a_posting_under_the_lock_is_one_statement(account: Account, django_assert_num_queries: Any) -> None:
    with transaction.atomic():
        balance = balance_lock(account_id=account.pk)
        with django_assert_num_queries(1) as captured:
            entry = ledger_post(
                account_id=account.pk, amount=-2500, kind=LedgerEntry.Kind.WITHDRAWAL, reference="w:1", locked=balance
            )
    assert captured.captured_queries[0]["sql"].startswith("WITH entry AS (INSERT")
    assert entry is not None
    assert entry.balance_after == 7500
    assert balance.available == 7500 == AccountBalance.objects.get(account=account).available


def test_a_repeat_is_the_same_one_statement_and_moves_nothing(account: Account, django_assert_num_queries: Any) -> None:
    with transaction.atomic():
        balance = balance_lock(account_id=account.pk)
        with django_assert_num_queries(1):
            assert (
                ledger_post(
                    account_id=account.pk,
                    amount=1,
                    kind=LedgerEntry.Kind.CHARGE_PAID,
                    reference="seed:ledger",
                    locked=balance,
                )
                is None
            )
    assert balance.available == 10_000 == AccountBalance.objects.get(account=account).available
    assert LedgerEntry.objects.filter(account=account).count() == 1


def test_a_repeated_debit_beyond_the_balance_is_a_repeat_not_a_refusal(account: Account) -> None:
    with transaction.atomic():
        ledger_post(account_id=account.pk, amount=-9000, kind=LedgerEntry.Kind.WITHDRAWAL, reference="w:big")
    with transaction.atomic():
        # The balance (1,000) no longer covers it; it was posted already: nothing to do.
        assert (
            ledger_post(account_id=account.pk, amount=-9000, kind=LedgerEntry.Kind.WITHDRAWAL, reference="w:big")
            is None
        )
        with pytest.raises(InsufficientBalance):
            ledger_post(account_id=account.pk, amount=-9000, kind=LedgerEntry.Kind.WITHDRAWAL, reference="w:other")
    assert AccountBalance.objects.get(account=account).available == 1000


def test_a_reversal_moves_the_days_total_in_its_one_statement(account: Account, django_assert_num_queries: Any) -> None:
    today = timezone.localdate()
    AccountBalance.objects.filter(account=account).update(withdrawn_day=today, withdrawn_on_day=5000)
    reference = f"withdrawal:{uuid.uuid4()}:2"
    with transaction.atomic():
        balance = balance_lock(account_id=account.pk)
        with django_assert_num_queries(1):
            entry = post_with_day_total(
                balance=balance,
                amount=3000,
                kind=LedgerEntry.Kind.WITHDRAWAL_REVERSAL,
                reference=reference,
                withdrawn=(today, 2000),
            )
        assert entry is not None
        # Posted already: neither the balance nor the day's total moves again.
        again = post_with_day_total(
            balance=balance,
            amount=3000,
            kind=LedgerEntry.Kind.WITHDRAWAL_REVERSAL,
            reference=reference,
            withdrawn=(today, 0),
        )
        assert again is None
    row = AccountBalance.objects.get(account=account)
    assert (row.available, row.withdrawn_day, row.withdrawn_on_day) == (13_000, today, 2000)
    assert (balance.withdrawn_day, balance.withdrawn_on_day) == (today, 2000)
    assert isinstance(row.withdrawn_day, dt.date)
