"""The queue of MED infractions: open ones first, the nearest defence
deadline on top, then the closed ones, last closed first. Every field is
read-only (an infraction moves only with its acquirer's record or an
approved request); its page offers the defence on the account's behalf and
the requests a second staff member approves (``pages``)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.contrib import admin
from django.contrib.admin.utils import flatten_fieldsets
from django.db.models import Case, F, QuerySet, Value, When
from django.http import HttpRequest, HttpResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.html import format_html

from core.admin.lists import ListTotalsMixin, short_id
from core.admin.money import money
from core.admin.records import ReadOnlyAdminMixin, ReadOnlyInlineMixin, UUIDSearchMixin
from infractions.admin import pages
from infractions.admin.pages import DEFEND_PERMISSION
from infractions.approvals import REQUEST_PERMISSION
from infractions.models import DefenseAttachment, Infraction, InfractionRequest
from infractions.selectors import DEADLINE_NEAR
from infractions.selectors import deadline_near as deadline_near_q

#: Open first, nearest deadline first (none last); then closed ones, last closed first.
QUEUE_ORDERING = (
    Case(When(closed_at__isnull=True, then=Value(0)), default=Value(1)).asc(),
    F("defense_deadline").asc(nulls_last=True),
    F("closed_at").desc(nulls_last=True),
    "-created_at",
)


def deadline_near(queryset: QuerySet[Infraction], now: dt.datetime | None = None) -> QuerySet[Infraction]:
    """The ones a person must look at now (:func:`infractions.selectors.deadline_near`)."""
    return queryset.filter(deadline_near_q(now or timezone.now()))


class QueueFilter(admin.SimpleListFilter):
    title = "fila"
    parameter_name = "queue"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [
            ("open", "Abertas"),
            ("awaiting", "Prazo correndo, sem defesa"),
            ("deadline_near", "Prazo em menos de 24 h, sem defesa"),
            ("overdue", "Prazo vencido, sem defesa"),
            ("closed", "Encerradas"),
        ]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        if value == "open":
            return queryset.filter(closed_at__isnull=True)
        if value == "awaiting":
            return queryset.filter(
                closed_at__isnull=True,
                defense_submitted_at__isnull=True,
                defense_waived_at__isnull=True,
                defense_deadline__gt=timezone.now(),
            )
        if value == "deadline_near":
            return deadline_near(queryset)
        if value == "overdue":
            return queryset.filter(
                closed_at__isnull=True,
                defense_submitted_at__isnull=True,
                defense_waived_at__isnull=True,
                defense_deadline__lte=timezone.now(),
            )
        if value == "closed":
            return queryset.filter(closed_at__isnull=False)
        return queryset


class DefenseFilter(admin.SimpleListFilter):
    title = "defesa"
    parameter_name = "defense"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("sent", "Enviada"), ("none", "Não enviada"), ("waived", "Dispensada (devolução aceita)")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() == "sent":
            return queryset.filter(defense_submitted_at__isnull=False)
        if self.value() == "none":
            return queryset.filter(defense_submitted_at__isnull=True, defense_waived_at__isnull=True)
        if self.value() == "waived":
            return queryset.filter(defense_waived_at__isnull=False)
        return queryset


class DefenseAttachmentInline(ReadOnlyInlineMixin, admin.TabularInline[DefenseAttachment, Infraction]):
    model = DefenseAttachment
    fields = ("name", "content_type", "size", "created_at")
    readonly_fields = fields


class RequestInline(ReadOnlyInlineMixin, admin.TabularInline[InfractionRequest, Infraction]):
    model = InfractionRequest
    fk_name = "infraction"
    fields = ("request_link", "kind", "state", "reason", "requested_by", "decided_by", "decided_at", "outcome")
    readonly_fields = fields
    verbose_name_plural = "pedidos à equipe (aprovação por outra pessoa)"

    @admin.display(description="nº")
    def request_link(self, pending: InfractionRequest) -> str:
        url = reverse("admin:infractions_infractionrequest_change", args=[pending.pk])
        return format_html('<a href="{}">#{}</a>', url, pending.pk)


@admin.register(Infraction)
class InfractionAdmin(ListTotalsMixin, ReadOnlyAdminMixin, UUIDSearchMixin, admin.ModelAdmin[Infraction]):
    """The queue staff work through before each defence deadline."""

    change_form_template = "admin/infractions/infraction/change_form.html"

    short_id = short_id
    amount_brl = money("amount", "Valor contestado")
    blocked_brl = money("blocked_amount", "Bloqueado na adquirente")
    hold_brl = money("hold", "Bloqueio no saldo")
    hold_covered_brl = money("hold_covered", "Bloqueio coberto pelo saldo")
    returned_brl = money("returned_amount", "Devolvido ao pagador")
    debited_brl = money("debited_amount", "Debitado da conta")

    list_display = (
        "short_id",
        "account",
        "charge_link",
        "acquirer",
        "status",
        "amount_brl",
        "blocked_brl",
        "hold_brl",
        "deadline_display",
        "defense_display",
    )
    list_filter = (QueueFilter, "status", "acquirer", DefenseFilter, "source")
    list_totals = (("amount", "Contestado"), ("blocked_amount", "Bloqueado na adquirente"), ("hold", "Retido no saldo"))
    list_select_related = ("account", "acquirer", "charge")
    search_fields = ("=e2e_id", "=external_id", "=charge__id", "account__name")
    ordering = QUEUE_ORDERING
    inlines = [DefenseAttachmentInline, RequestInline]
    actions = [pages.defend]
    fieldsets = (
        (None, {"fields": ("id", "status", "source", "acquirer", "external_id", "account", "charge_link", "e2e_id")}),
        ("Motivo e prazo", {"fields": ("reason", "opened_at", "defense_deadline", "closed_at", "note")}),
        (
            "Valores",
            {
                "fields": (
                    "amount_brl",
                    "blocked_brl",
                    "hold_brl",
                    "hold_covered_brl",
                    "hold_released",
                    "holds_charge",
                    "returned_brl",
                    "debited_brl",
                )
            },
        ),
        (
            "Defesa",
            {
                "fields": (
                    "defense_text",
                    "defense_by",
                    "defense_submitted_at",
                    "defense_sent_at",
                    "defense_error",
                    "defense_waived_at",
                )
            },
        ),
        ("Registro da adquirente", {"classes": ("collapse",), "fields": ("raw", "created_at", "updated_at")}),
    )

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        # Every field, the money ones above all: nothing here is typed by hand.
        return flatten_fieldsets(self.fieldsets or ())

    @admin.display(description="cobrança", ordering="charge_id")
    def charge_link(self, infraction: Infraction) -> str:
        if infraction.charge_id is None:
            return "—"
        url = reverse("admin:payments_charge_change", args=[infraction.charge_id])
        return format_html('<a href="{}">{}…</a>', url, str(infraction.charge_id)[:8])

    @admin.display(description="prazo de defesa", ordering="defense_deadline")
    def deadline_display(self, infraction: Infraction) -> str:
        deadline = infraction.defense_deadline
        if deadline is None:
            return "—"
        shown = timezone.localtime(deadline).strftime("%d/%m/%Y %H:%M")
        if infraction.is_closed or infraction.defense_submitted_at or infraction.defense_waived_at:
            return shown
        left = deadline - timezone.now()
        if left <= dt.timedelta(0):
            return format_html('<strong class="deadline-passed">{} (vencido)</strong>', shown)
        if left <= DEADLINE_NEAR:
            return format_html(
                '<strong class="deadline-near">{} (em {} h)</strong>', shown, int(left.total_seconds() // 3600)
            )
        return shown

    @admin.display(description="defesa", ordering="defense_submitted_at")
    def defense_display(self, infraction: Infraction) -> str:
        if infraction.defense_sent_at is not None:
            return "Entregue à adquirente"
        if infraction.defense_submitted_at is not None:
            return "Enviada (aguardando entrega)" if not infraction.defense_error else "Enviada (falha na entrega)"
        if infraction.defense_waived_at is not None:
            return "Dispensada"
        return "Não enviada"

    # ----------------------------------------------------------------------- the pages that act

    def has_defend_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(DEFEND_PERMISSION)

    def has_request_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(REQUEST_PERMISSION)

    def get_urls(self) -> list[URLPattern]:
        site = self.admin_site
        return [
            path(
                "<path:object_id>/defesa/",
                site.admin_view(lambda request, object_id: pages.defend_view(self, request, object_id)),
                name="infractions_infraction_defend",
            ),
            path(
                "<path:object_id>/pedido/<str:kind>/",
                site.admin_view(lambda request, object_id, kind: pages.request_view(self, request, object_id, kind)),
                name="infractions_infraction_request",
            ),
            *super().get_urls(),
        ]

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        infraction = self.get_object(request, object_id)
        context = {**(extra_context or {}), "infraction_tools": pages.tools(self, request, infraction)}
        return super().change_view(request, object_id, form_url, context)
