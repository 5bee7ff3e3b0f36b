"""Back office for withdrawals: the approval queue, payouts and history
(their columns: ``columns``; the queues' filters: ``queue``; the history
inlines: ``history``); every action goes through the withdrawal services."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse

from accounts.admin.decisions import staff_user
from accounts.admin.money_actions import request_approval_action
from accounts.exceptions import SegregationOfDuties
from accounts.models import MoneyActionRequest
from core.admin.confirmation import Confirmation, confirm_first
from core.admin.lists import (
    CsvExportMixin,
    DetailActionsMixin,
    ListTotalsMixin,
    csv_choice,
    csv_datetime,
    csv_field,
    csv_money,
    titled,
)
from core.admin.records import ActionsOnlyAdminMixin, UUIDSearchMixin
from core.admin.transitions import TransitionActions
from core.exceptions import AccessDenied
from core.plural import plural
from withdrawals.admin.columns import (
    WithdrawalColumns,
    account_document,
    destination,
    key_holder,
    liquid_amount,
    total_debit,
)
from withdrawals.admin.history import PayoutAttemptInline, WithdrawalTransitionInline
from withdrawals.admin.queue import QUEUE_ORDER, ApprovalQueueFilter, PayoutStateFilter, ScheduledFilter
from withdrawals.admin.receipts import ReceiptAdminMixin
from withdrawals.approvals import withdrawal_staff_approve
from withdrawals.exceptions import WithdrawalTransitionNotAllowed
from withdrawals.models import Withdrawal, WithdrawalStatus, WithdrawalTransition
from withdrawals.runs import withdrawal_payout_resume
from withdrawals.services import withdrawal_transition


def _move(pk: Any, to_status: str, description: str, request: HttpRequest) -> bool:
    if to_status == WithdrawalStatus.APPROVED:
        # The approval service checks segregation of duties (accounts.segregation).
        return withdrawal_staff_approve(withdrawal_id=pk, staff=staff_user(request))
    return withdrawal_transition(
        withdrawal_id=pk,
        to_status=to_status,
        source=WithdrawalTransition.Source.STAFF,
        actor=request.user.get_username(),
        reason=f"{description} (equipe)",
    )


_transitions = TransitionActions(
    move=_move,
    refused=WithdrawalTransitionNotAllowed,
    reported=(SegregationOfDuties, AccessDenied),
    done_message=("{description}: {n} saque.", "{description}: {n} saques."),
    skipped_message=(
        "{n} saque ignorado: o status atual não permite.",
        "{n} saques ignorados: o status atual não permite.",
    ),
)


RESUME = "Retomar pagamento interrompido"


def _resume(modeladmin: Any, request: HttpRequest, queryset: QuerySet[Withdrawal], reason: str) -> None:
    """Staff run again payouts held because their runs kept dying with their
    worker (docs/operations/queues-and-workers.md, "The payout worker"); each
    resumption is logged with the reason."""
    done = skipped = 0
    for withdrawal in queryset.order_by("pk"):
        if withdrawal_payout_resume(withdrawal_id=withdrawal.pk):
            done += 1
            modeladmin.log_change(request, withdrawal, f"{RESUME}. Motivo: {reason}")
        else:
            skipped += 1
    if done:
        modeladmin.message_user(
            request, plural(done, f"{RESUME}: {{n}} saque.", f"{RESUME}: {{n}} saques."), messages.SUCCESS
        )
    if skipped:
        modeladmin.message_user(
            request,
            plural(
                skipped,
                "{n} saque ignorado: não está retido por processamento interrompido.",
                "{n} saques ignorados: não estão retidos por processamento interrompido.",
            ),
            messages.WARNING,
        )


@admin.register(Withdrawal)
class WithdrawalAdmin(
    ReceiptAdminMixin,
    WithdrawalColumns,
    DetailActionsMixin,
    CsvExportMixin,
    ListTotalsMixin,
    ActionsOnlyAdminMixin,
    UUIDSearchMixin,
    admin.ModelAdmin[Withdrawal],
):
    list_display = (
        "short_id",
        "created_at_label",
        "account",
        "amount_brl",
        "liquid_amount_brl",
        "destination",
        "payee_column",
        "status_label",
        "scheduled_for",
        "hold_reason",
        "acquirer",
    )
    list_totals = (("amount", "Valor"), ("liquid_amount", "Valor enviado"))
    csv_filename = "saques"
    csv_columns = (
        csv_field("id", "ID"),
        csv_datetime("created_at", "Pedido em"),
        csv_choice("status", "Status"),
        *csv_money("amount", "Valor"),
        *csv_money("fee", "Taxa"),
        *csv_money("total_debit", "Débito total"),
        *csv_money("liquid_amount", "Valor enviado"),
        csv_field("account", "Conta"),
        csv_field("account_id", "ID da conta"),
        csv_choice("pix_key_type", "Tipo de chave"),
        csv_field("pix_key", "Chave Pix"),
        csv_field("acquirer", "Adquirente"),
        csv_field("e2e_id", "ID end-to-end (E2E)"),
        csv_datetime("approved_at", "Aprovado em"),
        csv_datetime("paid_at", "Pago em"),
        csv_field("failure_reason", "Motivo da falha"),
        csv_field("scheduled_for", "Agendado para"),
    )
    # Buttons on a withdrawal's page: the list's actions, in the statuses that allow them.
    detail_actions = {
        "approve": (WithdrawalStatus.PENDING,),
        "cancel": (WithdrawalStatus.PENDING,),
        "mark_returned": (WithdrawalStatus.PAID,),
        "resume_payout": (WithdrawalStatus.APPROVED,),
    }
    list_filter = (
        ApprovalQueueFilter,
        PayoutStateFilter,
        ScheduledFilter,
        "status",
        ("pix_key_type", titled(admin.ChoicesFieldListFilter, "tipo de chave")),
        "acquirer",
        ("created_at", titled(admin.DateFieldListFilter, "data do pedido")),
        ("scheduled_for", titled(admin.DateFieldListFilter, "data agendada")),
    )
    list_select_related = ("account", "acquirer")
    search_fields = ("=e2e_id", "=pix_key", "=idempotency_id", "account__name")
    date_hierarchy = "created_at"
    ordering = ("-created_at",)
    inlines = [PayoutAttemptInline, WithdrawalTransitionInline]
    actions = [
        # Approval sends the payout after commit (withdrawal_transition enqueues it).
        _transitions.action(
            "approve",
            "Aprovar",
            WithdrawalStatus.APPROVED,
            (WithdrawalStatus.PENDING,),
            permission="approve_withdrawal",
            confirmation=Confirmation(
                effect="Aprovar envia o Pix à chave de destino de cada saque",
                column="Enviado via Pix",
                amount=liquid_amount,
                from_statuses=(WithdrawalStatus.PENDING,),
                note="Confira a chave de destino e o titular (um CPF/CNPJ que não é o da conta vem marcado). "
                "Quem emitiu ou rotacionou uma credencial com permissão de saque de uma conta, ou pediu ou aprovou "
                "a alteração do e-mail de contato dela, não pode aprovar os saques dessa conta por um período "
                "(segregação de funções).",
                columns=(
                    ("Chave de destino", lambda withdrawal: destination(None, withdrawal)),
                    ("Titular da chave", key_holder),
                    ("CPF/CNPJ da conta", account_document),
                ),
            ),
        ),
        # Gives back exactly the debit of a withdrawal never sent (a pending
        # one has no payout): a credit with its own evidence, so one person may.
        _transitions.action(
            "cancel",
            "Cancelar (devolve o saldo)",
            WithdrawalStatus.CANCELED,
            (WithdrawalStatus.PENDING,),
            permission="cancel_withdrawal",
            confirmation=Confirmation(
                effect="Cancelar devolve ao saldo da conta o valor debitado pelo saque, que não foi enviado",
                column="Crédito na conta",
                amount=total_debit,
                from_statuses=(WithdrawalStatus.PENDING,),
            ),
        ),
        # An approved withdrawal still waiting for its scheduled day, never
        # sent; the transition refuses (skips) any other approved one.
        _transitions.action(
            "cancel_scheduled",
            "Cancelar agendamento aprovado (devolve o saldo)",
            WithdrawalStatus.CANCELED,
            (WithdrawalStatus.APPROVED,),
            permission="cancel_withdrawal",
            confirmation=Confirmation(
                effect="Cancelar devolve ao saldo da conta o valor debitado pelo saque agendado, que não foi enviado",
                column="Crédito na conta",
                amount=total_debit,
                from_statuses=(WithdrawalStatus.APPROVED,),
                note="Só é cancelado o saque aprovado agendado para um dia futuro que nunca foi enviado; "
                "os demais são ignorados.",
            ),
        ),
        # Credits the account on staff's word: asked here, carried out when
        # another staff member approves (accounts.admin.money_actions).
        request_approval_action(
            name="mark_returned",
            description="Marcar como devolvido pelo destino",
            action=MoneyActionRequest.Action.MARK_WITHDRAWAL_RETURNED,
            permission="request_withdrawal_return",
            confirmation=Confirmation(
                effect="Marcar como devolvido credita na conta o valor líquido que o destino devolveu",
                column="Crédito na conta",
                amount=liquid_amount,
                from_statuses=(WithdrawalStatus.PAID,),
                note="Nada é creditado agora: é criado um pedido que outro membro da equipe precisa aprovar.",
            ),
        ),
        # The payout was approved already; its runs kept dying with their
        # worker (HoldReason.PAYOUT_INTERRUPTED). Run again, asking the
        # acquirer that may hold it first, once the cause is dealt with.
        confirm_first(
            _resume,
            name="resume_payout",
            description=RESUME,
            permission="approve_withdrawal",
            confirmation=Confirmation(
                effect="Retomar executa de novo o pagamento dos saques retidos porque o processo que os executava "
                "morreu repetidamente; a adquirente que pode ter o pagamento é consultada antes de qualquer envio",
                column="Enviado via Pix",
                amount=liquid_amount,
                from_statuses=(WithdrawalStatus.APPROVED,),
            ),
        ),
    ]

    def get_ordering(self, request: HttpRequest) -> Any:
        for (parameter, value), ordering in QUEUE_ORDER.items():
            if request.GET.get(parameter) == value:
                return ordering
        return super().get_ordering(request)

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> Any:
        awaiting = Withdrawal.objects.filter(status=WithdrawalStatus.PENDING, account__withdrawals_need_approval=True)
        extra_context = {
            **(extra_context or {}),
            "awaiting_approval_url": reverse("admin:withdrawals_withdrawal_changelist") + "?queue=awaiting",
            "awaiting_approval_count": awaiting.count(),
        }
        return super().changelist_view(request, extra_context)

    # One permission per action that moves money (staff groups: accounts.staff_groups).
    def has_approve_withdrawal_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("withdrawals.approve_withdrawal")

    def has_cancel_withdrawal_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("withdrawals.cancel_withdrawal")

    def has_request_withdrawal_return_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("withdrawals.request_withdrawal_return")
