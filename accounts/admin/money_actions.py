"""Back office for maker-checker actions: the action that asks (on the
charge or withdrawal list) and the queue where another staff member
approves or rejects. Registered by ``accounts.admin``, which imports
every module of the package."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from django.contrib import admin, messages
from django.contrib.auth.models import User
from django.contrib.contenttypes.models import ContentType
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.urls import NoReverseMatch, reverse
from django.utils.html import format_html

from accounts.admin.decisions import (
    DECISION_COLUMNS,
    QUEUE_ORDERING,
    DecideButtonsMixin,
    RequestQueue,
    decide_each,
    log_on_record,
    staff_user,
)
from accounts.approvals import money_action
from accounts.exceptions import ActionNotExecutable, ApprovalRefused
from accounts.models import MoneyActionRequest
from accounts.services import money_action_approve, money_action_reject, money_action_request
from core.admin.confirmation import Confirmation, confirm_first
from core.admin.records import ReadOnlyAdminMixin
from core.money import brl
from core.plural import plural

State = MoneyActionRequest.State


def request_approval_action(
    *, name: str, description: str, action: str, permission: str, confirmation: Confirmation
) -> Callable[[Any, HttpRequest, QuerySet[Any]], HttpResponse | None]:
    """An admin action that, once confirmed with a reason, only asks: each
    eligible record gets a pending :class:`MoneyActionRequest`, and nothing
    is credited until another staff member approves it."""

    def perform(modeladmin: Any, request: HttpRequest, queryset: QuerySet[Any], reason: str) -> None:
        created = 0
        eligible = queryset.filter(**{f"{confirmation.status_field}__in": confirmation.from_statuses})
        for record in eligible.order_by("pk"):
            try:
                with transaction.atomic():
                    pending = money_action_request(
                        action=action, target_id=record.pk, requested_by=staff_user(request), reason=reason
                    )
                    modeladmin.log_change(
                        request, record, f"{description}: pedido #{pending.pk} aguardando aprovação. Motivo: {reason}"
                    )
                    modeladmin.log_addition(request, pending, f"Pedido: {description}. Motivo: {reason}")
            except (ApprovalRefused, ActionNotExecutable) as exc:
                modeladmin.message_user(request, f"{record.pk}: {exc.message}", messages.ERROR)
                continue
            created += 1
        if created:
            modeladmin.message_user(
                request,
                f"{description}: "
                + plural(created, "{n} pedido de aprovação criado.", "{n} pedidos de aprovação criados.")
                + f" Nada foi {'debitado' if action in DEBITING_ACTIONS else 'creditado'}: outro membro da equipe "
                "precisa aprovar em Pedidos de aprovação (Contas).",
                messages.SUCCESS,
            )
        if skipped := queryset.count() - eligible.count():
            modeladmin.message_user(
                request,
                plural(
                    skipped,
                    "{n} registro ignorado: o status atual não permite.",
                    "{n} registros ignorados: o status atual não permite.",
                ),
                messages.WARNING,
            )

    return confirm_first(perform, name=name, description=description, permission=permission, confirmation=confirmation)


def _log_on_target(request: HttpRequest, pending: MoneyActionRequest, message: str) -> None:
    """The decision also goes to the charge's or withdrawal's own history."""
    content_type = ContentType.objects.get_by_natural_key(*pending.target_type.split(".", 1))
    log_on_record(request, content_type, pending.target_id, pending.target_id, message)


QUEUE = RequestQueue(
    label="Pedido",
    not_done="não executado",
    approved=("{n} pedido aprovado e executado.", "{n} pedidos aprovados e executados."),
    describe=lambda decided: f"({decided.get_action_display()}, {brl(decided.amount)})",
    log_on_target=_log_on_target,
)


def _approve(modeladmin: Any, request: HttpRequest, queryset: QuerySet[MoneyActionRequest], note: str) -> None:
    def approve(request_id: Any, staff: User, note: str) -> MoneyActionRequest:
        return money_action_approve(request_id=request_id, approver=staff, note=note)

    decide_each(modeladmin, request, queryset, note, decide=approve, verb="Aprovado", queue=QUEUE)


def _reject(modeladmin: Any, request: HttpRequest, queryset: QuerySet[MoneyActionRequest], note: str) -> None:
    def reject(request_id: Any, staff: User, note: str) -> MoneyActionRequest:
        return money_action_reject(request_id=request_id, staff=staff, note=note)

    decide_each(modeladmin, request, queryset, note, decide=reject, verb="Rejeitado", queue=QUEUE)


def _requested_amount(pending: MoneyActionRequest) -> int:
    return pending.amount


def _signed_amount(pending: MoneyActionRequest) -> int:
    """The movement as the account sees it: the redébito of a payout is a
    debit; returning a late payment to its payer moves nothing."""
    if pending.action in NOT_MOVING_ACTIONS:
        return 0
    return -pending.amount if pending.action in DEBITING_ACTIONS else pending.amount


#: Actions whose amount leaves the account (all the others credit it).
DEBITING_ACTIONS = frozenset(
    {
        MoneyActionRequest.Action.REDEBIT_SENT_PAYOUT,
        MoneyActionRequest.Action.REDEBIT_REFUND_AFTER_CHARGEBACK,
        MoneyActionRequest.Action.REFUND_CHARGE,
    }
)
#: Actions whose amount never was the account's (a Pix returned to its payer).
NOT_MOVING_ACTIONS = frozenset({MoneyActionRequest.Action.RETURN_LATE_PAYMENT})


PENDING_ONLY = (State.PENDING,)


def _destination(pending: MoneyActionRequest) -> str:
    """Where the money goes, as the record knows it: for a refund, the payer
    the charge names (the approver checks it is not a colleague's own)."""
    try:
        describe = money_action(pending.action).destination
    except LookupError:
        describe = None
    if describe is not None:
        return describe(pending.target_id)
    if pending.action in DEBITING_ACTIONS or pending.action in NOT_MOVING_ACTIONS:
        return "—"
    return "Saldo da conta"


#: The confirmation pages' column: to whom a refund sends the merchant's money.
DESTINATION_COLUMN = ("Para onde vai o dinheiro", _destination)


@admin.register(MoneyActionRequest)
class MoneyActionRequestAdmin(DecideButtonsMixin, ReadOnlyAdminMixin, admin.ModelAdmin[MoneyActionRequest]):
    """The queue of money actions waiting for a second staff member."""

    decide_buttons: ClassVar[list[tuple[str, str]]] = [
        ("approve_requests", "Aprovar e executar"),
        ("reject_requests", "Rejeitar"),
    ]

    list_display = ("id", "action", "account", "amount_display", "target_link", *DECISION_COLUMNS)
    list_filter = ("state", "action")
    ordering = QUEUE_ORDERING
    list_select_related = ("account", "requested_by", "decided_by")
    search_fields = ("=target_id", "account__name")
    fields = (
        "action",
        "account",
        "amount_display",
        "destination_display",
        "target_link",
        *DECISION_COLUMNS,
        "decision_note",
        "outcome",
    )
    readonly_fields = fields
    actions = (
        confirm_first(
            _approve,
            name="approve_requests",
            description="Aprovar e executar os pedidos selecionados",
            permission="decide",
            confirmation=Confirmation(
                effect=(
                    "Ao aprovar, o valor é creditado na conta agora (debitado, se negativo), pelo serviço de transições"
                ),
                column="Movimento na conta",
                amount=_signed_amount,
                from_statuses=PENDING_ONLY,
                status_field="state",
                note="Só outra pessoa, que não fez o pedido, pode aprová-lo. Num estorno, confira para quem o "
                "dinheiro vai.",
                columns=(DESTINATION_COLUMN,),
            ),
        ),
        confirm_first(
            _reject,
            name="reject_requests",
            description="Rejeitar os pedidos selecionados",
            permission="decide",
            confirmation=Confirmation(
                effect="Ao rejeitar, nada é creditado nem debitado",
                column="Valor pedido",
                amount=_requested_amount,
                from_statuses=PENDING_ONLY,
                status_field="state",
                columns=(DESTINATION_COLUMN,),
            ),
        ),
    )

    def has_decide_permission(self, request: HttpRequest) -> bool:
        return any(
            request.user.has_perm(permission)
            for permission in (
                "accounts.approve_chargeback_resolution",
                "accounts.approve_withdrawal_return",
                "accounts.approve_undetermined_payout_failure",
                "accounts.approve_sent_payout_redebit",
                "accounts.approve_late_payment_resolution",
                "accounts.approve_refund_after_chargeback_redebit",
                "accounts.approve_charge_refund",
            )
        )

    @admin.display(description="valor", ordering="amount")
    def amount_display(self, pending: MoneyActionRequest) -> str:
        return brl(_signed_amount(pending))

    @admin.display(description="para onde vai o dinheiro")
    def destination_display(self, pending: MoneyActionRequest) -> str:
        return _destination(pending)

    @admin.display(description="registro")
    def target_link(self, pending: MoneyActionRequest) -> str:
        app_label, model = pending.target_type.split(".", 1)
        try:
            url = reverse(f"admin:{app_label}_{model}_change", args=[pending.target_id])
        except NoReverseMatch:
            return pending.target_id
        return format_html('<a href="{}">{}</a>', url, pending.target_id)


__all__ = ["MoneyActionRequestAdmin", "request_approval_action"]
