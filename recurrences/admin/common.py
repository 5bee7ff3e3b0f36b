"""What the recurrences' and the cycles' pages share: the payer bank's
filter and column, the links between records, the cycle's status as the
API tells it, and the confirmation page of their actions."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html

from recurrences import admin_selectors
from recurrences.models import Cycle, Recurrence
from recurrences.payloads import cycle_status
from webhooks import readable

#: The confirmation page of the recurrences' and cycles' actions: the records, what happens, the reason.
CONFIRM_TEMPLATE = "admin/recurrences/confirm_action.html"

#: The API's cycle statuses (``recurrences.payloads.cycle_status``) as staff read them: the webhook events' labels.
API_STATUS_LABELS = readable.EVENT_STATUS_LABELS["recurrence_cycle"]


class PayerIspbFilter(admin.SimpleListFilter):
    """The payer's bank: reported by the acquirer, else the push request's
    (:func:`recurrences.admin_selectors.payer_ispb`)."""

    title = "ISPB do PSP pagador"
    parameter_name = "payer_ispb"
    #: "" on the recurrences' list, "recurrence__" on the cycles'.
    prefix = ""

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(ispb, ispb) for ispb in admin_selectors.payer_ispbs()]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        if not value:
            return queryset
        if self.prefix:
            return admin_selectors.cycles_with_payer_ispb(queryset, value)
        return admin_selectors.with_payer_ispb(queryset, value)


class CyclePayerIspbFilter(PayerIspbFilter):
    prefix = "recurrence__"


def payer_bank_text(recurrence: Recurrence) -> str:
    if recurrence.payer_ispb:
        return recurrence.payer_ispb
    asked = (recurrence.payer_bank or {}).get("ispb")
    # Only where the push request went: the payer's bank has not confirmed it.
    return f"{asked} (solicitação)" if asked else "—"


def debtor_text(recurrence: Recurrence) -> str:
    devedor = ((recurrence.terms or {}).get("vinculo") or {}).get("devedor") or {}
    name = devedor.get("nome") or ""
    return f"{name} ({recurrence.debtor_document})" if name else recurrence.debtor_document


def recurrence_link(recurrence: Recurrence) -> str:
    url = reverse("admin:recurrences_recurrence_change", args=[recurrence.pk])
    return format_html('<a href="{}" title="{}">{}</a>', url, recurrence.pk, recurrence.id_rec)


def charge_link(cycle: Cycle) -> str:
    if cycle.charge_id is None:
        return "—"
    url = reverse("admin:payments_charge_change", args=[cycle.charge_id])
    return format_html('<a href="{}" title="{}">{}…</a>', url, cycle.charge_id, str(cycle.charge_id)[:8])


def api_status(cycle: Cycle) -> str:
    """The cycle's status as the API and its webhooks name it: its charge's
    once the money moved (refunded, charged back), its own before."""
    return API_STATUS_LABELS.get(cycle_status(cycle), cycle_status(cycle))
