"""Back office for the Pix received after a cancel: credited or returned to
the payer by maker-checker (``payments.approvals``,
``accounts.admin.money_actions``); listed on the charge's page too."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from accounts.admin.money_actions import request_approval_action
from accounts.models import MoneyActionRequest
from core.admin.confirmation import Confirmation
from core.admin.lists import DetailActionsMixin, ListTotalsMixin
from core.admin.money import money
from core.admin.records import ReadOnlyAdminMixin, ReadOnlyInlineMixin
from payments.models import Charge, LatePayment, LatePaymentResolution

OPEN = (LatePayment.Status.OPEN,)
NOTE = "Nada se move agora: é criado um pedido que outro membro da equipe precisa aprovar."


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
