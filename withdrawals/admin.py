"""Back office for withdrawals: the approval queue, payouts and history;
every action goes through the withdrawal services."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from pix_service.admin import ReadOnlyInlineMixin, UUIDSearchMixin, transition_action
from withdrawals.exceptions import WithdrawalTransitionNotAllowed
from withdrawals.models import PayoutAttempt, Withdrawal, WithdrawalStatus, WithdrawalTransition
from withdrawals.services import withdrawal_transition


class PayoutAttemptInline(ReadOnlyInlineMixin, admin.TabularInline[PayoutAttempt, Withdrawal]):
    model = PayoutAttempt
    fields = ("created_at", "acquirer", "action", "outcome", "error_class", "error_message", "latency_ms")
    readonly_fields = fields


class WithdrawalTransitionInline(ReadOnlyInlineMixin, admin.TabularInline[WithdrawalTransition, Withdrawal]):
    model = WithdrawalTransition
    fields = ("created_at", "from_status", "to_status", "source", "actor")
    readonly_fields = fields


class ApprovalQueueFilter(admin.SimpleListFilter):
    """Withdrawals waiting for a person: pending on accounts with manual approval."""

    title = "fila de aprovação"
    parameter_name = "queue"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("awaiting", "Aguardando aprovação")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() == "awaiting":
            return queryset.filter(status=WithdrawalStatus.PENDING, account__withdrawals_need_approval=True)
        return queryset


def _transition_action(
    name: str, description: str, to_status: str, from_statuses: tuple[str, ...]
) -> Callable[[Any, HttpRequest, QuerySet[Any]], None]:
    def apply(pk: Any, request: HttpRequest) -> bool:
        return withdrawal_transition(
            withdrawal_id=pk,
            to_status=to_status,
            source=WithdrawalTransition.Source.STAFF,
            actor=request.user.get_username(),
            reason=f"{description} by staff",
        )

    return transition_action(
        name=name,
        description=description,
        to_status=to_status,
        from_statuses=from_statuses,
        apply=apply,
        refused=WithdrawalTransitionNotAllowed,
        done_message="{description}: {count} saque(s).",
        skipped_message="{count} saque(s) ignorado(s): o status atual não permite.",
    )


@admin.register(Withdrawal)
class WithdrawalAdmin(UUIDSearchMixin, admin.ModelAdmin[Withdrawal]):
    list_display = ("id", "account", "amount", "liquid_amount", "pix_key_type", "status", "acquirer", "created_at")
    list_filter = (ApprovalQueueFilter, "status", "pix_key_type", "acquirer", ("created_at", admin.DateFieldListFilter))
    list_select_related = ("account", "acquirer")
    search_fields = ("=e2e_id", "=pix_key", "=idempotency_id", "account__name")
    date_hierarchy = "created_at"
    ordering = ("-created_at",)
    inlines = [PayoutAttemptInline, WithdrawalTransitionInline]
    actions = [
        # Approval sends the payout after commit (withdrawal_transition enqueues it).
        _transition_action("approve", "Aprovar", WithdrawalStatus.APPROVED, (WithdrawalStatus.PENDING,)),
        _transition_action(
            "cancel", "Cancelar (devolve o saldo)", WithdrawalStatus.CANCELED, (WithdrawalStatus.PENDING,)
        ),
        _transition_action(
            "mark_returned", "Marcar como devolvido pelo destino", WithdrawalStatus.REFUNDED, (WithdrawalStatus.PAID,)
        ),
    ]

    def get_readonly_fields(self, request: HttpRequest, obj: Withdrawal | None = None) -> list[str]:
        return [field.name for field in Withdrawal._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Withdrawal | None = None) -> bool:
        return False
