"""A cycle is never charged twice: two beats at once, a worker killed
between the acquirer's answer and our write, an unclear send, a retry
racing a late payment, a payer's cancel racing a settlement. Threads on
their own PostgreSQL connections; the sandbox's state in Redis is the
acquirer's word."""

from __future__ import annotations

import datetime as dt
import threading
from typing import Any

import pytest

from accounts.models import Account, LedgerEntry
from acquirers import calls
from acquirers.adapters.base import AcquirerUnavailable, CycleChargeRequest, CycleChargeState
from acquirers.adapters.sandbox import SandboxAdapter
from acquirers.models import Acquirer
from payments import kinds
from payments.cancel_pursuit import charge_cancel_pursue
from payments.choices import ChargeKind
from payments.models import Charge, ChargeStatus, ChargeTransition
from payments.services import charge_transition
from recurrences import acquirer as recurrence_acquirer
from recurrences import outcomes, payloads
from recurrences.cycles import cycle_send, cycles_open
from recurrences.models import Cycle, CycleStatus, Journey, Recurrence
from recurrences.outcomes import cycle_sync
from recurrences.payloads import cycle_status
from recurrences.schedule import recurrences_tick
from recurrences.services import recurrence_apply, recurrence_cancel, recurrence_create
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


def test_a_cancel_racing_the_expiry_sweep_takes_the_locks_in_one_order(
    account: Account, acquirer: Acquirer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cancel holds the cycle and wants the charge; the sweep holds the
    charge and writes its event: that event never locks the cycle, so both
    finish (before, PostgreSQL killed one as a deadlock: a 500 on the cancel)."""
    recurrence = _approved(account)
    recurrences_tick(now=noon(START))
    cycle = Cycle.objects.get(recurrence=recurrence)
    charge_id = cycle.charge_id
    assert charge_id is not None
    both_hold_their_first_lock = threading.Barrier(2, timeout=20)
    event_of, cancel_charge = payloads._charge_event, outcomes._cancel_charge

    def event_under_the_charges_lock(charge: Charge) -> Any:
        both_hold_their_first_lock.wait()
        return event_of(charge)

    def cancel_under_the_cycles_lock(charge_id: Any) -> bool:
        both_hold_their_first_lock.wait()
        return cancel_charge(charge_id)

    monkeypatch.setitem(kinds._KINDS, ChargeKind.RECURRING, event_under_the_charges_lock)
    monkeypatch.setattr(outcomes, "_cancel_charge", cancel_under_the_cycles_lock)
    results = run_concurrently(
        [
            lambda: recurrence_cancel(recurrence=recurrence),
            lambda: charge_transition(
                charge_id=charge_id,
                to_status=ChargeStatus.CANCELED,
                source=ChargeTransition.Source.EXPIRY,
                only_from=[ChargeStatus.PENDING],
            ),
        ]
    )
    assert not [r for r in results if isinstance(r, BaseException)], results
    cycle.refresh_from_db()
    assert cycle.status == CycleStatus.CANCELLED
    assert Charge.objects.get(pk=charge_id).status == ChargeStatus.CANCELED


def test_a_cobr_made_while_its_recurrence_was_cancelled_is_cancelled_there(
    account: Account, acquirer: Acquirer, monkeypatch: pytest.MonkeyPatch
) -> None:
    recurrence = _approved(account)
    send = recurrence_acquirer.create_cycle

    def cancelled_while_in_flight(holder: Acquirer, request: CycleChargeRequest) -> Any:
        recurrence_cancel(recurrence=recurrence)  # the merchant's cancel lands while PUT /cobr is in flight
        return send(holder, request)

    monkeypatch.setattr(recurrence_acquirer, "create_cycle", cancelled_while_in_flight)
    recurrences_tick(now=noon(START))
    cycle = Cycle.objects.get(recurrence=recurrence)
    assert cycle.status == CycleStatus.CANCELLED
    assert not cycle.send_unclear
    assert cycle.charge is not None
    charge = cycle.charge
    assert charge.status == ChargeStatus.CANCELED  # never pending: nothing to credit
    assert charge_cancel_pursue(charge_id=charge.pk) == "done"
    assert sandbox(acquirer).cycle_charge_status(cycle.txid).status == "CANCELADA"


def test_a_cycle_cancelled_with_its_send_unclear_has_the_cobr_found_and_cancelled(
    account: Account, acquirer: Acquirer
) -> None:
    recurrence = _approved(account)
    Acquirer.objects.filter(pk=acquirer.pk).update(options={"charge": "timeout", "payout": "ok"}, read_timeout_ms=300)
    recurrences_tick(now=noon(START))
    cycle = Cycle.objects.get(recurrence=recurrence)
    assert cycle.send_unclear
    assert cycle.charge_id is None
    recurrence_cancel(recurrence=recurrence)
    cycle.refresh_from_db()
    assert cycle.status == CycleStatus.CANCELLED
    assert cycle.send_unclear  # the acquirer may hold its cobr: the round reads it
    recurrences_tick(now=noon(START, 13))
    cycle.refresh_from_db()
    assert not cycle.send_unclear
    assert cycle.charge is not None
    charge = cycle.charge
    assert charge.status == ChargeStatus.CANCELED
    assert charge_cancel_pursue(charge_id=charge.pk) == "done"
    assert sandbox(acquirer).cycle_charge_status(cycle.txid).status == "CANCELADA"


def test_past_its_window_only_the_acquirers_404_makes_an_unclear_cycle_missed(
    account: Account, acquirer: Acquirer, monkeypatch: pytest.MonkeyPatch
) -> None:
    recurrence = _approved(account)
    (cycle_id,) = cycles_open(recurrence_id=recurrence.pk, today=START)
    Cycle.objects.filter(pk=cycle_id).update(sends=1, send_unclear=True)  # sent; the answer was lost
    closed = FIRST_DUE - dt.timedelta(days=1)
    down: calls.Call[CycleChargeState] = calls.Call(
        outcome=calls.Outcome.UNAVAILABLE, label="unavailable", latency_ms=0, error=AcquirerUnavailable("503")
    )
    with monkeypatch.context() as patch:
        patch.setattr(recurrence_acquirer, "read_cycle", lambda *_: down)
        assert cycle_send(cycle_id=cycle_id, today=closed) == CycleStatus.SCHEDULED  # a 503 says nothing
    assert cycle_send(cycle_id=cycle_id, today=closed) == CycleStatus.MISSED  # the sandbox's 404
