"""Back office for charges: find them, see every acquirer attempt and status
change, and act on them through the same transition service acquirers use."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.utils import flatten_fieldsets
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html

from accounts.admin.money_actions import request_approval_action
from accounts.models import MoneyActionRequest
from acquirers.adapters.base import AdapterError
from core.admin.confirmation import Confirmation
from core.admin.lists import (
    CsvExportMixin,
    DetailActionsMixin,
    ListTotalsMixin,
    csv_choice,
    csv_datetime,
    csv_field,
    csv_money,
    labelled,
    short_id,
    titled,
)
from core.admin.money import money
from core.admin.records import ActionsOnlyAdminMixin, ReadOnlyInlineMixin, UUIDSearchMixin
from core.admin.transitions import TransitionActions
from core.exceptions import PixServiceError
from core.plural import plural
from payments.admin.cancellations import ChargeCancellationInline
from payments.admin.late_payments import LatePaymentInline
from payments.admin.med import refusing_med_open
from payments.admin.refunds import refund
from payments.choices import ChargeKind
from payments.exceptions import TransitionNotAllowed
from payments.models import Charge, ChargeAttempt, ChargeRefund, ChargeStatus, ChargeTransition
from payments.services import charge_transition
from payments.status_polling import charge_status_poll


class ChargeAttemptInline(ReadOnlyInlineMixin, admin.TabularInline[ChargeAttempt, Charge]):
    model = ChargeAttempt
    fields = ("position", "acquirer", "outcome", "error_class", "error_message", "latency_ms", "created_at")
    readonly_fields = fields
    ordering = ("position",)


class ChargeTransitionInline(ReadOnlyInlineMixin, admin.TabularInline[ChargeTransition, Charge]):
    model = ChargeTransition
    fields = ("created_at", "from_status", "to_status", "source", "actor")
    readonly_fields = fields


class ChargeRefundInline(ReadOnlyInlineMixin, admin.TabularInline[ChargeRefund, Charge]):
    # Reserved refunds, asked by staff or by the merchant through the API.
    model = ChargeRefund
    fields = (
        "created_at",
        "source",
        "status",
        "amount_brl",
        "reason",
        "failure_reason",
        "unclear_at",
        "finished_at",
        "release_check",
        "release_checked_at",
    )
    readonly_fields = fields
    amount_brl = money("amount", "Valor reservado")


def _move(pk: Any, to_status: str, description: str, request: HttpRequest) -> bool:
    return charge_transition(
        charge_id=pk, to_status=to_status, source=ChargeTransition.Source.STAFF, actor=request.user.get_username()
    )


_transitions = TransitionActions(
    move=_move,
    refused=TransitionNotAllowed,
    done_message=("{description}: {n} cobrança.", "{description}: {n} cobranças."),
    skipped_message=(
        "{n} cobrança ignorada: o status atual não permite.",
        "{n} cobranças ignoradas: o status atual não permite.",
    ),
)


def _liquid(charge: Charge) -> int:
    return charge.liquid_amount


@admin.action(description="Consultar na adquirente", permissions=["change"])
def reconcile(modeladmin: Any, request: HttpRequest, queryset: QuerySet[Any]) -> None:
    """Ask the acquirer where pending charges stand and apply its answer
    (what the periodic reconciliation does, on demand)."""
    changed = 0
    for record in queryset.select_related(None).only("pk", "status").filter(status=ChargeStatus.PENDING):
        try:
            changed += sum(r.changed for r in charge_status_poll(charge_id=record.pk))
        except (AdapterError, PixServiceError) as exc:
            modeladmin.message_user(request, f"{record.pk}: {exc}", messages.ERROR)
    modeladmin.message_user(
        request,
        plural(
            changed, "Consultar na adquirente: {n} cobrança mudou.", "Consultar na adquirente: {n} cobranças mudaram."
        ),
        messages.INFO,
    )


@admin.register(Charge)
class ChargeAdmin(
    DetailActionsMixin,
    CsvExportMixin,
    ListTotalsMixin,
    ActionsOnlyAdminMixin,
    UUIDSearchMixin,
    admin.ModelAdmin[Charge],
):
    """Nothing on a charge is edited by hand: its status moves only through the actions."""

    # The API serializes these fields: they are labelled here, not on the model.
    short_id = short_id
    id_label = labelled("id", "ID")
    amount_brl = money("amount", "Valor")
    platform_tax_brl = money("platform_tax", "Taxa da plataforma")
    liquid_amount_brl = money("liquid_amount", "Valor líquido")
    status_label = labelled("status", "Status")
    payment_method_label = labelled("payment_method", "Forma de pagamento")
    e2e_id_label = labelled("e2e_id", "ID end-to-end (E2E)")
    created_at_label = labelled("created_at", "Criada em")
    paid_at_label = labelled("paid_at", "Paga em")
    expires_at_label = labelled("expires_at", "Expira em")

    list_display = (
        "short_id",
        "created_at_label",
        "account",
        "amount_brl",
        "liquid_amount_brl",
        "status_label",
        "kind",
        "paid_at_label",
        "acquirer",
    )
    list_filter = (
        "status",
        "kind",
        "acquirer",
        ("created_at", titled(admin.DateFieldListFilter, "data de criação")),
        "account",
    )
    list_totals = (("amount", "Valor"), ("liquid_amount", "Valor líquido"))
    fieldsets = (
        (
            None,
            {
                "fields": (
                    "id_label",
                    "account",
                    "kind",
                    "due_terms",
                    "status_label",
                    "amount_brl",
                    "platform_tax_brl",
                    "liquid_amount_brl",
                    "payment_method_label",
                    "med_open",
                    "version",
                )
            },
        ),
        (
            "Pix",
            {
                "fields": (
                    "acquirer",
                    "txid",
                    "provider_charge_id",
                    "e2e_id_label",
                    "emv",
                    "created_at_label",
                    "expires_at_label",
                    "paid_at_label",
                    "updated_at",
                )
            },
        ),
        (
            "Pagador",
            {"fields": ("buyer_name", "buyer_document", "buyer_phone", "buyer_address", "postback_url", "metadata")},
        ),
    )
    csv_filename = "cobrancas"
    csv_columns = (
        csv_field("id", "ID"),
        csv_datetime("created_at", "Criada em"),
        csv_choice("status", "Status"),
        *csv_money("amount", "Valor"),
        *csv_money("platform_tax", "Taxa da plataforma"),
        *csv_money("liquid_amount", "Valor líquido"),
        csv_field("account", "Conta"),
        csv_field("account_id", "ID da conta"),
        csv_field("acquirer", "Adquirente"),
        csv_field("txid", "txid"),
        csv_field("e2e_id", "ID end-to-end (E2E)"),
        csv_field("buyer_document", "CPF/CNPJ do pagador"),
        csv_datetime("paid_at", "Paga em"),
        csv_datetime("expires_at", "Expira em"),
    )
    list_select_related = ("account", "acquirer")
    search_fields = ("=txid", "=e2e_id", "=buyer_document", "=provider_charge_id")
    date_hierarchy = "created_at"
    ordering = ("-created_at",)
    inlines = [
        ChargeAttemptInline,
        ChargeTransitionInline,
        ChargeRefundInline,
        ChargeCancellationInline,
        LatePaymentInline,
    ]
    actions = [
        _transitions.action(
            "cancel",
            "Cancelar",
            ChargeStatus.CANCELED,
            (ChargeStatus.PENDING,),
            confirmation=Confirmation(
                effect=(
                    "Cancelar: a adquirente é avisada para remover o Pix copia e cola (até responder); nenhum valor "
                    "entra ou sai do saldo. Um Pix que ainda chegar fica em Pagamentos após cancelamento"
                ),
                column="Movimento no saldo",
                amount=lambda charge: 0,
                from_statuses=(ChargeStatus.PENDING,),
            ),
        ),
        # A charge an open MED infraction holds moves only with it (payments.admin.med).
        refusing_med_open(refund),
        reconcile,
        refusing_med_open(
            _transitions.action(
                "mark_chargeback",
                "Marcar contestação (MED)",
                ChargeStatus.CHARGEBACK,
                (ChargeStatus.PAID,),
                permission="mark_charge_chargeback",
                confirmation=Confirmation(
                    effect="Contestação (MED): o valor líquido é debitado do saldo da conta",
                    column="Débito na conta",
                    amount=_liquid,
                    from_statuses=(ChargeStatus.PAID,),
                ),
            )
        ),
        # Credits the account: asked here, carried out when another staff
        # member approves (accounts.admin.money_actions, payments.approvals).
        refusing_med_open(
            request_approval_action(
                name="resolve_chargeback",
                description="Resolver contestação a favor da conta",
                action=MoneyActionRequest.Action.RESOLVE_CHARGEBACK,
                permission="request_chargeback_resolution",
                confirmation=Confirmation(
                    effect="Resolver a contestação a favor da conta credita de volta o valor líquido",
                    column="Crédito na conta",
                    amount=_liquid,
                    from_statuses=(ChargeStatus.CHARGEBACK,),
                    note="Nada é creditado agora: é criado um pedido que outro membro da equipe precisa aprovar.",
                ),
            )
        ),
    ]

    # Buttons on a charge's page: the list's actions, in the statuses that allow them.
    detail_actions = {
        "cancel": (ChargeStatus.PENDING,),
        "reconcile": (ChargeStatus.PENDING,),
        "refund": (ChargeStatus.PAID, ChargeStatus.CHARGEBACK),
        "mark_chargeback": (ChargeStatus.PAID,),
        "resolve_chargeback": (ChargeStatus.CHARGEBACK,),
    }

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        computed = [f for f in flatten_fieldsets(self.fieldsets or ()) if f.endswith(("_brl", "_label"))]
        return [*super().get_readonly_fields(request, obj), *computed, "due_terms"]

    @admin.display(description="vencimento")
    def due_terms(self, charge: Charge) -> str:
        """A due-date charge's terms, amount due today and paid components are on its own page."""
        if charge.kind != ChargeKind.DUE:
            return "—"
        url = reverse("admin:payments_duecharge_change", args=[charge.pk])
        return format_html('<a href="{}">{}</a>', url, charge.due)

    # One permission per action that moves money (staff groups: accounts.staff_groups).
    def has_refund_charge_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("payments.refund_charge")

    def has_mark_charge_chargeback_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("payments.mark_charge_chargeback")

    def has_request_chargeback_resolution_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("payments.request_chargeback_resolution")
