"""The hot read by id (core.selectors.owned_by_uuid): a precompiled SELECT
read with a plain cursor must give the same record and the same 404s as the
ORM, and refuse a field it would read unconverted; instances built from a
plain cursor's rows (core.sql.from_rows) are the ORM's."""

from __future__ import annotations

import uuid

import pytest
from django.db.models import signals

from core.selectors import owned_by_uuid
from core.sql import from_rows
from payments.exceptions import ChargeNotFound
from payments.models import Charge
from tests.factories import AccountFactory, ChargeFactory

pytestmark = pytest.mark.django_db


def test_the_plain_read_gives_what_the_orm_gives() -> None:
    charge = ChargeFactory()
    fields = ["status", "amount", "created_at", "buyer_document"]
    read = owned_by_uuid(Charge, charge.account_id, str(charge.pk), ChargeNotFound, fields)
    orm = Charge.objects.get(pk=charge.pk)
    assert [getattr(read, name) for name in ["pk", *fields]] == [getattr(orm, name) for name in ["pk", *fields]]
    assert read.get_deferred_fields() >= {"txid", "emv"}
    assert read.txid == orm.txid  # a deferred field still loads, through the ORM


@pytest.mark.parametrize("raw_id", ["not-a-uuid", "", None, str(uuid.uuid4())])
def test_unknown_or_malformed_ids_are_not_found(raw_id: object) -> None:
    charge = ChargeFactory()
    with pytest.raises(ChargeNotFound):
        owned_by_uuid(Charge, charge.account_id, raw_id, ChargeNotFound, ["status"])


def test_someone_elses_record_is_not_found() -> None:
    charge = ChargeFactory()
    with pytest.raises(ChargeNotFound):
        owned_by_uuid(Charge, AccountFactory().pk, charge.pk, ChargeNotFound, ["status"])


def test_a_field_python_must_convert_is_refused() -> None:
    # A JSON column would come back from a plain cursor as the driver gives it,
    # not as the field's from_db_value makes it: refused before any read.
    with pytest.raises(RuntimeError, match="needs a converter"):
        owned_by_uuid(Charge, uuid.uuid4(), uuid.uuid4(), ChargeNotFound, ["status", "metadata"])


def test_instances_from_rows_are_what_the_orm_builds() -> None:
    charge = ChargeFactory()
    columns = ["id", "account_id", "amount", "status", "paid_at", "created_at"]
    row = Charge.objects.filter(pk=charge.pk).values_list(*columns).get()
    [built] = from_rows(Charge, "default", columns, [row])
    orm = Charge.from_db("default", columns, row)
    state = ("_state",)
    assert {k: v for k, v in vars(built).items() if k not in state} == {
        k: v for k, v in vars(orm).items() if k not in state
    }
    assert (built._state.adding, built._state.db) == (False, "default")
    assert built.get_deferred_fields() == orm.get_deferred_fields() != set()
    assert built == orm
    assert built.txid == charge.txid  # a deferred field loads through the ORM
    built.status = "paid"
    built.save(update_fields=["status"])  # an update, not an insert
    assert Charge.objects.get(pk=charge.pk).status == "paid"


def test_a_model_with_init_receivers_is_built_by_the_orm() -> None:
    charge = ChargeFactory()
    seen: list[object] = []

    def receiver(sender: type, instance: object, **kwargs: object) -> None:
        seen.append(instance)

    signals.post_init.connect(receiver, sender=Charge)
    try:
        [built] = from_rows(Charge, "default", ["id", "amount"], [(charge.pk, charge.amount)])
    finally:
        signals.post_init.disconnect(receiver, sender=Charge)
    assert seen == [built]
