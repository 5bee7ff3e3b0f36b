"""Cycles of Pix Automático in the back office: every cycle with the status
the API shows, the failed and missed ones to act on first, and the one
thing staff do to a cycle: send it now when it was missed (or its cobr
refused on sending) and its creation window is still open.

No action here credits money: a cycle's money is its charge's, credited
only by what the acquirer says (the charge's page links from each row)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.utils import flatten_fieldsets
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse

from core.admin.confirmation import confirm_or_perform
from core.admin.lists import DetailActionsMixin, ListTotalsMixin, short_id
from core.admin.money import money
from core.admin.records import ActionsOnlyAdminMixin, UUIDSearchMixin
from core.exceptions import PixServiceError
from payments.due_payments import now_in_brazil
from payments.recurrence_schedule import MAX_LEAD_DAYS, MIN_LEAD_DAYS
from recurrences.admin.common import (
    API_STATUS_LABELS,
    CONFIRM_TEMPLATE,
    CyclePayerIspbFilter,
    api_status,
    charge_link,
    payer_bank_text,
    recurrence_link,
)
from recurrences.models import Cycle, CycleStatus
from recurrences.resend import SENDABLE_AGAIN, cycle_send_again, send_again_refusal

SEND_NOW = "Enviar agora (ciclo perdido ou falho, ainda no prazo de envio)"
SEND_NOW_EFFECT = (
    "Para um ciclo perdido (ou cuja cobrança a adquirente recusou no envio) cujo prazo de envio ainda está aberto "
    f"(de {MAX_LEAD_DAYS} a {MIN_LEAD_DAYS} dias antes do vencimento): o ciclo volta a agendado e a cobrança (cobr) "
    "é enviada agora à adquirente da recorrência, com o mesmo txid, como o agendamento faria; o pagador é cobrado no "
    "vencimento. Nenhum valor é creditado por esta ação: só o pagamento informado pela adquirente credita. Se a "
    "adquirente não responder com clareza, o ciclo fica agendado e o próximo ciclo do agendamento envia de novo. Um "
    "ciclo que já chegou ao pagador (com cobrança) segue a política de retentativas e não é reenviado."
)


class AttentionFilter(admin.SimpleListFilter):
    """The cycles staff act on: failed or missed, and those among them still sendable."""

    title = "a agir"
    parameter_name = "attention"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [
            ("act", "Falhos ou perdidos"),
            ("sendable", "Perdidos ou falhos ainda no prazo de envio"),
        ]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() == "act":
            return queryset.filter(status__in=SENDABLE_AGAIN)
        if self.value() == "sendable":
            # The window [due - 10, due - 2] holds today exactly when today + 2 <= due <= today + 10.
            today = now_in_brazil()
            return queryset.filter(
                status__in=SENDABLE_AGAIN,
                charge__isnull=True,
                amount__isnull=False,
                due_date__gte=today + dt.timedelta(days=MIN_LEAD_DAYS),
                due_date__lte=today + dt.timedelta(days=MAX_LEAD_DAYS),
            )
        return queryset


class StatusFilter(admin.SimpleListFilter):
    """The cycle's own status (refunded and charged back are its charge's: see the charges' list)."""

    title = "status"
    parameter_name = "status"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(str(value), str(label)) for value, label in CycleStatus.choices]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        return queryset.filter(status=self.value()) if self.value() else queryset


def send_now(modeladmin: Any, request: HttpRequest, queryset: QuerySet[Cycle]) -> HttpResponse | None:
    """:func:`recurrences.resend.cycle_send_again` for each selected cycle it allows."""
    today = now_in_brazil()
    chosen = list(queryset.select_related("recurrence__account", "recurrence").order_by("due_date", "index"))
    records = [cycle for cycle in chosen if send_again_refusal(cycle, today) is None]
    if not records:
        for cycle in chosen[:5]:
            modeladmin.message_user(
                request, f"{cycle}: não enviado: {send_again_refusal(cycle, today)}", messages.WARNING
            )
        return None

    def perform(reason: str) -> None:
        for cycle in records:
            try:
                status = cycle_send_again(cycle_id=cycle.pk, today=today)
            except PixServiceError as exc:
                modeladmin.message_user(request, f"{cycle}: {exc.message}", messages.ERROR)
                continue
            label = API_STATUS_LABELS.get(status, status)
            modeladmin.log_change(request, cycle, f"{SEND_NOW}: {label.lower()}. Motivo: {reason}")
            level = messages.SUCCESS if status not in SENDABLE_AGAIN else messages.WARNING
            modeladmin.message_user(request, f"{cycle}: enviado; agora {label.lower()}.", level)

    return confirm_or_perform(
        modeladmin,
        request,
        queryset,
        name="send_now",
        description=SEND_NOW,
        template=CONFIRM_TEMPLATE,
        perform=perform,
        page=lambda: {
            "effect": SEND_NOW_EFFECT,
            "rows": [
                (cycle, cycle.get_status_display(), f"{cycle} · vencimento {cycle.due_date:%d/%m/%Y}")
                for cycle in records
            ],
            "skipped": len(chosen) - len(records),
        },
    )


