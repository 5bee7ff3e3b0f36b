"""Back office for accounts, balances and the ledger (API credentials:
``accounts.admin_credentials``; the maker-checker queue:
``accounts.approvals_admin``; both registered from here).

The admin collects input, checks the staff permission and reports; every
status change and every credential goes through ``accounts.services``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.utils import quote, unquote
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import CheckConstraint, Q, QuerySet, TextField
from django.db.models.functions import Cast
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import NoReverseMatch, URLPattern, path, reverse
from django.utils.cache import add_never_cache_headers
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

# Also registers the credentials list.
from accounts.admin_credentials import CredentialInline, can_manage_credentials, issue_credential_view

# Registers the maker-checker queue (pedidos de aprovação).
from accounts.approvals_admin import MoneyActionRequestAdmin  # noqa: F401
from accounts.exceptions import InvalidTransition
from accounts.models import Account, AccountBalance, LedgerEntry, PaymentMethod
from accounts.services import (
    account_approve,
    account_create,
    account_reject,
    account_rotate_postback_secret,
    account_set_blocked,
)
from core.admin import CONFIRMED, ReadOnlyAdminMixin, ReaisFieldsMixin, ReasonForm, reveal_later, reveal_url
from core.documents import normalize_document
from core.money import brl

if TYPE_CHECKING:
    from django.contrib.admin.options import InlineModelAdmin, _FieldsetSpec
    from django.utils.functional import _StrPromise

POSTBACK_PAGE_TEMPLATE = "admin/accounts/postback_secret.html"


def show_postback_secret_once(request: HttpRequest, account: Account, secret: str, *, title: str) -> HttpResponse:
    return reveal_later(
        request,
        template=POSTBACK_PAGE_TEMPLATE,
        context={"title": title, "account": str(account), "secret": secret},
        url_name="admin:accounts_account_reveal",
        back_url=reverse("admin:accounts_account_change", args=[quote(account.pk)]),
    )


# --------------------------------------------------------------------------- documents and search

_DOCUMENT_FORMATTING = re.compile(r"[.\-/\s]")
_ID_PREFIX = re.compile(r"^[0-9a-f-]{4,36}$")


def format_document(value: str) -> str:
    """``11222333000181`` → ``11.222.333/0001-81``; ``52998224725`` →
    ``529.982.247-25``; anything else as stored."""
    if len(value) == 14:
        return f"{value[:2]}.{value[2:5]}.{value[5:8]}/{value[8:12]}-{value[12:]}"
    if len(value) == 11 and value.isdigit():
        return f"{value[:3]}.{value[3:6]}.{value[6:9]}-{value[9:]}"
    return value


def bare_document(value: str) -> str:
    """A CPF/CNPJ as stored: no dots, dashes, slashes or spaces, upper-cased."""
    return _DOCUMENT_FORMATTING.sub("", value).upper()


# --------------------------------------------------------------------------- the account form


def _constraint_rules() -> list[tuple[str, str, int]]:
    """``(field, lookup, limit)`` of every comparison the account's check
    constraints make, when a constraint is only such comparisons joined by
    AND (all of them today): the form checks them itself, so staff see the
    error on the field instead of "Restrição … violada" on top of the page."""
    rules: list[tuple[str, str, int]] = []

    def walk(node: Any) -> bool:
        if isinstance(node, Q):
            if node.negated or (node.connector != Q.AND and len(node.children) > 1):
                return False
            return all(walk(child) for child in node.children)
        lookup, limit = node
        field, _, comparison = str(lookup).partition("__")
        if comparison not in _COMPARISONS or not isinstance(limit, int):
            return False
        rules.append((field, comparison, limit))
        return True

    for constraint in Account._meta.constraints:
        if isinstance(constraint, CheckConstraint):
            walk(constraint.condition)
    return rules


_COMPARISONS: dict[str, tuple[Callable[[int, int], bool], str]] = {
    "gte": (lambda value, limit: value >= limit, "no mínimo"),
    "gt": (lambda value, limit: value > limit, "maior que"),
    "lte": (lambda value, limit: value <= limit, "no máximo"),
    "lt": (lambda value, limit: value < limit, "menor que"),
}
_UNITS = {"cashin_fee_bps": " bps", "withdrawal_fee_bps": " bps", "charge_expiry_seconds": " segundos"}

#: Centavos fields typed in reais on the account page and shown as R$ 1.234,56.
ACCOUNT_REAIS_FIELDS = (
    "cashin_fee_fixed",
    "withdrawal_fee_fixed",
    "withdrawal_minimum",
    "withdrawal_per_request_limit",
    "withdrawal_daily_limit",
)


def _shown_limit(field: str, limit: int) -> str:
    if field in ACCOUNT_REAIS_FIELDS:
        return brl(limit)
    return f"{limit:,}".replace(",", ".") + _UNITS.get(field, "")


class AccountAdminForm(forms.ModelForm[Account]):
    # The model stores a list of codes; checkboxes beat a comma-separated text box.
    payment_methods = forms.MultipleChoiceField(
        label="Métodos de pagamento",
        choices=PaymentMethod.choices,
        widget=forms.CheckboxSelectMultiple,
        required=False,
    )

    # Room for the punctuation staff type or paste; stored bare (14 characters at most).
    document = forms.CharField(
        label="CPF/CNPJ", max_length=20, required=False, help_text="Com ou sem pontuação: 11.222.333/0001-81."
    )

    class Meta:
        model = Account
        fields = "__all__"  # noqa: DJ007 - the admin's fieldsets pick the fields shown

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.document:
            # Shown as staff read it; an untouched value does not count as changed.
            self.initial["document"] = format_document(self.instance.document)

    def clean_document(self) -> str:
        document = bare_document(self.cleaned_data.get("document") or "")
        # Accounts stored before the check keep their document when it is not touched.
        if document and "document" in self.changed_data and normalize_document(document) is None:
            raise forms.ValidationError("CPF ou CNPJ inválido: confira os dígitos.", code="invalid_document")
        return document

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        for field, comparison, limit in _constraint_rules():
            value = cleaned.get(field)
            if field not in self.fields or not isinstance(value, int) or field in self.errors:
                continue
            holds, words = _COMPARISONS[comparison]
            if not holds(value, limit):
                self.add_error(field, f"Deve ser {words} {_shown_limit(field, limit)}.")
        return cleaned


IDENTITY = ("Identificação", {"fields": ("name", "document", "email", "status", "is_blocked")})
ADD_IDENTITY = ("Identificação", {"fields": ("name", "document", "email", "status")})
SUMMARY = ("Resumo", {"fields": ("balance_summary", "related_records")})
CONFIGURATION: _FieldsetSpec = (
    ("Métodos de pagamento e recursos", {"fields": ("payment_methods", "can_select_pix_cash_in_acquirer")}),
    ("Taxa de cash-in", {"fields": ("cashin_fee_fixed", "cashin_fee_bps")}),
    ("Taxa de saque", {"fields": ("withdrawal_fee_fixed", "withdrawal_fee_bps")}),
    (
        "Limites e aprovação de saques",
        {
            "fields": (
                "withdrawal_minimum",
                "withdrawal_per_request_limit",
                "withdrawal_daily_limit",
                "withdrawals_need_approval",
            )
        },
    ),
    ("Cobranças", {"fields": ("charge_expiry_seconds",)}),
)

#: The lists one click away from the account page: (URL name, label, related
#: name for the count). The lists belong to apps above accounts: named by URL,
#: never imported; each filters by ``?account__id__exact=<id>``.
RELATED_LISTS = (
    ("admin:payments_charge_changelist", "Cobranças", "charges"),
    ("admin:withdrawals_withdrawal_changelist", "Saques", "withdrawals"),
    ("admin:accounts_ledgerentry_changelist", "Lançamentos (extrato)", "ledger_entries"),
    ("admin:webhooks_webhookendpoint_changelist", "Endpoints de webhook", "webhook_endpoints"),
    ("admin:webhooks_webhookevent_changelist", "Eventos de webhook", "webhook_events"),
    ("admin:accounts_apicredential_changelist", "Credenciais de API", "credentials"),
    ("admin:accounts_moneyactionrequest_changelist", "Pedidos de aprovação", "money_action_requests"),
)


# --------------------------------------------------------------------------- approve, reject, block, unblock


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


#: Django's pt-BR admin messages say "O conta … foi alterado"; a conta is feminine.
_FEMININE = (
    ("O conta ", "A conta "),
    (" foi adicionado ", " foi adicionada "),
    (" foi alterado ", " foi alterada "),
    ("alterá-lo", "alterá-la"),
    ("adicionar outro ", "adicionar outra "),
)


def _count(count: int, singular: str, plural: str) -> str:
    return f"{count} {singular if count == 1 else plural}"


@admin.register(Account)
class AccountAdmin(ReaisFieldsMixin, admin.ModelAdmin[Account]):
    form = AccountAdminForm
    reais_fields = ACCOUNT_REAIS_FIELDS
    list_display = ("name", "document_display", "email", "status", "is_blocked", "balance_available", "created_at")
    list_filter = ("status", "is_blocked")
    search_fields = ("name", "email", "document")
    search_help_text = "Nome, CPF/CNPJ (com ou sem pontuação), e-mail ou o começo do ID."
    list_select_related = ("balance",)
    actions = ("approve", "reject", "block", "unblock", "rotate_postback_secret")
    # Never rendered, whatever the fieldsets become.
    exclude = ("postback_secret", "previous_postback_secret", "previous_postback_secret_expires_at")
    #: Apps above accounts add theirs with :func:`account_page_inline`.
    inlines: ClassVar[tuple[type[InlineModelAdmin[Any, Any]], ...]] = (CredentialInline,)

    # ----------------------------------------------------------------- permissions

    def has_approve_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("accounts.approve_account")

    def has_manage_credentials_permission(self, request: HttpRequest) -> bool:
        return can_manage_credentials(request)

    def has_delete_permission(self, request: HttpRequest, obj: Account | None = None) -> bool:
        # Accounts carry money history: they are rejected or blocked, never deleted.
        return False

    # ----------------------------------------------------------------- list

    @admin.display(description="CPF/CNPJ", ordering="document")
    def document_display(self, account: Account) -> str:
        return format_document(account.document) or "—"

    @admin.display(description="saldo disponível", ordering="balance__available")
    def balance_available(self, account: Account) -> str:
        try:
            available = account.balance.available
        except AccountBalance.DoesNotExist:
            # Accounts made outside account_create get their row on first posting.
            available = 0
        return brl(available)

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Account], search_term: str
    ) -> tuple[QuerySet[Account], bool]:
        results, may_have_duplicates = super().get_search_results(request, queryset, search_term)
        term = search_term.strip()
        document = bare_document(term)
        if len(document) >= 3 and document.isalnum() and document != term.upper():
            # A formatted CPF/CNPJ (11.222.333/0001-81) or a piece of one.
            results |= queryset.filter(document__icontains=document)
        if _ID_PREFIX.match(term.lower()):
            ids = Account.objects.annotate(id_text=Cast("id", TextField())).filter(id_text__startswith=term.lower())
            results |= queryset.filter(pk__in=ids.values("pk"))
        return results, may_have_duplicates

    # ----------------------------------------------------------------- the account's page

    @admin.display(description="saldo disponível")
    def balance_summary(self, account: Account) -> str:
        return self.balance_available(account)

    @admin.display(description="registros da conta")
    def related_records(self, account: Account) -> str:
        items = []
        for url_name, label, related_name in RELATED_LISTS:
            try:
                url = reverse(url_name)
            except NoReverseMatch:
                continue
            related = getattr(account, related_name, None)
            count = f" ({related.count()})" if related is not None else ""
            items.append((f"{url}?account__id__exact={account.pk}", label, count))
        return format_html(
            '<ul class="account-records" style="margin: 0; padding: 0">{}</ul>',
            format_html_join("", '<li style="list-style: none"><a href="{}">{}</a>{}</li>', items),
        )

    def get_fieldsets(self, request: HttpRequest, obj: Account | None = None) -> _FieldsetSpec:
        # The postback secret is never on this page: it is shown once, when
        # the account is created or the secret rotated (support never sees it).
        if obj is None:
            return (ADD_IDENTITY, *CONFIGURATION)
        return (SUMMARY, IDENTITY, *CONFIGURATION)

    def get_readonly_fields(self, request: HttpRequest, obj: Account | None = None) -> tuple[str, ...]:
        if obj is None:
            return () if self.has_approve_permission(request) else ("status",)
        # After creation the status moves only through the approve/reject actions.
        return ("balance_summary", "related_records", "is_blocked", "status")

    def get_inlines(self, request: HttpRequest, obj: Account | None) -> tuple[type[InlineModelAdmin[Any, Any]], ...]:
        if obj is None:
            return tuple(inline for inline in self.inlines if inline is not CredentialInline)
        return tuple(self.inlines)

    def save_model(self, request: HttpRequest, obj: Account, form: AccountAdminForm, change: bool) -> None:
        if change:
            # Only the fields this form edits: a full save would write back the
            # status and block flag read when the page was opened, undoing an
            # approval or a block made meanwhile.
            obj.save(update_fields=[*form.fields, "updated_at"])
            return
        # account_create gives the account its balance row. The inlines, the
        # admin log and the redirect that follow hold the form's instance, so
        # it becomes the row just created.
        created = account_create(**form.cleaned_data)
        obj.pk = created.pk
        obj.refresh_from_db()
        obj._state.adding = False

    def response_add(self, request: HttpRequest, obj: Account, post_url_continue: str | None = None) -> HttpResponse:
        # The postback secret was made with the row: shown now, once, to whoever
        # created the account, then never again.
        self.message_user(request, f"Conta {obj} cadastrada.", messages.SUCCESS)
        return show_postback_secret_once(request, obj, obj.postback_secret, title="Segredo de postback da nova conta")

    def message_user(
        self,
        request: HttpRequest,
        message: str | _StrPromise,
        level: int | str = messages.INFO,
        extra_tags: str = "",
        fail_silently: bool = False,
    ) -> None:
        # Django's pt-BR messages are masculine ("O conta … foi alterado"); a conta is feminine.
        text = str(message)
        if text.startswith("O conta "):
            for masculine, feminine in _FEMININE:
                text = text.replace(masculine, feminine)
            # Django's own message, escaped by format_html; the swaps add no markup.
            message = mark_safe(text) if isinstance(message, SafeString) else text  # noqa: S308
        super().message_user(request, message, level, extra_tags, fail_silently)

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        account = self.get_object(request, unquote(object_id))
        offered = []
        if account is not None and self.has_approve_permission(request):
            offered = [
                (transition.verb, reverse(f"admin:accounts_account_{transition.name}", args=[quote(account.pk)]))
                for transition in TRANSITIONS.values()
                if transition.offered(account)
            ]
        extra_context = {
            **(extra_context or {}),
            "can_manage_credentials": can_manage_credentials(request),
            "account_transitions": offered,
        }
        return super().change_view(request, object_id, form_url, extra_context)

    # ----------------------------------------------------------------- approve, reject, block, unblock

    def _perform(self, request: HttpRequest, pks: list[Any], transition: AccountTransition, reason: str) -> None:
        changed: list[str] = []
        unchanged: list[str] = []
        for pk in sorted(pks):
            try:
                with transaction.atomic():
                    # Decide on the current row, not the one the page showed.
                    locked = Account.objects.select_for_update().get(pk=pk)
                    if transition.apply(locked):
                        self.log_change(request, locked, f"{transition.done.capitalize()}. Motivo: {reason}")
                        changed.append(locked.name)
                    else:
                        unchanged.append(locked.name)
            except Account.DoesNotExist:
                continue
            except InvalidTransition:
                self.message_user(
                    request,
                    f"{locked.name}: uma conta {locked.get_status_display().lower()} não pode ser {transition.done}; "
                    "nada mudou.",
                    messages.ERROR,
                )
        if len(pks) == 1 and changed:
            self.message_user(request, f"A conta “{changed[0]}” foi {transition.done}.", messages.SUCCESS)
        elif changed:
            done = _count(len(changed), f"conta {transition.done}", f"contas {transition.done}s")
            self.message_user(request, f"{done}.", messages.SUCCESS)
        if len(pks) == 1 and unchanged:
            self.message_user(
                request, f"A conta “{unchanged[0]}” já estava {transition.done}; nada mudou.", messages.WARNING
            )
        elif unchanged:
            already = _count(len(unchanged), "conta já estava assim", "contas já estavam assim")
            self.message_user(request, f"{already}; nada mudou.", messages.WARNING)

    def _confirmation_page(
        self,
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
            **self.admin_site.each_context(request),
            "opts": self.opts,
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

    def _list_action(
        self, request: HttpRequest, queryset: QuerySet[Account], transition: AccountTransition
    ) -> HttpResponse | None:
        form = ReasonForm(request.POST if request.POST.get(CONFIRMED) else None)
        if form.is_valid():
            self._perform(request, list(queryset.values_list("pk", flat=True)), transition, form.cleaned_data["reason"])
            return None
        accounts = list(queryset.order_by("name"))
        return self._confirmation_page(request, transition, accounts, form, from_list=True)

    @admin.action(description="Aprovar contas selecionadas", permissions=["approve"])
    def approve(self, request: HttpRequest, queryset: QuerySet[Account]) -> HttpResponse | None:
        return self._list_action(request, queryset, TRANSITIONS["approve"])

    @admin.action(description="Rejeitar contas selecionadas", permissions=["approve"])
    def reject(self, request: HttpRequest, queryset: QuerySet[Account]) -> HttpResponse | None:
        return self._list_action(request, queryset, TRANSITIONS["reject"])

    @admin.action(description="Bloquear contas selecionadas", permissions=["approve"])
    def block(self, request: HttpRequest, queryset: QuerySet[Account]) -> HttpResponse | None:
        return self._list_action(request, queryset, TRANSITIONS["block"])

    @admin.action(description="Desbloquear contas selecionadas", permissions=["approve"])
    def unblock(self, request: HttpRequest, queryset: QuerySet[Account]) -> HttpResponse | None:
        return self._list_action(request, queryset, TRANSITIONS["unblock"])

    def transition_view(self, request: HttpRequest, object_id: str, name: str) -> HttpResponse:
        """The account page's approve/reject/block/unblock: a confirmation
        page asking for the reason, then the service, then back to the page."""
        if not self.has_approve_permission(request):
            raise PermissionDenied
        account = self.get_object(request, unquote(object_id))
        if account is None:
            self.message_user(request, "Conta não encontrada.", messages.WARNING)
            return redirect("admin:accounts_account_changelist")
        transition = TRANSITIONS[name]
        form = ReasonForm(request.POST if request.method == "POST" else None)
        if form.is_valid():
            self._perform(request, [account.pk], transition, form.cleaned_data["reason"])
            return redirect("admin:accounts_account_change", quote(account.pk))
        return self._confirmation_page(request, transition, [account], form, from_list=False)

    @admin.action(description="Rotacionar segredo de postback (exibido uma vez)", permissions=["manage_credentials"])
    def rotate_postback_secret(self, request: HttpRequest, queryset: QuerySet[Account]) -> HttpResponse | None:
        accounts = list(queryset.order_by("pk")[:2])
        if len(accounts) != 1:
            self.message_user(request, "Selecione uma conta por vez para rotacionar o segredo.", messages.WARNING)
            return None
        [account] = accounts
        with transaction.atomic():
            secret = account_rotate_postback_secret(account=account)
            self.log_change(request, account, "Segredo de postback rotacionado")
        return show_postback_secret_once(request, account, secret, title="Novo segredo de postback")

    # ----------------------------------------------------------------- issuing credentials

    def get_urls(self) -> list[URLPattern]:
        custom = [
            *(
                path(
                    f"<path:object_id>/{name}/",
                    self.admin_site.admin_view(partial(self.transition_view, name=name)),
                    name=f"{self.opts.app_label}_{self.opts.model_name}_{name}",
                )
                for name in TRANSITIONS
            ),
            path(
                "<path:object_id>/issue-credential/",
                self.admin_site.admin_view(self.issue_credential_view),
                name=f"{self.opts.app_label}_{self.opts.model_name}_issue_credential",
            ),
            reveal_url(self),
        ]
        # Before the defaults: their "<path:object_id>/" catch-all would swallow it.
        return custom + super().get_urls()

    def issue_credential_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        return issue_credential_view(self, request, object_id)


_Inline = TypeVar("_Inline", bound="type[InlineModelAdmin[Any, Any]]")


def account_page_inline(inline: _Inline) -> _Inline:
    """Class decorator: show ``inline`` on the account page, after the ones
    already there. For the apps above accounts (acquirer grants and slots,
    webhook endpoints), which accounts may not import. Admin autodiscovery
    imports their admin modules after this one (INSTALLED_APPS order), so
    every inline is in place before the system checks and the first request."""
    AccountAdmin.inlines = (*AccountAdmin.inlines, inline)
    return inline


# --------------------------------------------------------------------------- balances and ledger


@admin.register(LedgerEntry)
class LedgerEntryAdmin(ReadOnlyAdminMixin, admin.ModelAdmin[LedgerEntry]):
    list_display = ("id", "account", "kind", "amount_display", "balance_after_display", "reference", "created_at")
    list_filter = ("kind", "created_at")
    search_fields = ("account__name", "=account__document", "reference")
    list_select_related = ("account",)
    date_hierarchy = "created_at"
    # The detail page too shows money as R$ (the stored centavos never).
    fields = ("account", "kind", "amount_display", "balance_after_display", "reference", "created_at")
    readonly_fields = fields

    @admin.display(description="valor", ordering="amount")
    def amount_display(self, entry: LedgerEntry) -> str:
        return brl(entry.amount)

    @admin.display(description="saldo após", ordering="balance_after")
    def balance_after_display(self, entry: LedgerEntry) -> str:
        return brl(entry.balance_after)


@admin.register(AccountBalance)
class AccountBalanceAdmin(ReadOnlyAdminMixin, admin.ModelAdmin[AccountBalance]):
    list_display = ("account", "available_display", "updated_at")
    list_filter = ("updated_at",)
    search_fields = ("account__name", "account__document")
    list_select_related = ("account",)
    ordering = ("account__name",)
    fields = ("account", "available_display", "updated_at")
    readonly_fields = fields

    @admin.display(description="disponível", ordering="available")
    def available_display(self, balance: AccountBalance) -> str:
        return brl(balance.available)
