"""Request and response shapes of the withdrawal endpoints."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from accounts.models import LedgerEntry
from accounts.selectors import PLATFORM_MINIMUM_WITHDRAWAL, statement_record
from api.schema import SchemaExtras
from core.documents import normalize_document
from core.fields import (
    IsoDateField,
    OutputSerializer,
    SharedFieldsSerializer,
    StrictBooleanField,
    StrictCharField,
    StrictChoiceField,
    StrictIntegerField,
)
from withdrawals.exceptions import INVALID_PAYEE_DOCUMENT, merchant_failure_reason
from withdrawals.keys import INVALID_KEY, MAX_KEY_LENGTH, normalize_key
from withdrawals.models import PixKeyType, Withdrawal


class WithdrawalCreateSerializer(SchemaExtras, SharedFieldsSerializer):
    # The minimum is checked by the service (it depends on the account); the
    # platform's floor holds for every account.
    openapi_extra = {"properties": {"amount": {"minimum": PLATFORM_MINIMUM_WITHDRAWAL}}}

    amount = StrictIntegerField(help_text="Centavos; at least max(1000, the account's minimum).")
    key_type = StrictChoiceField(choices=PixKeyType.choices, default=PixKeyType.CPF)
    key_value = StrictCharField(
        max_length=MAX_KEY_LENGTH, trim_whitespace=True, error_messages={"max_length": INVALID_KEY}
    )
    discount_fee = StrictBooleanField(default=True)
    # Additive (docs/api/withdrawals.md): the payee check, the schedule, the merchant's reference.
    payee_document = StrictCharField(
        required=False,
        default="",
        allow_blank=True,
        max_length=18,
        help_text="CPF or CNPJ the key must belong to (formatting accepted): the Pix is sent only if the key's "
        "owner has it; otherwise the withdrawal fails and its debit is given back (payee check).",
        error_messages={"max_length": INVALID_PAYEE_DOCUMENT},
    )
    scheduled_for = IsoDateField(
        required=False,
        default=None,
        allow_null=True,
        help_text="`YYYY-MM-DD`, America/Sao_Paulo: send the Pix on that day, not now (after today, at most 60 "
        "days ahead). The total is debited now; `POST /api/withdrawals/{id}/cancel` cancels it until it is sent.",
    )
    external_id = StrictCharField(
        required=False,
        default="",
        allow_blank=True,
        max_length=64,
        help_text="Your own reference for the withdrawal (shown back on it, its receipt and batch results).",
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        normalized = normalize_key(attrs["key_type"], attrs["key_value"])
        if normalized is None:
            raise serializers.ValidationError({"key_value": [INVALID_KEY]})
        attrs["key_value"] = normalized
        if attrs.get("payee_document"):
            document = normalize_document(attrs["payee_document"])
            if document is None:
                raise serializers.ValidationError({"payee_document": [INVALID_PAYEE_DOCUMENT]})
            attrs["payee_document"] = document
        return attrs


class WithdrawalCreatedSerializer(OutputSerializer):
    """The creation body of the spec (``pix_key_type``, no ``e2e_id``/``paid_at``)."""

    class Meta:
        model = Withdrawal
        fields = ["id", "amount", "liquid_amount", "pix_key_type", "pix_key", "status", "created_at"]
        read_only_fields = fields
        extra_kwargs = {
            "pix_key_type": {
                "help_text": "The key's type, named as the spec's creation response names it; the "
                "withdrawal's record (read, listing, webhook) names the same value `pix_type`."
            }
        }


class WithdrawalSerializer(OutputSerializer):
    """The Withdrawal record of the spec."""

    pix_type = serializers.CharField(
        source="pix_key_type", help_text="The key's type (the creation response names it `pix_key_type`)."
    )

    class Meta:
        model = Withdrawal
        fields = ["id", "e2e_id", "amount", "liquid_amount", "pix_type", "pix_key", "status", "paid_at", "created_at"]
        read_only_fields = fields


class PayeeSerializer(serializers.Serializer[Any]):
    """The payee check of a withdrawal (withdrawals.payees)."""

    expected_document = serializers.CharField(
        source="payee_document", help_text='The CPF/CNPJ the withdrawal asked the key to belong to ("": none).'
    )
    check = serializers.CharField(
        source="payee_check",
        help_text='`matched`, `mismatch`, `not_found`, or "" while the key was not looked up yet.',
    )
    name = serializers.CharField(source="payee_name", help_text="The key owner's name, as the DICT gives it.")
    document = serializers.CharField(
        source="payee_document_masked", help_text="The key owner's CPF/CNPJ, masked (`***.456.789-**`)."
    )
    ispb = serializers.CharField(source="payee_ispb", help_text="The ISPB of the key owner's bank.")
    bank = serializers.CharField(source="payee_bank", help_text="The key owner's bank.")
    checked_at = serializers.DateTimeField(source="payee_checked_at", allow_null=True)


@extend_schema_field(PayeeSerializer(allow_null=True))
class PayeeField(serializers.Field[Any, Any, Any, Any]):
    """Null when the withdrawal asked for no check and its key was never looked up."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(source="*", read_only=True, **kwargs)

    def to_representation(self, value: Withdrawal) -> dict[str, Any] | None:
        if not value.payee_document and not value.payee_check:
            return None
        return dict(PayeeSerializer(value).data)


