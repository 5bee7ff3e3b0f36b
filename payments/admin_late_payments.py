"""Back office for what a cancel leaves at the acquirer: the asks to withdraw
charges cancelled here (and the ones it never answered, to ask again), and
the Pix received after a cancel, credited or returned to the payer by
maker-checker (``payments.approvals``, ``accounts.approvals_admin``)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from accounts.approvals_admin import request_approval_action
from accounts.models import MoneyActionRequest
from core.admin import Confirmation, ReadOnlyAdminMixin, ReadOnlyInlineMixin
from core.admin_lists import DetailActionsMixin, ListTotalsMixin
from core.admin_money import money
from core.plural import plural
from payments.cancellation import charge_cancel_retry
from payments.models import Charge, ChargeCancellation, LatePayment, LatePaymentResolution

OPEN = (LatePayment.Status.OPEN,)
NOTE = "Nada se move agora: é criado um pedido que outro membro da equipe precisa aprovar."


class ChargeCancellationInline(ReadOnlyInlineMixin, admin.StackedInline[ChargeCancellation, Charge]):
    model = ChargeCancellation
    fields = ("state", "attempts", "last_error", "requested_at", "next_attempt_at", "give_up_at", "finished_at")
    readonly_fields = fields


class LatePaymentInline(ReadOnlyInlineMixin, admin.TabularInline[LatePayment, Charge]):
    model = LatePayment
    fields = ("created_at", "e2e_id", "amount_brl", "status", "source")
    readonly_fields = fields
    show_change_link = True
    amount_brl = money("amount", "Valor recebido")


class LatePaymentResolutionInline(ReadOnlyInlineMixin, admin.TabularInline[LatePaymentResolution, LatePayment]):
    model = LatePaymentResolution
    fields = (
        "created_at",
        "kind",
        "status",
        "actor",
        "reason",
        "attempts",
        "last_error",
        "unclear_at",
        "failure_reason",
    )
    readonly_fields = fields


def _liquid(late: LatePayment) -> int:
    return late.liquid_amount


@admin.register(LatePayment)
class LatePaymentAdmin(DetailActionsMixin, ListTotalsMixin, ReadOnlyAdminMixin, admin.ModelAdmin[LatePayment]):
    """Each Pix received after its charge was cancelled (or failed) here,
    with its evidence, until it is credited or returned."""

    amount_brl = money("amount", "Valor recebido")
    platform_tax_brl = money("platform_tax", "Taxa da plataforma")
    liquid_amount_brl = money("liquid_amount", "Valor líquido")
    returned_there_brl = money("returned_there", "Devolvido na adquirente")
    list_display = ("id", "created_at", "account", "charge", "amount_brl", "status", "source", "acquirer")
    list_filter = ("status", "acquirer", "source")
    list_totals = (("amount", "Valor recebido"),)
    list_select_related = ("account", "charge", "acquirer")
    search_fields = ("=e2e_id", "=charge__txid")
    ordering = ("-created_at",)
    fields = (
        "status",
        "charge",
        "charge_status",
        "account",
        "acquirer",
        "e2e_id",
        "amount_brl",
        "platform_tax_brl",
        "liquid_amount_brl",
        "paid_at",
        "payer_info",
        "source",
        "raw",
        "returned_there_brl",
        "returned_there_at",
        "returned_there_evidence",
        "created_at",
        "resolved_at",
    )
    readonly_fields = fields
    inlines = [LatePaymentResolutionInline]
    actions = [
        request_approval_action(
            name="request_late_credit",
            description="Creditar na conta",
            action=MoneyActionRequest.Action.CREDIT_LATE_PAYMENT,
            permission="request_late_payment_resolution",
            confirmation=Confirmation(
                effect=(
                    "Creditar: o valor líquido (o Pix menos a taxa da conta) entra no saldo; a cobrança continua "
                    "cancelada e o extrato mostra o crédito nela"
                ),
                column="Crédito na conta",
                amount=_liquid,
                from_statuses=OPEN,
                note=NOTE,
            ),
        ),
        request_approval_action(
            name="request_late_return",
            description="Devolver ao pagador",
            action=MoneyActionRequest.Action.RETURN_LATE_PAYMENT,
            permission="request_late_payment_resolution",
            confirmation=Confirmation(
                effect="Devolver: a adquirente devolve o Pix ao pagador (devolução); o saldo da conta não muda",
                column="Movimento na conta",
                amount=lambda late: 0,
                from_statuses=OPEN,
                note=NOTE,
            ),
        ),
    ]
    detail_actions = {"request_late_credit": OPEN, "request_late_return": OPEN}

    def has_request_late_payment_resolution_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("payments.request_late_payment_resolution")


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
