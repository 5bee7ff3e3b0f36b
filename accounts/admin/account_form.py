"""The account page's form: fees and limits typed in reais, the CPF/CNPJ
with or without punctuation, and the database's check constraints checked on
their fields first, so staff see a message where they typed."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from django import forms
from django.db.models import CheckConstraint, Q

from accounts.admin.changes import CHANGE_REASON, change_reason_field, clean_controlled_changes
from accounts.models import Account, PaymentMethod
from core.documents import bare_document, format_document, normalize_document
from core.money import brl

if TYPE_CHECKING:
    from django.contrib.admin.options import _FieldsetSpec

# --------------------------------------------------------------------------- documents and search


# --------------------------------------------------------------------------- the account form


def _constraint_rules() -> list[tuple[str, str, int]]:
    """``(field, lookup, limit)`` of every comparison the account's check
    constraints make, when a constraint is only such comparisons joined by
    AND (all of them today): the form checks them itself, so staff see the
    error on the field instead of "Restrição … violada" on top of the page."""
    rules: list[tuple[str, str, int]] = []

    def walk(node: Any) -> bool:
        if isinstance(node, Q):
            if node.negated or (node.connector != Q.AND and len(node.children) > 1):
                return False
            return all(walk(child) for child in node.children)
        lookup, limit = node
        field, _, comparison = str(lookup).partition("__")
        if comparison not in _COMPARISONS or not isinstance(limit, int):
            return False
        rules.append((field, comparison, limit))
        return True

    for constraint in Account._meta.constraints:
        if isinstance(constraint, CheckConstraint):
            walk(constraint.condition)
    return rules


_COMPARISONS: dict[str, tuple[Callable[[int, int], bool], str]] = {
    "gte": (lambda value, limit: value >= limit, "no mínimo"),
    "gt": (lambda value, limit: value > limit, "maior que"),
    "lte": (lambda value, limit: value <= limit, "no máximo"),
    "lt": (lambda value, limit: value < limit, "menor que"),
}
_UNITS = {"cashin_fee_bps": " bps", "withdrawal_fee_bps": " bps", "charge_expiry_seconds": " segundos"}

#: Centavos fields typed in reais on the account page and shown as R$ 1.234,56.
ACCOUNT_REAIS_FIELDS = (
    "cashin_fee_fixed",
    "withdrawal_fee_fixed",
    "withdrawal_minimum",
    "withdrawal_per_request_limit",
    "withdrawal_daily_limit",
)


def _shown_limit(field: str, limit: int) -> str:
    if field in ACCOUNT_REAIS_FIELDS:
        return brl(limit)
    return f"{limit:,}".replace(",", ".") + _UNITS.get(field, "")


class AccountAdminForm(forms.ModelForm[Account]):
    # The model stores a list of codes; checkboxes beat a comma-separated text box.
    payment_methods = forms.MultipleChoiceField(
        label="Métodos de pagamento",
        choices=PaymentMethod.choices,
        widget=forms.CheckboxSelectMultiple,
        required=False,
    )

    # Room for the punctuation staff type or paste; stored bare (14 characters at most).
    document = forms.CharField(
        label="CPF/CNPJ", max_length=20, required=False, help_text="Com ou sem pontuação: 11.222.333/0001-81."
    )

    # Not a field of the account: why the contact e-mail, manual approval or
    # limits change (``changes``); shown on an existing account only.
    change_reason = change_reason_field()
    #: The controlled fields this save only asked to change (``changes``).
    requested: set[str] = set()

    class Meta:
        model = Account
        fields = "__all__"  # noqa: DJ007 - the admin's fieldsets pick the fields shown

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance._state.adding:
            # Creating an account changes nothing: its first values are set as
            # given, but for the contact e-mail (accounts.account_changes).
            self.fields.pop(CHANGE_REASON, None)
            if "email" in self.fields:
                self.fields["email"].help_text = (
                    "Não vale ao cadastrar: vira um pedido de alteração que outra pessoa da equipe aprova antes "
                    "que qualquer link de credencial seja enviado a ele."
                )
        if self.instance.document:
            # Shown as staff read it; an untouched value does not count as changed.
            self.initial["document"] = format_document(self.instance.document)

    def clean_document(self) -> str:
        document = bare_document(self.cleaned_data.get("document") or "")
        # Accounts stored before the check keep their document when it is not touched.
        if document and "document" in self.changed_data and normalize_document(document) is None:
            raise forms.ValidationError("CPF ou CNPJ inválido: confira os dígitos.", code="invalid_document")
        return document

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        for field, comparison, limit in _constraint_rules():
            value = cleaned.get(field)
            if field not in self.fields or not isinstance(value, int) or field in self.errors:
                continue
            holds, words = _COMPARISONS[comparison]
            if not holds(value, limit):
                self.add_error(field, f"Deve ser {words} {_shown_limit(field, limit)}.")
        if CHANGE_REASON in self.fields:
            clean_controlled_changes(self)
        return cleaned


IDENTITY = ("Identificação", {"fields": ("name", "document", "email", "status", "is_blocked")})
ADD_IDENTITY = ("Identificação", {"fields": ("name", "document", "email", "status")})
SUMMARY = ("Resumo", {"fields": ("balance_summary", "related_records", "pending_changes", "payee_lookups_today")})
CONFIGURATION: _FieldsetSpec = (
    ("Métodos de pagamento e recursos", {"fields": ("payment_methods", "can_select_pix_cash_in_acquirer")}),
    ("Taxa de cash-in", {"fields": ("cashin_fee_fixed", "cashin_fee_bps")}),
    ("Taxa de saque", {"fields": ("withdrawal_fee_fixed", "withdrawal_fee_bps")}),
    (
        "Limites e aprovação de saques",
        {
            "fields": (
                "withdrawal_minimum",
                "withdrawal_per_request_limit",
                "withdrawal_daily_limit",
                "withdrawals_need_approval",
                "payouts_same_ownership_only",
            )
        },
    ),
    ("Cobranças", {"fields": ("charge_expiry_seconds",)}),
)

#: The lists one click away from the account page: (URL name, label, related
#: name for the count). The lists belong to apps above accounts: named by URL,
#: never imported; each filters by ``?account__id__exact=<id>``.
RELATED_LISTS = (
    ("admin:payments_charge_changelist", "Cobranças", "charges"),
    ("admin:withdrawals_withdrawal_changelist", "Saques", "withdrawals"),
    ("admin:accounts_ledgerentry_changelist", "Lançamentos (extrato)", "ledger_entries"),
    ("admin:webhooks_webhookendpoint_changelist", "Endpoints de webhook", "webhook_endpoints"),
    ("admin:webhooks_webhookevent_changelist", "Eventos de webhook", "webhook_events"),
    ("admin:accounts_apicredential_changelist", "Credenciais de API", "credentials"),
    ("admin:accounts_moneyactionrequest_changelist", "Pedidos de aprovação", "money_action_requests"),
    ("admin:accounts_accountchangerequest_changelist", "Pedidos de alteração de conta", "change_requests"),
)
