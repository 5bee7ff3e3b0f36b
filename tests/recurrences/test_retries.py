"""The retry policy as the payer's bank refuses attempts: ``3_in_7_days``
retries on D+1, D+3 and D+7 and then fails the cycle; ``none`` fails it at
the first refusal; a refusal that ends the cobr there fails it at once; a
retry whose day passed unsent moves to the next allowed day."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from accounts.models import Account
from acquirers import calls
from acquirers.models import Acquirer
from payments.models import Charge, ChargeStatus
from recurrences import acquirer as recurrence_acquirer
from recurrences.models import Cycle, CycleStatus, Journey
from recurrences.outcomes import cycle_apply
from recurrences.payloads import cycle_status
from recurrences.schedule import recurrences_tick
from recurrences.services import recurrence_create
from tests.recurrences.support import (
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
from webhooks.models import WebhookEvent

pytestmark = pytest.mark.django_db(transaction=True)

START = dt.date(2027, 5, 3)
DUE = dt.date(2027, 5, 12)


def _charge_of(cycle: Cycle) -> Charge:
    assert cycle.charge_id is not None
    return Charge.objects.get(pk=cycle.charge_id)


@pytest.fixture
def account(db: Any) -> Account:
    return make_account()


@pytest.fixture
def acquirer(db: Any) -> Acquirer:
    return make_acquirer()


def _cycle(account: Account, *, retries: bool = True) -> Cycle:
    recurrence = recurrence_create(
        account=account, terms=terms(first_due=DUE, retries=retries), journey=Journey.QR, now=noon(START)
    )
    approve(recurrence, at=noon(START))
    recurrences_tick(now=noon(START))
    return Cycle.objects.select_related("recurrence__acquirer").get(recurrence=recurrence)


def _refuse_on(cycle: Cycle, day: dt.date) -> None:
    assert scheduled_on(cycle) == day
    settle(cycle, on=day, paid=False)
    recurrences_tick(now=noon(day, 13))
    cycle.refresh_from_db()


def test_three_retries_on_d1_d3_d7_then_the_cycle_fails(account: Account, acquirer: Acquirer) -> None:
    cycle = _cycle(account)
    days = [DUE + dt.timedelta(days=n) for n in (0, 1, 3, 7)]
    for day in days[:-1]:
        _refuse_on(cycle, day)
        assert cycle.status == CycleStatus.RETRYING
    assert cycle.retries == 3
    assert cycle.tried_on == [d.isoformat() for d in days]
    _refuse_on(cycle, days[-1])
    assert cycle_status(cycle) == "failed"
    assert cycle.failure_reason.startswith("AM02")
    assert _charge_of(cycle).status == ChargeStatus.CANCELED
    statuses = list(
        WebhookEvent.objects.filter(record_id=cycle.pk).order_by("created_at").values_list("status", flat=True)
    )
    assert statuses.count("retrying") == 3
    assert statuses[-1] == "failed"
    assert_ledger_is_balance(account)


def test_no_retry_policy_fails_the_cycle_at_the_first_refusal(account: Account, acquirer: Acquirer) -> None:
    cycle = _cycle(account, retries=False)
    _refuse_on(cycle, DUE)
    assert cycle_status(cycle) == "failed"
    assert cycle.retries == 0
    assert _charge_of(cycle).status == ChargeStatus.CANCELED


def test_a_refusal_that_ends_the_cobr_fails_the_cycle_at_once(account: Account, acquirer: Acquirer) -> None:
    cycle = _cycle(account)
    assert sandbox(acquirer).cycle_fail(cycle.txid, on=DUE, reason_code="AC05") is not None
    recurrences_tick(now=noon(DUE, 13))
    cycle.refresh_from_db()
    assert cycle_status(cycle) == "failed"
    assert cycle.retries == 0


def test_a_retry_whose_day_passed_unsent_moves_to_the_next_allowed_day(account: Account, acquirer: Acquirer) -> None:
    cycle = _cycle(account)
    settle(cycle, on=DUE, paid=False)
    # The refusal is read (a notification) but the retry for D+1 is not sent: the beat is down that day.
    cycle_apply(cycle_id=cycle.pk, state=sandbox(acquirer).cycle_charge_status(cycle.txid), today=DUE)
    cycle.refresh_from_db()
    assert cycle.status == CycleStatus.RETRYING
    assert cycle.next_retry_on == DUE + dt.timedelta(days=1)
    assert cycle.retries == 0
    # The next round comes two days later: D+1 has passed, the retry goes for D+3.
    later = DUE + dt.timedelta(days=2)
    recurrences_tick(now=noon(later))
    cycle.refresh_from_db()
    assert cycle.next_retry_on == DUE + dt.timedelta(days=3)
    assert cycle.retries == 1
    assert scheduled_on(cycle) == DUE + dt.timedelta(days=3)
    settle(cycle, on=DUE + dt.timedelta(days=3), paid=True)
    recurrences_tick(now=noon(DUE + dt.timedelta(days=3), 13))
    cycle.refresh_from_db()
    assert cycle_status(cycle) == "paid"
    assert_ledger_is_balance(account)


def test_a_retry_asked_without_a_clear_answer_is_recorded_when_read_never_moved(
    account: Account, acquirer: Acquirer, monkeypatch: pytest.MonkeyPatch
) -> None:
    cycle = _cycle(account)
    retry = recurrence_acquirer.retry_cycle

    def made_but_lost(holder: Acquirer, txid: str, on: dt.date) -> Any:
        retry(holder, txid, on)  # the PSP schedules it; its answer never comes back
        return calls.Call(outcome=calls.Outcome.TIMEOUT, label="timeout", latency_ms=0, error=TimeoutError())

    with monkeypatch.context() as patch:
        patch.setattr(recurrence_acquirer, "retry_cycle", made_but_lost)
        _refuse_on(cycle, DUE)
    assert cycle.status == CycleStatus.RETRYING
    assert cycle.retries == 0  # not known to be asked
    # The beat is down until after the retry's day; the next read finds the retry live there.
    later = DUE + dt.timedelta(days=2)
    recurrences_tick(now=noon(later))
    cycle.refresh_from_db()
    assert cycle.retries == 1
    assert cycle.next_retry_on == DUE + dt.timedelta(days=1)  # recorded as it stands, not moved
    assert cycle.status == CycleStatus.RETRYING
    settle(cycle, on=DUE + dt.timedelta(days=1), paid=True)  # the payer's bank settled it that day
    recurrences_tick(now=noon(later, 13))
    cycle.refresh_from_db()
    assert cycle_status(cycle) == "paid"
    assert_ledger_is_balance(account)
