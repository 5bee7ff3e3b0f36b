"""Back office for reconciliation with acquirers: the report per day and
acquirer (runs, CSV export), the mismatches with what each side says, and
their resolution: an acknowledgement with a reason (no money moves, an
audit entry), or, where money must move, a maker-checker request that a
second staff member approves (``accounts.approvals``)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from django.contrib import admin, messages
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.urls import NoReverseMatch, reverse
from django.utils import timezone
from django.utils.html import format_html

from accounts.admin.decisions import staff_user
from accounts.exceptions import ActionNotExecutable, ApprovalRefused
from accounts.services import money_action_request
from acquirers.admin import acquirer_page_action
from core.admin.confirmation import confirmation_page, reason_form
from core.admin.lists import (
    CsvExportMixin,
    DetailActionsMixin,
    csv_choice,
    csv_datetime,
    csv_field,
    csv_money,
)
from core.admin.money import money
from core.admin.records import ActionsOnlyAdminMixin
from core.money import brl
from core.plural import plural
from reconciliation.items import REDEBIT_KINDS, REDEBITS, reconciliation_items_follow_approvals
from reconciliation.models import ReconciliationItem, ReconciliationRun
from reconciliation.run import directions_of, yesterday
from reconciliation.tasks import reconcile_acquirer_day

CONFIRM_TEMPLATE = "admin/reconciliation/reconciliationitem/confirm_resolve.html"
Item = ReconciliationItem
OPEN = (Item.Status.OPEN,)


# --------------------------------------------------------------------------- on demand, from the acquirers' list


def _may_reconcile(request: HttpRequest) -> bool:
    return request.user.has_perm("reconciliation.resolve_reconciliationitem")


@admin.action(description="Conciliar o dia de ontem com a adquirente", permissions=["reconcile"])
def reconcile_yesterday(modeladmin: Any, request: HttpRequest, queryset: QuerySet[Any]) -> None:
    """What beat does daily, now: one task per selected acquirer that lists."""
    day = yesterday().isoformat()
    queued = 0
    for acquirer in queryset.order_by("key"):
        if not directions_of(acquirer):
            modeladmin.message_user(
                request, f"{acquirer.key}: o adaptador não lista Pix recebidos nem enviados.", messages.WARNING
            )
            continue
        transaction.on_commit(partial(reconcile_acquirer_day.delay, acquirer.pk, day))
        queued += 1
    if queued:
        modeladmin.message_user(
            request,
            f"Conciliação de {day} enfileirada para "
            + plural(queued, "{n} adquirente", "{n} adquirentes")
            + ": veja o resultado em Conciliações com adquirentes.",
            messages.SUCCESS,
        )


acquirer_page_action(reconcile_yesterday, permission="reconcile", allowed=_may_reconcile)


# --------------------------------------------------------------------------- the report


@admin.register(ReconciliationRun)
class ReconciliationRunAdmin(CsvExportMixin, admin.ModelAdmin[ReconciliationRun]):
    """One line per acquirer and day: counts and sums matched and not."""

    change_list_template = "admin/money_records/change_list.html"
    matched_brl = money("matched_amount", "valor conferido")
    unmatched_brl = money("unmatched_amount", "valor divergente")
    list_display = (
        "day",
        "acquirer",
        "status",
        "matched_count",
        "matched_brl",
        "unmatched_count",
        "unmatched_brl",
        "healed_count",
        "items_link",
        "finished_at",
    )
    list_filter = ("acquirer", "status")
    date_hierarchy = "day"
    list_select_related = ("acquirer",)
    readonly_fields = (
        "acquirer",
        "day",
        "window_start",
        "window_end",
        "status",
        "started_at",
        "finished_at",
        "executions",
        "matched_count",
        "matched_brl",
        "unmatched_count",
        "unmatched_brl",
        "healed_count",
        "error",
        "items_link",
    )
    fields = readonly_fields
    csv_filename = "conciliacoes"
    csv_columns = (
        csv_field("day", "Dia"),
        csv_field("acquirer", "Adquirente"),
        csv_choice("status", "Situação"),
        csv_field("matched_count", "Conferidos"),
        *csv_money("matched_amount", "Valor conferido"),
        csv_field("unmatched_count", "Divergentes"),
        *csv_money("unmatched_amount", "Valor divergente"),
        csv_field("healed_count", "Corrigidos"),
        csv_datetime("finished_at", "Terminada em"),
        csv_field("error", "Erro"),
    )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="divergências")
    def items_link(self, run: ReconciliationRun) -> str:
        url = reverse("admin:reconciliation_reconciliationitem_changelist")
        return format_html('<a href="{}?acquirer__id__exact={}">Ver divergências</a>', url, run.acquirer_id)


# --------------------------------------------------------------------------- the mismatches


def _confirm_items(
    perform: Callable[[Any, HttpRequest, QuerySet[Any], str], None],
    *,
    name: str,
    description: str,
    permission: str,
    effect: str,
    kinds: tuple[str, ...] | None = None,
    note: str = "",
) -> Callable[[Any, HttpRequest, QuerySet[Any]], HttpResponse | None]:
    """An action on open items that first lists them with both sides'
    amounts and asks for a reason; only the page's own submit acts."""

    def eligible(queryset: QuerySet[Any]) -> QuerySet[Any]:
        queryset = queryset.filter(status__in=OPEN)
        return queryset.filter(kind__in=kinds) if kinds is not None else queryset

    def action(modeladmin: Any, request: HttpRequest, queryset: QuerySet[Any]) -> HttpResponse | None:
        records = list(eligible(queryset).select_related("acquirer").order_by("pk"))
        if not records:
            modeladmin.message_user(
                request, f"{description}: nenhuma divergência selecionada permite esta ação.", messages.WARNING
            )
            return None
        form = reason_form(request)
        if form.is_valid():
            perform(modeladmin, request, eligible(queryset), form.cleaned_data["reason"])
            return None
        return confirmation_page(
            modeladmin,
            request,
            queryset,
            name=name,
            description=description,
            template=CONFIRM_TEMPLATE,
            form=form,
            effect=effect,
            note=note,
            rows=[(r, _amount(r.ours_amount), _amount(r.theirs_amount)) for r in records],
            skipped=queryset.count() - len(records),
        )

    action.__name__ = name
    return admin.action(description=description, permissions=[permission])(action)


