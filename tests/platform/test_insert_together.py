"""core.sql.insert_together: several new rows in one statement, all or nothing."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.db import IntegrityError
from django.db.models import Model, Value
from django.db.models.sql.subqueries import InsertQuery
from django.utils import timezone

from accounts.models import LedgerEntry
from core.sql import _INSERTS, insert_sql, insert_together
from payments.models import Charge, ChargeAttempt
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


def compiled(instance: Model) -> tuple[str, tuple[Any, ...]]:
    """What Django's own compiler makes of ``instance``'s INSERT, fresh (raw:
    with the values insert_sql's pre_save left on it, auto_now_add's included)."""
    meta = instance._meta
    fields = [f for f in meta.local_concrete_fields if not (f.primary_key and getattr(instance, f.attname) is None)]
    query = InsertQuery(type(instance))
    query.insert_values(fields, [instance], raw=True)
    compiler = query.get_compiler(using="default")
    compiler.returning_fields = [meta.pk]
    [(sql, params)] = compiler.as_sql()
    return sql, tuple(params)


def test_a_statement_compiled_once_sends_what_the_compiler_would_for_every_new_row() -> None:
    charge_id = uuid.uuid4()
    account = AccountFactory()
    rows: list[Model] = [
        Charge(
            id=charge_id,
            account=account,
            acquirer=AcquirerFactory(),
            amount=1500,
            platform_tax=30,
            liquid_amount=1470,
            txid=charge_id.hex,
            emv="000201",
            buyer_name="Fulano",
            buyer_document="52998224725",
            buyer_address={"city": "São Paulo"},
            metadata={"order": 7, "tags": ["a"]},
            expires_at=timezone.now(),
        ),
        attempt(charge_id, 1),
        LedgerEntry(account=account, kind=LedgerEntry.Kind.CHARGE_PAID, amount=1470, balance_after=1470, reference="r"),
    ]
    for _ in range(2):  # the first compiles, the second uses the statement kept
        for row in rows:
            sql, params = insert_sql(row)
            expected_sql, expected = compiled(row)
            assert sql == expected_sql
            # Same values, same adapters (a JSON value wrapped, not a bare dict).
            assert [(type(p), getattr(p, "obj", p)) for p in params] == [
                (type(p), getattr(p, "obj", p)) for p in expected
            ]
    insert_together(rows)
    stored = Charge.objects.get(pk=charge_id)
    assert (stored.metadata, stored.buyer_address, stored.amount) == (
        {"order": 7, "tags": ["a"]},
        {"city": "São Paulo"},
        1500,
    )
    entry = rows[2]
    assert isinstance(entry, LedgerEntry)
    assert LedgerEntry.objects.get(pk=entry.pk).created_at == entry.created_at


def test_a_row_with_an_expression_among_its_values_neither_uses_nor_leaves_a_kept_statement() -> None:
    account = AccountFactory()

    def entry(amount: Any, reference: str) -> LedgerEntry:
        return LedgerEntry(
            account=account, kind=LedgerEntry.Kind.CHARGE_PAID, amount=amount, balance_after=1, reference=reference
        )

    _INSERTS.clear()
    with_expression = entry(Value(7) + Value(3), "expression first")
    insert_together([with_expression])
    plain = entry(11, "plain after it")
    insert_together([plain])
    assert LedgerEntry.objects.get(pk=with_expression.pk).amount == 10
    assert LedgerEntry.objects.get(pk=plain.pk).amount == 11
    # And the other way round: a kept statement is not used for an expression.
    insert_together([late := entry(Value(20) * Value(2), "expression after")])
    assert LedgerEntry.objects.get(pk=late.pk).amount == 40
