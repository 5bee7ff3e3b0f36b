"""The ``withdrawal`` webhook's data: exactly the spec's fields and formats,
whatever the API's serializers become."""

from __future__ import annotations

import datetime as dt
import json
import uuid

from withdrawals.models import PixKeyType, Withdrawal, WithdrawalStatus
from withdrawals.payloads import withdrawal_payload

# The spec, Events, event_type `withdrawal` (`pix_type`, not the creation
# response's `pix_key_type`).
SPEC_FIELDS = {
    "id",
    "e2e_id",
    "amount",
    "liquid_amount",
    "pix_type",
    "pix_key",
    "status",
    "paid_at",
    "created_at",
}
UTC = dt.UTC


def withdrawal(**fields: object) -> Withdrawal:
    values: dict[str, object] = {
        "id": uuid.UUID("0d9e8f7a-6b5c-4d3e-8f1a-2b3c4d5e6f70"),
        "e2e_id": None,
        "amount": 5000,
        "liquid_amount": 4900,
        "pix_key_type": PixKeyType.EMAIL,
        "pix_key": "loja@example.com",
        "status": WithdrawalStatus.PENDING,
        "paid_at": None,
        "created_at": dt.datetime(2026, 1, 2, 15, 4, 5, 123456, tzinfo=UTC),
    }
    return Withdrawal(**(values | fields))


def test_pending_withdrawal_payload_is_the_spec_record() -> None:
    payload = withdrawal_payload(withdrawal())

    assert set(payload) == SPEC_FIELDS
    # Local time (America/Sao_Paulo), the spec's YYYY-MM-DD HH:mm:ss.
    assert payload == {
        "id": "0d9e8f7a-6b5c-4d3e-8f1a-2b3c4d5e6f70",
        "e2e_id": None,
        "amount": 5000,
        "liquid_amount": 4900,
        "pix_type": "email",
        "pix_key": "loja@example.com",
        "status": "pending",
        "paid_at": None,
        "created_at": "2026-01-02 12:04:05",
    }


def test_paid_withdrawal_payload_carries_e2e_id_and_paid_at_as_json() -> None:
    paid = withdrawal(
        e2e_id="E98765432202601021510abcdefghijk",
        status=WithdrawalStatus.PAID,
        paid_at=dt.datetime(2026, 1, 2, 15, 10, 0, tzinfo=UTC),
    )

    payload = withdrawal_payload(paid)

    assert set(payload) == SPEC_FIELDS
    # What is stored and sent: plain JSON types, nothing left to an encoder.
    assert json.loads(json.dumps(payload)) == payload
    assert (payload["status"], payload["e2e_id"], payload["paid_at"]) == (
        "paid",
        "E98765432202601021510abcdefghijk",
        "2026-01-02 12:10:00",
    )
