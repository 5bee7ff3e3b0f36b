"""Infractions on paid charges, as the acquirer's records open and close them
(``infractions.services.infraction_apply``: the only way money moves); the
fake acquirers (Efí behind mTLS) the acquirer tests use, their fixtures
shared; and the money tests' charge, records and books (the end)."""

from __future__ import annotations

import datetime as dt
import itertools
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from django.db.models import Sum
from django.utils import timezone

from accounts.models import Account, AccountBalance, LedgerEntry
from accounts.selectors import available_balance
from acquirers import adapters
from acquirers.adapters.base import InfractionDefense, InfractionPage, InfractionRecord, InfractionStatus
from acquirers.adapters.sandbox import SandboxAdapter, new_e2e_id
from acquirers.models import Acquirer
from infractions import statement
from infractions.models import Infraction
from infractions.services import infraction_apply
from payments.models import Charge, ChargeStatus, ChargeTransition
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


# ---- the money tests (tests/infractions/test_money.py, test_races.py, tests/property/test_med_model.py)

AMOUNT = 10_000
#: ``charge``'s liquid amount: 180 of fees (30 + 1.5 %) left out.
LIQUID = 9_820


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
