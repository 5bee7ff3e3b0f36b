"""Fixtures of the fault-injection tests: an account holding money, the
name of the test database that the processes a test starts join, and Efí
faked on loopback as the account's payout acquirer."""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection, transaction

from accounts.models import Account, LedgerEntry
from accounts.services import ledger_post
from acquirers.models import Acquirer, AcquirerSlot
from acquirers.services import acquirer_slots_set
from tests.acquirers.conftest import EFI_CHAVE, EFI_ENV, PKI, efi_options, warm_up
from tests.acquirers.fake_efi import FakeEfi
from tests.factories import AccountFactory, AcquirerFactory
from tests.realworld import CeleryWorker, wait_for
from withdrawals.models import Withdrawal, WithdrawalStatus

SEED = 50_000


@pytest.fixture
def account(db: Any) -> Account:
    """Holds SEED, so "the balance did not change" means something."""
    account = AccountFactory(withdrawal_fee_fixed=100, withdrawal_fee_bps=100)
    with transaction.atomic():
        ledger_post(
            account_id=account.pk, amount=SEED, kind=LedgerEntry.Kind.CHARGE_PAID, reference=f"seed:{uuid.uuid4().hex}"
        )
    return account


@pytest.fixture
def database_name(transactional_db: Any) -> str:
    """The test database, which processes started by the test join."""
    return str(connection.settings_dict["NAME"])


@pytest.fixture
def efi() -> Iterator[FakeEfi]:
    """Efí's send-Pix API on loopback, behind mTLS, paying every send."""
    fake = FakeEfi(
        pki=PKI,
        client_id=f"efi-client-{secrets.token_hex(4)}",  # a token cache of its own
        client_secret=EFI_ENV["PIX_TEST_EFI_CLIENT_SECRET"],
        chave=EFI_CHAVE,
        outcome="paid",  # REALIZADO right after its 201 EM_PROCESSAMENTO answer
    )
    with fake.running():
        yield fake
    assert fake.violations == [], "\n".join(fake.violations)


def efi_cashout(account: Account, efi: FakeEfi, *, name: str, read_timeout_ms: int) -> Acquirer:
    """``efi`` as the account's only payout acquirer, its token already fetched
    (shared through Redis), so the send is the first call a payout makes."""
    acquirer: Acquirer = AcquirerFactory(
        key=f"{name}_{uuid.uuid4().hex[:8]}",
        adapter="efi_pix",
        options=efi_options(efi),
        connect_timeout_ms=2000,
        read_timeout_ms=read_timeout_ms,
    )
    acquirer_slots_set(account=account, purpose=AcquirerSlot.Purpose.CASHOUT, acquirers=[acquirer])
    warm_up(acquirer)
    return acquirer


def wait_until_paid(withdrawal: Withdrawal, worker: CeleryWorker, *, within: float, since: str = "") -> None:
    """Wait for ``withdrawal`` to be paid; past ``within`` seconds (counted
    from ``since``, said in the failure), fail with the end of ``worker``'s log."""

    def paid() -> bool:
        withdrawal.refresh_from_db()
        return withdrawal.status == WithdrawalStatus.PAID

    try:
        wait_for(paid, timeout=within, interval=0.05)
    except AssertionError:
        raise AssertionError(f"not paid within {within}s{since}:\n{worker.output()[-6000:]}") from None
