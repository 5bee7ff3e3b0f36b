"""Request and response shapes of /api/recurrences (Pix Automático).

The responses are :mod:`recurrences.payloads`' dicts, the ones the webhooks
carry: the output serializers below only describe them for the OpenAPI
schema and hand the dict over (``to_representation``), so the API and the
events cannot drift apart."""

from __future__ import annotations

import datetime as dt
from typing import Any

from rest_framework import serializers

from api.schema import SchemaExtras
from core.documents import normalize_document
from core.exceptions import ValidationFailed
from core.fields import (
    HttpUrlField,
    IsoDateField,
    SharedFieldsSerializer,
    StrictCharField,
    StrictIntegerField,
    StrictRegexField,
)
from payments.due_payments import now_in_brazil
from payments.recurrence_terms import (
    NOME_MAX,
    VINCULO_MAX,
    Calendario,
    Devedor,
    InvalidRecurrenceTerms,
    Periodicidade,
    PoliticaRetentativa,
    RecurrenceTerms,
    ValorRecorrencia,
    Vinculo,
)
from payments.serializers import MAX_AMOUNT, MIN_AMOUNT, ChargeCreateSerializer
from recurrences.models import (
    CancelledBy,
    Cycle,
    CycleStatus,
    Journey,
    Periodicity,
    Recurrence,
    RecurrenceStatus,
    RetryPolicy,
)
from recurrences.payloads import cycle_data, recurrence_data

MIN_AMOUNT_MESSAGE = "O valor mínimo permitido para transações é de R$ 1,00."
ONE_AMOUNT = "Informe amount (valor fixo) ou max_amount (valor variável), um dos dois."
PAYER_BANK_REQUIRED = "Obrigatório na jornada push."
PAYER_BANK_REFUSED = "Não se informa na jornada qr: o pagador lê o QR Code no seu banco."
END_BEFORE_START = "A data final não pode ser anterior ao primeiro vencimento."
FIRST_DUE_TOO_FAR = "O primeiro vencimento deve estar nos próximos 10 anos."
#: A first due date at most ten years ahead: later is a typo, not a contract.
FIRST_DUE_MAX_DAYS_AHEAD = 3650
#: The cycle money a cycle's status may take beyond the schedule's own (:func:`recurrences.payloads.cycle_status`).
CYCLE_STATUSES = [*CycleStatus.values, "refunded", "chargeback"]


def _amount(help_text: str, **kwargs: Any) -> StrictIntegerField:
    return StrictIntegerField(
        min_value=MIN_AMOUNT, error_messages={"min_value": MIN_AMOUNT_MESSAGE}, help_text=help_text, **kwargs
    )


class RecurrenceDebtorSerializer(serializers.Serializer[Any]):
    """``vinculo.devedor``: the payer whose bank the authorisation is asked of."""

    document = StrictCharField(max_length=20, help_text="CPF (11 digits) or CNPJ (14), formatted or not.")
    name = StrictCharField(max_length=NOME_MAX, help_text="`vinculo.devedor.nome`.")

    def validate_document(self, value: str) -> str:
        document = normalize_document(value)
        if document is None:
            raise serializers.ValidationError("CPF ou CNPJ inválido.")
        return document


class PayerBankSerializer(serializers.Serializer[Any]):
    """Where the push journey's request goes (``POST /solicrec``'s ``destinatario``)."""

    ispb = StrictRegexField(
        r"^[0-9]{8}$",
        help_text="The payer's PSP ISPB, 8 digits.",
        error_messages={"invalid": "Informe o ISPB com 8 dígitos."},
    )
    branch = StrictRegexField(
        r"^[0-9]{1,4}$",
        required=False,
        allow_blank=True,
        help_text="`agencia`, up to 4 digits (optional).",
        error_messages={"invalid": "Informe a agência com até 4 dígitos."},
    )
    account = StrictRegexField(
        r"^[0-9]{1,20}$",
        help_text="`conta`, digits only (with its check digit), up to 20.",
        error_messages={"invalid": "Informe a conta com até 20 dígitos."},
    )


