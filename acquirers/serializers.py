"""Shapes of the acquirer selection endpoints."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from acquirers.models import ACQUIRER_KEY_PATTERN
from acquirers.services import MAX_CHAIN_LENGTH
from api.schema import SchemaExtras
from core.fields import StrictIntegerField


def acquirer_key_field(**kwargs: Any) -> serializers.RegexField:
    return serializers.RegexField(
        ACQUIRER_KEY_PATTERN,
        max_length=64,
        error_messages={"invalid": "Use apenas letras minúsculas, números e _."},
        **kwargs,
    )


class AcquirerItemSerializer(serializers.Serializer[Any]):
    acquirer_key = acquirer_key_field()
    # Required in each item of the array form (the spec's rules table).
    priority = StrictIntegerField(min_value=1, max_value=3)


def acquirer_items_field(**kwargs: Any) -> serializers.ListField:
    """1 to 3 ``{acquirer_key, priority}`` items. A ListField rather than
    ``many=True``: its length bounds are validators, which the OpenAPI
    schema shows as ``minItems``/``maxItems``."""
    return serializers.ListField(child=AcquirerItemSerializer(), min_length=1, max_length=MAX_CHAIN_LENGTH, **kwargs)


class AcquirerSelectionSerializer(SchemaExtras, serializers.Serializer[Any]):
    """Either ``{acquirers: [...]}`` or ``{acquirer_key, priority}``."""

    # The view requires exactly one of the two forms (422 otherwise).
    openapi_extra = {"oneOf": [{"required": ["acquirers"]}, {"required": ["acquirer_key"]}]}

    acquirers = acquirer_items_field(required=False)
    acquirer_key = acquirer_key_field(required=False)
    priority = StrictIntegerField(min_value=1, max_value=3, required=False, help_text="Single form only; default 1.")


class AcquirerEntrySerializer(serializers.Serializer[Any]):
    nominal = serializers.CharField()
    acquirer_key = serializers.CharField(source="key")
    acquirer_name = serializers.CharField(source="name")
    max_ticket = serializers.IntegerField(help_text="Centavos.")
    conversion_percent = serializers.FloatField(
        help_text="0 to 100: paid ÷ created charges at this acquirer over the last days, or a value set by staff."
    )
    is_new = serializers.BooleanField()
    active_priority = serializers.IntegerField(allow_null=True, help_text="1, 2 or 3; null when not in use.")


class SlotSerializer(serializers.Serializer[Any]):
    acquirer_key = serializers.CharField()
    acquirer_name = serializers.CharField()


class ActiveAcquirersSerializer(serializers.Serializer[Any]):
    primary = SlotSerializer(allow_null=True)
    secondary = SlotSerializer(allow_null=True)
    tertiary = SlotSerializer(allow_null=True)


class AcquirerListSerializer(serializers.Serializer[Any]):
    acquirers = AcquirerEntrySerializer(many=True)
    active_acquirers = ActiveAcquirersSerializer()


class ActiveAcquirersDataSerializer(serializers.Serializer[Any]):
    active_acquirers = ActiveAcquirersSerializer()
