"""Request and response shapes of /api/due-charges."""

from __future__ import annotations

import datetime as dt
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from acquirers.serializers import acquirer_items_field, acquirer_key_field
from api.schema import SchemaExtras
from core.documents import normalize_document
from core.fields import (
    HttpUrlField,
    IsoDateField,
    SharedFieldsSerializer,
    StrictCharField,
    StrictIntegerField,
    StrictRegexField,
)
from payments.due_amounts import amount_due
from payments.due_payments import now_in_brazil
from payments.due_terms import DueTerms
from payments.models import Charge, ChargeStatus
from payments.serializers import MAX_AMOUNT, MIN_AMOUNT, ChargeCreateSerializer, PixCodeSerializer

#: API Pix's ``solicitacaoPagador`` bound.
DESCRIPTION_MAX_LENGTH = 140
#: Ten years after the due date: longer is a typo, not a billing term.
DAYS_AFTER_DUE_MAX = 3650
#: A due date at most ten years ahead, for the same reason.
DUE_DATE_MAX_DAYS_AHEAD = 3650
DUE_DATE_TOO_FAR = "A data de vencimento deve estar nos próximos 10 anos."


class DebtorSerializer(serializers.Serializer[Any]):
    """API Pix's ``devedor`` (name and CPF or CNPJ) and its address fields."""

    name = StrictCharField(max_length=200)
    document = StrictCharField(max_length=20, help_text="CPF (11 digits) or CNPJ (14), formatted or not.")
    # 200: what a cobv's devedor.email may hold (acquirers.adapters.apipix.cobv cuts longer ones).
    email = serializers.EmailField(max_length=200, required=False, allow_blank=True)
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


def _term(api_name: str) -> serializers.DictField:
    return serializers.DictField(
        required=False,
        allow_null=True,
        help_text=f"API Pix's `valor.{api_name}` object as it is (`modalidade` and its values).",
    )


class DueChargeCreateSerializer(SchemaExtras, SharedFieldsSerializer):
    # Both override forms at once is a 422 (the view checks it, as POST /transactions does).
    openapi_extra = {
        "not": {"required": ["acquirers", "acquirer_key"]},
        "properties": {"amount": {"maximum": MAX_AMOUNT}},
    }

    amount = StrictIntegerField(
        min_value=MIN_AMOUNT,
        error_messages={"min_value": "O valor mínimo permitido para transações é de R$ 1,00."},
        help_text="Centavos: `valor.original`, the amount due on the due date before fine, interest and discounts.",
    )
    due_date = IsoDateField(help_text="`calendario.dataDeVencimento`, `YYYY-MM-DD`.")
    days_after_due = StrictIntegerField(
        min_value=0,
        max_value=DAYS_AFTER_DUE_MAX,
        required=False,
        default=30,
        help_text="`calendario.validadeAposVencimento`: days it stays payable after the due date (default 30).",
    )
    debtor = DebtorSerializer()
    fine = _term("multa")
    interest = _term("juros")
    rebate = _term("abatimento")
    discount = _term("desconto")
    description = StrictCharField(
        max_length=DESCRIPTION_MAX_LENGTH, required=False, allow_blank=True, help_text="`solicitacaoPagador`."
    )
    acquirers = acquirer_items_field(required=False)
    acquirer_key = acquirer_key_field(required=False)
    postback_url = HttpUrlField(max_length=2000, required=False, allow_blank=True)
    metadata = serializers.DictField(required=False)

    # The same refusals as an immediate charge's, before any acquirer is called.
    validate_postback_url = ChargeCreateSerializer.validate_postback_url
    validate_metadata = ChargeCreateSerializer.validate_metadata

    def validate_due_date(self, value: dt.date) -> dt.date:
        # Days are counted one by one (business days, interest): a due date
        # centuries ahead would cost minutes of CPU, and is a typo anyway.
        if value > now_in_brazil() + dt.timedelta(days=DUE_DATE_MAX_DAYS_AHEAD):
            raise serializers.ValidationError(DUE_DATE_TOO_FAR)
        return value


