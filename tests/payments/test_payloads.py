"""The ``transaction`` webhook's data: exactly the spec's fields and formats,
whatever the API's serializers become."""

from __future__ import annotations

import datetime as dt
import json
import uuid

from payments.models import Charge, ChargeStatus
from payments.payloads import charge_payload

# The spec, Events, event_type `transaction`.
SPEC_FIELDS = {
    "id",
    "payment_method",
    "e2e_id",
    "amount",
    "platform_tax",
    "liquid_amount",
    "status",
    "paid_at",
    "created_at",
}
UTC = dt.UTC


def charge(**fields: object) -> Charge:
    values: dict[str, object] = {
        "id": uuid.UUID("6f1c2a4e-8d3b-4c5a-9e7f-0a1b2c3d4e5f"),
        "payment_method": "pix",
        "e2e_id": None,
        "amount": 1000,
        "platform_tax": 45,
        "liquid_amount": 955,
        "status": ChargeStatus.PENDING,
        "paid_at": None,
        "created_at": dt.datetime(2026, 1, 2, 15, 4, 5, 123456, tzinfo=UTC),
    }
    return Charge(**(values | fields))


def test_pending_charge_payload_is_the_spec_record() -> None:
    payload = charge_payload(charge())

    assert set(payload) == SPEC_FIELDS
    # Local time (America/Sao_Paulo), the spec's YYYY-MM-DD HH:mm:ss.
    assert payload == {
        "id": "6f1c2a4e-8d3b-4c5a-9e7f-0a1b2c3d4e5f",
        "payment_method": "pix",
        "e2e_id": None,
        "amount": 1000,
        "platform_tax": 45,
        "liquid_amount": 955,
        "status": "pending",
        "paid_at": None,
        "created_at": "2026-01-02 12:04:05",
    }


def test_paid_charge_payload_carries_e2e_id_and_paid_at_as_json() -> None:
    paid = charge(
        e2e_id="E12345678202601021504abcdefghijk",
        status=ChargeStatus.PAID,
        paid_at=dt.datetime(2026, 1, 2, 15, 10, 0, tzinfo=UTC),
    )

    payload = charge_payload(paid)

    assert set(payload) == SPEC_FIELDS
    # What is stored and sent: plain JSON types, nothing left to an encoder.
    assert json.loads(json.dumps(payload)) == payload
    assert (payload["status"], payload["e2e_id"], payload["paid_at"]) == (
        "paid",
        "E12345678202601021504abcdefghijk",
        "2026-01-02 12:10:00",
    )
