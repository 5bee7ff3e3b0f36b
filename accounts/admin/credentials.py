"""Back office for API credentials: the list (view, revoke, rotate, send the
claim link again), the read-only inline and the issuing page of the
account's page. Staff never see a secret key: a credential issued or
rotated here waits for its claim, and its secret is shown to whoever opens
the link e-mailed to the account's contact (``accounts.credential_links``).
Registered by ``accounts.admin``, which imports every module of the package."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.contrib.admin.utils import quote, unquote
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.utils import timezone
from django.utils.cache import add_never_cache_headers

from accounts.admin.decisions import staff_user
from accounts.credential_links import (
    credential_issue_for_claim,
    credential_link_send,
    credential_rotate_for_claim,
)
from accounts.exceptions import CredentialLinkNotSent, CredentialLinkRefused
from accounts.models import Account, ApiCredential, CredentialLink
from accounts.services import credential_revoke
from core.admin.confirmation import confirm_or_perform
from core.admin.records import ReadOnlyAdminMixin

ISSUE_TEMPLATE = "admin/accounts/account/issue_credential.html"
CONFIRM_TEMPLATE = "admin/accounts/apicredential/confirm_link.html"


def can_manage_credentials(request: HttpRequest) -> bool:
    return request.user.has_perm("accounts.manage_credentials")


def _credentials(count: int, singular: str, plural: str) -> str:
    """``1 credencial revogada``, ``2 credenciais revogadas``."""
    return f"{count} credencial {singular}" if count == 1 else f"{count} credenciais {plural}"


def _secret_hint(credential: ApiCredential) -> str:
    return f"sk_…{credential.secret_hint}" if credential.secret_hint else "—"


def _status(credential: ApiCredential) -> str:
    if credential.revoked_at is not None:
        return "Revogada"
    if not credential.awaiting_claim:
        return "Ativa"
    link = credential.claim_links.filter(used_at=None, replaced_at=None).first()
    if link is None:
        last = credential.claim_links.order_by("-created_at").first()
        if last is not None and last.send_failed_at is not None:
            when = timezone.localtime(last.send_failed_at)
            return f"Aguardando resgate: o e-mail para {last.sent_to} falhou em {when:%d/%m/%Y %H:%M}; nenhum link vale"
        return "Aguardando resgate: nenhum link em vigor"
    if link.expires_at <= timezone.now():
        return f"Aguardando resgate: o link enviado para {link.sent_to} expirou"
    until = timezone.localtime(link.expires_at)
    return f"Aguardando resgate: link enviado para {link.sent_to}, válido até {until:%d/%m/%Y %H:%M}"


def send_link(modeladmin: Any, request: HttpRequest, credential: ApiCredential, reason: str) -> bool:
    """E-mail ``credential``'s claim link (committed first: call it outside a
    transaction) and tell staff where it went; never what it says. An e-mail
    that did not leave is in the credential's admin log too, with ``reason``."""
    try:
        link = credential_link_send(credential_id=credential.pk, sent_by=staff_user(request))
    except (CredentialLinkRefused, CredentialLinkNotSent) as exc:
        modeladmin.message_user(request, f"{credential.public_key}: {exc.message}", messages.ERROR)
        if isinstance(exc, CredentialLinkNotSent):
            logger: Any = modeladmin  # the log takes any record's type
            logger.log_change(request, credential, f"Link de resgate não enviado: {exc.message} Motivo: {reason}")
        return False
    modeladmin.message_user(
        request,
        f"{credential.public_key} ({credential.get_permission_display()}): link de resgate enviado para "
        f"{link.sent_to}, válido até {timezone.localtime(link.expires_at):%d/%m/%Y %H:%M}. A chave secreta só "
        "aparece para quem abrir o link; a equipe não a vê.",
        messages.SUCCESS,
    )
    return True


class CredentialInline(ReadOnlyAdminMixin, admin.TabularInline[ApiCredential, Account]):
    """Existing credentials, read-only: issuing, rotating and revoking have
    their own screens, and no secret is ever shown here."""

    model = ApiCredential
    fields = (
        "public_key",
        "label",
        "permission",
        "status_display",
        "secret_hint_display",
        "created_at",
        "last_used_at",
    )
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

    @admin.display(description="situação")
    def status_display(self, credential: ApiCredential) -> str:
        return _status(credential)