class RecurrenceCreateSerializer(SchemaExtras, SharedFieldsSerializer):
    # The rules between fields, for the schema: one of the amounts, and the
    # payer's bank for the push journey only.
    openapi_extra = {
        "oneOf": [{"required": ["amount"]}, {"required": ["max_amount"]}],
        "properties": {"amount": {"maximum": MAX_AMOUNT}, "max_amount": {"maximum": MAX_AMOUNT}},
    }

    debtor = RecurrenceDebtorSerializer()
    contract = StrictCharField(
        max_length=VINCULO_MAX,
        help_text="`vinculo.contrato`: your reference of the contract; one live recurrence per debtor and contract.",
    )
    description = StrictCharField(
        max_length=VINCULO_MAX,
        required=False,
        allow_blank=True,
        help_text="`vinculo.objeto`: what the payer authorises, shown by their bank.",
    )
    amount = _amount("Centavos, fixed: every cycle charges it (`valor.valorRec`).", required=False)
    max_amount = _amount(
        "Centavos, variable amounts: you set each cycle's amount, at most this "
        "(`valor.valorMinimoRecebedor`: the least the payer's own limit must allow).",
        required=False,
    )
    periodicity = serializers.ChoiceField(choices=Periodicity.choices, help_text="`calendario.periodicidade`.")
    first_due_date = IsoDateField(help_text="`calendario.dataInicial`: the first cycle's due date, `YYYY-MM-DD`.")
    end_date = IsoDateField(
        required=False, help_text="`calendario.dataFinal`: no cycle falls due after it; none: until cancelled."
    )
    retry_policy = serializers.ChoiceField(
        choices=RetryPolicy.choices,
        help_text="`politicaRetentativa`: `3_in_7_days` lets a refused cycle be retried up to 3 times in 7 days.",
    )
    journey = serializers.ChoiceField(
        choices=Journey.choices,
        help_text="`qr`: the payer scans the recurrence's QR Code; `push`: the request goes to the payer's bank.",
    )
    payer_bank = PayerBankSerializer(required=False, help_text="Required for `push`, refused for `qr`.")
    postback_url = HttpUrlField(max_length=2000, required=False, allow_blank=True)
    metadata = serializers.DictField(required=False)

    validate_postback_url = ChargeCreateSerializer.validate_postback_url
    validate_metadata = ChargeCreateSerializer.validate_metadata

    def validate_first_due_date(self, value: dt.date) -> dt.date:
        if value > now_in_brazil() + dt.timedelta(days=FIRST_DUE_MAX_DAYS_AHEAD):
            raise serializers.ValidationError(FIRST_DUE_TOO_FAR)
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        errors: dict[str, list[str]] = {}
        if ("amount" in attrs) == ("max_amount" in attrs):
            errors["amount"] = [ONE_AMOUNT]
        journey = attrs.get("journey")
        if journey == Journey.PUSH and "payer_bank" not in attrs:
            errors["payer_bank"] = [PAYER_BANK_REQUIRED]
        if journey == Journey.QR and "payer_bank" in attrs:
            errors["payer_bank"] = [PAYER_BANK_REFUSED]
        end = attrs.get("end_date")
        if end is not None and end < attrs["first_due_date"]:
            errors["end_date"] = [END_BEFORE_START]
        if errors:
            raise serializers.ValidationError(errors)
        return attrs


#: Our names for API Pix's (:attr:`InvalidRecurrenceTerms.field`), longest first.
TERM_FIELDS = (
    ("vinculo.devedor.nome", "debtor.name"),
    ("vinculo.devedor", "debtor.document"),
    ("vinculo.contrato", "contract"),
    ("vinculo.objeto", "description"),
    ("vinculo", "debtor"),
    ("calendario.dataInicial", "first_due_date"),
    ("calendario.dataFinal", "end_date"),
    ("calendario.periodicidade", "periodicity"),
    ("valor.valorMinimoRecebedor", "max_amount"),
    ("valor", "amount"),
    ("politicaRetentativa", "retry_policy"),
)
PERIODICIDADE = {
    Periodicity.WEEKLY: Periodicidade.SEMANAL,
    Periodicity.MONTHLY: Periodicidade.MENSAL,
    Periodicity.QUARTERLY: Periodicidade.TRIMESTRAL,
    Periodicity.SEMIANNUAL: Periodicidade.SEMESTRAL,
    Periodicity.YEARLY: Periodicidade.ANUAL,
}
POLITICA = {
    RetryPolicy.NONE: PoliticaRetentativa.NAO_PERMITE,
    RetryPolicy.THREE_IN_SEVEN_DAYS: PoliticaRetentativa.PERMITE_3R_7D,
}


def field_of(term: str) -> str:
    """The request's field an API Pix path (``vinculo.devedor.cpf``) stands for."""
    for prefix, field in TERM_FIELDS:
        if term == prefix or term.startswith(prefix + "."):
            return field
    return "non_field_errors"


def recurrence_terms_build(data: dict[str, Any]) -> RecurrenceTerms:
    """The validated body as API Pix ``/rec`` terms; a rule of theirs the
    serializer did not state is a 422 under our field's name, in pt-BR."""
    debtor = data["debtor"]
    document = debtor["document"]
    try:
        return RecurrenceTerms(
            vinculo=Vinculo(
                contrato=data["contract"],
                devedor=Devedor(
                    nome=debtor["name"],
                    cpf=document if len(document) == 11 else None,
                    cnpj=document if len(document) != 11 else None,
                ),
                objeto=data.get("description") or None,
            ),
            calendario=Calendario(
                data_inicial=data["first_due_date"],
                periodicidade=PERIODICIDADE[data["periodicity"]],
                data_final=data.get("end_date"),
            ),
            politica_retentativa=POLITICA[data["retry_policy"]],
            valor=ValorRecorrencia(valor_rec=data.get("amount"), valor_minimo_recebedor=data.get("max_amount")),
        )
    except InvalidRecurrenceTerms as exc:
        message = exc.message[:1].upper() + exc.message[1:] + "."
        raise ValidationFailed({field_of(exc.field): [message]}) from exc


