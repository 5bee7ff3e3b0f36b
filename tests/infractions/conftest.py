"""Fixtures of the MED infraction tests: a sandbox acquirer, a paid charge
with an e2e id whose ``liquid_amount`` differs from its ``amount``, the
acquirer's record of an infraction on it, and the books every path must
leave exact (``books``)."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from django.db.models import Sum
from django.utils import timezone

from accounts.models import Account, AccountBalance, LedgerEntry
from acquirers.adapters.base import InfractionRecord, InfractionStatus
from acquirers.adapters.sandbox import new_e2e_id
from acquirers.models import Acquirer
from infractions.models import Infraction
from payments.models import Charge, ChargeStatus, ChargeTransition
from payments.services import charge_transition
from tests.factories import AcquirerFactory

AMOUNT = 10_000
#: ``charge``'s liquid amount: 180 of fees (30 + 1.5 %) left out.
LIQUID = 9_820


@pytest.fixture
def acquirer(db: Any) -> Acquirer:
    """The sandbox acquirer the charges are paid at (and their infractions reported by)."""
    return AcquirerFactory(key="sbx_med")


def paid_charge_of(account: Account, acquirer: Acquirer, amount: int = AMOUNT, liquid: int | None = None) -> Charge:
    """A charge paid with an e2e id (its ``charge_paid`` credit posted), as the
    acquirer's notification would leave it. The row is written directly: a
    test needs many, and charge creation is not under test here. Its fee is
    1.8 % unless ``liquid`` says otherwise."""
    liquid = amount * LIQUID // AMOUNT if liquid is None else liquid
    charge = Charge.objects.create(
        account=account,
        acquirer=acquirer,
        amount=amount,
        platform_tax=amount - liquid,
        liquid_amount=liquid,
        txid=uuid.uuid4().hex,
        emv="000201",
        buyer_name="Fulano de Tal",
        buyer_document="52998224725",
        buyer_phone="11999998888",
        expires_at=timezone.now() + dt.timedelta(hours=1),
    )
    assert charge_transition(
        charge_id=charge.pk, to_status=ChargeStatus.PAID, source=ChargeTransition.Source.ACQUIRER, e2e_id=new_e2e_id()
    )
    charge.refresh_from_db()
    return charge


@pytest.fixture
def charge(account: Account, acquirer: Acquirer) -> Charge:
    """R$ 100,00 paid, R$ 98,20 of it the account's (``AMOUNT``, ``LIQUID``)."""
    return paid_charge_of(account, acquirer)


def record(
    charge: Charge | str,
    status: InfractionStatus = InfractionStatus.OPEN,
    *,
    external_id: str = "inf-1",
    amount: int | None = None,
    blocked: int | None = None,
    returned: int = 0,
    deadline: dt.datetime | None = None,
    reason: str = "Golpe: pagador diz não reconhecer o Pix",
) -> InfractionRecord:
    """The acquirer's record of an infraction on ``charge`` (or on a bare e2e
    id). By default it disputes and blocks the charge's whole amount."""
    e2e_id = charge if isinstance(charge, str) else (charge.e2e_id or "")
    disputed = amount if amount is not None else (charge.amount if isinstance(charge, Charge) else AMOUNT)
    return InfractionRecord(
        external_id=external_id,
        e2e_id=e2e_id,
        status=status,
        amount=disputed,
        blocked_amount=disputed if blocked is None else blocked,
        returned_amount=returned,
        reason=reason,
        opened_at=timezone.now(),
        defense_deadline=deadline if deadline is not None else timezone.now() + dt.timedelta(days=7),
        closed_at=timezone.now() if status in (InfractionStatus.ACCEPTED, InfractionStatus.REJECTED) else None,
        raw={"idInfracao": external_id},
    )


@dataclass(frozen=True)
class Books:
    """An account's money as a merchant (and the ledger) sees it."""

    available: int
    held: int
    hold_uncovered: int

    @property
    def withdrawable(self) -> int:
        return self.available - self.hold_uncovered


def books(account: Account | uuid.UUID) -> Books:
    """The account's balance row, after checking it against the ledger and the
    open infractions: sum(ledger) == available, held == the open
    infractions' blocks, hold_uncovered == their uncovered parts."""
    account_id = account.pk if isinstance(account, Account) else account
    row = AccountBalance.objects.get(account_id=account_id)
    ledger = LedgerEntry.objects.filter(account_id=account_id).aggregate(total=Sum("amount"))["total"] or 0
    assert ledger == row.available, f"ledger {ledger} != available {row.available}"
    open_ones = list(Infraction.objects.filter(account_id=account_id, closed_at__isnull=True))
    assert row.held == sum(i.hold for i in open_ones), f"held {row.held} != open blocks"
    assert row.hold_uncovered == sum(i.hold_uncovered for i in open_ones), f"uncovered {row.hold_uncovered}"
    closed = Infraction.objects.filter(account_id=account_id, closed_at__isnull=False, hold__gt=0)
    assert all(closed.values_list("hold_released", flat=True)), "a closed infraction still blocks"
    return Books(row.available, row.held, row.hold_uncovered)


def kinds(account: Account, since: int = 0) -> list[tuple[str, int]]:
    """The account's ledger entries (kind, amount) in order, past the first ``since``."""
    entries = LedgerEntry.objects.filter(account=account).order_by("id").values_list("kind", "amount")
    return list(entries)[since:]


#: ``record(...)`` for fixtures' users that prefer a fixture to an import.
@pytest.fixture
def infraction_record() -> Callable[..., InfractionRecord]:
    return record