class IssueCredentialForm(forms.Form):
    permission = forms.ChoiceField(
        label="Permissão", choices=ApiCredential.Permission.choices, initial=ApiCredential.Permission.ALL
    )
    label = forms.CharField(label="Rótulo", max_length=100, required=False)
    reason = forms.CharField(
        label="Motivo", max_length=500, widget=forms.Textarea(attrs={"rows": 3, "cols": 80}), strip=True
    )


def issue_credential_view(modeladmin: admin.ModelAdmin[Account], request: HttpRequest, object_id: str) -> HttpResponse:
    """The account page's "Emitir credencial": the form (with a reason), then
    the credential made waiting for its claim and its link e-mailed to the
    account's contact. Nothing secret is ever on a page here."""
    if not can_manage_credentials(request):
        raise PermissionDenied
    opts = modeladmin.opts
    account = modeladmin.get_object(request, unquote(object_id))
    if account is None:
        modeladmin.message_user(request, "Conta não encontrada.", messages.WARNING)
        return redirect(f"admin:{opts.app_label}_{opts.model_name}_changelist")
    context = {**modeladmin.admin_site.each_context(request), "opts": opts, "account": account}
    form = IssueCredentialForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        reason = form.cleaned_data["reason"]
        try:
            with transaction.atomic():
                credential = credential_issue_for_claim(
                    account=account, permission=form.cleaned_data["permission"], label=form.cleaned_data["label"]
                )
                message = f"Credencial emitida, aguardando resgate por link: {credential.public_key}. Motivo: {reason}"
                modeladmin.log_change(request, account, message)
                # On the credential's own history (the log takes any record's type).
                logger: Any = modeladmin
                logger.log_addition(request, credential, f"Emitida pela equipe. Motivo: {reason}")
        except CredentialLinkRefused as exc:
            form.add_error(None, exc.message)
        else:
            send_link(modeladmin, request, credential, reason)
            done = redirect(f"admin:{opts.app_label}_{opts.model_name}_change", quote(account.pk))
            done.status_code = 303
            return done
    response = TemplateResponse(
        request,
        ISSUE_TEMPLATE,
        {
            **context,
            "title": f"Emitir credencial para {account}",
            "form": form,
            "link_hours": f"{settings.CREDENTIAL_LINK_HOURS:g}",
        },
    )
    add_never_cache_headers(response)
    return response


def link_action(
    modeladmin: Any,
    request: HttpRequest,
    queryset: QuerySet[ApiCredential],
    eligible: QuerySet[ApiCredential],
    *,
    name: str,
    description: str,
    effect: str,
    skipped: tuple[str, str],
    each: Callable[[ApiCredential, str], None],
) -> HttpResponse | None:
    """An action of the credentials list that e-mails claim links: the
    ``eligible`` ones listed with where their link goes and a reason asked,
    then ``each(credential, reason)`` for them; the others counted as skipped
    (``skipped``: what they are, singular and plural)."""

    def perform(reason: str) -> None:
        if ignored := queryset.count() - eligible.count():
            modeladmin.message_user(request, _credentials(ignored, *skipped) + ".", messages.WARNING)
        for credential in eligible.select_related("account").order_by("pk"):
            each(credential, reason)

    if not eligible.exists():
        perform("")
        return None
    return confirm_or_perform(
        modeladmin,
        request,
        eligible,
        name=name,
        description=description,
        template=CONFIRM_TEMPLATE,
        perform=perform,
        page=lambda: {"effect": effect, "credentials": list(eligible.select_related("account").order_by("pk"))},
    )


