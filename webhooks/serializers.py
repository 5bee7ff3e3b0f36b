"""Shapes of the webhook management endpoints."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from core.fields import HttpUrlField, StrictCharField
from webhooks.models import WebhookAttempt, WebhookDelivery, WebhookEndpoint


class EndpointCreateSerializer(serializers.Serializer[Any]):
    url = HttpUrlField(max_length=2000)
    description = StrictCharField(max_length=200, required=False, allow_blank=True)


class EndpointSerializer(serializers.ModelSerializer[WebhookEndpoint]):
    class Meta:
        model = WebhookEndpoint
        fields = ["id", "url", "description", "code", "is_active", "disabled_reason", "created_at"]
        read_only_fields = fields
        # The model's help texts are the back office's pt-BR; the API documents itself in English.
        extra_kwargs = {"code": {"help_text": "Sent in the `X-Webhook-Code` header of every delivery."}}


class EndpointCreatedSerializer(EndpointSerializer):
    secret = serializers.CharField(help_text="Signing secret (`whsec_…`), shown only in this response.")

    class Meta(EndpointSerializer.Meta):
        fields = [*EndpointSerializer.Meta.fields, "secret"]
        read_only_fields = fields


class SecretSerializer(serializers.Serializer[Any]):
    id = serializers.UUIDField()
    secret = serializers.CharField(help_text="New secret; the previous one also signs for 24 h.")


class AttemptSerializer(serializers.ModelSerializer[WebhookAttempt]):
    class Meta:
        model = WebhookAttempt
        fields = ["number", "attempted_at", "status_code", "latency_ms", "error", "succeeded"]
        read_only_fields = fields


class DeliverySerializer(serializers.ModelSerializer[WebhookDelivery]):
    event_id = serializers.UUIDField(source="event.id")
    event_type = serializers.CharField(source="event.event_type")
    attempts = AttemptSerializer(many=True)

    class Meta:
        model = WebhookDelivery
        fields = [
            "id",
            "event_id",
            "event_type",
            "status",
            "attempt_count",
            "next_attempt_at",
            "last_status_code",
            "created_at",
            "attempts",
        ]
        read_only_fields = fields
