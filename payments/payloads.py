"""The ``data`` of a ``transaction`` webhook (the spec's Events section).

Its own serializer, not the API's ``ChargeSerializer``: receivers verify and
store these bodies, so a change made for an API response must not reach them
unnoticed. Same DRF fields as the record, hence the same JSON (timestamps in
``REST_FRAMEWORK["DATETIME_FORMAT"]``, local time)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from accounts.models import PaymentMethod
from payments.models import Charge, ChargeStatus


class ChargePayloadSerializer(serializers.Serializer[Charge]):
    id = serializers.UUIDField(read_only=True)
    payment_method = serializers.ChoiceField(choices=PaymentMethod.choices, read_only=True)
    e2e_id = serializers.CharField(allow_null=True, read_only=True)
    amount = serializers.BigIntegerField(read_only=True)
    platform_tax = serializers.BigIntegerField(read_only=True)
    liquid_amount = serializers.BigIntegerField(read_only=True)
    status = serializers.ChoiceField(choices=ChargeStatus.choices, read_only=True)
    paid_at = serializers.DateTimeField(allow_null=True, read_only=True)
    created_at = serializers.DateTimeField(read_only=True)


def charge_payload(charge: Charge) -> dict[str, Any]:
    """The event's ``data`` for the charge as it is now."""
    return dict(ChargePayloadSerializer(charge).data)
