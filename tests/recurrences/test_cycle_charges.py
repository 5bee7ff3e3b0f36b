"""A cycle's money is a charge: it shows in the transactions like any other,
but has no code to scan and is not paid by the generic sandbox driver (its
payer's bank settles it)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from rest_framework.test import APIClient

from accounts.models import Account
from payments import exceptions as payment_errors
from payments.models import Charge, ChargeStatus
from recurrences.models import Cycle, Journey
from recurrences.schedule import recurrences_tick
from recurrences.services import recurrence_create
from tests.factories import AccountFactory
from tests.recurrences.support import AMOUNT, FEE_BPS, FEE_FIXED, approve, fee, make_acquirer, noon, terms

pytestmark = pytest.mark.django_db(transaction=True)

START = dt.date(2027, 5, 3)


@pytest.fixture
def account(db: Any) -> Account:
    return AccountFactory(cashin_fee_fixed=FEE_FIXED, cashin_fee_bps=FEE_BPS)


@pytest.fixture
def cycle(account: Account) -> Cycle:
    make_acquirer()
    recurrence = recurrence_create(
        account=account, terms=terms(first_due=dt.date(2027, 5, 12)), journey=Journey.QR, now=noon(START)
    )
    approve(recurrence, at=noon(START))
    recurrences_tick(now=noon(START))
    return Cycle.objects.select_related("charge").get(recurrence=recurrence)


def test_a_cycles_charge_is_listed_with_the_transactions(api: APIClient, cycle: Cycle) -> None:
    assert cycle.charge is not None
    response = api.get(f"/api/transactions/{cycle.charge.pk}")
    assert response.status_code == 200
    data = response.json()["data"]
    assert data["amount"] == AMOUNT
    assert data["status"] == "pending"
    assert cycle.charge.platform_tax == fee(AMOUNT)


def test_a_cycle_has_no_qr_code(api: APIClient, cycle: Cycle) -> None:
    assert cycle.charge is not None
    response = api.get(f"/api/transactions/{cycle.charge.pk}/qrcode")
    assert response.status_code == 404
    assert response.json()["message"] == payment_errors.NO_QR_CODE


@pytest.mark.parametrize("action", ["pay", "fail"])
def test_the_generic_sandbox_driver_does_not_settle_a_cycle(api: APIClient, cycle: Cycle, action: str) -> None:
    assert cycle.charge is not None
    response = api.post(f"/api/sandbox/transactions/{cycle.charge.pk}/{action}")
    assert response.status_code == 409
    assert response.json()["message"] == payment_errors.CYCLE_PAID_BY_PAYERS_BANK
    assert Charge.objects.get(pk=cycle.charge.pk).status == ChargeStatus.PENDING
