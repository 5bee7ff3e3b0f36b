"""Back office for account change requests (``accounts.account_changes``):
what the account page's form does with a change of the contact e-mail,
manual approval of withdrawals or the withdrawal limits (asks, or applies
at once when it only tightens them), and the queue where another staff
member approves or rejects what was asked, with the conventions of the
maker-checker queue (``money_actions``). Registered by
``accounts.admin``, which imports every module of the package."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import quote
from django.contrib.auth.models import User
from django.contrib.contenttypes.models import ContentType
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from accounts.account_changes import (
    APPROVE_PERMISSION,
    CONTROLLED_FIELDS,
    account_change_approve,
    account_change_reject,
    account_change_request,
    loosens,
)
from accounts.admin.decisions import (
    DECISION_COLUMNS,
    QUEUE_ORDERING,
    DecideButtonsMixin,
    RequestQueue,
    decide_each,
    log_on_record,
    staff_user,
)
from accounts.exceptions import ApprovalRefused
from accounts.models import Account, AccountChangeRequest
from accounts.staff_models import shown_value
from core.admin.confirmation import confirm_or_perform
from core.admin.records import ReadOnlyAdminMixin
from core.documents import bare_document

State = AccountChangeRequest.State
DECIDE_TEMPLATE = "admin/accounts/accountchangerequest/confirm_decision.html"

#: The account form's reason for a change of a controlled field (not a model field).
CHANGE_REASON = "change_reason"
CHANGE_REASON_FIELDSET = (
    "Motivo das alterações que decidem para onde o dinheiro pode ir",
    {
        "fields": (CHANGE_REASON,),
        "description": "E-mail de contato, aprovação manual e limites de saque: uma alteração que os afrouxa "
        "vira um pedido que outra pessoa da equipe aprova; uma que só os torna mais restritos vale já. "
        "Em ambos os casos o motivo é obrigatório e fica no histórico.",
    },
)


def change_reason_field() -> forms.CharField:
    return forms.CharField(
        label="Motivo",
        max_length=500,
        required=False,
        widget=forms.Textarea(attrs={"rows": 2, "cols": 80}),
        help_text="Obrigatório ao alterar o e-mail de contato, a aprovação manual ou os limites de saque.",
    )


def controlled_changes(form: forms.ModelForm[Account]) -> list[tuple[str, Any, Any]]:
    """``(field, old, new)`` of every controlled field the form changes (an existing account only)."""
    if form.instance._state.adding:
        return []
    changed = []
    for field in CONTROLLED_FIELDS:
        if field in form.changed_data and field in form.cleaned_data:
            old = form.initial.get(field)
            if field == "document":  # shown formatted, compared as stored
                old = bare_document(str(old or ""))
            new = form.cleaned_data[field]
            if old != new:
                changed.append((field, old, new))
    return changed


def clean_controlled_changes(form: forms.ModelForm[Account]) -> None:
    """The form's checks: a reason for any controlled change, and no second
    request for a field that already has one waiting."""
    changes = controlled_changes(form)
    if changes and not (form.cleaned_data.get(CHANGE_REASON) or "").strip():
        form.add_error(
            CHANGE_REASON, "Informe o motivo da alteração do e-mail de contato, da aprovação ou dos limites."
        )
    waiting = dict(
        AccountChangeRequest.objects.filter(account_id=form.instance.pk, state=State.PENDING).values_list("field", "pk")
    )
    for field, old, new in changes:
        if loosens(field, old, new) and field in waiting:
            form.add_error(field, f"Já existe um pedido de alteração (#{waiting[field]}) aguardando aprovação.")


def _label(field: str) -> str:
    return str(AccountChangeRequest.Field(field).label)


def save_controlled_changes(modeladmin: Any, request: HttpRequest, account: Account, form: Any) -> set[str]:
    """Called by the account page's save, in its transaction: each change of
    a controlled field is judged against the field's value under the
    account's row lock (not the one the form was built with): one that
    loosens it becomes a pending request, one that only tightens it is
    logged and left to the page's save. Returns the controlled fields that
    save must not write (all but the tightened ones); the ones asked for are
    kept on the form as ``requested`` for the page's change message."""
    reason = (form.cleaned_data.get(CHANGE_REASON) or "").strip()
    current = Account.objects.select_for_update().values(*CONTROLLED_FIELDS).get(pk=account.pk)
    untouched = set(CONTROLLED_FIELDS)
    form.requested = set()
    for field, _, new in controlled_changes(form):
        old = current[field]
        # The form's instance keeps the value the account has, unless tightened below.
        setattr(account, field, old)
        if old == new:
            continue
        change = f"{_label(field)}: {shown_value(field, old)} → {shown_value(field, new)}"
        if not loosens(field, old, new):
            setattr(account, field, new)
            untouched.discard(field)
            modeladmin.log_change(
                request, account, f"Alteração mais restritiva aplicada já ({change}). Motivo: {reason}"
            )
            continue
        form.requested.add(field)
        try:
            pending = account_change_request(
                account=account, field=field, new_value=new, requested_by=staff_user(request), reason=reason
            )
        except ApprovalRefused as exc:
            modeladmin.message_user(request, exc.message, messages.ERROR)
            continue
        report_requested(modeladmin, request, account, pending)
    return untouched


