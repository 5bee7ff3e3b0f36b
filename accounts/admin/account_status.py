"""The account's status changes in the back office (approve, reject, block,
unblock): from the list for the selected accounts or from the account's
page, always through a confirmation page with a required reason, which the
admin log keeps. The change itself is made by ``accounts.services``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.contrib import messages
from django.contrib.admin import helpers
from django.contrib.admin.utils import quote, unquote
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.cache import add_never_cache_headers

from accounts.exceptions import InvalidTransition
from accounts.models import Account
from accounts.services import account_approve, account_reject, account_set_blocked
from core.admin.confirmation import CONFIRMED, ReasonForm, reason_form
from core.documents import format_document


@dataclass(frozen=True)
class AccountTransition:
    """One status change staff make on accounts, always with a reason, from
    the list (selected accounts) or the account's page (that account)."""

    name: str
    #: The button and the action: "Bloquear".
    verb: str
    #: Past participle, feminine (a conta): "bloqueada".
    done: str
    #: What changes for the merchant, shown on the confirmation page.
    effect: str
    apply: Callable[[Account], bool]
    #: Whether the account's page offers it for this account.
    offered: Callable[[Account], bool]


TRANSITIONS = {
    transition.name: transition
    for transition in (
        AccountTransition(
            name="approve",
            verb="Aprovar",
            done="aprovada",
            effect="A conta passa a operar: cobranças e saques pela API (se não estiver bloqueada).",
            apply=lambda account: account_approve(account=account),
            offered=lambda account: account.status != Account.Status.APPROVED,
        ),
        AccountTransition(
            name="reject",
            verb="Rejeitar",
            done="rejeitada",
            effect="A conta deixa de operar; o saldo e o histórico ficam guardados.",
            apply=lambda account: account_reject(account=account),
            offered=lambda account: account.status != Account.Status.REJECTED,
        ),
        AccountTransition(
            name="block",
            verb="Bloquear",
            done="bloqueada",
            effect="A conta deixa de operar pela API e os saques dela ficam retidos até o desbloqueio; "
            "o saldo e o histórico ficam guardados.",
            apply=lambda account: account_set_blocked(account=account, blocked=True),
            offered=lambda account: not account.is_blocked,
        ),
        AccountTransition(
            name="unblock",
            verb="Desbloquear",
            done="desbloqueada",
            effect="A conta volta a operar (se estiver aprovada) e os saques retidos seguem.",
            apply=lambda account: account_set_blocked(account=account, blocked=False),
            offered=lambda account: account.is_blocked,
        ),
    )
}
TRANSITION_TEMPLATE = "admin/accounts/account/confirm_transition.html"


def _count(count: int, singular: str, plural: str) -> str:
    return f"{count} {singular if count == 1 else plural}"


def perform(modeladmin: Any, request: HttpRequest, pks: list[Any], transition: AccountTransition, reason: str) -> None:
    changed: list[str] = []
    unchanged: list[str] = []
    for pk in sorted(pks):
        try:
            with transaction.atomic():
                # Decide on the current row, not the one the page showed.
                locked = Account.objects.select_for_update().get(pk=pk)
                if transition.apply(locked):
                    modeladmin.log_change(request, locked, f"{transition.done.capitalize()}. Motivo: {reason}")
                    changed.append(locked.name)
                else:
                    unchanged.append(locked.name)
        except Account.DoesNotExist:
            continue
        except InvalidTransition:
            modeladmin.message_user(
                request,
                f"{locked.name}: uma conta {locked.get_status_display().lower()} não pode ser {transition.done}; "
                "nada mudou.",
                messages.ERROR,
            )
    if len(pks) == 1 and changed:
        modeladmin.message_user(request, f"A conta “{changed[0]}” foi {transition.done}.", messages.SUCCESS)
    elif changed:
        done = _count(len(changed), f"conta {transition.done}", f"contas {transition.done}s")
        modeladmin.message_user(request, f"{done}.", messages.SUCCESS)
    if len(pks) == 1 and unchanged:
        modeladmin.message_user(
            request, f"A conta “{unchanged[0]}” já estava {transition.done}; nada mudou.", messages.WARNING
        )
    elif unchanged:
        already = _count(len(unchanged), "conta já estava assim", "contas já estavam assim")
        modeladmin.message_user(request, f"{already}; nada mudou.", messages.WARNING)


def confirmation_page(
    modeladmin: Any,
    request: HttpRequest,
    transition: AccountTransition,
    accounts: list[Account],
    form: ReasonForm,
    *,
    from_list: bool,
) -> HttpResponse:
    title = f"{transition.verb} {'conta' if len(accounts) == 1 else 'contas'}: confirmar"
    cancel_url = (
        reverse("admin:accounts_account_changelist")
        if from_list
        else reverse("admin:accounts_account_change", args=[quote(accounts[0].pk)])
    )
    context = {
        **modeladmin.admin_site.each_context(request),
        "opts": modeladmin.opts,
        "title": title,
        "transition": transition,
        "accounts": [(account, format_document(account.document)) for account in accounts],
        "form": form,
        "from_list": from_list,
        "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
        "confirmed_field": CONFIRMED,
        "cancel_url": cancel_url,
        "original": accounts[0] if not from_list else None,
    }
    response = TemplateResponse(request, TRANSITION_TEMPLATE, context)
    add_never_cache_headers(response)
    return response


def list_action(
    modeladmin: Any, request: HttpRequest, queryset: QuerySet[Account], transition: AccountTransition
) -> HttpResponse | None:
    form = reason_form(request)
    if form.is_valid():
        perform(
            modeladmin, request, list(queryset.values_list("pk", flat=True)), transition, form.cleaned_data["reason"]
        )
        return None
    accounts = list(queryset.order_by("name"))
    return confirmation_page(modeladmin, request, transition, accounts, form, from_list=True)


def transition_view(modeladmin: Any, request: HttpRequest, object_id: str, name: str) -> HttpResponse:
    """The account page's approve/reject/block/unblock: a confirmation
    page asking for the reason, then the service, then back to the page."""
    if not modeladmin.has_approve_permission(request):
        raise PermissionDenied
    account = modeladmin.get_object(request, unquote(object_id))
    if account is None:
        modeladmin.message_user(request, "Conta não encontrada.", messages.WARNING)
        return redirect("admin:accounts_account_changelist")
    transition = TRANSITIONS[name]
    form = ReasonForm(request.POST if request.method == "POST" else None)
    if form.is_valid():
        perform(modeladmin, request, [account.pk], transition, form.cleaned_data["reason"])
        return redirect("admin:accounts_account_change", quote(account.pk))
    return confirmation_page(modeladmin, request, transition, [account], form, from_list=False)
