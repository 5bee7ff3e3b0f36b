"""Infractions on paid charges, as the acquirer's records open and close them
(``infractions.services.infraction_apply``: the only way money moves); and the
fake acquirers (Efí behind mTLS) the acquirer tests use, their fixtures shared."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import pytest
from django.utils import timezone

from accounts.models import Account
from acquirers.adapters.base import InfractionRecord, InfractionStatus
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
