"""The ``data`` of a ``withdrawal`` webhook (the spec's Events section).

Its own serializer, not the API's ``WithdrawalSerializer``: receivers verify
and store these bodies, so a change made for an API response must not reach
them unnoticed. Same DRF fields as the record, hence the same JSON (timestamps
in ``REST_FRAMEWORK["DATETIME_FORMAT"]``, local time)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from withdrawals.models import Withdrawal, WithdrawalStatus


class WithdrawalPayloadSerializer(serializers.Serializer[Withdrawal]):
    id = serializers.UUIDField(read_only=True)
    e2e_id = serializers.CharField(allow_null=True, read_only=True)
    amount = serializers.BigIntegerField(read_only=True)
    liquid_amount = serializers.BigIntegerField(read_only=True)
    pix_type = serializers.CharField(source="pix_key_type", read_only=True)
    pix_key = serializers.CharField(read_only=True)
    status = serializers.ChoiceField(choices=WithdrawalStatus.choices, read_only=True)
    paid_at = serializers.DateTimeField(allow_null=True, read_only=True)
    created_at = serializers.DateTimeField(read_only=True)


def withdrawal_payload(withdrawal: Withdrawal) -> dict[str, Any]:
    """The event's ``data`` for the withdrawal as it is now."""
    return dict(WithdrawalPayloadSerializer(withdrawal).data)