class WithdrawalDetailSerializer(WithdrawalSerializer):
    """The record of the read and the listing: the contract's fields, then
    the additive ones (docs/api/index.md). The webhook body and the CSV keep
    the contract's record."""

    failure_reason = serializers.SerializerMethodField(
        help_text='Why it failed, in Portuguese ("" unless `failed`): the payee check\'s reason, or a generic one.'
    )
    batch_id = serializers.UUIDField(allow_null=True, help_text="The batch it was posted in, if any.")
    payee = PayeeField(help_text="The payee check: the key owner found and whether it matched.")

    class Meta(WithdrawalSerializer.Meta):
        fields = [
            *WithdrawalSerializer.Meta.fields,
            "scheduled_for",
            "external_id",
            "failure_reason",
            "batch_id",
            "payee",
        ]
        read_only_fields = fields

    def get_failure_reason(self, withdrawal: Withdrawal) -> str:
        return merchant_failure_reason(withdrawal.status, withdrawal.failure_reason)


#: The model fields WithdrawalSerializer reads (``pix_type`` is ``pix_key_type``):
#: what the detail read loads.
WITHDRAWAL_COLUMNS = [
    "id",
    "e2e_id",
    "amount",
    "liquid_amount",
    "pix_key_type",
    "pix_key",
    "status",
    "paid_at",
    "created_at",
]
#: ... and WithdrawalDetailSerializer.
WITHDRAWAL_DETAIL_COLUMNS = [
    *WITHDRAWAL_COLUMNS,
    "scheduled_for",
    "external_id",
    "failure_reason",
    "batch_id",
    "payee_document",
    "payee_check",
    "payee_name",
    "payee_document_masked",
    "payee_ispb",
    "payee_bank",
    "payee_checked_at",
]


class BalanceLimitsSerializer(serializers.Serializer[Any]):
    per_request = serializers.IntegerField(help_text="Maximum per withdrawal request, centavos.")
    per_day_total = serializers.IntegerField(help_text="Maximum total per America/Sao_Paulo day, centavos.")


class BalanceSerializer(serializers.Serializer[Any]):
    available_balance = serializers.IntegerField(
        help_text="Balance available for withdrawal, centavos: the balance less what open MED blocks keep back "
        "beyond it (never below 0)."
    )
    blocked_balance = serializers.IntegerField(
        help_text="Held by open MED infractions (cautionary blocks), centavos: released if the infraction is "
        "rejected, returned to the payer if it is accepted (`GET /infractions`). Not part of `available_balance`."
    )
    daily_limit_remaining = serializers.IntegerField(help_text="max(0, per_day_total - today's withdrawals).")
    minimum_withdrawal = serializers.IntegerField(help_text="Effective minimum: max(1000, account minimum).")
    limits = BalanceLimitsSerializer()


class StatementRecordSerializer(serializers.Serializer[Any]):
    type = serializers.ChoiceField(
        choices=["transaction", "withdrawal"], help_text="`transaction` (a charge) or `withdrawal`."
    )
    id = serializers.UUIDField(help_text="The charge's or the withdrawal's id.")


