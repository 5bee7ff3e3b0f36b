"""Back office for API credentials: the list (view, revoke, rotate), the
read-only inline and the issuing page of the account's page. A secret key is
shown on one page only, once (``core.admin.reveal_later``); the stored hash
never. Registered by ``accounts.admin``, which imports this module."""

from __future__ import annotations

from collections.abc import Sequence

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import quote, unquote
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, reverse

from accounts.models import Account, ApiCredential
from accounts.services import IssuedCredential, credential_issue, credential_revoke, credential_rotate
from core.admin import ReadOnlyAdminMixin, reveal_later, reveal_url

SECRETS_TEMPLATE = "admin/accounts/credential_secrets.html"
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


def _credentials(count: int, singular: str, plural: str) -> str:
    """``1 credencial revogada``, ``2 credenciais revogadas``."""
    return f"{count} credencial {singular}" if count == 1 else f"{count} credenciais {plural}"


def _secret_hint(credential: ApiCredential) -> str:
    return f"sk_…{credential.secret_hint}"


class CredentialInline(ReadOnlyAdminMixin, admin.TabularInline[ApiCredential, Account]):
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

    @admin.display(description="chave secreta")
    def secret_hint_display(self, credential: ApiCredential) -> str:
        return _secret_hint(credential)


class IssueCredentialForm(forms.Form):
    permission = forms.ChoiceField(
        label="Permissão", choices=ApiCredential.Permission.choices, initial=ApiCredential.Permission.ALL
    )
    label = forms.CharField(label="Rótulo", max_length=100, required=False)


def issue_credential_view(modeladmin: admin.ModelAdmin[Account], request: HttpRequest, object_id: str) -> HttpResponse:
    """The account page's "Emitir credencial": the form, then the new secret
    key shown once."""
    if not can_manage_credentials(request):
        raise PermissionDenied
    opts = modeladmin.opts
    account = modeladmin.get_object(request, unquote(object_id))
    if account is None:
        modeladmin.message_user(request, "Conta não encontrada.", messages.WARNING)
        return redirect(f"admin:{opts.app_label}_{opts.model_name}_changelist")
    context = {**modeladmin.admin_site.each_context(request), "opts": opts, "account": account}
    change_url = reverse(
        f"admin:{opts.app_label}_{opts.model_name}_change",
        args=[quote(account.pk)],
        current_app=modeladmin.admin_site.name,
    )
    form = IssueCredentialForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        with transaction.atomic():
            issued = credential_issue(
                account=account, permission=form.cleaned_data["permission"], label=form.cleaned_data["label"]
            )
            modeladmin.log_change(request, account, f"Credencial emitida: {issued.credential.public_key}")
        return show_secrets_once(
            request,
            title="Credencial emitida",
            issued=[issued],
            url_name=f"admin:{opts.app_label}_{opts.model_name}_reveal",
            back_url=change_url,
        )
    return TemplateResponse(
        request, ISSUE_TEMPLATE, {**context, "title": f"Emitir credencial para {account}", "form": form}
    )


@admin.register(ApiCredential)
class ApiCredentialAdmin(ReadOnlyAdminMixin, admin.ModelAdmin[ApiCredential]):
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

    def has_manage_credentials_permission(self, request: HttpRequest) -> bool:
        return can_manage_credentials(request)

    @admin.display(description="chave secreta")
    def secret_hint_display(self, credential: ApiCredential) -> str:
        return _secret_hint(credential)

    @admin.action(description="Revogar credenciais selecionadas", permissions=["manage_credentials"])
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiCredential]) -> None:
        revoked = 0
        for credential in queryset.order_by("pk"):
            with transaction.atomic():
                if credential_revoke(credential=credential):
                    self.log_change(request, credential, "Revogada")
                    revoked += 1
        if revoked:
            self.message_user(request, _credentials(revoked, "revogada", "revogadas") + ".", messages.SUCCESS)
        if skipped := queryset.count() - revoked:
            self.message_user(
                request, _credentials(skipped, "já estava revogada", "já estavam revogadas") + ".", messages.WARNING
            )

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
            self.message_user(
                request, _credentials(skipped, "revogada ignorada", "revogadas ignoradas") + ".", messages.WARNING
            )
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
