"""The bootstrap file (decisions §9) and its validation: the serializers,
then :func:`check_against_database` for what they cannot see. Nothing here
writes; ``provisioning.bootstrap`` applies what passes.

The file's field names are the operator's vocabulary (``cashin_fee.bps``,
``blocked``); the serializers map them onto model columns with ``source``, so
validated data can be written as is. Validation is strict in the way the API
is (decisions §1): a number must be a JSON number, a boolean a JSON boolean.
Unknown fields are ignored, as in the API.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from django.conf import settings
from django.core.validators import EmailValidator, RegexValidator
from rest_framework import serializers
from rest_framework.settings import api_settings

from accounts.models import Account, ApiCredential, PaymentMethod
from acquirers.adapters import adapter_names, validate_options
from acquirers.adapters.base import InvalidOptions
from acquirers.models import Acquirer, AcquirerGrant, acquirer_key_validator
from acquirers.services import MAX_CHAIN_LENGTH
from core.fields import (
    HttpUrlField,
    StrictBooleanField,
    StrictCharField,
    StrictChoiceField,
    StrictDecimalField,
    StrictIntegerField,
)
from core.text import validate_single_line
from provisioning.sandbox_charges import SandboxChargeSpecSerializer
from provisioning.sandbox_charges import validate_specs as validate_sandbox_charges
from webhooks.exceptions import endpoint_limit_message
from webhooks.http import url_refusal
from webhooks.models import WebhookEndpoint
from webhooks.selectors import endpoints_counted

# Column bounds, so that an oversized number is a field error rather than a
# database error.
MAX_BIGINT = 2**63 - 1
MAX_INT = 2**31 - 1
MAX_SMALLINT = 2**15 - 1
MAX_BPS = 10_000
REF_MAX_LENGTH = 64

ROOT_PATH = "(file)"
CHAIN_FIELDS = ("available_acquirers", "active_acquirers", "cashout_acquirers")

DUPLICATE = "Valor repetido na lista."
REQUIRED_ON_CREATE = "Este campo é obrigatório ao criar."
NOT_AVAILABLE = "Uma adquirente ativa precisa estar em available_acquirers."
DOCUMENT_INVALID = "Informe um CPF (11 dígitos) ou CNPJ (14 caracteres), sem pontuação."
EMAIL_INVALID = "Informe um endereço de e-mail válido."
NO_BACK_TO_PENDING = "Uma conta aprovada ou rejeitada não volta a pendente."


# --------------------------------------------------------------------------- strict fields


class UniqueListField(serializers.ListField):
    """A list whose items may not repeat; the repeated item carries the error."""

    def to_internal_value(self, data: Any) -> list[Any]:
        items = super().to_internal_value(data)
        repeated = repeated_positions(items)
        if repeated:
            raise serializers.ValidationError({str(index): [DUPLICATE] for index in repeated})
        return items


def money(**kwargs: Any) -> StrictIntegerField:
    return StrictIntegerField(required=False, min_value=0, max_value=MAX_BIGINT, **kwargs)


def basis_points(**kwargs: Any) -> StrictIntegerField:
    return StrictIntegerField(required=False, min_value=0, max_value=MAX_BPS, **kwargs)


def ref_field() -> StrictCharField:
    return StrictCharField(max_length=REF_MAX_LENGTH)


def acquirer_key_field() -> StrictCharField:
    return StrictCharField(max_length=64, validators=[acquirer_key_validator])


def acquirer_chain_field(**kwargs: Any) -> UniqueListField:
    return UniqueListField(child=acquirer_key_field(), required=False, **kwargs)


def repeated_positions(values: Sequence[Any]) -> list[int]:
    """Positions of the values already seen earlier in ``values``."""
    seen: set[Any] = set()
    repeated: list[int] = []
    for index, value in enumerate(values):
        if value in seen:
            repeated.append(index)
        seen.add(value)
    return repeated


def unique_refs(items: Sequence[Mapping[str, Any]], field: str = "ref") -> None:
    """Raise on each item that repeats an earlier item's ``field``."""
    repeated = repeated_positions([item[field] for item in items])
    if repeated:
        raise serializers.ValidationError({str(index): {field: [DUPLICATE]} for index in repeated})


# --------------------------------------------------------------------------- the file


