"""Fixtures of the fault-injection tests: an account holding money, and the
name of the test database that the processes a test starts join."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.db import connection, transaction

from accounts.models import Account, LedgerEntry
from accounts.services import ledger_post
from tests.factories import AccountFactory

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
