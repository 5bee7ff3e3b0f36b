"""Infractions on paid charges, as the acquirer's records open and close them
(``infractions.services.infraction_apply``: the only way money moves); and the
fake acquirers (Efí behind mTLS) the acquirer tests use, their fixtures shared."""

from __future__ import annotations

import datetime as dt
import itertools
import uuid
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
from infractions import statement
from infractions.models import Infraction
from infractions.services import infraction_apply
from payments.models import Charge, ChargeStatus
from payments.services import charge_transition
from tests.acquirers.conftest import efi_acquirer, fake_efi, make_efi_acquirer  # noqa: F401 - fixtures
from tests.factories import AcquirerFactory, ChargeFactory


@pytest.fixture(autouse=True)
def _statement_knows_infractions() -> None:
    # What the infractions app's AppConfig.ready does (idempotent).
    statement.register()


@pytest.fixture
def acquirer(db: Any) -> Acquirer:
    return AcquirerFactory(key="sbx_med")


def paid_charge(account: Account, acquirer: Acquirer, amount: int = 10_000) -> Charge:
    """A charge the acquirer confirmed: its liquid amount (amount - 1 %) is in the balance."""
    charge = ChargeFactory(account=account, acquirer=acquirer, amount=amount)
    e2e_id = f"E{uuid.uuid4().hex}"[:32]
    assert charge_transition(charge_id=charge.pk, to_status=ChargeStatus.PAID, e2e_id=e2e_id, source="acquirer")
    charge.refresh_from_db()
    return charge


def record_of(
    charge: Charge,
    *,
    external_id: str,
    status: InfractionStatus = InfractionStatus.OPEN,
    blocked: int | None = None,
    returned: int = 0,
    deadline: dt.datetime | None = None,
) -> InfractionRecord:
    return InfractionRecord(
        external_id=external_id,
        e2e_id=charge.e2e_id or "",
        status=status,
        amount=charge.amount,
        blocked_amount=charge.amount if blocked is None else blocked,
        returned_amount=returned,
        reason="Fraude: o pagador não reconhece a transação",
        opened_at=timezone.now(),
        defense_deadline=deadline or timezone.now() + dt.timedelta(days=7),
    )


def open_infraction(acquirer: Acquirer, charge: Charge, *, external_id: str | None = None, **fields: Any) -> Infraction:
    """The acquirer reports an infraction on ``charge`` (by default with a block of the whole amount)."""
    record = record_of(charge, external_id=external_id or uuid.uuid4().hex, **fields)
    return infraction_apply(acquirer=acquirer, record=record)


def close_infraction(
    acquirer: Acquirer, infraction: Infraction, status: InfractionStatus, returned: int = 0
) -> Infraction:
    """The acquirer's later record of the same infraction: decided."""
    assert infraction.charge_id is not None
    charge = Charge.objects.get(pk=infraction.charge_id)
    record = record_of(
        charge,
        external_id=infraction.external_id,
        status=status,
        returned=returned,
        deadline=infraction.defense_deadline,
    )
    infraction_apply(acquirer=acquirer, record=record)
    infraction.refresh_from_db()
    return infraction


# ---- staff's side (tests/infractions/test_admin.py and beside it)

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
