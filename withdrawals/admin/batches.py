"""Back office for payout batches: the list with each batch's progress, a
batch's page with its items, and staff's one decision on a batch waiting
for approval (approve: every item is sent; refuse: every item canceled, its
debit given back), through withdrawals.batches."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import Count, F, Q, QuerySet, Sum
from django.http import HttpRequest

from accounts.admin.decisions import staff_user
from accounts.exceptions import SegregationOfDuties
from core.admin.confirmation import Confirmation, confirm_first
from core.admin.lists import DetailActionsMixin
from core.admin.records import ActionsOnlyAdminMixin, ReadOnlyInlineMixin, UUIDSearchMixin
from core.exceptions import AccessDenied, ConflictError
from core.money import brl
from withdrawals.admin.columns import payee_column
from withdrawals.batches import payout_batch_approve, payout_batch_refuse
from withdrawals.models import PayoutBatch, Withdrawal, WithdrawalStatus

AWAITING = (PayoutBatch.Status.AWAITING_APPROVAL,)


class PayoutBatchItemInline(ReadOnlyInlineMixin, admin.TabularInline[Withdrawal, PayoutBatch]):
    model = Withdrawal
    fk_name = "batch"
    fields = (
        "batch_index",
        "external_id",
        "amount",
        "pix_key_type",
        "pix_key",
        "payee_column",
        "status",
        "e2e_id",
        "failure_reason",
    )
    readonly_fields = fields
    payee_column = payee_column  # the key's owner the payee check found, for the approving staff
    ordering = ("batch_index",)
    show_change_link = True
    verbose_name = "saque do lote"
    verbose_name_plural = "saques do lote"

    def get_queryset(self, request: HttpRequest) -> QuerySet[Withdrawal]:
        return super().get_queryset(request).select_related("account")  # the owner column reads the account


def _decide(decision: Any, verb: str) -> Any:
    def perform(modeladmin: Any, request: HttpRequest, queryset: QuerySet[PayoutBatch], reason: str) -> None:
        staff = staff_user(request)
        for batch in queryset.filter(status__in=AWAITING):
            try:
                moved = decision(batch_id=batch.pk, staff=staff)
            except (AccessDenied, SegregationOfDuties, ConflictError) as refused:
                modeladmin.message_user(request, f"{batch}: {refused.message}", messages.ERROR)
                continue
            modeladmin.log_change(request, batch, f"Lote {verb} ({moved} saques). Motivo: {reason}")
            modeladmin.message_user(request, f"Lote {batch.pk} {verb}: {moved} saques.", messages.SUCCESS)

    return perform


@admin.register(PayoutBatch)
class PayoutBatchAdmin(DetailActionsMixin, ActionsOnlyAdminMixin, UUIDSearchMixin, admin.ModelAdmin[PayoutBatch]):
    list_display = (
        "short_id",
        "created_at",
        "account",
        "status",
        "item_count",
        "total_brl",
        "paid_count",
        "failed_count",
        "open_count",
        "paid_brl",
    )
    list_filter = ("status",)
    list_select_related = ("account",)
    search_fields = ("account__name", "description")
    inlines = [PayoutBatchItemInline]
    detail_actions = {"approve_batch": AWAITING, "refuse_batch": AWAITING}
    actions = [
        confirm_first(
            _decide(payout_batch_approve, "aprovado"),
            name="approve_batch",
            description="Aprovar lote de saques",
            permission="approve_payout_batch",
            confirmation=Confirmation(
                effect="Aprovar envia o Pix de cada saque pendente do lote (o valor já foi debitado da conta)",
                column="Enviado via Pix",
                amount=lambda batch: int(batch.total_amount),
                from_statuses=AWAITING,
            ),
        ),
        confirm_first(
            _decide(payout_batch_refuse, "recusado"),
            name="refuse_batch",
            description="Recusar lote de saques",
            permission="approve_payout_batch",
            confirmation=Confirmation(
                effect="Recusar cancela cada saque pendente do lote e devolve ao saldo da conta o que ele debitou",
                column="Crédito na conta",
                amount=lambda batch: int(batch.total_debit),
                from_statuses=AWAITING,
            ),
        ),
    ]

    def get_queryset(self, request: HttpRequest) -> QuerySet[PayoutBatch]:
        # The progress columns come with the page, not from a query per row;
        # ``amount`` is what the confirmation page shows as the record's value.
        return (
            super()
            .get_queryset(request)
            .annotate(
                amount=F("total_amount"),
                paid=Count("items", filter=Q(items__status=WithdrawalStatus.PAID)),
                failed=Count("items", filter=Q(items__status__in=(WithdrawalStatus.FAILED, WithdrawalStatus.CANCELED))),
                open=Count("items", filter=Q(items__status__in=(WithdrawalStatus.PENDING, WithdrawalStatus.APPROVED))),
                paid_amount=Sum("items__amount", filter=Q(items__status=WithdrawalStatus.PAID)),
            )
        )

    def has_approve_payout_batch_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("withdrawals.approve_payout_batch")

    @admin.display(description="ID")
    def short_id(self, obj: PayoutBatch) -> str:
        return str(obj.pk)[:8]

    @admin.display(description="Valor total", ordering="total_amount")
    def total_brl(self, obj: PayoutBatch) -> str:
        return brl(obj.total_amount)

    @admin.display(description="Pagos", ordering="paid")
    def paid_count(self, obj: Any) -> int:
        return int(obj.paid)

    @admin.display(description="Falhos ou cancelados", ordering="failed")
    def failed_count(self, obj: Any) -> int:
        return int(obj.failed)

    @admin.display(description="Em andamento", ordering="open")
    def open_count(self, obj: Any) -> int:
        return int(obj.open)

    @admin.display(description="Valor pago")
    def paid_brl(self, obj: Any) -> str:
        return brl(int(obj.paid_amount or 0))
