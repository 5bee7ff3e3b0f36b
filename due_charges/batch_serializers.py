"""Request and response shapes of /api/due-charges/batches. Each item is
validated as the body of ``POST /api/due-charges`` is
(:class:`due_charges.serializers.DueChargeCreateSerializer`)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from core.fields import HttpUrlField, StrictCharField
from due_charges.models import DueChargeBatch, DueChargeBatchItem, ItemStatus
from webhooks.http import url_refusal

#: At most this many charges in one batch (Efí's lotecobv takes 1,000 too).
MAX_ITEMS = 1000
ITEMS_REQUIRED = "Informe a lista de cobranças em items."
ITEMS_NOT_A_LIST = "items deve ser uma lista de cobranças."
ITEMS_EMPTY = "O lote deve ter ao menos uma cobrança."
ITEMS_TOO_MANY = f"O lote pode ter no máximo {MAX_ITEMS} cobranças."


def item_as_json(data: dict[str, Any]) -> dict[str, Any]:
    """Validated data as stored on the item (dates as ISO text)."""
    return {key: value.isoformat() if isinstance(value, dt.date) else value for key, value in data.items()}


class BatchCreateSerializer(serializers.Serializer[Any]):
    """The request's own fields; ``items`` is checked as a list here and each
    item apart (a bad item fails alone, as lotecobv's NEGADA)."""

    items = serializers.ListField(
        child=serializers.JSONField(),
        error_messages={"required": ITEMS_REQUIRED, "null": ITEMS_REQUIRED, "not_a_list": ITEMS_NOT_A_LIST},
        help_text=f"1 to {MAX_ITEMS} due-date charges, each the body of POST /api/due-charges.",
    )
    description = StrictCharField(max_length=140, required=False, allow_blank=True)
    postback_url = HttpUrlField(max_length=2000, required=False, allow_blank=True)

    def validate_items(self, value: list[Any]) -> list[Any]:
        if not value:
            raise serializers.ValidationError(ITEMS_EMPTY)
        if len(value) > MAX_ITEMS:
            raise serializers.ValidationError(ITEMS_TOO_MANY)
        return value

    def validate_postback_url(self, value: str) -> str:
        refusal = url_refusal(value) if value else None
        if refusal:
            raise serializers.ValidationError(refusal)
        return value


class BatchCountsSerializer(serializers.Serializer[Any]):
    total = serializers.IntegerField()
    pending = serializers.IntegerField()
    created = serializers.IntegerField()
    failed = serializers.IntegerField()


class BatchSerializer(serializers.ModelSerializer[DueChargeBatch]):
    """A batch with its counts by item status (``counts``, given by the view)."""

    counts = serializers.SerializerMethodField()

    class Meta:
        model = DueChargeBatch
        fields = ["id", "status", "description", "postback_url", "counts", "created_at", "finished_at"]
        # The API documents itself in English; the models' help texts are the back office's pt-BR.
        extra_kwargs = {"postback_url": {"help_text": "Where the batch's webhook goes once it is done."}}

    @extend_schema_field(BatchCountsSerializer)
    def get_counts(self, batch: DueChargeBatch) -> dict[str, int]:
        counts: dict[str, int] = self.context["counts"]
        return counts


class BatchItemSerializer(serializers.ModelSerializer[DueChargeBatchItem]):
    """One item: ``charge_id`` is the charge's id in /api/due-charges once created."""

    charge_id = serializers.SerializerMethodField()

    class Meta:
        model = DueChargeBatchItem
        fields = ["position", "status", "errors", "charge_id"]
        extra_kwargs = {"position": {"help_text": "The item's index in the list sent, from 0."}}

    @extend_schema_field({"type": "string", "format": "uuid", "nullable": True})
    def get_charge_id(self, item: DueChargeBatchItem) -> str | None:
        return str(item.charge_id) if item.status == ItemStatus.CREATED else None


class BatchEventSerializer(serializers.Serializer[Any]):
    """The body of a ``due_charge_batch`` webhook (sent once, when the last item settled), for the API docs."""

    id = serializers.UUIDField(help_text="The event's id: the same on every attempt (`webhook-id`).")
    event_type = serializers.ChoiceField(choices=["due_charge_batch"])
    data = BatchSerializer(help_text="The batch as it is when done, with its counts.")  # type: ignore[assignment]