class AcquirerSpecSerializer(serializers.Serializer[Any]):
    key = acquirer_key_field()
    name = StrictCharField(required=False, max_length=100)
    nominal = StrictCharField(required=False, max_length=200, allow_blank=True)
    adapter = StrictCharField(required=False, max_length=64)
    options = serializers.DictField(required=False)
    enabled = StrictBooleanField(required=False)
    max_ticket = money()
    # The staff override of the measured conversion (acquirers.models); null
    # clears it, so the listing shows the measured value.
    conversion_percent = StrictDecimalField(
        required=False,
        allow_null=True,
        source="conversion_percent_override",
        max_digits=5,
        decimal_places=2,
        min_value=0,
        max_value=100,
    )
    is_new = StrictBooleanField(required=False)
    default_priority = StrictIntegerField(required=False, allow_null=True, min_value=1, max_value=MAX_SMALLINT)
    connect_timeout_ms = StrictIntegerField(required=False, min_value=1, max_value=MAX_INT)
    read_timeout_ms = StrictIntegerField(required=False, min_value=1, max_value=MAX_INT)


class CashinFeeSerializer(serializers.Serializer[Any]):
    fixed = money(source="cashin_fee_fixed")
    bps = basis_points(source="cashin_fee_bps")


class WithdrawalFeeSerializer(serializers.Serializer[Any]):
    fixed = money(source="withdrawal_fee_fixed")
    bps = basis_points(source="withdrawal_fee_bps")


class WithdrawalLimitsSerializer(serializers.Serializer[Any]):
    minimum = money(source="withdrawal_minimum")
    per_request = money(source="withdrawal_per_request_limit")
    per_day_total = money(source="withdrawal_daily_limit")


class CredentialSpecSerializer(serializers.Serializer[Any]):
    ref = ref_field()
    permission = StrictChoiceField(choices=ApiCredential.Permission.choices, required=False)


class WebhookSpecSerializer(serializers.Serializer[Any]):
    ref = ref_field()
    url = HttpUrlField(max_length=2000)

    def validate_url(self, value: str) -> str:
        # The rules the API and the admin apply (https and a public address in production).
        refusal = url_refusal(value)
        if refusal:
            raise serializers.ValidationError(refusal)
        return value


