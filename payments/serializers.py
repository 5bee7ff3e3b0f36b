"""Request and response shapes of the charge endpoints."""

from __future__ import annotations

import json
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from accounts.models import PaymentMethod
from acquirers.serializers import acquirer_items_field, acquirer_key_field
from api.schema import SchemaExtras
from core.documents import normalize_document
from core.fields import (
    HttpUrlField,
    OutputSerializer,
    SharedFieldsSerializer,
    StrictCharField,
    StrictIntegerField,
    StrictRegexField,
)
from payments.models import Charge, ChargeRefund
from webhooks.http import url_refusal

MIN_AMOUNT = 100
# Above it is a 400 business rule (spec step 7), not a field error; the
# schema still states the bound, as the spec's request table does.
MAX_AMOUNT = 300_000
METADATA_MAX_BYTES = 4096
#: Objects and arrays inside one another, the metadata object itself counted.
#: Deeper is refused before anything else happens: PostgreSQL and json.dumps
#: give up on a few hundred levels, after the acquirer accepted the charge.
METADATA_MAX_DEPTH = 32
METADATA_UNSTORABLE = "Os metadados não podem conter caracteres nulos nem substitutos (U+D800 a U+DFFF)."


class BuyerSerializer(serializers.Serializer[Any]):
    # Digits are 0-9: \d (and str.isdigit) also take full-width and
    # Arabic-Indic digits, which no acquirer or payer's bank reads.
    buyer_name = StrictCharField(max_length=255)
    buyer_document = StrictCharField(max_length=20)
    buyer_phone = StrictRegexField(
        r"^[0-9]{10,11}$", error_messages={"invalid": "Informe DDD e número, apenas dígitos (10 ou 11)."}
    )
    buyer_city = StrictCharField(max_length=100, required=False, allow_blank=True)
    buyer_state = StrictRegexField(
        r"^[A-Za-z]{2}$", required=False, allow_blank=True, error_messages={"invalid": "Informe a UF com 2 letras."}
    )
    buyer_zipcode = StrictRegexField(
        r"^[0-9]{8}$", required=False, allow_blank=True, error_messages={"invalid": "Informe o CEP com 8 dígitos."}
    )
    buyer_neighborhood = StrictCharField(max_length=100, required=False, allow_blank=True)
    buyer_number = StrictCharField(max_length=20, required=False, allow_blank=True)
    buyer_complement = StrictCharField(max_length=100, required=False, allow_blank=True)

    def validate_buyer_document(self, value: str) -> str:
        document = normalize_document(value)
        if document is None:
            raise serializers.ValidationError("CPF ou CNPJ inválido.")
        return document


class ChargeCreateSerializer(SchemaExtras, SharedFieldsSerializer):
    # decisions §4: both override forms at once is a 422 (the view checks it).
    openapi_extra = {
        "not": {"required": ["acquirers", "acquirer_key"]},
        "properties": {"amount": {"maximum": MAX_AMOUNT}},
    }

    payment_method = serializers.ChoiceField(choices=PaymentMethod.choices)
    amount = StrictIntegerField(
        min_value=MIN_AMOUNT, error_messages={"min_value": "O valor mínimo permitido para transações é de R$ 1,00."}
    )
    buyer = BuyerSerializer()
    acquirers = acquirer_items_field(required=False)
    acquirer_key = acquirer_key_field(required=False)
    postback_url = HttpUrlField(max_length=2000, required=False, allow_blank=True)
    metadata = serializers.DictField(required=False)

    def validate_postback_url(self, value: str) -> str:
        # Refused when saved, not only when delivered (decisions §6).
        refusal = url_refusal(value) if value else None
        if refusal:
            raise serializers.ValidationError(refusal)
        return value

    def validate_metadata(self, value: dict[str, Any]) -> dict[str, Any]:
        # Refused here, not by PostgreSQL once the acquirer has already
        # accepted the charge: jsonb holds no U+0000, UTF-8 no lone surrogate.
        # Depth first: the checks below must not recurse through it.
        if _depth(value) > METADATA_MAX_DEPTH:
            raise serializers.ValidationError(
                f"Os metadados podem ter no máximo {METADATA_MAX_DEPTH} níveis de objetos e listas."
            )
        if any(_unstorable(text) for text in _strings(value)):
            raise serializers.ValidationError(METADATA_UNSTORABLE)
        if len(json.dumps(value, ensure_ascii=False).encode()) > METADATA_MAX_BYTES:
            raise serializers.ValidationError(f"Os metadados devem ter no máximo {METADATA_MAX_BYTES} bytes.")
        return value


