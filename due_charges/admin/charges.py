"""Due-date charges in the back office: what each debtor owes today, what
is due today or overdue, and what a paid one came to. Read-only: a due-date
charge is a :class:`payments.models.Charge` of kind ``due`` and moves only
through the charge's own page and actions (the link on each row) and the
services; this list adds the terms, the amount due today and the paid
components beside it."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.contrib import admin
from django.contrib.admin.utils import flatten_fieldsets
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from core.admin.lists import ListTotalsMixin, titled
from core.admin.money import money
from core.admin.records import ReadOnlyAdminMixin, UUIDSearchMixin
from core.money import brl
from payments.choices import ChargeStatus
from payments.due_amounts import AmountDue, amount_due
from payments.due_models import DueCharge
from payments.due_payments import now_in_brazil
from payments.due_terms import DueTerms, InvalidDueTerms

#: componentesValor's parts in the order staff read them, with their pt-BR names.
COMPONENT_LABELS = (
    ("original", "original"),
    ("abatimento", "abatimento"),
    ("desconto", "desconto"),
    ("multa", "multa"),
    ("juros", "juros"),
)


def due_today(due: DueCharge, today: dt.date | None = None) -> AmountDue | None:
    """The amount due today (Brasília) of a pending due-date charge; None
    when it is not pending or its stored terms cannot be read (shown as "—",
    never a 500 on the list)."""
    if due.charge.status != ChargeStatus.PENDING:
        return None
    try:
        return amount_due(DueTerms.from_api(due.terms), on=today or now_in_brazil())
    except InvalidDueTerms:
        return None


def components_text(parts: dict[str, int]) -> str:
    """``{"original": 15000, "multa": 300}`` → "original R$ 150,00 · multa R$ 3,00" (zero parts left out)."""
    return " · ".join(f"{label} {brl(parts[name])}" for name, label in COMPONENT_LABELS if parts.get(name))


class DueSituationFilter(admin.SimpleListFilter):
    """Where the pending ones stand against their due date, in Brasília's day
    (the due date itself, not the business day it may move to)."""

    title = "vencimento"
    parameter_name = "situation"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [
            ("overdue", "Vencidas (pendentes, vencimento passado)"),
            ("today", "Vencem hoje"),
            ("upcoming", "A vencer"),
        ]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        today = now_in_brazil()
        pending = queryset.filter(charge__status=ChargeStatus.PENDING)
        if self.value() == "overdue":
            return pending.filter(due_date__lt=today)
        if self.value() == "today":
            return pending.filter(due_date=today)
        if self.value() == "upcoming":
            return pending.filter(due_date__gt=today)
        return queryset


class StatusFilter(admin.SimpleListFilter):
    """The charge's status (it lives on the charge, not on its terms)."""

    title = "status"
    parameter_name = "status"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(str(value), str(label)) for value, label in ChargeStatus.choices]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        return queryset.filter(charge__status=self.value()) if self.value() else queryset