class CycleAmountSerializer(serializers.Serializer[Any]):
    amount = _amount("Centavos: this cycle's amount, at most the recurrence's `max_amount`.")


# --------------------------------------------------------------------------- output (documentation of the payloads)


class _QrCodeSerializer(serializers.Serializer[Any]):
    emv = serializers.CharField(help_text="The recurrence's Pix copy-and-paste code, for the payer's app.")
    location = serializers.CharField(help_text="Its `locrec` URL.")


class _DebtorOutSerializer(serializers.Serializer[Any]):
    name = serializers.CharField()
    document = serializers.CharField()


class _PayerBankOutSerializer(serializers.Serializer[Any]):
    ispb = serializers.CharField()
    branch = serializers.CharField()
    account = serializers.CharField()


class RecurrenceSerializer(serializers.Serializer[Recurrence]):
    """A recurrence as the API and its `recurrence` webhook show it."""

    id = serializers.UUIDField()
    id_rec = serializers.CharField(help_text="API Pix `idRec`, assigned by the acquirer.")
    status = serializers.ChoiceField(choices=RecurrenceStatus.choices)
    journey = serializers.ChoiceField(choices=Journey.choices)
    contract = serializers.CharField()
    description = serializers.CharField()
    debtor = _DebtorOutSerializer()
    amount = serializers.IntegerField(allow_null=True, help_text="Centavos, fixed amount; null when variable.")
    max_amount = serializers.IntegerField(allow_null=True, help_text="Centavos, variable amounts' maximum.")
    periodicity = serializers.ChoiceField(choices=Periodicity.choices)
    first_due_date = serializers.DateField()
    end_date = serializers.DateField(allow_null=True)
    retry_policy = serializers.ChoiceField(choices=RetryPolicy.choices)
    qr_code = _QrCodeSerializer(allow_null=True, help_text="QR journey only.")
    payer_bank = _PayerBankOutSerializer(allow_null=True, help_text="Push journey only.")
    push_status = serializers.CharField(
        allow_null=True, help_text="The push request at the payer's bank (API Pix `solicrec` status)."
    )
    payer_ispb = serializers.CharField(allow_null=True, help_text="The payer's PSP, once authorised.")
    cancelled_by = serializers.ChoiceField(
        choices=[c for c in CancelledBy.values if c], allow_null=True, help_text="Who cancelled it."
    )
    status_reason = serializers.CharField(allow_null=True, help_text="Why it was rejected or cancelled.")
    acquirer = serializers.CharField(help_text="The acquirer that holds its `idRec`: every cycle is charged there.")
    metadata = serializers.JSONField()
    approved_at = serializers.DateTimeField(allow_null=True)
    ended_at = serializers.DateTimeField(allow_null=True)
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()

    def to_representation(self, instance: Recurrence) -> dict[str, Any]:
        return recurrence_data(instance)


class CycleSerializer(serializers.Serializer[Cycle]):
    """A cycle as the API and its `recurrence_cycle` webhook show it."""

    id = serializers.UUIDField()
    recurrence_id = serializers.UUIDField()
    index = serializers.IntegerField(help_text="0 is the first due date's cycle.")
    due_date = serializers.DateField()
    amount = serializers.IntegerField(allow_null=True, help_text="Centavos; null until you set a variable one.")
    status = serializers.ChoiceField(
        choices=CYCLE_STATUSES, help_text="The schedule's, then the money's (`paid`, `refunded`, `chargeback`)."
    )
    txid = serializers.CharField(help_text="The cycle's `cobr` txid.")
    transaction_id = serializers.UUIDField(
        allow_null=True, help_text="Its charge (`GET /api/transactions/{id}`), once the acquirer holds the cobr."
    )
    platform_tax = serializers.IntegerField(allow_null=True)
    liquid_amount = serializers.IntegerField(allow_null=True)
    e2e_id = serializers.CharField(allow_null=True)
    paid_at = serializers.DateTimeField(allow_null=True)
    retries = serializers.IntegerField(help_text="Retries asked for.")
    next_retry_on = serializers.DateField(allow_null=True)
    failure_reason = serializers.CharField(allow_null=True)
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()

    def to_representation(self, instance: Cycle) -> dict[str, Any]:
        return cycle_data(instance)


class RecurrenceEventSerializer(serializers.Serializer[Any]):
    """The body of a ``recurrence`` webhook, for the API docs."""

    id = serializers.UUIDField(help_text="The event's id: the same on every attempt (`webhook-id`).")
    event_type = serializers.ChoiceField(choices=["recurrence"])
    data = RecurrenceSerializer(help_text="The recurrence as it is after the change.")  # type: ignore[assignment]


class CycleEventSerializer(serializers.Serializer[Any]):
    """The body of a ``recurrence_cycle`` webhook, for the API docs."""

    id = serializers.UUIDField(help_text="The event's id: the same on every attempt (`webhook-id`).")
    event_type = serializers.ChoiceField(choices=["recurrence_cycle"])
    data = CycleSerializer(help_text="The cycle as it is after the change.")  # type: ignore[assignment]
