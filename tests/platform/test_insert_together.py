"""core.db.insert_together: several new rows in one statement, all or nothing."""

from __future__ import annotations

import uuid

import pytest
from django.db import IntegrityError

from core.db import insert_together
from payments.models import ChargeAttempt
from tests.factories import AccountFactory, AcquirerFactory

pytestmark = pytest.mark.django_db


def attempt(charge_id: uuid.UUID, position: int) -> ChargeAttempt:
    return ChargeAttempt(
        charge_id=charge_id,
        account=AccountFactory(),
        acquirer=AcquirerFactory(),
        position=position,
        outcome="unavailable",
        latency_ms=3,
    )


def test_every_row_is_stored_and_given_its_key() -> None:
    charge_id = uuid.uuid4()
    rows = [attempt(charge_id, 1), attempt(charge_id, 2)]
    insert_together(rows)
    assert all(row.pk is not None and not row._state.adding for row in rows)
    stored = ChargeAttempt.objects.filter(charge_id=charge_id).order_by("position")
    assert [(a.pk, a.position, a.created_at) for a in stored] == [(r.pk, r.position, r.created_at) for r in rows]


@pytest.mark.django_db(transaction=True)
def test_one_row_refused_stores_none_without_a_transaction_around() -> None:
    charge_id = uuid.uuid4()
    # The second breaks the table's check (a position is never negative).
    rows = [attempt(charge_id, 1), attempt(charge_id, -1)]
    with pytest.raises(IntegrityError):
        insert_together(rows)  # in autocommit: the one statement is the transaction
    assert not ChargeAttempt.objects.filter(charge_id=charge_id).exists()
