"""The hot read by id (core.selectors.owned_by_uuid): a precompiled SELECT
read with a plain cursor must give the same record and the same 404s as the
ORM, and refuse a field it would read unconverted."""

from __future__ import annotations

import uuid

import pytest

from core.selectors import owned_by_uuid
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
