"""A recurrence's life at the service: created through the chain (an
acquirer that timed out has its orphan found and cancelled there), the
payer's answer (approved, rejected, expired) read back, the merchant's
cancel effective here at once and confirmed there, a late approval that
skips cycles no longer chargeable, a window closed with the acquirer down,
variable amounts given in time or missed."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.utils import timezone

from accounts.models import Account
from acquirers.adapters.sandbox import new_e2e_id
from acquirers.models import Acquirer
from core.exceptions import PixServiceError
from recurrences import exceptions as err
from recurrences.authorisations import orphan_cancel, recurrence_cancel_there, recurrence_sync
from recurrences.cycles import cycle_amount_set
from recurrences.models import Cycle, CycleStatus, Journey, Recurrence, RecurrenceStatus
from recurrences.schedule import recurrences_tick
from recurrences.services import recurrence_cancel, recurrence_create
from tests.recurrences.support import (
    AMOUNT,
    approve,
    assert_ledger_is_balance,
    make_account,
    make_acquirer,
    noon,
    sandbox,
    terms,
)
from webhooks.models import WebhookEvent

pytestmark = pytest.mark.django_db(transaction=True)

START = dt.date(2027, 5, 3)
DUE = dt.date(2027, 5, 12)


@pytest.fixture
def account(db: Any) -> Account:
    return make_account()


def _events(record: Any) -> list[str]:
    return list(
        WebhookEvent.objects.filter(record_id=record.pk).order_by("created_at").values_list("status", flat=True)
    )


def test_a_create_that_timed_out_goes_to_the_next_acquirer_and_the_orphan_is_cancelled(account: Account) -> None:
    slow = make_acquirer(charge="timeout")
    Acquirer.objects.filter(pk=slow.pk).update(read_timeout_ms=300)
    ok = make_acquirer()
    Acquirer.objects.filter(pk=ok.pk).update(default_priority=2)
    slow.refresh_from_db()
    asked_at = timezone.now()  # the acquirers' clocks are real: the orphan is looked for from then on
    recurrence = recurrence_create(account=account, terms=terms(first_due=DUE), journey=Journey.QR, now=noon(START))
    assert recurrence.acquirer_id == ok.pk
    # The slow one created it anyway; the orphan task finds it by debtor and contract and cancels it there.
    found = sandbox(slow).find_recurrence(debtor_document="52998224725", contract="ASSINATURA-1", since=asked_at)
    assert found is not None  # CRIADA, or CANCELADA already when a worker ran the orphan task first
    assert orphan_cancel(acquirer_id=slow.pk, debtor_document="52998224725", contract="ASSINATURA-1", since=asked_at)
    assert sandbox(slow).recurrence_status(found.id_rec).status == "CANCELADA"
    assert sandbox(ok).recurrence_status(recurrence.id_rec).status == "CRIADA"  # ours is left alone


def test_one_live_recurrence_per_debtor_and_contract(account: Account) -> None:
    make_acquirer()
    recurrence_create(account=account, terms=terms(first_due=DUE), journey=Journey.QR, now=noon(START))
    with pytest.raises(err.LiveRecurrenceExists):
        recurrence_create(account=account, terms=terms(first_due=DUE), journey=Journey.QR, now=noon(START))
    assert Recurrence.objects.count() == 1


@pytest.mark.parametrize(("answer", "status"), [("reject", "rejected"), ("expire", "expired")])
def test_the_payers_refusal_or_silence_ends_it_without_cycles(account: Account, answer: str, status: str) -> None:
    acquirer = make_acquirer()
    recurrence = recurrence_create(account=account, terms=terms(first_due=DUE), journey=Journey.QR, now=noon(START))
    getattr(sandbox(acquirer), f"recurrence_{answer}")(recurrence.id_rec)
    assert recurrence_sync(recurrence_id=recurrence.pk, now=noon(START, 13))
    recurrence.refresh_from_db()
    assert recurrence.status == status
    assert recurrence.ended_at is not None
    recurrences_tick(now=noon(DUE))
    assert not Cycle.objects.exists()
    assert _events(recurrence) == ["created", status]


def test_the_merchants_cancel_stops_the_open_cycle_and_is_confirmed_there(account: Account) -> None:
    acquirer = make_acquirer()
    recurrence = recurrence_create(account=account, terms=terms(first_due=DUE), journey=Journey.QR, now=noon(START))
    approve(recurrence, at=noon(START))
    recurrences_tick(now=noon(START))
    cycle = Cycle.objects.get()
    assert cycle.status == CycleStatus.ACTIVE

    cancelled = recurrence_cancel(recurrence=recurrence, now=noon(START, 14))
    assert cancelled.status == RecurrenceStatus.CANCELLED
    assert cancelled.cancelled_by == "merchant"
    assert cancelled.cancel_pending
    cycle.refresh_from_db()
    assert cycle.status == CycleStatus.CANCELLED
    assert recurrence_cancel_there(recurrence_id=recurrence.pk)
    recurrence.refresh_from_db()
    assert not recurrence.cancel_pending
    assert sandbox(acquirer).recurrence_status(recurrence.id_rec).status == "CANCELADA"
    # Cancelling again changes nothing; no cycle opens after it.
    assert recurrence_cancel(recurrence=recurrence).status == RecurrenceStatus.CANCELLED
    recurrences_tick(now=noon(DUE + dt.timedelta(days=25)))
    assert Cycle.objects.count() == 1
    assert _events(recurrence) == ["created", "approved", "cancelled"]
    assert_ledger_is_balance(account)


def test_a_rejected_recurrence_cannot_be_cancelled(account: Account) -> None:
    acquirer = make_acquirer()
    recurrence = recurrence_create(account=account, terms=terms(first_due=DUE), journey=Journey.QR, now=noon(START))
    sandbox(acquirer).recurrence_reject(recurrence.id_rec)
    recurrence_sync(recurrence_id=recurrence.pk)
    with pytest.raises(err.RecurrenceEnded):
        recurrence_cancel(recurrence=recurrence)


def test_a_late_approval_skips_cycles_no_longer_chargeable(account: Account) -> None:
    make_acquirer()
    recurrence = recurrence_create(account=account, terms=terms(first_due=DUE), journey=Journey.QR, now=noon(START))
    approve(recurrence, at=noon(DUE - dt.timedelta(days=1)))  # the first window closed on the 10th
    recurrence.refresh_from_db()
    assert recurrence.next_index == 1
    recurrences_tick(now=noon(DUE))
    assert not Cycle.objects.exists()
    recurrences_tick(now=noon(dt.date(2027, 6, 2)))  # the second cycle's window opens
    assert list(Cycle.objects.values_list("index", "status")) == [(1, CycleStatus.ACTIVE)]


def test_a_window_that_closes_with_the_acquirer_down_leaves_the_cycle_missed(account: Account) -> None:
    acquirer = make_acquirer()
    recurrence = recurrence_create(account=account, terms=terms(first_due=DUE), journey=Journey.QR, now=noon(START))
    approve(recurrence, at=noon(START))
    Acquirer.objects.filter(pk=acquirer.pk).update(options={"charge": "fail", "payout": "ok"})
    for day in (START, START + dt.timedelta(days=3), DUE - dt.timedelta(days=2)):
        recurrences_tick(now=noon(day))
    cycle = Cycle.objects.get()
    assert cycle.status == CycleStatus.SCHEDULED
    assert cycle.sends == 3
    recurrences_tick(now=noon(DUE - dt.timedelta(days=1)))  # the window closed: read back, none there
    cycle.refresh_from_db()
    assert cycle.status == CycleStatus.MISSED
    assert cycle.charge_id is None
    assert _events(cycle)[-1] == "missed"


def test_variable_amounts_are_given_in_time_or_the_cycle_is_missed(account: Account) -> None:
    make_acquirer()
    recurrence = recurrence_create(
        account=account,
        terms=terms(first_due=DUE, amount=None, max_amount=20000),
        journey=Journey.QR,
        now=noon(START),
    )
    approve(recurrence, at=noon(START))
    recurrence.refresh_from_db()
    with pytest.raises(err.CycleAmountRefused):
        cycle_amount_set(recurrence=recurrence, index=0, amount=20001, today=START)
    # The second cycle's amount may come early; the first's window opens with none.
    cycle_amount_set(recurrence=recurrence, index=1, amount=15000, today=START)
    recurrences_tick(now=noon(START))
    assert dict(Cycle.objects.values_list("index", "status")) == {
        0: CycleStatus.AWAITING_AMOUNT,
        1: CycleStatus.SCHEDULED,
    }
    recurrences_tick(now=noon(DUE - dt.timedelta(days=1)))  # the first window closed without an amount
    with pytest.raises(err.CycleAmountRefused):
        cycle_amount_set(recurrence=recurrence, index=0, amount=AMOUNT, today=DUE - dt.timedelta(days=1))
    recurrences_tick(now=noon(dt.date(2027, 6, 2)))  # the second's window opens: sent with its amount
    cycles = dict(Cycle.objects.values_list("index", "status"))
    assert cycles == {0: CycleStatus.MISSED, 1: CycleStatus.ACTIVE}
    second = Cycle.objects.select_related("charge").get(index=1)
    assert second.charge is not None
    assert second.charge.amount == 15000
    with pytest.raises(PixServiceError):  # sent: its amount is frozen
        cycle_amount_set(recurrence=recurrence, index=1, amount=16000, today=dt.date(2027, 6, 2))


def test_a_recurrence_past_its_last_cycle_is_completed_and_frees_its_contract(account: Account) -> None:
    acquirer = make_acquirer()
    recurrence = recurrence_create(
        account=account, terms=terms(first_due=DUE, cycles=1), journey=Journey.QR, now=noon(START)
    )
    approve(recurrence, at=noon(START))
    recurrences_tick(now=noon(START))
    cycle = Cycle.objects.get()
    sandbox(acquirer).cycle_settle(cycle.txid, on=DUE, e2e_id=new_e2e_id(at=noon(DUE)), at=noon(DUE))
    recurrences_tick(now=noon(DUE, 13))
    recurrence.refresh_from_db()
    assert recurrence.status == RecurrenceStatus.COMPLETED
    assert recurrence.ended_at is not None
    assert _events(recurrence)[-1] == "completed"
    # Its contract may take a new recurrence; the completed one is not read back any more.
    recurrence_create(account=account, terms=terms(first_due=DUE.replace(year=2028)), journey=Journey.QR, now=noon(DUE))
    assert Recurrence.objects.count() == 2