class AccountSpecSerializer(serializers.Serializer[Any]):
    ref = ref_field()
    name = StrictCharField(required=False, max_length=200, validators=[validate_single_line])
    # CPF (11 digits) or CNPJ (14 characters, the last two digits: the
    # alphanumeric CNPJ keeps numeric check digits).
    document = StrictCharField(
        required=False,
        allow_blank=True,
        validators=[RegexValidator(r"^([0-9]{11}|[0-9A-Z]{12}[0-9]{2})?$", DOCUMENT_INVALID)],
    )
    # The contact e-mail credential claim links go to (README, "Money safety"):
    # set here by an operator with shell access, in the back office only by maker-checker.
    email = StrictCharField(
        required=False, allow_blank=True, max_length=254, validators=[EmailValidator(EMAIL_INVALID)]
    )
    status = StrictChoiceField(choices=Account.Status.choices, required=False)
    blocked = StrictBooleanField(required=False, source="is_blocked")
    payment_methods = UniqueListField(child=StrictChoiceField(choices=PaymentMethod.choices), required=False)
    acquirer_selection = StrictBooleanField(required=False, source="can_select_pix_cash_in_acquirer")
    available_acquirers = acquirer_chain_field()
    active_acquirers = acquirer_chain_field(max_length=MAX_CHAIN_LENGTH)
    cashout_acquirers = acquirer_chain_field(max_length=MAX_CHAIN_LENGTH)
    withdrawals_need_approval = StrictBooleanField(required=False)
    # source="*": the nested fields land flat, under their column names.
    cashin_fee = CashinFeeSerializer(source="*", required=False)
    withdrawal_fee = WithdrawalFeeSerializer(source="*", required=False)
    withdrawal_limits = WithdrawalLimitsSerializer(source="*", required=False)
    charge_expiry_seconds = StrictIntegerField(required=False, min_value=60, max_value=MAX_INT)
    credentials = CredentialSpecSerializer(many=True, required=False)
    webhooks = WebhookSpecSerializer(many=True, required=False)
    sandbox_paid_charges = SandboxChargeSpecSerializer(many=True, required=False)

    def validate_sandbox_paid_charges(self, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return validate_sandbox_charges(value)

    def validate_credentials(self, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        unique_refs(value)
        return value

    def validate_webhooks(self, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        unique_refs(value)
        return value


class BootstrapFileSerializer(serializers.Serializer[Any]):
    acquirers = AcquirerSpecSerializer(many=True, required=False)
    accounts = AccountSpecSerializer(many=True, required=False)

    def validate_acquirers(self, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        unique_refs(value, "key")
        return value

    def validate_accounts(self, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        unique_refs(value)
        return value


def error_paths(detail: Any, path: str = "") -> dict[str, list[str]]:
    """DRF's nested errors → ``{"accounts[0].cashin_fee.bps": [...]}``.

    List positions are written ``[i]`` (DRF gives them as list positions for
    lists of objects and as integer keys for lists of values); a serializer's
    own errors belong to the object's path.
    """
    out: dict[str, list[str]] = {}
    if isinstance(detail, Mapping):
        for key, value in detail.items():
            if key == api_settings.NON_FIELD_ERRORS_KEY:
                child = path
            # DRF keys list positions with ints, our own checks with digit
            # strings (the stubs want str keys).
            elif isinstance(key, int) or key.isdigit():
                child = f"{path}[{key}]"
            else:
                child = f"{path}.{key}" if path else str(key)
            for child_path, messages in error_paths(value, child).items():
                out.setdefault(child_path, []).extend(messages)
    elif isinstance(detail, list) and any(isinstance(item, Mapping | list) for item in detail):
        for index, item in enumerate(detail):
            if item:
                out.update(error_paths(item, f"{path}[{index}]"))
    elif isinstance(detail, list):
        out[path or ROOT_PATH] = [str(item) for item in detail]
    else:
        out[path or ROOT_PATH] = [str(detail)]
    return out


# --------------------------------------------------------------------------- against the database


def check_against_database(
    acquirers: list[dict[str, Any]], accounts: list[dict[str, Any]], existing: Mapping[str, Account]
) -> dict[str, list[str]]:
    """The rules a serializer cannot see: references, and what a new record must have."""
    errors: dict[str, list[str]] = {}

    def add(path: str, message: str) -> None:
        errors.setdefault(path, []).append(message)

    referenced = {key for spec in accounts for field in CHAIN_FIELDS for key in spec.get(field, [])}
    file_keys = {spec["key"] for spec in acquirers}
    stored = Acquirer.objects.in_bulk(list(referenced | file_keys), field_name="key")
    known = file_keys | set(stored)
    adapters = adapter_names()
    for index, spec in enumerate(acquirers):
        path = f"acquirers[{index}]"
        current = stored.get(spec["key"])
        if current is None and "name" not in spec:
            add(f"{path}.name", REQUIRED_ON_CREATE)
        if "adapter" not in spec and "options" not in spec and current is not None:
            continue
        # Checked as they will be stored, so that a bad option fails here
        # rather than at the first charge.
        adapter = spec.get("adapter", current.adapter if current else Acquirer._meta.get_field("adapter").default)
        options = spec.get("options", current.options if current else {})
        if adapter not in adapters:
            add(f"{path}.adapter", f'Adapter desconhecido "{adapter}"; use um de: {", ".join(adapters)}.')
            continue
        try:
            validate_options(adapter, options)
        except InvalidOptions as exc:
            add(f"{path}.options", str(exc))

    granted: dict[Any, set[str]] = {}
    for account_id, key in AcquirerGrant.objects.filter(account__in=list(existing.values())).values_list(
        "account_id", "acquirer__key"
    ):
        granted.setdefault(account_id, set()).add(key)

    for index, spec in enumerate(accounts):
        path = f"accounts[{index}]"
        account = existing.get(spec["ref"])
        if account is None and "name" not in spec:
            add(f"{path}.name", REQUIRED_ON_CREATE)
        # The account state machine has no way back to pending.
        if (
            account is not None
            and spec.get("status") == Account.Status.PENDING
            and account.status != Account.Status.PENDING
        ):
            add(f"{path}.status", NO_BACK_TO_PENDING)
        for field in CHAIN_FIELDS:
            for position, key in enumerate(spec.get(field, [])):
                if key not in known:
                    add(f"{path}.{field}[{position}]", f'Adquirente "{key}" não existe no arquivo nem no banco.')
        if "available_acquirers" in spec:
            available = set(spec["available_acquirers"])
        else:
            available = granted.get(account.pk, set()) if account is not None else set()
        for position, key in enumerate(spec.get("active_acquirers", [])):
            if key in known and key not in available:
                add(f"{path}.active_acquirers[{position}]", NOT_AVAILABLE)
        if spec.get("webhooks"):
            message = _webhook_limit_refusal(account, {item["ref"] for item in spec["webhooks"]})
            if message:
                add(f"{path}.webhooks", message)
    return errors


def _webhook_limit_refusal(account: Account | None, refs: set[str]) -> str | None:
    """The limit of endpoints per account (docs/webhooks.md, "Limits"): the file's new
    refs plus the account's endpoints must fit. The caller holds the
    account's row lock, as every creation of endpoints does."""
    limit = settings.WEBHOOK_MAX_ENDPOINTS_PER_ACCOUNT
    if account is None:
        counted, new = 0, len(refs)
    else:
        counted = endpoints_counted(account_id=account.pk)
        # A ref the account already has is updated, not created.
        known = set(WebhookEndpoint.objects.filter(account=account, ref__in=refs).values_list("ref", flat=True))
        new = len(refs - known)
    return endpoint_limit_message(limit) if new and counted + new > limit else None
