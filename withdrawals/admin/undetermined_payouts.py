"""Back office for payouts waiting on an acquirer that has not said whether
it paid (README, "Money safety"): ask it again, or give the debit back by
maker-checker once it says it never paid."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import Count, Prefetch, QuerySet
from django.http import HttpRequest
from django.utils import timezone

from accounts.admin.money_actions import request_approval_action
from accounts.models import MoneyActionRequest
from core.admin.confirmation import Confirmation
from core.admin.lists import DetailActionsMixin, ListTotalsMixin
from core.admin.records import ActionsOnlyAdminMixin, UUIDSearchMixin
from withdrawals.admin.columns import WithdrawalColumns, total_debit
from withdrawals.admin.history import PayoutAttemptInline, WithdrawalTransitionInline
from withdrawals.models import PayoutAttempt, UndeterminedPayout, WithdrawalStatus
from withdrawals.payouts import ProcessOutcome, withdrawal_payout_ask
from withdrawals.services import payout_settle_window

#: What asking the acquirer again came to, for staff (the withdrawal's status otherwise).
ASK_RESULTS: dict[str, str] = {
    ProcessOutcome.UNDETERMINED: "ainda indeterminado",
    ProcessOutcome.HELD: "outra execução está tratando o pagamento agora",
    ProcessOutcome.ON_HOLD: 'retido: veja o motivo em "retido por"',
    ProcessOutcome.DEFERRED: "adiado: adquirentes indisponíveis, nova tentativa em seguida",
    ProcessOutcome.PROCESSING: "aceito pela adquirente, pagamento em processamento",
    ProcessOutcome.AWAITING_APPROVAL: "aguardando aprovação",
}


@admin.register(UndeterminedPayout)
class UndeterminedPayoutAdmin(
    WithdrawalColumns,
    DetailActionsMixin,
    ListTotalsMixin,
    ActionsOnlyAdminMixin,
    UUIDSearchMixin,
    admin.ModelAdmin[UndeterminedPayout],
):
    """Staff's queue: payouts sent to an acquirer that has not said whether
    it paid. The money stays debited; staff check with the acquirer, then
    ask it again here (its answer settles the payout the normal way)."""

    list_display = (
        "short_id",
        "payout_unclear_since",
        "past_window",
        "account",
        "amount_brl",
        "liquid_amount_brl",
        "destination",
        "payout_owner",
        "payout_owner_since",
        "attempt_count",
        "late_answers",
    )
    list_select_related = ("account", "payout_owner")
    search_fields = ("=idempotency_id", "=pix_key", "account__name")
    # Oldest first: a queue.
    ordering = ("payout_unclear_since", "id")
    list_totals = (("amount", "Valor"), ("liquid_amount", "Valor enviado"))
    inlines = [PayoutAttemptInline, WithdrawalTransitionInline]
    detail_actions = {
        "ask_owner_again": (WithdrawalStatus.APPROVED,),
        "fail_undetermined": (WithdrawalStatus.APPROVED,),
    }
    actions = [
        "ask_owner_again",
        # The acquirer said, outside the service, that it never paid: giving
        # the debit back on staff's word needs a second staff member
        # (accounts.admin.money_actions); approval runs withdrawal_payout_resolve.
        request_approval_action(
            name="fail_undetermined",
            description="Falhar pagamento indeterminado (devolver o saldo)",
            action=MoneyActionRequest.Action.FAIL_UNDETERMINED_PAYOUT,
            permission="request_undetermined_payout_failure",
            confirmation=Confirmation(
                effect="Falhar o pagamento devolve ao saldo da conta o valor debitado pelo saque. Só o faça com "
                "a resposta definitiva da adquirente de que não pagou nem pagará",
                column="Crédito na conta",
                amount=total_debit,
                from_statuses=(WithdrawalStatus.APPROVED,),
                note="Nada é creditado agora: é criado um pedido que outro membro da equipe precisa aprovar. "
                "No motivo, diga qual resposta definitiva a adquirente deu (chamado, extrato).",
            ),
        ),
    ]

    @admin.display(description="Além da janela", boolean=True)
    def past_window(self, obj: UndeterminedPayout) -> bool:
        since = obj.payout_unclear_since
        return since is not None and timezone.now() - since > payout_settle_window()

    def get_queryset(self, request: HttpRequest) -> QuerySet[UndeterminedPayout]:
        # The two attempt columns come with the page, not from a query per row.
        late = PayoutAttempt.objects.filter(late_at__isnull=False).order_by("id")
        return (
            super()
            .get_queryset(request)
            .annotate(attempts_made=Count("payout_attempts"))
            .prefetch_related(Prefetch("payout_attempts", queryset=late, to_attr="late_attempts"))
        )

    @admin.display(description="Chamadas", ordering="attempts_made")
    def attempt_count(self, obj: Any) -> int:
        return int(obj.attempts_made)

    @admin.display(description="Respostas tardias")
    def late_answers(self, obj: Any) -> str:
        return "; ".join(f"{a.late_outcome} {a.late_detail}".strip() for a in obj.late_attempts)[:300] or "-"

    def has_ask_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("withdrawals.change_withdrawal")

    def has_request_undetermined_payout_failure_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("withdrawals.request_undetermined_payout_failure")

    @admin.action(description="Perguntar de novo à adquirente", permissions=["ask"])
    def ask_owner_again(self, request: HttpRequest, queryset: QuerySet[UndeterminedPayout]) -> None:
        """Asks the acquirer that may hold each payout; money moves only
        through its definitive answer, as in any payout run."""
        for withdrawal in queryset.select_related("payout_owner").order_by("payout_unclear_since"):
            result = withdrawal_payout_ask(withdrawal_id=withdrawal.pk)
            owner = withdrawal.payout_owner.key if withdrawal.payout_owner else "?"
            said = ASK_RESULTS.get(result) or WithdrawalStatus(result).label.lower()
            self.log_change(request, withdrawal, f"Perguntado de novo à adquirente {owner}: {said}")
            level = messages.SUCCESS if result not in ("undetermined", "held") else messages.WARNING
            self.message_user(request, f"{withdrawal} {withdrawal.pk} ({owner}): {said}.", level)
