"""Which pending charges the status poll asks about: every one gets its
turn, however many due-date charges stay pending for weeks."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest
from django.utils import timezone

from payments import status_polling
from payments.choices import ChargeKind
from payments.models import Charge
from tests.factories import AccountFactory, AcquirerFactory, ChargeFactory

pytestmark = pytest.mark.django_db


def test_polling_reaches_a_new_charge_behind_more_old_due_charges_than_a_run_takes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    polled: list[uuid.UUID] = []

    def poll(*, charge_id: uuid.UUID) -> list[object]:
        polled.append(charge_id)
        return []

    monkeypatch.setattr(status_polling, "charge_status_poll", poll)
    monkeypatch.setattr(status_polling, "can_read", lambda acquirer, *, due: True)  # cob and cobv read back
    account, acquirer = AccountFactory(), AcquirerFactory(adapter="sandbox")
    weeks_ago = timezone.now() - dt.timedelta(days=20)
    old = [
        ChargeFactory(account=account, acquirer=acquirer, kind=ChargeKind.DUE, created_at=weeks_ago) for _ in range(4)
    ]
    assert status_polling.charges_status_poll(limit=4) == 0
    assert sorted(polled) == sorted(c.pk for c in old)  # each old one polled now: not again for a while

    polled.clear()
    new = ChargeFactory(account=account, acquirer=acquirer, created_at=timezone.now() - dt.timedelta(minutes=3))
    assert new.kind == ChargeKind.IMMEDIATE

    status_polling.charges_status_poll(limit=3)  # fewer than the old charges still pending

    assert polled == [new.pk]
    assert Charge.objects.filter(status="pending").count() == 5
