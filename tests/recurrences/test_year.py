"""A year of a monthly subscription on a simulated clock, one beat round a
day (no sleeping): the payer authorises by QR; twelve cycles are each
sent once inside their window, settled by the payer's bank on their due
date; the third is refused first and paid on the policy's retry; the
ledger equals the balance every day, and the money is exactly twelve
cycles' net. A second subscriber authorises by push, pays twice, then
cancels at their bank: the open cycle is cancelled, no cycle follows."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from typing import Any

import pytest

from accounts.models import Account, LedgerEntry
from acquirers.models import Acquirer
from payments.models import Charge, ChargeStatus
from recurrences.cycle_base import cycle_txid
from recurrences.models import Cycle, CycleStatus, Journey, Recurrence, RecurrenceStatus
from recurrences.payloads import cycle_status
from recurrences.schedule import recurrences_tick
from recurrences.services import PayerBank, recurrence_apply, recurrence_create
from tests.recurrences.support import (
    AMOUNT,
    PAYER_ISPB,
    assert_ledger_is_balance,
    fee,
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

START = dt.date(2027, 1, 4)
FIRST_DUE = dt.date(2027, 1, 20)
REFUSED_ONCE = 2  # the third cycle


@pytest.fixture
def account(db: Any) -> Account:
    return make_account()


@pytest.fixture
def acquirer(db: Any) -> Acquirer:
    return make_acquirer()


def _days(first: dt.date, last: dt.date) -> list[dt.date]:
    return [first + dt.timedelta(days=n) for n in range((last - first).days + 1)]


def _run_day(day: dt.date, plan: dict[str, list[bool]]) -> None:
    """One beat round at noon; the payer's bank settles (or refuses, per
    ``plan``: cycle txid → outcomes of its attempts in order) whatever is
    scheduled today; the next round, an hour later, reads it."""
    recurrences_tick(now=noon(day))
    for cycle in Cycle.objects.filter(status__in=[CycleStatus.ACTIVE, CycleStatus.RETRYING]).select_related(
        "recurrence__acquirer"
    ):
        if scheduled_on(cycle) != day:
            continue
        outcomes = plan.setdefault(cycle.txid, [])
        settle(cycle, on=day, paid=outcomes.pop(0) if outcomes else True)
    recurrences_tick(now=noon(day, 13))


def test_a_year_of_monthly_cycles_with_one_retry_and_a_payer_cancellation(account: Account, acquirer: Acquirer) -> None:
    qr = recurrence_create(account=account, terms=terms(first_due=FIRST_DUE), journey=Journey.QR, now=noon(START))
    push = recurrence_create(
        account=account,
        terms=terms(first_due=FIRST_DUE, contract="ASSINATURA-2", document="11144477735"),
        journey=Journey.PUSH,
        payer_bank=PayerBank(ispb=PAYER_ISPB, branch="0001", account="123456"),
        now=noon(START),
    )
    assert qr.emv
    assert qr.location
    assert qr.status == RecurrenceStatus.CREATED
    assert qr.acquirer_id == acquirer.pk

    # The push request reaches the payer's bank (the round sends it), then both payers authorise.
    recurrences_tick(now=noon(START))
    push.refresh_from_db()
    assert push.push_status == "ENVIADA"
    for recurrence in (qr, push):
        sandbox(acquirer).recurrence_approve(recurrence.id_rec, payer_ispb=PAYER_ISPB)
    recurrences_tick(now=noon(START, 13))  # the round reads both back: approved
    for recurrence in (qr, push):
        recurrence.refresh_from_db()
        assert recurrence.status == RecurrenceStatus.APPROVED
        assert recurrence.payer_ispb == PAYER_ISPB

    plan: dict[str, list[bool]] = {cycle_txid(qr.pk, REFUSED_ONCE): [False, True]}
    for day in _days(START + dt.timedelta(days=1), dt.date(2027, 3, 15)):
        _run_day(day, plan)
        assert_ledger_is_balance(account)

    # The second payer cancels at their bank with cycle 3 sent; the round hears it.
    cancelled = sandbox(acquirer).recurrence_payer_cancel(push.id_rec)
    recurrence_apply(recurrence_id=push.pk, state=cancelled, now=noon(dt.date(2027, 3, 15), 14))

    for day in _days(dt.date(2027, 3, 16), dt.date(2028, 1, 31)):
        _run_day(day, plan)
        assert_ledger_is_balance(account)

    qr.refresh_from_db()
    push.refresh_from_db()
    assert push.status == RecurrenceStatus.CANCELLED
    assert push.cancelled_by == "payer"
    cycles = list(Cycle.objects.filter(recurrence=qr).select_related("charge").order_by("index"))
    assert [c.index for c in cycles] == list(range(12))
    assert [cycle_status(c) for c in cycles] == ["paid"] * 12
    assert {c.due_date.day for c in cycles} == {20}
    assert cycles[REFUSED_ONCE].retries == 1
    refused = cycles[REFUSED_ONCE].charge
    assert refused is not None
    assert refused.paid_at is not None
    assert all(c.retries == 0 for i, c in enumerate(cycles) if i != REFUSED_ONCE)

    pushed = list(Cycle.objects.filter(recurrence=push).select_related("charge").order_by("index"))
    assert [cycle_status(c) for c in pushed] == ["paid", "paid", "cancelled"]
    assert pushed[2].charge is not None
    assert pushed[2].charge.status == ChargeStatus.CANCELED

    # Exactly fourteen cycles' net money: each paid once, nothing else credited.
    net = AMOUNT - fee(AMOUNT)
    credits = LedgerEntry.objects.filter(account=account, kind=LedgerEntry.Kind.CHARGE_PAID)
    assert credits.count() == 14
    assert sum(credits.values_list("amount", flat=True)) == 14 * net
    assert_ledger_is_balance(account)
    assert Charge.objects.filter(account=account).count() == 15

    # A webhook for every change: the authorisations, and each cycle's.
    events = Counter(WebhookEvent.objects.filter(account=account).values_list("event_type", "status"))
    assert events[("recurrence", "approved")] == 2
    assert events[("recurrence", "cancelled")] == 1
    assert events[("recurrence_cycle", "paid")] == 14
    assert events[("recurrence_cycle", "retrying")] == 1
    assert events[("recurrence_cycle", "cancelled")] == 1
    assert not Recurrence.objects.filter(status=RecurrenceStatus.APPROVED).exclude(pk=qr.pk).exists()