def _amount(value: int | None) -> str:
    return "—" if value is None else brl(value)


def _acknowledge(modeladmin: Any, request: HttpRequest, queryset: QuerySet[Any], reason: str) -> None:
    done = 0
    for item in queryset.order_by("pk"):
        with transaction.atomic():
            # Judged again under the lock: another staff member may have resolved it meanwhile.
            changed = Item.objects.filter(pk=item.pk, status__in=OPEN).update(
                status=Item.Status.RESOLVED,
                resolution=Item.Resolution.ACKNOWLEDGED,
                reason=reason,
                resolved_by=staff_user(request),
                resolved_at=timezone.now(),
            )
            if changed:
                modeladmin.log_change(request, item, f"Resolvida (ciente, sem movimentação). Motivo: {reason}")
                done += changed
    modeladmin.message_user(
        request,
        plural(done, "{n} divergência resolvida.", "{n} divergências resolvidas.") + " Nenhum saldo foi movimentado.",
        messages.SUCCESS,
    )


def _request_redebit(modeladmin: Any, request: HttpRequest, queryset: QuerySet[Any], reason: str) -> None:
    for item in queryset.order_by("pk"):
        redebit = REDEBITS[item.kind]
        if item.theirs_status != redebit.confirmed:
            # Still in flight there (it may yet fail, and a re-debit would then
            # take money for nothing), or not all of it returned.
            modeladmin.message_user(
                request,
                f"{item.key}: {redebit.unconfirmed} (diz: {item.theirs_status}); aguarde a próxima conciliação.",
                messages.ERROR,
            )
            continue
        try:
            with transaction.atomic():
                pending = money_action_request(
                    action=redebit.action,
                    target_id=item.pk if redebit.names_item else item.target_id,
                    requested_by=staff_user(request),
                    reason=reason,
                )
                claimed = Item.objects.filter(pk=item.pk, status__in=OPEN).update(
                    status=Item.Status.AWAITING_APPROVAL,
                    resolution=Item.Resolution.MONEY_ACTION,
                    reason=reason,
                    resolved_by=staff_user(request),
                    resolved_at=timezone.now(),
                    approval_request=pending,
                )
                if not claimed:  # resolved by someone else meanwhile: no request either
                    raise ActionNotExecutable("A divergência já não está aberta.")
                modeladmin.log_change(request, item, f"Pedido: {redebit.label} (#{pending.pk}). Motivo: {reason}")
                modeladmin.log_addition(request, pending, f"Pedido: {redebit.label}. Motivo: {reason}")
        except (ApprovalRefused, ActionNotExecutable) as exc:
            modeladmin.message_user(request, f"{item.key}: {exc.message}", messages.ERROR)
            continue
        modeladmin.message_user(
            request,
            f"{item.key}: pedido #{pending.pk} de {redebit.label} criado. Nada foi debitado: outro membro da "
            "equipe precisa aprovar em Pedidos de aprovação (Contas).",
            messages.SUCCESS,
        )


