"""Request and response shapes of /api/withdrawals/batches. Each item is
validated as the body of ``POST /api/withdrawals`` is
(:class:`withdrawals.serializers.WithdrawalCreateSerializer`)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from core.fields import StrictCharField
from withdrawals.models import PayoutBatch, WithdrawalStatus

#: At most this many payouts in one batch.
MAX_ITEMS = 1000
ITEMS_REQUIRED = "Informe a lista de saques em items."
ITEMS_NOT_A_LIST = "items deve ser uma lista de saques."
ITEMS_EMPTY = "O lote deve ter ao menos um saque."
ITEMS_TOO_MANY = f"O lote pode ter no máximo {MAX_ITEMS} saques."
ITEM_NOT_AN_OBJECT = "Cada saque do lote deve ser um objeto JSON."
ITEM_NOT_SCHEDULED = "Saques de um lote não podem ser agendados."


class PayoutBatchCreateSerializer(serializers.Serializer[Any]):
    """The request's own fields; each item is checked apart (withdrawals.batches)."""

    items = serializers.ListField(
        child=serializers.JSONField(),
        error_messages={"required": ITEMS_REQUIRED, "null": ITEMS_REQUIRED, "not_a_list": ITEMS_NOT_A_LIST},
        help_text=f"1 to {MAX_ITEMS} payouts, each the body of POST /api/withdrawals (without scheduled_for).",
    )
    description = StrictCharField(max_length=140, required=False, allow_blank=True, default="")

    def validate_items(self, value: list[Any]) -> list[Any]:
        if not value:
            raise serializers.ValidationError(ITEMS_EMPTY)
        if len(value) > MAX_ITEMS:
            raise serializers.ValidationError(ITEMS_TOO_MANY)
        return value


def _per_status_serializer(name: str, what: str) -> type[serializers.Serializer[Any]]:
    fields: dict[str, Any] = {
        status: serializers.IntegerField(help_text=f"{what} of the items {status}.")
        for status in WithdrawalStatus.values
    }
    fields["total"] = serializers.IntegerField(help_text=f"{what} of all items.")
    return type(name, (serializers.Serializer,), fields)


PayoutBatchCountsSerializer = _per_status_serializer("PayoutBatchCountsSerializer", "Number")
PayoutBatchAmountsSerializer = _per_status_serializer("PayoutBatchAmountsSerializer", "Sum of `amount` (centavos)")


class PayoutBatchSerializer(serializers.ModelSerializer[PayoutBatch]):
    """A batch with its progress: items and amounts by status (``progress`` in the context)."""

    counts = serializers.SerializerMethodField()
    amounts = serializers.SerializerMethodField()

    class Meta:
        model = PayoutBatch
        fields = [
            "id",
            "status",
            "description",
            "item_count",
            "total_amount",
            "total_debit",
            "counts",
            "amounts",
            "created_at",
            "decided_at",
            "completed_at",
        ]
        read_only_fields = fields
        # The API documents itself in English; the model's labels are the back office's pt-BR.
        extra_kwargs = {
            "status": {"help_text": "awaiting_approval, processing, completed or canceled."},
            "description": {"help_text": "The description sent with the batch."},
            "item_count": {"help_text": "How many payouts the batch has."},
            "total_amount": {"help_text": "Sum of the items' `amount` (centavos)."},
            "total_debit": {"help_text": "What the batch took from the balance when accepted (centavos)."},
            "created_at": {"help_text": "When the batch was accepted."},
            "decided_at": {"help_text": "When staff approved or refused it (null: no decision needed or made)."},
            "completed_at": {"help_text": "When every item reached a final status (paid, failed, canceled, refunded)."},
        }

    @extend_schema_field(PayoutBatchCountsSerializer)
    def get_counts(self, batch: PayoutBatch) -> dict[str, int]:
        counts: dict[str, int] = self.context["progress"]["counts"]
        return counts

    @extend_schema_field(PayoutBatchAmountsSerializer)
    def get_amounts(self, batch: PayoutBatch) -> dict[str, int]:
        amounts: dict[str, int] = self.context["progress"]["amounts"]
        return amounts


class PayoutBatchEventSerializer(serializers.Serializer[Any]):
    """The body of a ``payout_batch`` webhook (sent once, when the batch ends), for the API docs."""

    id = serializers.UUIDField(help_text="The event's id: the same on every attempt (`webhook-id`).")
    event_type = serializers.ChoiceField(choices=["payout_batch"])
    data = PayoutBatchSerializer(help_text="The batch as it is when it ended, with its progress.")  # type: ignore[assignment]
