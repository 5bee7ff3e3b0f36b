"""The withdrawal queues staff work: awaiting approval, and payouts that
wait (undetermined or held), each with the order it is worked in."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from withdrawals.limits import sao_paulo_today
from withdrawals.models import WithdrawalStatus
from withdrawals.services import payout_settle_window


class ApprovalQueueFilter(admin.SimpleListFilter):
    """Withdrawals waiting for a person: pending on accounts with manual
    approval. Listed oldest first (WithdrawalAdmin.get_ordering)."""

    title = "fila de aprovação"
    parameter_name = "queue"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("awaiting", "Aguardando aprovação")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() == "awaiting":
            return queryset.filter(status=WithdrawalStatus.PENDING, account__withdrawals_need_approval=True)
        return queryset


class PayoutStateFilter(admin.SimpleListFilter):
    """Approved withdrawals whose payout waits: on an acquirer that has not
    said where it stands, or held (their account, or runs that kept dying)."""

    title = "pagamento parado"
    parameter_name = "payout"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [
            ("undetermined", "Pagamento indeterminado"),
            ("staff", "Indeterminado além da janela (equipe)"),
            ("held", "Retido: conta bloqueada ou não aprovada, ou processamento interrompido"),
        ]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        approved = queryset.filter(status=WithdrawalStatus.APPROVED)
        if self.value() == "undetermined":
            return approved.filter(payout_unclear_since__isnull=False)
        if self.value() == "staff":
            return approved.filter(payout_unclear_since__lt=timezone.now() - payout_settle_window())
        if self.value() == "held":
            return approved.exclude(hold_reason="")
        return queryset


class ScheduledFilter(admin.SimpleListFilter):
    """Scheduled withdrawals (withdrawals.schedule): those still waiting for
    their day, today's, or all of them; by date with the "data agendada" filter."""

    title = "agendados"
    parameter_name = "scheduled"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [
            ("waiting", "Aguardando o dia agendado"),
            ("today", "Agendados para hoje"),
            ("all", "Todos os agendados"),
        ]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        today = sao_paulo_today()
        if self.value() == "waiting":
            return queryset.filter(
                scheduled_for__gt=today, status__in=(WithdrawalStatus.PENDING, WithdrawalStatus.APPROVED)
            )
        if self.value() == "today":
            return queryset.filter(scheduled_for=today)
        if self.value() == "all":
            return queryset.filter(scheduled_for__isnull=False)
        return queryset


#: Queues are worked oldest first: the filter's value → the default order.
QUEUE_ORDER = {
    ("queue", "awaiting"): ("created_at", "id"),
    ("payout", "undetermined"): ("payout_unclear_since", "id"),
    ("payout", "staff"): ("payout_unclear_since", "id"),
    ("payout", "held"): ("held_since", "id"),
}
