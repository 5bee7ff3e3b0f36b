"""Request and response shapes of /api/due-charges/batches.

:class:`DueChargeItemSerializer` validates one item: the body of ``POST
/api/due-charges``. It is written here because the single-charge API was
being written beside it; the two are meant to become one serializer.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from acquirers.serializers import acquirer_items_field
from core.documents import normalize_document
from core.fields import HttpUrlField, SharedFieldsSerializer, StrictCharField, StrictIntegerField, StrictRegexField
from due_charges.models import DueChargeBatch, DueChargeBatchItem, ItemStatus
from payments.serializers import MIN_AMOUNT, ChargeCreateSerializer
from webhooks.http import url_refusal

#: At most this many charges in one batch (Efí's lotecobv takes 1,000 too).
MAX_ITEMS = 1000
ITEMS_REQUIRED = "Informe a lista de cobranças em items."
ITEMS_NOT_A_LIST = "items deve ser uma lista de cobranças."
ITEMS_EMPTY = "O lote deve ter ao menos uma cobrança."
ITEMS_TOO_MANY = f"O lote pode ter no máximo {MAX_ITEMS} cobranças."


class DebtorSerializer(serializers.Serializer[Any]):
    # API Pix devedor: nome with cpf or cnpj; the address as cobv's schema allows.
    name = StrictCharField(max_length=200)
    document = StrictCharField(max_length=20)
    email = serializers.EmailField(max_length=254, required=False, allow_blank=True)
    street = StrictCharField(max_length=200, required=False, allow_blank=True)
    city = StrictCharField(max_length=200, required=False, allow_blank=True)
    state = StrictRegexField(
        r"^[A-Za-z]{2}$", required=False, allow_blank=True, error_messages={"invalid": "Informe a UF com 2 letras."}
    )
    zip_code = StrictRegexField(
        r"^[0-9]{8}$", required=False, allow_blank=True, error_messages={"invalid": "Informe o CEP com 8 dígitos."}
    )

    def validate_document(self, value: str) -> str:
        document = normalize_document(value)
        if document is None:
            raise serializers.ValidationError("CPF ou CNPJ inválido.")
        return document


class DueChargeItemSerializer(SharedFieldsSerializer):
    """One due-date charge as the merchant sends it. The terms' inner
    objects (fine, interest, rebate, discount) are API Pix's own and are
    validated by :func:`payments.due_charges.due_terms_build`."""

    amount = StrictIntegerField(
        min_value=MIN_AMOUNT, error_messages={"min_value": "O valor mínimo permitido para cobranças é de R$ 1,00."}
    )
    due_date = serializers.DateField(input_formats=["%Y-%m-%d"])
    days_after_due = StrictIntegerField(min_value=0, required=False, default=30)
    debtor = DebtorSerializer()
    fine = serializers.DictField(required=False, allow_null=True)
    interest = serializers.DictField(required=False, allow_null=True)
    rebate = serializers.DictField(required=False, allow_null=True)
    discount = serializers.DictField(required=False, allow_null=True)
    description = StrictCharField(max_length=140, required=False, allow_blank=True)
    postback_url = HttpUrlField(max_length=2000, required=False, allow_blank=True)
    metadata = serializers.DictField(required=False)
    acquirers = acquirer_items_field(required=False)

    def validate_postback_url(self, value: str) -> str:
        refusal = url_refusal(value) if value else None
        if refusal:
            raise serializers.ValidationError(refusal)
        return value

    def validate_metadata(self, value: dict[str, Any]) -> dict[str, Any]:
        # The same limits as a charge's metadata (depth, bytes, unstorable text).
        return ChargeCreateSerializer.validate_metadata(self, value)  # type: ignore[arg-type]


def item_as_json(data: dict[str, Any]) -> dict[str, Any]:
    """Validated data as stored on the item (dates as ISO text)."""
    return {key: value.isoformat() if isinstance(value, dt.date) else value for key, value in data.items()}


class BatchCreateSerializer(serializers.Serializer[Any]):
    """The request's own fields; ``items`` is checked as a list here and each
    item apart (a bad item fails alone, as lotecobv's NEGADA)."""

    items = serializers.ListField(
        child=serializers.JSONField(),
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

    @extend_schema_field({"type": "string", "format": "uuid", "nullable": True})
    def get_charge_id(self, item: DueChargeBatchItem) -> str | None:
        return str(item.charge_id) if item.status == ItemStatus.CREATED else None
