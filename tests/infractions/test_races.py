"""MED blocks racing the merchant's own moves, on real PostgreSQL (each
thread its own connection): a withdrawal and a block want the same money,
exactly one gets it and the ledger stays exact and never below zero; the same
record seen twice at once (the poller and a notification) is one infraction
and one block.

The ordered races hold the first party inside its balance lock until the
second one's backend is seen queued behind it (``pg_blocking_pids``), so each
order is exercised on purpose, not by luck; the free races show no other
interleaving exists."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from django.db import connection

from accounts.models import Account, LedgerEntry
from acquirers.adapters.base import InfractionStatus as Rec
from acquirers.models import Acquirer
from infractions import services as infraction_services
from infractions.models import Infraction
from infractions.services import infraction_apply
from payments.models import Charge, ChargeStatus
from tests.factories import AccountFactory
from tests.infractions.conftest import LIQUID, Books, books, kinds, paid_charge_of, record
from tests.realworld import run_concurrently, wait_for
from withdrawals import services as withdrawal_services
from withdrawals.exceptions import BusinessRuleError
from withdrawals.models import Withdrawal
from withdrawals.services import withdrawal_request

pytestmark = pytest.mark.django_db(transaction=True)

CPF = "52998224725"
INSUFFICIENT = "Saldo insuficiente para realizar o saque."


@pytest.fixture
def account(db: Any) -> Account:
    # Withdrawals wait for staff: nothing goes to a broker behind the test's back.
    return AccountFactory(cashin_fee_fixed=30, cashin_fee_bps=150, withdrawals_need_approval=True)


def withdraw(account: Account, amount: int = LIQUID) -> Withdrawal:
    return withdrawal_request(account=account, amount=amount, key_type="cpf", key_value=CPF)


def pg_connect() -> psycopg.Connection[Any]:
    """An observer's connection of the test's own, outside Django (autocommit:
    inside a transaction pg_stat_activity would be a snapshot)."""
    s = connection.settings_dict
    return psycopg.connect(
        dbname=s["NAME"],
        user=s["USER"] or None,
        password=s["PASSWORD"] or None,
        host=s["HOST"] or None,
        port=s["PORT"] or None,
        autocommit=True,
    )


@contextlib.contextmanager
def first_to_lock(monkeypatch: pytest.MonkeyPatch, module: Any) -> Iterator[threading.Event]:
    """``module``'s ``balance_lock`` takes the lock, sets the event it yields,
    and keeps the lock until another backend queues behind it: the caller's
    other thread, started on the event, is then certainly second. Later
    calls are the real one."""
    taken = threading.Event()
    real = module.balance_lock

    def held_until_someone_waits(**kwargs: Any) -> Any:
        balance = real(**kwargs)
        if taken.is_set():  # the first call only
            return balance
        pid = connection.connection.info.backend_pid
        taken.set()
        with pg_connect() as observer:

            def queued() -> bool:
                row = observer.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))", (pid,)
                ).fetchone()
                return bool(row and row[0])

            wait_for(queued, timeout=30, interval=0.01)
        return balance

    monkeypatch.setattr(module, "balance_lock", held_until_someone_waits)
    yield taken


def second(after: threading.Event, call: Callable[[], Any]) -> Callable[[], Any]:
    def run() -> Any:
        assert after.wait(timeout=30)
        return call()

    return run


def assert_never_below_zero(account: Account) -> None:
    assert not LedgerEntry.objects.filter(account=account, balance_after__lt=0).exists()


# --------------------------------------------------------------------------- a withdrawal and a block, same money


def test_the_block_first_covers_it_all_and_the_withdrawal_is_refused(
    acquirer: Acquirer, account: Account, monkeypatch: pytest.MonkeyPatch
) -> None:
    charge = paid_charge_of(account, acquirer)

    with first_to_lock(monkeypatch, infraction_services) as taken:
        blocked, withdrawn = run_concurrently(
            [
                lambda: infraction_apply(acquirer=acquirer, record=record(charge)),
                second(taken, lambda: withdraw(account)),
            ]
        )

    assert isinstance(blocked, Infraction)
    assert isinstance(withdrawn, BusinessRuleError)
    assert withdrawn.message == INSUFFICIENT
    assert not Withdrawal.objects.exists()
    infraction = Infraction.objects.get()
    assert (infraction.hold, infraction.hold_covered) == (LIQUID, LIQUID)
    assert kinds(account) == [("charge_paid", LIQUID), ("med_hold", -LIQUID)]
    assert books(account) == Books(available=0, held=LIQUID, hold_uncovered=0)
    assert_never_below_zero(account)


def test_the_withdrawal_first_takes_the_money_and_the_block_is_kept_back_uncovered(
    acquirer: Acquirer, account: Account, monkeypatch: pytest.MonkeyPatch
) -> None:
    charge = paid_charge_of(account, acquirer)

    with first_to_lock(monkeypatch, withdrawal_services) as taken:
        withdrawn, blocked = run_concurrently(
            [
                lambda: withdraw(account),
                second(taken, lambda: infraction_apply(acquirer=acquirer, record=record(charge))),
            ]
        )

    assert isinstance(withdrawn, Withdrawal)
    assert isinstance(blocked, Infraction)
    infraction = Infraction.objects.get()
    assert (infraction.hold, infraction.hold_covered) == (LIQUID, 0)
    assert kinds(account) == [("charge_paid", LIQUID), ("withdrawal", -LIQUID)]
    assert books(account) == Books(available=0, held=LIQUID, hold_uncovered=LIQUID)
    assert_never_below_zero(account)
    # Kept back: the next money in is not the merchant's to withdraw until the infraction closes.
    paid_charge_of(account, acquirer)
    with pytest.raises(BusinessRuleError):
        withdraw(account, 1_000)


@pytest.mark.parametrize("round_", range(4))
def test_a_free_race_ends_in_one_of_the_two_orders(acquirer: Acquirer, account: Account, round_: int) -> None:
    charge = paid_charge_of(account, acquirer)

    withdrawn, blocked = run_concurrently(
        [lambda: withdraw(account), lambda: infraction_apply(acquirer=acquirer, record=record(charge))]
    )

    assert isinstance(blocked, Infraction)
    infraction = Infraction.objects.get()
    if isinstance(withdrawn, Withdrawal):
        assert infraction.hold_covered == 0
        assert books(account) == Books(available=0, held=LIQUID, hold_uncovered=LIQUID)
    else:
        assert isinstance(withdrawn, BusinessRuleError)
        assert infraction.hold_covered == LIQUID
        assert books(account) == Books(available=0, held=LIQUID, hold_uncovered=0)
        assert not Withdrawal.objects.exists()
    assert_never_below_zero(account)


# --------------------------------------------------------------------------- one record, seen twice at once


def test_the_same_record_applied_at_once_is_one_infraction_and_one_block(
    acquirer: Acquirer, account: Account, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second thread queues on the charge, then finds the first one's
    infraction (its insert refused by the unique key) and follows it: a no-op."""
    charge = paid_charge_of(account, acquirer)
    apply = lambda: infraction_apply(acquirer=acquirer, record=record(charge))  # noqa: E731

    with first_to_lock(monkeypatch, infraction_services) as taken:
        outcomes = run_concurrently([apply, second(taken, apply)])

    assert all(isinstance(o, Infraction) for o in outcomes), outcomes
    assert outcomes[0].pk == outcomes[1].pk == Infraction.objects.get().pk
    assert kinds(account) == [("charge_paid", LIQUID), ("med_hold", -LIQUID)]
    assert books(account) == Books(available=0, held=LIQUID, hold_uncovered=0)


def test_many_copies_of_each_record_at_once_move_the_money_once(acquirer: Acquirer, account: Account) -> None:
    charge = paid_charge_of(account, acquirer)
    unknown = record("E00000000202611280000000000000x1", external_id="inf-unknown")

    def copies(rec: Any, n: int = 6) -> list[Callable[[], Any]]:
        return [lambda: infraction_apply(acquirer=acquirer, record=rec) for _ in range(n)]

    opened = run_concurrently(copies(record(charge)) + copies(unknown))
    assert all(isinstance(o, Infraction) for o in opened), opened
    assert Infraction.objects.count() == 2
    assert books(account) == Books(available=0, held=LIQUID, hold_uncovered=0)

    closed = run_concurrently(copies(record(charge, Rec.ACCEPTED, returned=6_000)))
    assert all(isinstance(o, Infraction) for o in closed), closed
    assert kinds(account) == [
        ("charge_paid", LIQUID),
        ("med_hold", -LIQUID),
        ("med_hold_release", LIQUID),
        ("med_return", -6_000),
    ]
    assert books(account) == Books(available=LIQUID - 6_000, held=0, hold_uncovered=0)
    assert Charge.objects.get(pk=charge.pk).status == ChargeStatus.REFUNDED