class AmountDueSerializer(serializers.Serializer[Any]):
    date = serializers.DateField()
    amount = serializers.IntegerField(help_text="Centavos due on `date`.")
    components = serializers.DictField(
        child=serializers.IntegerField(),
        help_text="Centavos by API Pix name: original, multa, juros, abatimento, desconto.",
    )


class DueDebtorSerializer(serializers.Serializer[Any]):
    name = serializers.CharField(source="buyer_name")
    document = serializers.CharField(source="buyer_document")
    email = serializers.CharField(source="due.debtor_email")
    street = serializers.CharField(source="buyer_address.street", default="")
    city = serializers.CharField(source="buyer_address.city", default="")
    state = serializers.CharField(source="buyer_address.state", default="")
    zip_code = serializers.CharField(source="buyer_address.zip_code", default="")


def amount_due_today(charge: Charge) -> dict[str, Any] | None:
    """What the payer owes today (America/Sao_Paulo), or None once it cannot be paid."""
    if charge.status != ChargeStatus.PENDING:
        return None
    today = now_in_brazil()
    due = amount_due(DueTerms.from_api(charge.due.terms), on=today)
    if not due.payable:
        return None
    parts = {name: getattr(due, name) for name in ("original", "multa", "juros", "abatimento", "desconto")}
    return {"date": today, "amount": due.final, "components": parts}


class DueChargeSerializer(serializers.Serializer[Charge]):
    """A due-date charge as GET /api/due-charges(/{id}) shows it."""

    id = serializers.UUIDField()
    txid = serializers.CharField()
    status = serializers.ChoiceField(choices=ChargeStatus.choices)
    amount = serializers.IntegerField(source="due.original", help_text="Centavos: `valor.original`.")
    due_date = serializers.DateField(source="due.due_date")
    days_after_due = serializers.IntegerField(source="due.terms.calendario.validadeAposVencimento")
    last_payable_date = serializers.DateField(
        source="due.last_payable_date", help_text="The last day it can be paid (America/Sao_Paulo)."
    )
    fine = serializers.JSONField(source="due.terms.valor.multa", default=None)
    interest = serializers.JSONField(source="due.terms.valor.juros", default=None)
    rebate = serializers.JSONField(source="due.terms.valor.abatimento", default=None)
    discount = serializers.JSONField(source="due.terms.valor.desconto", default=None)
    amount_due_today = serializers.SerializerMethodField(
        help_text="What the payer owes today (America/Sao_Paulo); null once it is not pending or not payable any more."
    )
    paid_amount = serializers.IntegerField(source="due.paid_amount", allow_null=True)
    paid_components = serializers.DictField(child=serializers.IntegerField(), source="due.paid_components")
    platform_tax = serializers.IntegerField()
    liquid_amount = serializers.IntegerField()
    e2e_id = serializers.CharField(allow_null=True)
    paid_at = serializers.DateTimeField(allow_null=True)
    pix = PixCodeSerializer(
        source="*",
        help_text="The PIX code; its QR image is at `GET /api/transactions/{id}/qrcode` (a due charge is a charge).",
    )
    debtor = DueDebtorSerializer(source="*")
    description = serializers.CharField(source="due.description")
    metadata = serializers.JSONField()
    acquirer = serializers.CharField(source="acquirer.key", allow_null=True)
    created_at = serializers.DateTimeField()

    @extend_schema_field(AmountDueSerializer(allow_null=True))
    def get_amount_due_today(self, charge: Charge) -> dict[str, Any] | None:
        today = amount_due_today(charge)
        return None if today is None else dict(AmountDueSerializer(today).data)


#: The CSV's columns: the record's flat fields.
CSV_HEADER = [
    "id",
    "txid",
    "status",
    "amount",
    "due_date",
    "last_payable_date",
    "paid_amount",
    "platform_tax",
    "liquid_amount",
    "e2e_id",
    "paid_at",
    "debtor_name",
    "debtor_document",
    "description",
    "created_at",
]