@admin.register(DueCharge)
class DueChargeAdmin(ListTotalsMixin, ReadOnlyAdminMixin, UUIDSearchMixin, admin.ModelAdmin[DueCharge]):
    """The list of due-date charges. Every row is one query's worth: the
    amount due today is computed from the stored terms, in Python."""

    original_brl = money("original", "Valor original")
    paid_brl = money("paid_amount", "Valor pago")
    expected_brl = money("expected_amount", "Devido no dia do pagamento (nosso cálculo)")

    list_display = (
        "charge_link",
        "debtor",
        "original_brl",
        "due_today_brl",
        "due_date",
        "last_payable_date",
        "status_display",
        "paid_brl",
        "components_display",
        "account",
    )
    list_filter = (
        DueSituationFilter,
        StatusFilter,
        ("due_date", titled(admin.DateFieldListFilter, "vencimento (data)")),
        ("last_payable_date", titled(admin.DateFieldListFilter, "pagável até")),
        "charge__acquirer",
    )
    list_totals = (("original", "Valor original"), ("paid_amount", "Valor pago"))
    list_select_related = ("charge", "charge__account")
    search_fields = ("=charge__txid", "=charge__buyer_document", "charge__buyer_name", "debtor_email")
    search_help_text = "txid, CPF/CNPJ (só números), nome ou e-mail do devedor, ou o ID da cobrança."
    date_hierarchy = "due_date"
    ordering = ("due_date", "charge_id")
    fieldsets = (
        (None, {"fields": ("charge_link", "account", "status_display", "kind_note")}),
        ("Devedor", {"fields": ("debtor", "debtor_email", "debtor_address")}),
        (
            "Vencimento e valor",
            {
                "fields": (
                    "original_brl",
                    "due_date",
                    "last_payable_date",
                    "terms_display",
                    "due_today_brl",
                    "due_today_parts",
                    "description",
                )
            },
        ),
        ("Pagamento", {"fields": ("paid_brl", "components_display", "expected_brl", "difference")}),
        ("Condições (API Pix)", {"classes": ("collapse",), "fields": ("terms",)}),
    )

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return flatten_fieldsets(self.fieldsets or ())

    # ----------------------------------------------------------------------- columns

    @admin.display(description="cobrança", ordering="charge_id")
    def charge_link(self, due: DueCharge) -> str:
        url = reverse("admin:payments_charge_change", args=[due.charge_id])
        return format_html('<a href="{}" title="{}">{}…</a>', url, due.charge_id, str(due.charge_id)[:8])

    @admin.display(description="conta", ordering="charge__account__name")
    def account(self, due: DueCharge) -> str:
        return str(due.charge.account)

    @admin.display(description="devedor", ordering="charge__buyer_name")
    def debtor(self, due: DueCharge) -> str:
        return f"{due.charge.buyer_name} ({due.charge.buyer_document})"

    @admin.display(description="endereço do devedor")
    def debtor_address(self, due: DueCharge) -> str:
        address = due.charge.buyer_address or {}
        parts = [str(address.get(key) or "") for key in ("street", "city", "state", "zip_code")]
        return ", ".join(part for part in parts if part) or "—"

    @admin.display(description="status", ordering="charge__status")
    def status_display(self, due: DueCharge) -> str:
        return str(due.charge.get_status_display())

    @admin.display(description="tipo")
    def kind_note(self, due: DueCharge) -> str:
        return "Cobrança com vencimento (cobv): reembolso, MED e cancelamento na página da cobrança."

    @admin.display(description="devido hoje")
    def due_today_brl(self, due: DueCharge) -> str:
        today = due_today(due)
        if today is None:
            return "—"
        if not today.payable:
            return format_html('<span class="not-payable">não pagável desde {:%d/%m/%Y}</span>', today.last_payable_day)
        return brl(today.final)

    @admin.display(description="composição do devido hoje")
    def due_today_parts(self, due: DueCharge) -> str:
        today = due_today(due)
        if today is None or not today.payable:
            return "—"
        return components_text({name: getattr(today, name) for name, _ in COMPONENT_LABELS})

    @admin.display(description="componentes do valor pago")
    def components_display(self, due: DueCharge) -> str:
        return components_text(due.paid_components or {}) or "—"

    @admin.display(description="diferença (adquirente menos nosso cálculo)")
    def difference(self, due: DueCharge) -> str:
        if due.paid_amount is None or due.expected_amount is None:
            return "—"
        delta = due.paid_amount - due.expected_amount
        if not delta:
            return "nenhuma"
        # The acquirer's amount is the one credited (docs/api/due-charges.md, "What is credited").
        sign = "+" if delta > 0 else "-"
        return format_html("<strong>{}{}</strong> (creditado o valor da adquirente)", sign, brl(abs(delta)))

    @admin.display(description="condições")
    def terms_display(self, due: DueCharge) -> str:
        valor = (due.terms or {}).get("valor") or {}
        calendario = (due.terms or {}).get("calendario") or {}
        rows = [("validade após o vencimento", f"{calendario.get('validadeAposVencimento', '—')} dias")]
        for name in ("multa", "juros", "abatimento", "desconto"):
            part = valor.get(name)
            if isinstance(part, dict):
                rows.append((name, ", ".join(f"{key}: {value}" for key, value in part.items())))
        return format_html_join("", "<div><strong>{}</strong>: {}</div>", rows)