@extend_schema_field(StatementRecordSerializer(allow_null=True))
class StatementRecordField(serializers.Field[Any, Any, Any, Any]):
    """The record an entry is for, read from its reference (accounts.selectors.statement_record)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(source="*", read_only=True, **kwargs)

    def to_representation(self, value: LedgerEntry) -> dict[str, str] | None:
        return statement_record(value)


class DueComponentsSerializer(serializers.Serializer[Any]):
    """API Pix's ``componentesValor``, in centavos; every part shown, 0 when none."""

    original = serializers.IntegerField(help_text="Centavos: the charge's nominal amount.")
    multa = serializers.IntegerField(help_text="Centavos: the fine paid (0 when none).")
    juros = serializers.IntegerField(help_text="Centavos: the interest paid.")
    abatimento = serializers.IntegerField(help_text="Centavos: the rebate taken off.")
    desconto = serializers.IntegerField(help_text="Centavos: the discount taken off.")


@extend_schema_field(DueComponentsSerializer(allow_null=True))
class DueComponentsField(serializers.Field[Any, Any, Any, Any]):
    """What a due-date charge's payer paid, by component (``payments.selectors.STATEMENT_DUE_COMPONENTS``)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(source="*", read_only=True, **kwargs)

    def to_representation(self, value: LedgerEntry) -> dict[str, int] | None:
        paid = getattr(value, "due_components", None)
        if paid is None:
            return None
        return {name: int(paid.get(name, 0)) for name in DueComponentsSerializer._declared_fields}


class StatementEntrySerializer(OutputSerializer):
    """One ledger entry of the account's statement."""

    record = StatementRecordField(
        help_text="The charge (`transaction`) or withdrawal the entry is for (a refund's or a MED block's, "
        "release's or return's entries name the charge); null for an entry that names neither (an adjustment)."
    )
    components = DueComponentsField(
        help_text="A due-date charge's credit (`charge_paid`): what the payer paid, by component "
        "(original + multa + juros - abatimento - desconto = the amount paid; `amount` is that less the fee). "
        "Null on every other entry."
    )

    class Meta:
        model = LedgerEntry
        fields = ["id", "kind", "amount", "balance_after", "record", "components", "created_at"]
        read_only_fields = fields
        extra_kwargs = {
            "id": {"help_text": "The entry's id: increasing in the order the entries were posted."},
            "amount": {"help_text": "Centavos, signed: positive credits the balance, negative debits it."},
            "balance_after": {"help_text": "The available balance right after this entry, centavos."},
        }


class SettlementDaySerializer(serializers.Serializer[Any]):
    date = serializers.DateField(help_text="The day, America/Sao_Paulo.")
    credits = serializers.IntegerField(help_text="Sum of the day's credits (positive ledger entries), centavos.")
    debits = serializers.IntegerField(
        help_text="Sum of the day's debits (negative ledger entries), as a positive number of centavos."
    )
    fees = serializers.IntegerField(
        help_text="The platform's fees behind the day's entries, already inside `credits` and `debits` (for "
        "reading only, never to subtract again): charges' `platform_tax` (netted out of their credit), "
        "withdrawals' `fee` (inside their debit), minus the fees a failed or canceled withdrawal gave back."
    )
    med_blocked = serializers.IntegerField(
        help_text="MED: the day's cautionary blocks taken from the balance (`med_hold` entries), centavos; "
        "already inside `debits`, shown apart."
    )
    med_released = serializers.IntegerField(
        help_text="MED: blocks given back (`med_hold_release`), centavos; already inside `credits`."
    )
    med_returned = serializers.IntegerField(
        help_text="MED: money returned to payers (`med_return`), centavos; already inside `debits`."
    )
    entries = serializers.IntegerField(help_text="How many ledger entries the day has.")
    closing_balance = serializers.IntegerField(
        help_text="The balance after the day's entries: the previous day's closing_balance + credits - debits."
    )


class SettlementTotalsSerializer(serializers.Serializer[Any]):
    credits = serializers.IntegerField()
    debits = serializers.IntegerField()
    fees = serializers.IntegerField()
    med_blocked = serializers.IntegerField()
    med_released = serializers.IntegerField()
    med_returned = serializers.IntegerField()
    entries = serializers.IntegerField()


class SettlementSerializer(serializers.Serializer[Any]):
    date_start = serializers.DateField()
    date_end = serializers.DateField(help_text="The last day listed: the period's end, or today if it ends later.")
    opening_balance = serializers.IntegerField(help_text="The balance before date_start, centavos.")
    closing_balance = serializers.IntegerField(help_text="The last day's closing_balance (opening_balance if none).")
    totals = SettlementTotalsSerializer(help_text="The days' sums.")
    days = SettlementDaySerializer(many=True, help_text="Every day of the period up to today, oldest first.")
