"""Back office for accounts, API credentials, balances and the ledger.

The admin collects input, checks the staff permission and reports; every
status change and every credential goes through ``accounts.services``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import quote, unquote
from django.core.exceptions import PermissionDenied
from django.db import models, transaction
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse

# Registers the maker-checker queue (pedidos de aprovação).
from accounts.approvals_admin import MoneyActionRequestAdmin  # noqa: F401
from accounts.exceptions import InvalidTransition
from accounts.models import Account, AccountBalance, ApiCredential, LedgerEntry, PaymentMethod
from accounts.services import (
    IssuedCredential,
    account_approve,
    account_create,
    account_reject,
    account_rotate_postback_secret,
    account_set_blocked,
    credential_issue,
    credential_revoke,
    credential_rotate,
)
from acquirers.models import AcquirerGrant, AcquirerSlot
from core.admin import ReadOnlyAdminMixin, brl, reveal_later, reveal_url
from webhooks.models import WebhookEndpoint

if TYPE_CHECKING:
    from django.contrib.admin.options import InlineModelAdmin, _FieldsetSpec

SECRETS_TEMPLATE = "admin/accounts/credential_secrets.html"
POSTBACK_PAGE_TEMPLATE = "admin/accounts/postback_secret.html"
ISSUE_TEMPLATE = "admin/accounts/account/issue_credential.html"


def can_manage_credentials(request: HttpRequest) -> bool:
    return request.user.has_perm("accounts.manage_credentials")


def show_secrets_once(
    request: HttpRequest, *, title: str, issued: Sequence[IssuedCredential], url_name: str, back_url: str
) -> HttpResponse:
    """Redirects to the one page that ever shows a secret key (Post/Redirect/Get:
    reloading it issues nothing and shows nothing again)."""
    shown = [
        {
            "account": str(item.credential.account),
            "permission": item.credential.get_permission_display(),
            "label": item.credential.label,
            "public_key": item.credential.public_key,
            "secret_key": item.secret_key,
        }
        for item in issued
    ]
    return reveal_later(
        request,
        template=SECRETS_TEMPLATE,
        context={"title": title, "issued": shown},
        url_name=url_name,
        back_url=back_url,
    )


def show_postback_secret_once(request: HttpRequest, account: Account, secret: str, *, title: str) -> HttpResponse:
    return reveal_later(
        request,
        template=POSTBACK_PAGE_TEMPLATE,
        context={"title": title, "account": str(account), "secret": secret},
        url_name="admin:accounts_account_reveal",
        back_url=reverse("admin:accounts_account_change", args=[quote(account.pk)]),
    )


# --------------------------------------------------------------------------- account inlines


class CredentialInline(admin.TabularInline[ApiCredential, Account]):
    """Existing credentials, read-only: issuing, rotating and revoking have
    their own screens, so the secret is only ever shown on one page."""

    model = ApiCredential
    fields = ("public_key", "label", "permission", "is_active", "secret_hint_display", "created_at", "last_used_at")
    readonly_fields = fields
    # Never rendered, whatever "fields" becomes.
    exclude = ("secret_hash",)
    extra = 0
    can_delete = False
    show_change_link = True
    verbose_name_plural = "credenciais de API"

    # Inlines take the parent object here; the stubs mark the same mismatch.
    def has_add_permission(self, request: HttpRequest, obj: Account | None) -> bool:  # type: ignore[override]
        return False

    def has_change_permission(self, request: HttpRequest, obj: Account | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Account | None = None) -> bool:
        return False

    @admin.display(description="chave secreta")
    def secret_hint_display(self, credential: ApiCredential) -> str:
        return f"sk_…{credential.secret_hint}"


class AcquirerGrantInline(admin.TabularInline[AcquirerGrant, Account]):
    model = AcquirerGrant
    fields = ("acquirer", "created_at")
    readonly_fields = ("created_at",)
    autocomplete_fields = ("acquirer",)
    extra = 0


class AcquirerSlotInline(admin.TabularInline[AcquirerSlot, Account]):
    model = AcquirerSlot
    fields = ("purpose", "priority", "acquirer")
    autocomplete_fields = ("acquirer",)
    extra = 0


class WebhookEndpointInline(admin.TabularInline[WebhookEndpoint, Account]):
    """URL and state only; the signing secret and code live on the endpoint's own page."""

    model = WebhookEndpoint
    fields = ("url", "is_active")
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}
    extra = 0
    show_change_link = True


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


