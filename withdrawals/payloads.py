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
    # Output only; not read_only all the same, so that the API docs can show
    # it as the body of the webhook a receiver gets (an OpenAPI callback's
    # request body leaves read-only fields out).
    id = serializers.UUIDField()
    e2e_id = serializers.CharField(allow_null=True)
    amount = serializers.BigIntegerField()
    liquid_amount = serializers.BigIntegerField()
    pix_type = serializers.CharField(source="pix_key_type")
    pix_key = serializers.CharField()
    status = serializers.ChoiceField(choices=WithdrawalStatus.choices)
    paid_at = serializers.DateTimeField(allow_null=True)
    created_at = serializers.DateTimeField()


def withdrawal_payload(withdrawal: Withdrawal) -> dict[str, Any]:
    """The event's ``data`` for the withdrawal as it is now."""
    return dict(WithdrawalPayloadSerializer(withdrawal).data)


class WithdrawalEventSerializer(serializers.Serializer[Any]):
    """The body of a ``withdrawal`` webhook, for the API docs (the envelope
    itself is ``WebhookEvent.body``): what a receiver gets on every change."""

    id = serializers.UUIDField(help_text="The event's id: the same on every attempt (`webhook-id`).")
    event_type = serializers.ChoiceField(choices=["withdrawal"])
    data = WithdrawalPayloadSerializer(help_text="The withdrawal as it is after the change.")  # type: ignore[assignment]