def _depth(value: Any) -> int:
    """How deep objects and arrays nest in decoded JSON, without recursion."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, level)
            stack.extend((child, level + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def _strings(value: Any) -> list[str]:
    """Every key and string value inside decoded JSON."""
    found: list[str] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            found.append(item)
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def _unstorable(text: str) -> bool:
    """U+0000 or a lone UTF-16 surrogate (JSON's ``\\u0000``, ``\\ud800``)."""
    return "\x00" in text or any("\ud800" <= char <= "\udfff" for char in text)


class PixCodeSerializer(serializers.Serializer[Any]):
    """The charge's ``pix`` object: a declared field, so the docs show
    ``emv`` (a method field was an opaque map, ``additionalProp1``)."""

    emv = serializers.CharField(help_text="The BR Code (PIX copia e cola); the QR code encodes this text.")


class ChargeCreatedSerializer(serializers.Serializer[Any]):
    """The creation body: exactly what the spec lists."""

    id = serializers.UUIDField()
    amount = serializers.IntegerField()
    platform_tax = serializers.IntegerField()
    liquid_amount = serializers.IntegerField()
    pix = PixCodeSerializer(source="*")

    def to_representation(self, instance: Any) -> dict[str, Any]:
        # What the fields above render (the id as its string, the amounts as
        # the ints they are), without DRF building them for every response:
        # its deep copy of the declared fields was 3.7% of a charge's CPU
        # (py-spy under wrk). The fields stay declared: they are the schema.
        return {
            "id": str(instance.pk),
            "amount": instance.amount,
            "platform_tax": instance.platform_tax,
            "liquid_amount": instance.liquid_amount,
            "pix": {"emv": instance.emv},
        }


class ChargeSerializer(OutputSerializer):
    """The Transaction record of the spec."""

    class Meta:
        model = Charge
        fields = [
            "id",
            "payment_method",
            "e2e_id",
            "amount",
            "platform_tax",
            "liquid_amount",
            "status",
            "paid_at",
            "created_at",
            # Not in the spec's record: added (issue 15) so an integrator can
            # tell the payer until when the code is valid. The creation
            # response and the webhook body stay exactly as the spec fixes them.
            "expires_at",
        ]
        read_only_fields = fields


class ChargeReadSerializer(ChargeSerializer):
    """A charge as ``GET /transactions/{id}`` and the listing show it: the
    record plus the ``pix`` object exactly as the creation answered it, so
    the copy-and-paste code can be fetched again (issue 30). Additive: the
    CSV export and the sandbox drivers keep :class:`ChargeSerializer`."""

    pix = PixCodeSerializer(source="*", help_text="The charge's PIX code, as the creation response has it.")

    class Meta(ChargeSerializer.Meta):
        fields = [*ChargeSerializer.Meta.fields, "pix"]
        read_only_fields = fields


#: The model fields a read loads for :class:`ChargeReadSerializer`: the
#: record's columns and ``emv`` (behind ``pix``), in the same row.
CHARGE_READ_COLUMNS = (*ChargeSerializer.Meta.fields, "emv")


#: The refund's ``status`` as merchants read it (docs/api/refunds.md, "What happens").
REFUND_STATUSES = {
    ChargeRefund.Status.PROCESSING: "processing",
    ChargeRefund.Status.DONE: "refunded",
    ChargeRefund.Status.FAILED: "failed",
    ChargeRefund.Status.RELEASED: "canceled",
}
REFUND_REASON_MAX_LENGTH = 140


class RefundCreateSerializer(SharedFieldsSerializer):
    """Body of a refund request: optional; the refund is always the charge's full amount."""

    reason = StrictCharField(
        max_length=REFUND_REASON_MAX_LENGTH,
        required=False,
        allow_blank=True,
        help_text="Why the payer gets the money back; sent to the acquirer with the refund.",
    )


class RefundSerializer(serializers.Serializer[Any]):
    """A refund of a charge: always its full amount."""

    id = serializers.IntegerField()
    transaction_id = serializers.UUIDField(source="charge_id")
    amount = serializers.IntegerField(source="charge.amount", help_text="Centavos returned to the payer.")
    liquid_amount = serializers.IntegerField(
        source="amount", help_text="Centavos taken from the balance: the charge's `liquid_amount`."
    )
    status = serializers.SerializerMethodField(
        help_text=(
            "`processing`: asked, `liquid_amount` reserved; `refunded`: the money went back (the charge is "
            "`refunded`); `failed`: the acquirer did not make it, the reservation is back in the balance; "
            "`canceled`: a chargeback took the money first, the reservation is back."
        )
    )
    reason = serializers.CharField()
    failure_reason = serializers.CharField(help_text="What the acquirer said when it did not make it.")
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)

    @extend_schema_field(serializers.ChoiceField(choices=sorted(set(REFUND_STATUSES.values()))))
    def get_status(self, refund: ChargeRefund) -> str:
        return REFUND_STATUSES[ChargeRefund.Status(refund.status)]