@admin.register(ApiCredential)
class ApiCredentialAdmin(ReadOnlyAdminMixin, admin.ModelAdmin[ApiCredential]):
    """View, revoke, rotate and send a claim link again. Issuing is on the
    account's page; no secret and no hash is ever shown."""

    list_display = ("public_key", "account", "permission", "status_display", "created_at", "last_used_at")
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
        "status_display",
        "is_active",
        "created_at",
        "last_used_at",
        "revoked_at",
    )
    readonly_fields = fields
    # Never rendered, whatever "fields" becomes.
    exclude = ("secret_hash",)
    actions = ("revoke", "rotate", "resend_link")

    def has_manage_credentials_permission(self, request: HttpRequest) -> bool:
        return can_manage_credentials(request)

    @admin.display(description="chave secreta")
    def secret_hint_display(self, credential: ApiCredential) -> str:
        return _secret_hint(credential)

    @admin.display(description="situação")
    def status_display(self, credential: ApiCredential) -> str:
        return _status(credential)

    @admin.action(description="Revogar credenciais selecionadas", permissions=["manage_credentials"])
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiCredential]) -> HttpResponse | None:
        def perform(reason: str) -> None:
            revoked = 0
            for credential in queryset.order_by("pk"):
                with transaction.atomic():
                    if credential_revoke(credential=credential):
                        self.log_change(request, credential, f"Revogada. Motivo: {reason}")
                        revoked += 1
            if revoked:
                self.message_user(request, _credentials(revoked, "revogada", "revogadas") + ".", messages.SUCCESS)
            if skipped := queryset.count() - revoked:
                self.message_user(
                    request, _credentials(skipped, "já estava revogada", "já estavam revogadas") + ".", messages.WARNING
                )

        # Confirmed with a reason, like every action that changes what a merchant can do.
        eligible = queryset.filter(revoked_at=None)
        if not eligible.exists():
            perform("")
            return None
        return confirm_or_perform(
            self,
            request,
            queryset,
            name="revoke",
            description="Revogar credenciais",
            template=CONFIRM_TEMPLATE,
            perform=perform,
            page=lambda: {
                "effect": "Cada credencial deixa de autenticar agora e para sempre: as integrações que a usam recebem "
                "401, e um link de resgate em aberto deixa de funcionar.",
                "credentials": list(eligible.select_related("account").order_by("pk")),
                "revoking": True,
            },
        )

    @admin.action(
        description="Rotacionar credenciais selecionadas (link ao e-mail de contato)",
        permissions=["manage_credentials"],
    )
    def rotate(self, request: HttpRequest, queryset: QuerySet[ApiCredential]) -> HttpResponse | None:
        def rotate_one(credential: ApiCredential, reason: str) -> None:
            try:
                with transaction.atomic():
                    new = credential_rotate_for_claim(credential=credential)
                    self.log_change(
                        request, credential, f"Rotacionada: nova credencial {new.public_key}. Motivo: {reason}"
                    )
                    self.log_addition(request, new, f"Emitida por rotação de {credential.public_key}. Motivo: {reason}")
            except CredentialLinkRefused as exc:
                self.message_user(request, f"{credential.public_key}: {exc.message}", messages.ERROR)
                return
            send_link(self, request, new, reason)

        # A revoked key was taken out of use on purpose, and one waiting for its
        # claim has nothing to rotate: only active ones.
        return link_action(
            self,
            request,
            queryset,
            queryset.filter(is_active=True),
            name="rotate",
            description="Rotacionar credenciais",
            effect="Cada credencial ganha uma nova, com a mesma permissão, que aguarda resgate: o link vai ao "
            "e-mail de contato da conta e a chave secreta só aparece para quem o abrir. A antiga continua "
            "ativa até ser revogada.",
            skipped=("revogada ou aguardando resgate ignorada", "revogadas ou aguardando resgate ignoradas"),
            each=rotate_one,
        )

    @admin.action(description="Reenviar link de resgate (ao e-mail de contato)", permissions=["manage_credentials"])
    def resend_link(self, request: HttpRequest, queryset: QuerySet[ApiCredential]) -> HttpResponse | None:
        def resend_one(credential: ApiCredential, reason: str) -> None:
            if send_link(self, request, credential, reason):
                self.log_change(request, credential, f"Link de resgate reenviado. Motivo: {reason}")

        return link_action(
            self,
            request,
            queryset,
            queryset.filter(revoked_at=None, secret_hash=""),
            name="resend_link",
            description="Reenviar link de resgate",
            effect="Um novo link vai ao e-mail de contato atual da conta; o enviado antes deixa de funcionar.",
            skipped=("que não aguarda resgate ignorada", "que não aguardam resgate ignoradas"),
            each=resend_one,
        )


@admin.register(CredentialLink)
class CredentialLinkAdmin(ReadOnlyAdminMixin, admin.ModelAdmin[CredentialLink]):
    """Where each claim link went, who sent it, and whether it was used: the
    evidence segregation of duties reads. The token is never stored."""

    fields = (
        "credential",
        "sent_to",
        "sent_by",
        "created_at",
        "expires_at",
        "used_at",
        "replaced_at",
        "send_failed_at",
    )
    list_display = ("id", *fields)
    list_select_related = ("credential", "sent_by")
    search_fields = ("credential__public_key", "sent_to", "credential__account__name")
    readonly_fields = fields
    exclude = ("token_hash",)
