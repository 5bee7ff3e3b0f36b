"""Back office for accounts, balances and the ledger (API credentials:
``accounts.admin_credentials``; the maker-checker queue:
``accounts.approvals_admin``; both registered from here).

The admin collects input, checks the staff permission and reports; every
status change and every credential goes through ``accounts.services``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import quote
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.urls import URLPattern, path, reverse

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
from core.admin import ReadOnlyAdminMixin, reveal_later, reveal_url
from core.money import brl

if TYPE_CHECKING:
    from django.contrib.admin.options import InlineModelAdmin, _FieldsetSpec

POSTBACK_PAGE_TEMPLATE = "admin/accounts/postback_secret.html"


def show_postback_secret_once(request: HttpRequest, account: Account, secret: str, *, title: str) -> HttpResponse:
    return reveal_later(
        request,
        template=POSTBACK_PAGE_TEMPLATE,
        context={"title": title, "account": str(account), "secret": secret},
        url_name="admin:accounts_account_reveal",
        back_url=reverse("admin:accounts_account_change", args=[quote(account.pk)]),
    )


# --------------------------------------------------------------------------- accounts


class AccountAdminForm(forms.ModelForm[Account]):
    # The model stores a list of codes; checkboxes beat a comma-separated text box.
    payment_methods = forms.MultipleChoiceField(
        label="métodos de pagamento",
        choices=PaymentMethod.choices,
        widget=forms.CheckboxSelectMultiple,
        required=False,
    )

    class Meta:
        model = Account
        fields = "__all__"  # noqa: DJ007 - the admin's fieldsets pick the fields shown


IDENTITY = ("Identificação", {"fields": ("name", "document", "status", "is_blocked")})
ADD_IDENTITY = ("Identificação", {"fields": ("name", "document", "status")})
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


@admin.register(Account)
class AccountAdmin(admin.ModelAdmin[Account]):
    form = AccountAdminForm
    list_display = ("name", "document", "status", "is_blocked", "balance_available", "created_at")
    list_filter = ("status", "is_blocked")
    search_fields = ("name", "document")
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

    @admin.display(description="saldo disponível", ordering="balance__available")
    def balance_available(self, account: Account) -> str:
        try:
            available = account.balance.available
        except AccountBalance.DoesNotExist:
            # Accounts made outside account_create get their row on first posting.
            available = 0
        return brl(available)

    # ----------------------------------------------------------------- form

    def get_fieldsets(self, request: HttpRequest, obj: Account | None = None) -> _FieldsetSpec:
        # The postback secret is never on this page: it is shown once, when
        # the account is created or the secret rotated (support never sees it).
        if obj is None:
            return (ADD_IDENTITY, *CONFIGURATION)
        return (IDENTITY, *CONFIGURATION)

    def get_readonly_fields(self, request: HttpRequest, obj: Account | None = None) -> tuple[str, ...]:
        readonly = ("is_blocked",)
        if obj is not None or not self.has_approve_permission(request):
            # After creation the status moves only through the approve/reject actions.
            return (*readonly, "status")
        return readonly

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

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        extra_context = {**(extra_context or {}), "can_manage_credentials": can_manage_credentials(request)}
        return super().change_view(request, object_id, form_url, extra_context)

    # ----------------------------------------------------------------- actions

    def _transition(
        self,
        request: HttpRequest,
        queryset: QuerySet[Account],
        apply: Callable[[Account], bool],
        *,
        log_message: str,
        done: str,
    ) -> None:
        changed = unchanged = 0
        for account in queryset.order_by("pk"):
            try:
                with transaction.atomic():
                    # Decide on the current row, not the one the list showed.
                    locked = Account.objects.select_for_update().get(pk=account.pk)
                    if apply(locked):
                        self.log_change(request, locked, log_message)
                        changed += 1
                    else:
                        unchanged += 1
            except InvalidTransition as exc:
                self.message_user(request, f"{account.name}: {exc.message}", messages.ERROR)
        if changed:
            self.message_user(request, f"{changed} conta(s) {done}.", messages.SUCCESS)
        if unchanged:
            self.message_user(request, f"{unchanged} conta(s) já estava(m) assim; nada mudou.", messages.WARNING)

    @admin.action(description="Aprovar contas selecionadas", permissions=["approve"])
    def approve(self, request: HttpRequest, queryset: QuerySet[Account]) -> None:
        self._transition(
            request,
            queryset,
            lambda account: account_approve(account=account),
            log_message="Aprovada",
            done="aprovada(s)",
        )

    @admin.action(description="Rejeitar contas selecionadas", permissions=["approve"])
    def reject(self, request: HttpRequest, queryset: QuerySet[Account]) -> None:
        self._transition(
            request,
            queryset,
            lambda account: account_reject(account=account),
            log_message="Rejeitada",
            done="rejeitada(s)",
        )

    @admin.action(description="Bloquear contas selecionadas", permissions=["approve"])
    def block(self, request: HttpRequest, queryset: QuerySet[Account]) -> None:
        self._transition(
            request,
            queryset,
            lambda account: account_set_blocked(account=account, blocked=True),
            log_message="Bloqueada",
            done="bloqueada(s)",
        )

    @admin.action(description="Desbloquear contas selecionadas", permissions=["approve"])
    def unblock(self, request: HttpRequest, queryset: QuerySet[Account]) -> None:
        self._transition(
            request,
            queryset,
            lambda account: account_set_blocked(account=account, blocked=False),
            log_message="Desbloqueada",
            done="desbloqueada(s)",
        )

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
    search_fields = ("account__name", "reference")
    list_select_related = ("account",)
    date_hierarchy = "created_at"

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

    @admin.display(description="disponível", ordering="available")
    def available_display(self, balance: AccountBalance) -> str:
        return brl(balance.available)
