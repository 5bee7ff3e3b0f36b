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
    # Output only; not read_only all the same, so that the API docs can show
    # it as the body of the webhook a receiver gets (an OpenAPI callback's
    # request body leaves read-only fields out).
    id = serializers.UUIDField()
    payment_method = serializers.ChoiceField(choices=PaymentMethod.choices)
    e2e_id = serializers.CharField(allow_null=True)
    amount = serializers.BigIntegerField()
    platform_tax = serializers.BigIntegerField()
    liquid_amount = serializers.BigIntegerField()
    status = serializers.ChoiceField(choices=ChargeStatus.choices)
    paid_at = serializers.DateTimeField(allow_null=True)
    created_at = serializers.DateTimeField()


def charge_payload(charge: Charge) -> dict[str, Any]:
    """The event's ``data`` for the charge as it is now."""
    return dict(ChargePayloadSerializer(charge).data)


class TransactionEventSerializer(serializers.Serializer[Any]):
    """The body of a ``transaction`` webhook, for the API docs (the envelope
    itself is ``WebhookEvent.body``): what a receiver gets on every change."""

    id = serializers.UUIDField(help_text="The event's id: the same on every attempt (`webhook-id`).")
    event_type = serializers.ChoiceField(choices=["transaction"])
    data = ChargePayloadSerializer(help_text="The charge as it is after the change.")  # type: ignore[assignment]