send_now = admin.action(description=SEND_NOW, permissions=["change"])(send_now)


@admin.register(Cycle)
class CycleAdmin(DetailActionsMixin, ListTotalsMixin, ActionsOnlyAdminMixin, UUIDSearchMixin, admin.ModelAdmin[Cycle]):
    """Latest due date first; the change permission only runs the send-now action."""

    short_id = short_id
    amount_brl = money("amount", "Valor")

    list_display = (
        "short_id",
        "recurrence_display",
        "account",
        "index",
        "due_date",
        "amount_brl",
        "status_api",
        "retries",
        "next_retry_on",
        "failure_reason",
        "charge_display",
        "payer_bank",
        "acquirer",
    )
    list_filter = (
        AttentionFilter,
        StatusFilter,
        ("due_date", admin.DateFieldListFilter),
        ("recurrence__acquirer", admin.RelatedFieldListFilter),
        CyclePayerIspbFilter,
        "recurrence__journey",
    )
    list_totals = (("amount", "Valor"),)
    list_select_related = ("recurrence", "recurrence__account", "recurrence__acquirer", "charge")
    search_fields = ("=txid", "=recurrence__id_rec", "=recurrence__contract", "=recurrence__debtor_document")
    search_help_text = "txid, idRec, contrato ou CPF/CNPJ do devedor (só números), ou o ID do ciclo."
    date_hierarchy = "due_date"
    ordering = ("-due_date", "recurrence_id", "index")
    actions = [send_now]
    detail_actions = {"send_now": SENDABLE_AGAIN}
    fieldsets = (
        (None, {"fields": ("id", "recurrence_display", "account", "index", "due_date", "amount_brl", "txid")}),
        (
            "Situação",
            {
                "fields": (
                    "status",
                    "status_api",
                    "charge_display",
                    "retries",
                    "next_retry_on",
                    "tried_on",
                    "failure_reason",
                    "sends",
                    "send_now_help",
                )
            },
        ),
        ("Registro", {"fields": ("payer_bank", "acquirer", "synced_at", "created_at", "updated_at")}),
    )

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return flatten_fieldsets(self.fieldsets or ())

    @admin.display(description="recorrência", ordering="recurrence__id_rec")
    def recurrence_display(self, cycle: Cycle) -> str:
        return recurrence_link(cycle.recurrence)

    @admin.display(description="conta", ordering="recurrence__account__name")
    def account(self, cycle: Cycle) -> str:
        return str(cycle.recurrence.account)

    @admin.display(description="adquirente", ordering="recurrence__acquirer__name")
    def acquirer(self, cycle: Cycle) -> str:
        return str(cycle.recurrence.acquirer)

    @admin.display(description="ISPB do PSP pagador")
    def payer_bank(self, cycle: Cycle) -> str:
        return payer_bank_text(cycle.recurrence)

    @admin.display(description="status (como a API mostra)", ordering="status")
    def status_api(self, cycle: Cycle) -> str:
        return api_status(cycle)

    @admin.display(description="cobrança", ordering="charge_id")
    def charge_display(self, cycle: Cycle) -> str:
        return charge_link(cycle)

    @admin.display(description="enviar agora")
    def send_now_help(self, cycle: Cycle) -> str:
        refusal = send_again_refusal(cycle, now_in_brazil())
        return f"Possível. {SEND_NOW_EFFECT}" if refusal is None else f"Não disponível: {refusal}"
