"""Infractions as staff meet them: on a paid charge, applied through
``infraction_apply`` as an acquirer's record (or an approved staff record)
is, at an acquirer with an infractions API or without one."""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Callable
from typing import Any

import pytest
from django.utils import timezone

from accounts.models import Account, LedgerEntry
from accounts.selectors import available_balance
from acquirers import adapters
from acquirers.adapters.base import InfractionDefense, InfractionPage, InfractionRecord, InfractionStatus
from acquirers.adapters.sandbox import SandboxAdapter
from acquirers.models import Acquirer
from infractions.models import Infraction
from infractions.services import infraction_apply
from payments.models import Charge, ChargeStatus
from payments.services import charge_transition
from tests.factories import AcquirerFactory, ChargeFactory

_numbers = itertools.count(1)


@adapters.register
class WithInfractionsApi(SandboxAdapter):
    """A sandbox that lists infractions itself (as Efí does): its record is the evidence."""

    name = "test_office_med_api"
    supports_infractions = True

    def list_infractions(self, since: dt.datetime, page: str | None = None) -> InfractionPage:
        return InfractionPage(records=())

    def defend_infraction(self, defense: InfractionDefense) -> None:
        return None


@pytest.fixture
def with_api(db: Any) -> Acquirer:
    return AcquirerFactory(key="medapi", name="Med Api", adapter=WithInfractionsApi.name)


@pytest.fixture
def without_api(db: Any) -> Acquirer:
    """An acquirer of the API Pix standard, which has no infractions listing."""
    return AcquirerFactory(key="bacenlike", name="Banco Padrao", adapter="bacen_pix", options={})


def paid_charge(account: Account, acquirer: Acquirer, amount: int = 10_000) -> Charge:
    charge = ChargeFactory(account=account, acquirer=acquirer, amount=amount)
    e2e = f"E1234567820261128{next(_numbers):015d}"
    charge_transition(charge_id=charge.pk, to_status=ChargeStatus.PAID, source="acquirer", e2e_id=e2e)
    charge.refresh_from_db()
    return charge


def reported(
    acquirer: Acquirer,
    charge: Charge | None,
    *,
    blocked: int | None = None,
    deadline: dt.timedelta | None = dt.timedelta(days=3),
    status: InfractionStatus = InfractionStatus.OPEN,
    returned: int = 0,
    external_id: str | None = None,
) -> Infraction:
    """The acquirer's record of an infraction on ``charge`` (None: a Pix that matches no charge), applied."""
    amount = charge.amount if charge is not None else 5_000
    record = InfractionRecord(
        external_id=external_id or f"INF{next(_numbers):06d}",
        e2e_id=charge.e2e_id if charge is not None and charge.e2e_id else f"E999{next(_numbers):028d}",
        status=status,
        amount=amount,
        blocked_amount=amount if blocked is None else blocked,
        returned_amount=returned,
        reason="Golpe: pagador diz não reconhecer",
        defense_deadline=timezone.now() + deadline if deadline is not None else None,
    )
    return infraction_apply(acquirer=acquirer, record=record)


@pytest.fixture
def money() -> Callable[[Account], tuple[int, list[tuple[str, int]]]]:
    """The balance and the ledger: what must not move before an approval."""

    def read(account: Account) -> tuple[int, list[tuple[str, int]]]:
        entries = LedgerEntry.objects.filter(account=account).order_by("id").values_list("kind", "amount")
        return available_balance(account), list(entries)

    return read