def report_requested(modeladmin: Any, request: HttpRequest, account: Account, pending: AccountChangeRequest) -> None:
    """A change only asked for: logged on the account and the request, and staff told nothing changed yet."""
    change = f"{pending.get_field_display()}: {pending.shown(pending.old_value)} → {pending.shown(pending.new_value)}"
    modeladmin.log_change(
        request,
        account,
        f"Pedido de alteração #{pending.pk} ({change}), aguardando aprovação. Motivo: {pending.reason}",
    )
    modeladmin.log_addition(request, pending, f"Pedido: {change}. Motivo: {pending.reason}")
    modeladmin.message_user(
        request,
        f"{change}: nada mudou ainda. O pedido #{pending.pk} aguarda a aprovação de outra pessoa da equipe "
        "(Contas: Pedidos de alteração de conta).",
        messages.WARNING,
    )


@admin.display(description="alterações aguardando aprovação")
def pending_changes(modeladmin: Any, account: Account) -> str:
    waiting = AccountChangeRequest.objects.filter(account=account, state=State.PENDING).order_by("requested_at")
    rows = [
        (
            reverse("admin:accounts_accountchangerequest_change", args=[quote(pending.pk)]),
            f"#{pending.pk} {pending.get_field_display()}: {pending.shown(pending.old_value)} → "
            f"{pending.shown(pending.new_value)}",
        )
        for pending in waiting
    ]
    if not rows:
        return "Nenhuma"
    return format_html(
        '<ul class="account-changes" style="margin: 0; padding: 0">{}</ul>',
        format_html_join("", '<li style="list-style: none"><a href="{}">{}</a></li>', rows),
    )


# --------------------------------------------------------------------------- the queue


def _log_on_account(request: HttpRequest, pending: AccountChangeRequest, message: str) -> None:
    """The decision also goes to the account's own history."""
    content_type = ContentType.objects.get_for_model(Account)
    log_on_record(request, content_type, str(pending.account_id), str(pending.account), message)


QUEUE = RequestQueue(
    label="Pedido de alteração",
    not_done="não aplicado",
    approved=("{n} pedido aprovado e aplicado.", "{n} pedidos aprovados e aplicados."),
    describe=lambda decided: (
        f"({decided.get_field_display()}: {decided.shown(decided.old_value)} → {decided.shown(decided.new_value)})"
    ),
    log_on_target=_log_on_account,
)


def _decision_action(
    name: str, description: str, effect: str, decide: Callable[[Any, User, str], AccountChangeRequest], verb: str
) -> Callable[[Any, HttpRequest, QuerySet[AccountChangeRequest]], HttpResponse | None]:
    def action(modeladmin: Any, request: HttpRequest, queryset: QuerySet[AccountChangeRequest]) -> HttpResponse | None:
        waiting = list(queryset.filter(state=State.PENDING).select_related("account", "requested_by").order_by("pk"))
        if not waiting:
            modeladmin.message_user(
                request, f"{description}: nenhum pedido selecionado aguarda decisão.", messages.WARNING
            )
            return None
        return confirm_or_perform(
            modeladmin,
            request,
            queryset,
            name=name,
            description=description,
            template=DECIDE_TEMPLATE,
            perform=lambda note: decide_each(
                modeladmin, request, queryset, note, decide=decide, verb=verb, queue=QUEUE
            ),
            page=lambda: {
                "effect": effect,
                "rows": [
                    (
                        pending,
                        pending.shown(pending.old_value),
                        pending.shown(pending.new_value),
                        pending.shown(getattr(pending.account, pending.field)),
                    )
                    for pending in waiting
                ],
            },
        )

    action.__name__ = name
    return admin.action(description=description, permissions=["decide"])(action)


@admin.register(AccountChangeRequest)
class AccountChangeRequestAdmin(DecideButtonsMixin, ReadOnlyAdminMixin, admin.ModelAdmin[AccountChangeRequest]):
    """The queue of account changes waiting for a second staff member."""

    decide_buttons: ClassVar[list[tuple[str, str]]] = [
        ("approve_changes", "Aprovar e aplicar"),
        ("reject_changes", "Rejeitar"),
    ]

    list_display = ("id", "account", "field", "old_display", "new_display", *DECISION_COLUMNS)
    list_filter = ("state", "field")
    ordering = QUEUE_ORDERING
    list_select_related = ("account", "requested_by", "decided_by")
    search_fields = ("account__name", "=account__document")
    fields = ("account", "field", "old_display", "new_display", *DECISION_COLUMNS, "decision_note", "outcome")
    readonly_fields = fields
    actions = (
        _decision_action(
            "approve_changes",
            "Aprovar e aplicar os pedidos selecionados",
            "Ao aprovar, o campo da conta passa ao valor pedido agora, se ainda tiver o valor que o pedido viu. "
            "Só outra pessoa, que não fez o pedido, pode aprová-lo. Confira o pedido com a conta (por um canal "
            "já conhecido) antes: o e-mail de contato recebe os links das credenciais",
            lambda pk, staff, note: account_change_approve(request_id=pk, approver=staff, note=note),
            "Aprovado",
        ),
        _decision_action(
            "reject_changes",
            "Rejeitar os pedidos selecionados",
            "Ao rejeitar, a conta fica como está",
            lambda pk, staff, note: account_change_reject(request_id=pk, staff=staff, note=note),
            "Rejeitado",
        ),
    )

    def has_decide_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(APPROVE_PERMISSION)

    @admin.display(description="valor atual no pedido")
    def old_display(self, pending: AccountChangeRequest) -> str:
        return pending.shown(pending.old_value)

    @admin.display(description="valor pedido")
    def new_display(self, pending: AccountChangeRequest) -> str:
        return pending.shown(pending.new_value)
