"""Recurrences (Pix Automático) in the back office: the list, each
recurrence's page with its cycles, and the one thing staff do to one:
cancel it. Every field is read-only: a recurrence moves with the payer's
answer at their bank, the account's API and the schedule.

Cancelling moves no money out of the account (it stops the cycles not yet
charged and asks the acquirer to end the authorisation), so it needs no
second staff member; like every staff action it asks a reason and is
recorded in the record's history."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.utils import flatten_fieldsets
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html

from core.admin.confirmation import confirm_or_perform
from core.admin.lists import DetailActionsMixin, short_id
from core.admin.money import money
from core.admin.records import ActionsOnlyAdminMixin, ReadOnlyInlineMixin, UUIDSearchMixin
from core.exceptions import PixServiceError
from core.money import brl
from core.plural import plural
from payments.recurrence_terms import InvalidRecurrenceTerms, RecurrenceTerms
from recurrences.admin import outcomes
from recurrences.admin.common import (
    CONFIRM_TEMPLATE,
    PayerIspbFilter,
    api_status,
    charge_link,
    debtor_text,
    payer_bank_text,
)
from recurrences.models import CancelledBy, Cycle, Recurrence, RecurrenceStatus
from recurrences.services import recurrence_cancel

CANCEL = "Cancelar recorrência (equipe)"
#: The statuses a recurrence may be cancelled from.
CANCELLABLE = (RecurrenceStatus.CREATED, RecurrenceStatus.APPROVED)


class CycleInline(ReadOnlyInlineMixin, admin.TabularInline[Cycle, Recurrence]):
    """The recurrence's cycles, with the status the API shows (its charge's once the money moved)."""

    model = Cycle
    fields = (
        "cycle_link",
        "due_date",
        "amount_brl",
        "status_api",
        "retries",
        "next_retry_on",
        "failure_reason",
        "charge",
    )
    readonly_fields = fields
    ordering = ("index",)
    verbose_name_plural = "ciclos"

    amount_brl = money("amount", "valor")

    def get_queryset(self, request: HttpRequest) -> QuerySet[Cycle]:
        return super().get_queryset(request).select_related("charge")

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="ciclo")
    def cycle_link(self, cycle: Cycle) -> str:
        url = reverse("admin:recurrences_cycle_change", args=[cycle.pk])
        return format_html('<a href="{}">{}</a>', url, cycle.index)

    @admin.display(description="status (como a API mostra)")
    def status_api(self, cycle: Cycle) -> str:
        return api_status(cycle)

    @admin.display(description="cobrança")
    def charge(self, cycle: Cycle) -> str:
        return charge_link(cycle)


def cancel(modeladmin: Any, request: HttpRequest, queryset: QuerySet[Recurrence]) -> HttpResponse | None:
    """Cancel here at once (no cycle is opened or charged after this; the
    open ones stop) and ask the acquirer to end the authorisation
    (:func:`recurrences.services.recurrence_cancel`, by staff). Moves no money."""
    records = list(queryset.filter(status__in=CANCELLABLE).select_related("account").order_by("created_at"))
    if not records:
        modeladmin.message_user(
            request,
            f"{CANCEL}: nenhuma recorrência selecionada está aguardando autorização ou autorizada.",
            messages.WARNING,
        )
        return None

    def perform(reason: str) -> None:
        done = 0
        for recurrence in records:
            try:
                recurrence_cancel(recurrence=recurrence, by=CancelledBy.STAFF)
            except PixServiceError as exc:
                modeladmin.message_user(request, f"{recurrence.id_rec}: {exc.message}", messages.ERROR)
                continue
            modeladmin.log_change(request, recurrence, f"{CANCEL}. Motivo: {reason}")
            done += 1
        if done:
            modeladmin.message_user(
                request,
                plural(done, "{n} recorrência cancelada", "{n} recorrências canceladas")
                + "; a adquirente é avisada (até responder). Nenhum valor entrou ou saiu do saldo.",
                messages.SUCCESS,
            )

    return confirm_or_perform(
        modeladmin,
        request,
        queryset,
        name="cancel",
        description=CANCEL,
        template=CONFIRM_TEMPLATE,
        perform=perform,
        page=lambda: {
            "effect": (
                "A recorrência é cancelada aqui na hora: nenhum ciclo novo é aberto nem cobrado, os ciclos em aberto "
                "são interrompidos e a adquirente é avisada para encerrar a autorização (até responder). A conta "
                "recebe o webhook de cancelamento. Nenhum valor entra ou sai do saldo; ciclos já pagos continuam pagos."
            ),
            "rows": [(r, r.get_status_display(), f"{r.id_rec} · {debtor_text(r)}") for r in records],
            "skipped": queryset.count() - len(records),
        },
    )


cancel.__name__ = "cancel"
cancel = admin.action(description=CANCEL, permissions=["change"])(cancel)


class StatusFilter(admin.SimpleListFilter):
    title = "status"
    parameter_name = "status"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(str(value), str(label)) for value, label in RecurrenceStatus.choices]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        return queryset.filter(status=self.value()) if self.value() else queryset


@admin.register(Recurrence)
class RecurrenceAdmin(DetailActionsMixin, ActionsOnlyAdminMixin, UUIDSearchMixin, admin.ModelAdmin[Recurrence]):
    """Newest first; the change permission only runs the cancel action (every field is read-only)."""

    change_list_template = "admin/recurrences/recurrence/change_list.html"

    short_id = short_id
    list_display = (
        "short_id",
        "id_rec",
        "account",
        "debtor",
        "contract",
        "status",
        "journey",
        "payer_bank_display",
        "acquirer",
        "created_at",
        "approved_at",
        "ended_at",
        "cancelled_by",
    )
    list_filter = (
        StatusFilter,
        "journey",
        "acquirer",
        PayerIspbFilter,
        "cancelled_by",
        ("created_at", admin.DateFieldListFilter),
    )
    list_select_related = ("account", "acquirer")
    search_fields = ("=id_rec", "=contract", "=debtor_document")
    search_help_text = "idRec, contrato ou CPF/CNPJ do devedor (só números), ou o ID da recorrência."
    date_hierarchy = "created_at"
    ordering = ("-created_at", "-id")
    inlines = [CycleInline]
    actions = [cancel]
    detail_actions = {"cancel": CANCELLABLE}
    fieldsets = (
        (None, {"fields": ("id", "id_rec", "account", "acquirer", "status", "status_reason", "cancelled_by")}),
        ("Devedor e contrato", {"fields": ("debtor", "contract", "terms_display")}),
        (
            "Autorização",
            {
                "fields": (
                    "journey",
                    "payer_bank_display",
                    "payer_bank",
                    "push_request_id",
                    "push_status",
                    "location",
                    "emv",
                )
            },
        ),
        (
            "Datas",
            {"fields": ("created_at", "approved_at", "ended_at", "next_index", "next_open_on", "synced_at")},
        ),
        ("Notificações", {"fields": ("postback_url", "metadata", "cancel_pending")}),
        ("Termos (API Pix)", {"classes": ("collapse",), "fields": ("terms",)}),
    )

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return flatten_fieldsets(self.fieldsets or ())

    def get_urls(self) -> list[URLPattern]:
        report = self.admin_site.admin_view(lambda request: outcomes.outcomes_view(self, request))
        return [path("resultados/", report, name="recurrences_outcomes"), *super().get_urls()]

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> Any:
        context = {**(extra_context or {}), "outcomes_url": reverse("admin:recurrences_outcomes")}
        return super().changelist_view(request, context)

    @admin.display(description="devedor", ordering="debtor_document")
    def debtor(self, recurrence: Recurrence) -> str:
        return debtor_text(recurrence)

    @admin.display(description="ISPB do PSP pagador", ordering="payer_ispb")
    def payer_bank_display(self, recurrence: Recurrence) -> str:
        return payer_bank_text(recurrence)

    @admin.display(description="termos")
    def terms_display(self, recurrence: Recurrence) -> str:
        try:
            terms = RecurrenceTerms.from_api(recurrence.terms)
        except InvalidRecurrenceTerms:
            return "—"  # shown as stored below, never a 500
        calendario, valor = terms.calendario, terms.valor
        amount = (
            f"fixo, {brl(valor.valor_rec)}"
            if valor.valor_rec is not None
            else "variável, informado pela conta a cada ciclo"
            + (f" (até {brl(valor.valor_minimo_recebedor)})" if valor.valor_minimo_recebedor is not None else "")
        )
        return format_html(
            "<div><strong>objeto</strong>: {}</div><div><strong>periodicidade</strong>: {}, de {:%d/%m/%Y} {}</div>"
            "<div><strong>valor</strong>: {}</div><div><strong>retentativas</strong>: {}</div>",
            terms.vinculo.objeto or "—",
            str(calendario.periodicidade).lower(),
            calendario.data_inicial,
            f"até {calendario.data_final:%d/%m/%Y}" if calendario.data_final else "sem data final",
            amount,
            "até 3 em 7 dias" if terms.politica_retentativa.allows_retries else "não permite",
        )
