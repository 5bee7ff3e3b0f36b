"""A cycle's money is a charge's: reconciliation credits a cycle the beat has
not read yet (once), a paid cycle is refunded as any charge, and the expiry
sweep ends a cycle its payer's bank never settled, its cobr cancelled there."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from rest_framework.test import APIClient

from accounts.models import Account, LedgerEntry
from accounts.selectors import available_balance, ledger_sum
from acquirers.models import Acquirer
from payments.cancel_pursuit import charge_cancel_pursue
from payments.models import Charge, ChargeStatus
from payments.refunds import RefundOutcome, charge_refund_pursue
from payments.services import charges_expire
from reconciliation.run import acquirer_reconcile
from recurrences.models import Cycle, CycleStatus, Journey
from recurrences.payloads import cycle_status
from recurrences.schedule import recurrences_tick
from recurrences.services import recurrence_create
from tests.factories import AccountFactory
from tests.recurrences.support import (
    AMOUNT,
    FEE_BPS,
    FEE_FIXED,
    approve,
    assert_ledger_is_balance,
    fee,
    make_acquirer,
    noon,
    sandbox,
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
    return AccountFactory(cashin_fee_fixed=FEE_FIXED, cashin_fee_bps=FEE_BPS)


@pytest.fixture
def acquirer(db: Any) -> Acquirer:
    return make_acquirer()


@pytest.fixture
def cycle(account: Account, acquirer: Acquirer) -> Cycle:
    recurrence = recurrence_create(account=account, terms=terms(first_due=DUE), journey=Journey.QR, now=noon(START))
    approve(recurrence, at=noon(START))
    recurrences_tick(now=noon(START))
    return Cycle.objects.select_related("recurrence__acquirer").get(recurrence=recurrence)


def _credits(account: Account) -> list[int]:
    return list(
        LedgerEntry.objects.filter(account=account, kind=LedgerEntry.Kind.CHARGE_PAID).values_list("amount", flat=True)
    )


def test_reconciliation_credits_a_cycle_paid_there_before_the_beat_read_it_once(
    account: Account, acquirer: Acquirer, cycle: Cycle
) -> None:
    settle(cycle, on=DUE, paid=True)
    run = acquirer_reconcile(acquirer_id=acquirer.pk, day=DUE)
    run.refresh_from_db()
    assert run.status == "done", run.error
    assert run.healed_count == 1
    assert _charge_of(cycle).status == ChargeStatus.PAID
    cycle.refresh_from_db()
    assert cycle_status(cycle) == "paid"

    recurrences_tick(now=noon(DUE, 13))  # the beat reads the cobr: nothing more to credit
    cycle.refresh_from_db()
    assert cycle.status == CycleStatus.PAID
    assert _credits(account) == [AMOUNT - fee(AMOUNT)]
    assert_ledger_is_balance(account)


def test_a_paid_cycle_is_refunded_as_any_charge(api: APIClient, account: Account, cycle: Cycle) -> None:
    settle(cycle, on=DUE, paid=True)
    recurrences_tick(now=noon(DUE, 13))
    assert cycle.charge_id is not None
    response = api.post(
        f"/api/transactions/{cycle.charge_id}/refund", {"reason": "cancelamento do plano"}, format="json"
    )
    assert response.status_code == 202, response.content
    assert charge_refund_pursue(refund_id=response.json()["data"]["id"]) is RefundOutcome.REFUNDED
    cycle.refresh_from_db()
    assert cycle_status(cycle) == "refunded"
    assert available_balance(account) == ledger_sum(account) == 0
    statuses = list(
        WebhookEvent.objects.filter(record_id=cycle.pk).order_by("created_at").values_list("event_type", "status")
    )
    assert statuses[-2:] == [("recurrence_cycle", "paid"), ("recurrence_cycle", "refunded")]


def test_a_cycle_never_settled_expires_and_its_cobr_is_cancelled_there(
    account: Account, acquirer: Acquirer, cycle: Cycle
) -> None:
    charge = _charge_of(cycle)
    assert charges_expire(now=charge.expires_at + dt.timedelta(seconds=1)) == 1
    assert charge_cancel_pursue(charge_id=charge.pk) == "done"
    assert sandbox(acquirer).cycle_charge_status(cycle.txid).status == "CANCELADA"
    cycle.refresh_from_db()
    assert cycle_status(cycle) == "cancelled"
    assert _credits(account) == []
    assert_ledger_is_balance(account)
