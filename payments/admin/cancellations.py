"""Back office for what a cancel leaves at the acquirer: the asks to withdraw
charges cancelled here, and the ones it never answered, to ask again (no
money moves); shown on the charge's page too."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from core.admin.records import ReadOnlyAdminMixin, ReadOnlyInlineMixin
from core.plural import plural
from payments.cancellation import charge_cancel_retry
from payments.models import Charge, ChargeCancellation


class ChargeCancellationInline(ReadOnlyInlineMixin, admin.StackedInline[ChargeCancellation, Charge]):
    model = ChargeCancellation
    fields = ("state", "attempts", "last_error", "requested_at", "next_attempt_at", "give_up_at", "finished_at")
    readonly_fields = fields


@admin.action(description="Pedir de novo o cancelamento na adquirente", permissions=["retry"])
def retry_cancel(modeladmin: Any, request: HttpRequest, queryset: QuerySet[ChargeCancellation]) -> None:
    """The acquirer gave no definitive answer in time: ask again (no money moves)."""
    asked = 0
    for cancellation in queryset.filter(state=ChargeCancellation.State.GAVE_UP):
        if charge_cancel_retry(charge_id=cancellation.pk):
            asked += 1
            modeladmin.log_change(request, cancellation, "Cancelamento pedido de novo à adquirente.")
    skipped = queryset.count() - asked
    if asked:
        modeladmin.message_user(
            request,
            plural(asked, "{n} cancelamento pedido de novo.", "{n} cancelamentos pedidos de novo."),
            messages.SUCCESS,
        )
    if skipped:
        modeladmin.message_user(
            request,
            plural(
                skipped,
                "{n} ignorado: só os sem resposta da adquirente.",
                "{n} ignorados: só os sem resposta da adquirente.",
            ),
            messages.WARNING,
        )


@admin.register(ChargeCancellation)
class ChargeCancellationAdmin(ReadOnlyAdminMixin, admin.ModelAdmin[ChargeCancellation]):
    """Charges cancelled here and what their acquirer answered to the ask to withdraw them."""

    list_display = ("charge", "requested_at", "acquirer", "state", "attempts", "last_error", "next_attempt_at")
    list_filter = ("state", "acquirer")
    list_select_related = ("charge", "acquirer")
    search_fields = ("=charge__txid",)
    ordering = ("-requested_at",)
    fields = (
        "charge",
        "acquirer",
        "state",
        "attempts",
        "last_error",
        "requested_at",
        "next_attempt_at",
        "give_up_at",
        "finished_at",
    )
    readonly_fields = fields
    actions = [retry_cancel]

    def has_retry_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("payments.retry_chargecancellation")