acknowledge = _confirm_items(
    _acknowledge,
    name="acknowledge",
    description="Resolver (ciente, sem movimentação)",
    permission="resolve",
    effect="As divergências passam a resolvidas com o motivo informado; nenhum saldo é movimentado",
)
request_redebit = _confirm_items(
    _request_redebit,
    name="request_redebit",
    description="Pedir redébito (aprovação)",
    permission="resolve",
    effect=(
        "Saque que falhou aqui (o débito voltou ao saldo) mas que a adquirente enviou: pede-se debitar de novo "
        "o débito total do saque. Estorno que a adquirente fez depois da contestação (MED) já ter devolvido o "
        "valor ao pagador: pede-se debitar o que o pagador recebeu a mais que o Pix, em proporção do valor "
        "líquido (o valor líquido inteiro quando recebeu o Pix duas vezes), e a cobrança passa a estornada"
    ),
    kinds=REDEBIT_KINDS,
    note="Nada é debitado agora: outra pessoa, que não fez o pedido, precisa aprovar.",
)


@admin.register(ReconciliationItem)
class ReconciliationItemAdmin(DetailActionsMixin, CsvExportMixin, ActionsOnlyAdminMixin, admin.ModelAdmin[Item]):
    """What reconciliation found, each side's word, and how it was resolved."""

    change_list_template = "admin/money_records/change_list.html"
    ours_brl = money("ours_amount", "valor aqui")
    theirs_brl = money("theirs_amount", "valor na adquirente")
    returned_by_med_brl = money("returned_by_med", "devolvido pelo MED")
    returned_by_refund_brl = money("returned_by_refund", "devolvido por estorno")
    list_display = (
        "created_at",
        "acquirer",
        "kind",
        "status",
        "key",
        "ours_status",
        "ours_brl",
        "theirs_status",
        "theirs_brl",
    )
    list_filter = ("acquirer", "kind", "status", "direction")
    list_select_related = ("acquirer",)
    search_fields = ("=key", "=reference", "=e2e_id", "=target_id")
    fieldsets = (
        (None, {"fields": ("acquirer", "kind", "direction", "status", "detail", "run", "created_at", "last_seen_at")}),
        ("Aqui", {"fields": ("target_link", "reference", "ours_status", "ours_brl")}),
        (
            "Na adquirente",
            {
                "fields": (
                    "e2e_id",
                    "theirs_status",
                    "theirs_brl",
                    "returned_by_med_brl",
                    "returned_by_refund_brl",
                    "theirs_raw",
                )
            },
        ),
        ("Resolução", {"fields": ("resolution", "reason", "resolved_by", "resolved_at", "approval_link")}),
    )
    actions = (acknowledge, request_redebit)
    detail_actions = {"acknowledge": OPEN, "request_redebit": OPEN}
    csv_filename = "divergencias-conciliacao"
    csv_columns = (
        csv_datetime("created_at", "Encontrada em"),
        csv_field("acquirer", "Adquirente"),
        csv_choice("kind", "Tipo"),
        csv_choice("status", "Situação"),
        csv_field("key", "Chave"),
        csv_field("target_id", "Registro"),
        csv_field("ours_status", "Situação aqui"),
        *csv_money("ours_amount", "Valor aqui"),
        csv_field("theirs_status", "Situação na adquirente"),
        *csv_money("theirs_amount", "Valor na adquirente"),
        csv_field("reason", "Motivo"),
    )

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return [
            *super().get_readonly_fields(request, obj),
            "target_link",
            "ours_brl",
            "theirs_brl",
            "returned_by_med_brl",
            "returned_by_refund_brl",
            "approval_link",
        ]

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> Any:
        # Items waiting for an approval show what the approvals queue decided meanwhile.
        reconciliation_items_follow_approvals()
        return super().changelist_view(request, extra_context)

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: dict[str, Any] | None = None
    ) -> Any:
        reconciliation_items_follow_approvals()
        return super().change_view(request, object_id, form_url, extra_context)

    def has_resolve_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("reconciliation.resolve_reconciliationitem")

    def _available_detail_actions(self, request: HttpRequest, record: Any) -> list[tuple[str, str]]:
        offered = super()._available_detail_actions(request, record)
        # The redébito only where it fits: a payout sent there that failed here, a refund made after a chargeback.
        return [(n, d) for n, d in offered if n != "request_redebit" or record.kind in REDEBIT_KINDS]

    @admin.display(description="registro aqui")
    def target_link(self, item: ReconciliationItem) -> str:
        if not item.target_type:
            return "—"
        app_label, model = item.target_type.split(".", 1)
        try:
            url = reverse(f"admin:{app_label}_{model}_change", args=[item.target_id])
        except NoReverseMatch:
            return item.target_id
        return format_html('<a href="{}">{}</a>', url, item.target_id)

    @admin.display(description="pedido de aprovação")
    def approval_link(self, item: ReconciliationItem) -> str:
        if item.approval_request_id is None:
            return "—"
        url = reverse("admin:accounts_moneyactionrequest_change", args=[item.approval_request_id])
        state = item.approval_request.get_state_display() if item.approval_request else ""
        return format_html('<a href="{}">#{}</a> ({})', url, item.approval_request_id, state)
