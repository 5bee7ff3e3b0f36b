"""A cycle is never charged twice: two beats at once, a worker killed
between the acquirer's answer and our write, an unclear send, a retry
racing a late payment, a payer's cancel racing a settlement. Threads on
their own PostgreSQL connections; the sandbox's state in Redis is the
acquirer's word."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from accounts.models import Account, LedgerEntry
from acquirers.adapters.base import CycleChargeRequest
from acquirers.adapters.sandbox import SandboxAdapter
from acquirers.models import Acquirer
from payments.models import Charge, ChargeStatus
from recurrences.cycles import cycle_send, cycles_open
from recurrences.models import Cycle, CycleStatus, Journey, Recurrence
from recurrences.outcomes import cycle_sync
from recurrences.payloads import cycle_status
from recurrences.schedule import recurrences_tick
from recurrences.services import recurrence_apply, recurrence_create
from tests.realworld import run_concurrently
from tests.recurrences.support import (
    AMOUNT,
    approve,
    assert_ledger_is_balance,
    make_account,
    make_acquirer,
    noon,
    sandbox,
    scheduled_on,
    settle,
    terms,
)

pytestmark = pytest.mark.django_db(transaction=True)

START = dt.date(2027, 5, 3)
FIRST_DUE = dt.date(2027, 5, 12)  # its window opened on 2 May: the first round sends it


def _charge_of(cycle: Cycle) -> Charge:
    assert cycle.charge_id is not None
    return Charge.objects.get(pk=cycle.charge_id)


@pytest.fixture
def account(db: Any) -> Account:
    return make_account()


@pytest.fixture
def acquirer(db: Any) -> Acquirer:
    return make_acquirer()


def _approved(account: Account, n: int = 0, **kw: Any) -> Recurrence:
    recurrence = recurrence_create(
        account=account,
        terms=terms(first_due=FIRST_DUE, contract=f"C-{n}", **kw),
        journey=Journey.QR,
        now=noon(START),
    )
    approve(recurrence, at=noon(START))
    recurrence.refresh_from_db()
    return recurrence


def _credits(account: Account) -> int:
    return LedgerEntry.objects.filter(account=account, kind=LedgerEntry.Kind.CHARGE_PAID).count()


def test_two_beats_at_once_open_and_send_each_cycle_once(account: Account, acquirer: Acquirer) -> None:
    recurrences = [_approved(account, n) for n in range(6)]
    outcomes = run_concurrently([lambda: recurrences_tick(now=noon(START)) for _ in range(3)])
    assert not [o for o in outcomes if isinstance(o, BaseException)]
    cycles = Cycle.objects.filter(recurrence__in=recurrences)
    assert cycles.count() == 6
    assert set(cycles.values_list("status", flat=True)) == {CycleStatus.ACTIVE}
    assert Charge.objects.filter(account=account).count() == 6
    # The acquirer holds one cobr per cycle: each was sent once or, when two
    # rounds raced past the lock, the same txid again (an idempotent PUT).
    for cycle in cycles:
        assert sandbox(acquirer).cycle_charge_status(cycle.txid).amount == AMOUNT


def test_a_worker_killed_after_the_acquirer_took_the_cobr_stores_it_once_on_the_next_round(
    account: Account, acquirer: Acquirer
) -> None:
    recurrence = _approved(account)
    (cycle_id,) = cycles_open(recurrence_id=recurrence.pk, today=START)
    cycle = Cycle.objects.get(pk=cycle_id)
    # A worker counted its send, the acquirer took the cobr, and the worker died before writing the answer.
    Cycle.objects.filter(pk=cycle.pk).update(sends=1)
    request = CycleChargeRequest(txid=cycle.txid, id_rec=recurrence.id_rec, due_date=cycle.due_date, amount=AMOUNT)
    sandbox(acquirer).create_cycle_charge(request)
    assert not Charge.objects.exists()

    recurrences_tick(now=noon(START))  # the next round sends the same txid: the acquirer answers with that cobr
    cycle.refresh_from_db()
    assert cycle.status == CycleStatus.ACTIVE
    assert cycle.sends == 2
    assert Charge.objects.filter(txid=cycle.txid).count() == 1
    assert cycle_send(cycle_id=cycle.pk, today=START) == CycleStatus.ACTIVE  # once stored, a repeat is a no-op
    assert Charge.objects.filter(txid=cycle.txid).count() == 1


def test_an_unclear_send_is_sent_again_with_the_same_txid_and_stored_once(account: Account, acquirer: Acquirer) -> None:
    recurrence = _approved(account)
    Acquirer.objects.filter(pk=acquirer.pk).update(options={"charge": "timeout", "payout": "ok"}, read_timeout_ms=300)
    recurrences_tick(now=noon(START))
    cycle = Cycle.objects.get(recurrence=recurrence)
    assert cycle.status == CycleStatus.SCHEDULED
    assert cycle.sends == 1
    assert cycle.charge_id is None
    # The acquirer did create it (late); the next round asks again with the same txid and stores it once.
    Acquirer.objects.filter(pk=acquirer.pk).update(options={"charge": "ok", "payout": "ok"})
    recurrences_tick(now=noon(START, 13))
    cycle.refresh_from_db()
    assert cycle.status == CycleStatus.ACTIVE
    assert cycle.sends == 2
    assert Charge.objects.filter(txid=cycle.txid).count() == 1
    assert_ledger_is_balance(account)


def test_a_retry_racing_a_late_payment_credits_the_cycle_once(account: Account, acquirer: Acquirer) -> None:
    recurrence = _approved(account)
    recurrences_tick(now=noon(START))
    cycle = Cycle.objects.get(recurrence=recurrence)
    settle(cycle, on=FIRST_DUE, paid=False)
    recurrences_tick(now=noon(FIRST_DUE, 13))  # refused: a retry asked for the next day
    cycle.refresh_from_db()
    assert cycle.status == CycleStatus.RETRYING
    assert cycle.retries == 1
    retry_day = scheduled_on(cycle)
    assert retry_day == FIRST_DUE + dt.timedelta(days=1)
    settle(cycle, on=retry_day, paid=True)
    # Several readers at once (two beats, a worker's sync): one credit.
    outcomes = run_concurrently([lambda: cycle_sync(cycle_id=cycle.pk, today=retry_day) for _ in range(4)])
    assert not [o for o in outcomes if isinstance(o, BaseException)]
    cycle.refresh_from_db()
    assert cycle_status(cycle) == "paid"
    assert _credits(account) == 1
    assert_ledger_is_balance(account)


def test_a_payers_cancel_racing_the_settlement_ends_as_one_of_them(account: Account, acquirer: Acquirer) -> None:
    for n in range(5):
        recurrence = _approved(account, n)
        recurrences_tick(now=noon(START))
        cycle = Cycle.objects.get(recurrence=recurrence)
        adapter = sandbox(acquirer)

        def pay(cycle: Cycle = cycle) -> None:
            settle(cycle, on=FIRST_DUE, paid=True)
            cycle_sync(cycle_id=cycle.pk, today=FIRST_DUE)

        def cancel(recurrence: Recurrence = recurrence, adapter: SandboxAdapter = adapter) -> None:
            state = adapter.recurrence_payer_cancel(recurrence.id_rec)
            recurrence_apply(recurrence_id=recurrence.pk, state=state)

        outcomes = run_concurrently([pay, cancel])
        assert not [o for o in outcomes if isinstance(o, BaseException) and not isinstance(o, AssertionError)]
        cycle_sync(cycle_id=cycle.pk, today=FIRST_DUE)
        cycle.refresh_from_db()
        charge = _charge_of(cycle)
        paid_there = adapter.cycle_charge_status(cycle.txid).status == "CONCLUIDA"
        if paid_there:
            assert charge.status == ChargeStatus.PAID
            assert cycle_status(cycle) == "paid"
        else:
            assert charge.status == ChargeStatus.CANCELED
            assert cycle_status(cycle) == "cancelled"
    assert _credits(account) == Charge.objects.filter(account=account, status=ChargeStatus.PAID).count()
    assert_ledger_is_balance(account)
