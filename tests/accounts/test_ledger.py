"""The ledger: the only way a balance changes, and the invariants around it."""

from __future__ import annotations

import functools
import random

import pytest
from django.db import IntegrityError, transaction

from accounts.models import Account, AccountBalance, LedgerEntry
from accounts.selectors import available_balance, ledger_sum
from accounts.services import ledger_post
from core.exceptions import InsufficientBalance
from tests.factories import AccountFactory
from tests.realworld import run_concurrently


def post(account: Account, amount: int, kind: str, reference: str) -> LedgerEntry | None:
    with transaction.atomic():
        return ledger_post(account_id=account.pk, amount=amount, kind=kind, reference=reference)


@pytest.mark.django_db
def test_credit_then_debit_moves_balance_and_records_balance_after(account: Account) -> None:
    credit = post(account, 5000, LedgerEntry.Kind.CHARGE_PAID, "charge:a:1")
    debit = post(account, -1200, LedgerEntry.Kind.WITHDRAWAL, "withdrawal:b")
    assert credit is not None
    assert credit.balance_after == 5000
    assert debit is not None
    assert debit.balance_after == 3800
    assert available_balance(account) == 3800 == ledger_sum(account)


@pytest.mark.django_db
def test_repeated_cause_posts_nothing(account: Account) -> None:
    assert post(account, 5000, LedgerEntry.Kind.CHARGE_PAID, "charge:a:1") is not None
    assert post(account, 5000, LedgerEntry.Kind.CHARGE_PAID, "charge:a:1") is None
    assert available_balance(account) == 5000
    assert LedgerEntry.objects.filter(account=account).count() == 1


@pytest.mark.django_db
def test_debit_beyond_balance_is_refused_and_changes_nothing(account: Account) -> None:
    post(account, 1000, LedgerEntry.Kind.CHARGE_PAID, "charge:a:1")
    with pytest.raises(InsufficientBalance):
        post(account, -1001, LedgerEntry.Kind.WITHDRAWAL, "withdrawal:b")
    assert available_balance(account) == 1000
    assert LedgerEntry.objects.filter(account=account).count() == 1


@pytest.mark.django_db
@pytest.mark.parametrize("kind", [LedgerEntry.Kind.CHARGE_REFUND, LedgerEntry.Kind.CHARGE_CHARGEBACK])
def test_refund_and_chargeback_may_go_negative(account: Account, kind: str) -> None:
    post(account, 500, LedgerEntry.Kind.CHARGE_PAID, "charge:a:1")
    entry = post(account, -900, kind, "charge:a:2")
    assert entry is not None
    assert entry.balance_after == -400
    # Credits are always allowed, even while the balance is negative.
    post(account, 100, LedgerEntry.Kind.CHARGEBACK_REVERSAL, "charge:a:3")
    assert available_balance(account) == -300 == ledger_sum(account)


@pytest.mark.django_db(transaction=True)
def test_must_run_inside_the_callers_transaction(account: Account) -> None:
    with pytest.raises(RuntimeError):
        ledger_post(account_id=account.pk, amount=100, kind=LedgerEntry.Kind.CHARGE_PAID, reference="x")


@pytest.mark.django_db
@pytest.mark.parametrize("amount", [0, 10.5, True])
def test_amount_must_be_non_zero_integer(account: Account, amount: object) -> None:
    with pytest.raises(ValueError, match="amount"):
        post(account, amount, LedgerEntry.Kind.CHARGE_PAID, "x")  # type: ignore[arg-type]


@pytest.mark.django_db
def test_rolled_back_change_takes_its_entry_with_it(account: Account) -> None:
    class Boom(Exception):
        pass

    def change_that_fails_after_posting() -> None:
        with transaction.atomic():
            ledger_post(account_id=account.pk, amount=700, kind=LedgerEntry.Kind.CHARGE_PAID, reference="charge:a:1")
            raise Boom

    with pytest.raises(Boom):
        change_that_fails_after_posting()
    assert available_balance(account) == 0
    assert not LedgerEntry.objects.filter(account=account).exists()


@pytest.mark.django_db
def test_database_refuses_an_overdrawing_entry(account: Account) -> None:
    # The service checks first; the constraint is the net under it.
    with pytest.raises(IntegrityError), transaction.atomic():
        LedgerEntry.objects.create(
            account=account, kind=LedgerEntry.Kind.WITHDRAWAL, amount=-1, balance_after=-1, reference="w"
        )


@pytest.mark.django_db
def test_database_refuses_a_sign_that_does_not_match_the_kind(account: Account) -> None:
    with pytest.raises(IntegrityError), transaction.atomic():
        LedgerEntry.objects.create(
            account=account, kind=LedgerEntry.Kind.CHARGE_PAID, amount=-5, balance_after=0, reference="c"
        )


@pytest.mark.django_db
def test_account_without_balance_row_gets_one_on_first_posting() -> None:
    account = Account.objects.create(name="Sem saldo")
    post(account, 300, LedgerEntry.Kind.CHARGE_PAID, "charge:z:1")
    assert AccountBalance.objects.get(account=account).available == 300


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_concurrent_debits_and_credits_never_overdraw(seed: int) -> None:
    """Many threads, each on its own PostgreSQL connection, post random debits
    and credits on one account. Debits beyond the balance must be refused,
    never applied; at the end the balance equals the ledger's sum and no entry
    ever recorded a negative balance."""
    account = AccountFactory()
    post(account, 10_000, LedgerEntry.Kind.CHARGE_PAID, "seed-credit")
    rng = random.Random(seed)
    plans = [[rng.choice([-700, -300, -1500, 400]) for _ in range(15)] for _ in range(12)]
    refused = []

    def worker(index: int, plan: list[int]) -> None:
        for step, amount in enumerate(plan):
            kind = LedgerEntry.Kind.WITHDRAWAL if amount < 0 else LedgerEntry.Kind.CHARGE_PAID
            try:
                post(account, amount, kind, f"t{index}:{step}")
            except InsufficientBalance:
                refused.append(amount)

    outcomes = run_concurrently([functools.partial(worker, i, plan) for i, plan in enumerate(plans)], timeout=60)
    errors = [o for o in outcomes if isinstance(o, BaseException)]

    assert not errors
    entries = LedgerEntry.objects.filter(account=account)
    assert entries.count() == 1 + sum(len(p) for p in plans) - len(refused)
    assert not entries.filter(balance_after__lt=0).exists()
    assert available_balance(account) == ledger_sum(account) >= 0
    # The running balances chain: each entry's balance_after is the previous one plus its amount.
    running = 0
    for entry in entries.order_by("id"):
        running += entry.amount
        assert entry.balance_after == running
    assert refused, "the plan is built so that some debits must be refused"