class IssueCredentialForm(forms.Form):
    permission = forms.ChoiceField(
        label="Permissão", choices=ApiCredential.Permission.choices, initial=ApiCredential.Permission.ALL
    )
    label = forms.CharField(label="Rótulo", max_length=100, required=False)


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
    inlines = (CredentialInline, AcquirerGrantInline, AcquirerSlotInline, WebhookEndpointInline)

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
        if not can_manage_credentials(request):
            raise PermissionDenied
        account = self.get_object(request, unquote(object_id))
        if account is None:
            self.message_user(request, "Conta não encontrada.", messages.WARNING)
            return redirect(f"admin:{self.opts.app_label}_{self.opts.model_name}_changelist")
        context = {**self.admin_site.each_context(request), "opts": self.opts, "account": account}
        change_url = reverse(
            f"admin:{self.opts.app_label}_{self.opts.model_name}_change",
            args=[quote(account.pk)],
            current_app=self.admin_site.name,
        )
        form = IssueCredentialForm(request.POST or None)
        if request.method == "POST" and form.is_valid():
            with transaction.atomic():
                issued = credential_issue(
                    account=account, permission=form.cleaned_data["permission"], label=form.cleaned_data["label"]
                )
                self.log_change(request, account, f"Credencial emitida: {issued.credential.public_key}")
            return show_secrets_once(
                request,
                title="Credencial emitida",
                issued=[issued],
                url_name=f"admin:{self.opts.app_label}_{self.opts.model_name}_reveal",
                back_url=change_url,
            )
        return TemplateResponse(
            request, ISSUE_TEMPLATE, {**context, "title": f"Emitir credencial para {account}", "form": form}
        )


# --------------------------------------------------------------------------- credentials


@admin.register(ApiCredential)
class ApiCredentialAdmin(admin.ModelAdmin[ApiCredential]):
    """View, revoke and rotate. Issuing is on the account's page; the stored
    hash is never shown, and the secret exists only on the page that issues it."""

    list_display = ("public_key", "account", "permission", "is_active", "created_at", "last_used_at")
    list_filter = ("permission", "is_active")
    search_fields = ("public_key", "account__name")
    list_select_related = ("account",)
    fields = (
        "account",
        "label",
        "ref",
        "public_key",
        "secret_hint_display",
        "permission",
        "is_active",
        "created_at",
        "last_used_at",
        "revoked_at",
    )
    readonly_fields = fields
    # Never rendered, whatever "fields" becomes.
    exclude = ("secret_hash",)
    actions = ("revoke", "rotate")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: ApiCredential | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: ApiCredential | None = None) -> bool:
        return False

    def has_manage_credentials_permission(self, request: HttpRequest) -> bool:
        return can_manage_credentials(request)

    @admin.display(description="chave secreta")
    def secret_hint_display(self, credential: ApiCredential) -> str:
        return f"sk_…{credential.secret_hint}"

    @admin.action(description="Revogar credenciais selecionadas", permissions=["manage_credentials"])
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiCredential]) -> None:
        revoked = 0
        for credential in queryset.order_by("pk"):
            with transaction.atomic():
                if credential_revoke(credential=credential):
                    self.log_change(request, credential, "Revogada")
                    revoked += 1
        if revoked:
            self.message_user(request, f"{revoked} credencial(is) revogada(s).", messages.SUCCESS)
        if skipped := queryset.count() - revoked:
            self.message_user(request, f"{skipped} credencial(is) já estava(m) revogada(s).", messages.WARNING)

    @admin.action(description="Rotacionar credenciais selecionadas", permissions=["manage_credentials"])
    def rotate(self, request: HttpRequest, queryset: QuerySet[ApiCredential]) -> HttpResponse | None:
        issued: list[IssuedCredential] = []
        # A revoked key was taken out of use on purpose; rotating it would put
        # its permission back into circulation under a new key.
        for credential in queryset.filter(is_active=True).select_related("account").order_by("pk"):
            with transaction.atomic():
                new = credential_rotate(credential=credential)
                self.log_change(request, credential, f"Rotacionada: nova credencial {new.credential.public_key}")
                self.log_addition(request, new.credential, f"Emitida por rotação de {credential.public_key}")
            issued.append(new)
        if skipped := queryset.filter(is_active=False).count():
            self.message_user(request, f"{skipped} credencial(is) revogada(s) ignorada(s).", messages.WARNING)
        if not issued:
            return None
        return show_secrets_once(
            request,
            title="Credenciais rotacionadas",
            issued=issued,
            url_name=f"admin:{self.opts.app_label}_{self.opts.model_name}_reveal",
            # The changelist the action was run from, filters included.
            back_url=request.get_full_path(),
        )

    def get_urls(self) -> list[URLPattern]:
        # Before the defaults: their "<path:object_id>/" catch-all would swallow it.
        return [reveal_url(self), *super().get_urls()]


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
