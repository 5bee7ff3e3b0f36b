"""Back office for webhook endpoints: enable, disable, rotate the secret
(shown once), delete as the API does (deactivated, history kept); listed
on the account's page too."""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.db import models
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, reverse

from accounts.admin.accounts import account_page_inline
from accounts.models import Account
from core.admin.reveal import reveal_later, reveal_url
from core.plural import plural
from webhooks import http, readable, services
from webhooks.exceptions import EndpointLimitReached
from webhooks.models import WebhookEndpoint

SECRETS_TEMPLATE = "admin/webhooks/endpoint_secrets.html"
DELETE_TEMPLATE = "admin/webhooks/webhookendpoint/delete_confirmation.html"
DELETE_SELECTED_TEMPLATE = "admin/webhooks/webhookendpoint/delete_selected_confirmation.html"
REF_TAKEN = "Esta conta já tem um endpoint com esta referência (os excluídos também contam)."


def _secrets_page(
    modeladmin: admin.ModelAdmin[WebhookEndpoint], request: HttpRequest, pairs: list[tuple[WebhookEndpoint, str]]
) -> HttpResponse:
    """Redirects to the one page that shows the new secrets (Post/Redirect/Get:
    reloading it rotates nothing and shows nothing again)."""
    shown = [
        {"account": str(endpoint.account), "url": endpoint.url, "code": endpoint.code, "secret": secret}
        for endpoint, secret in pairs
    ]
    return reveal_later(
        request,
        template=SECRETS_TEMPLATE,
        context={"title": "Segredo de assinatura", "secrets": shown},
        url_name="admin:webhooks_webhookendpoint_reveal",
        back_url=reverse("admin:webhooks_webhookendpoint_changelist"),
    )


class HealthFilter(admin.SimpleListFilter):
    """Where staff look first: endpoints that are disabled or failing."""

    title = "saúde"
    parameter_name = "health"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("disabled", "Desativados"), ("failing", "Falhando"), ("healthy", "Saudáveis")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() == "disabled":
            return queryset.filter(is_active=False, deleted_at__isnull=True)
        if self.value() == "failing":
            return queryset.filter(is_active=True, failing_since__isnull=False)
        if self.value() == "healthy":
            return queryset.filter(is_active=True, failing_since__isnull=True)
        return queryset


class WebhookEndpointForm(forms.ModelForm[WebhookEndpoint]):
    url = forms.URLField(label="URL", max_length=2000, assume_scheme="https")

    class Meta:
        model = WebhookEndpoint
        fields = "__all__"  # noqa: DJ007 - the admin's fields pick what is shown

    def clean_url(self) -> str:
        url = str(self.cleaned_data["url"])
        refusal = http.url_refusal(url)
        if refusal:
            raise forms.ValidationError(refusal)
        return url

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        account = cleaned.get("account")
        ref = cleaned.get("ref")
        # webhook_unique_ref_per_account, said on the field instead of at the top.
        if account is not None and ref:
            taken = WebhookEndpoint.objects.filter(account=account, ref=ref).exclude(pk=self.instance.pk)
            if taken.exists():
                self.add_error("ref", REF_TAKEN)
        # A new endpoint, or one moved to another account, takes a slot of it.
        if account is not None and (self.instance._state.adding or self.instance.account_id != account.pk):
            try:
                # The admin's change view runs in one transaction: the account
                # stays locked until the endpoint is saved.
                services.endpoint_limit_check(account_id=account.pk)
            except EndpointLimitReached as exc:
                self.add_error("account", exc.errors["webhooks"])
        return cleaned


class WebhookEndpointInlineFormSet(forms.BaseInlineFormSet):  # type: ignore[type-arg]
    """The account page's endpoints respect the account's limit too."""

    def clean(self) -> None:
        super().clean()
        if any(self.errors):
            return
        new = deleted = 0
        for form in self.forms:
            if self.can_delete and self._should_delete_form(form):  # type: ignore[attr-defined]
                deleted += form.instance.pk is not None and form.instance.deleted_at is None
            elif form.instance._state.adding and form.has_changed():
                new += 1
        if not new:
            return
        try:
            if self.instance._state.adding:  # a new account has no endpoints yet
                if new > settings.WEBHOOK_MAX_ENDPOINTS_PER_ACCOUNT:
                    raise EndpointLimitReached(settings.WEBHOOK_MAX_ENDPOINTS_PER_ACCOUNT)
            else:
                services.endpoint_limit_check(account_id=self.instance.pk, adding=new - deleted)
        except EndpointLimitReached as exc:
            raise forms.ValidationError(exc.errors["webhooks"]) from exc

    def delete_existing(self, obj: WebhookEndpoint, commit: bool = True) -> None:
        # Deleting from the account's page is the API's soft delete too.
        if commit:
            services.endpoint_delete(endpoint=obj)


@account_page_inline
class WebhookEndpointInline(admin.TabularInline[WebhookEndpoint, Account]):
    """URL and state only; the signing secret and code live on the endpoint's own page."""

    model = WebhookEndpoint
    formset = WebhookEndpointInlineFormSet
    fields = ("url", "is_active")
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}
    extra = 0
    show_change_link = True

    def get_queryset(self, request: HttpRequest) -> QuerySet[WebhookEndpoint]:
        return super().get_queryset(request).filter(deleted_at__isnull=True)


@admin.register(WebhookEndpoint)
class WebhookEndpointAdmin(admin.ModelAdmin[WebhookEndpoint]):
    form = WebhookEndpointForm
    list_display = ("url", "account", "is_active", "failing_since", "why_disabled", "created_at")
    list_filter = (HealthFilter, "is_active")
    search_fields = ("url", "account__name")
    list_select_related = ("account",)
    autocomplete_fields = ("account",)
    # The signing secret is never displayed after it was shown once (on
    # creation or rotation); code and secret are not editable by hand, since
    # receivers are configured with them.
    fields = (
        "account",
        "ref",
        "url",
        "description",
        "is_active",
        "code",
        "failing_since",
        "disabled_at",
        "why_disabled",
        "created_at",
        "updated_at",
    )
    readonly_fields = ("code", "failing_since", "disabled_at", "why_disabled", "created_at", "updated_at")
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}
    actions = ["enable", "disable", "rotate_secret", "delete_selected"]
    # Deleting is the API's soft delete: the endpoint is deactivated and
    # hidden, its deliveries and attempts stay for support.
    delete_confirmation_template = DELETE_TEMPLATE

    def get_queryset(self, request: HttpRequest) -> QuerySet[WebhookEndpoint]:
        return super().get_queryset(request).filter(deleted_at__isnull=True)

    def get_urls(self) -> list[URLPattern]:
        # Before the defaults: their "<path:object_id>/" catch-all would swallow it.
        return [reveal_url(self), *super().get_urls()]

    def response_add(
        self, request: HttpRequest, obj: WebhookEndpoint, post_url_continue: str | None = None
    ) -> HttpResponse:
        self.message_user(request, "Endpoint cadastrado.", messages.SUCCESS)
        return _secrets_page(self, request, [(obj, obj.secret)])

    @admin.display(description="motivo da desativação", ordering="disabled_reason")
    def why_disabled(self, endpoint: WebhookEndpoint) -> str:
        return readable.disabled_reason(endpoint.disabled_reason)

    # ----------------------------------------------------------------- delete = deactivate

    def get_deleted_objects(
        self, objs: Any, request: HttpRequest
    ) -> tuple[list[str], dict[str, int], set[str], list[str]]:
        # Nothing is destroyed, so nothing related is listed (nor needs a permission).
        endpoints = [str(endpoint) for endpoint in objs]
        return endpoints, {str(self.opts.verbose_name_plural): len(endpoints)}, set(), []

    def delete_model(self, request: HttpRequest, obj: WebhookEndpoint) -> None:
        services.endpoint_delete(endpoint=obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[WebhookEndpoint]) -> None:
        for endpoint in queryset:
            services.endpoint_delete(endpoint=endpoint)

    def response_delete(self, request: HttpRequest, obj_display: str, obj_id: Any) -> HttpResponse:
        self.message_user(
            request,
            f"Endpoint {obj_display} excluído: desativado, com o histórico de entregas mantido.",
            messages.SUCCESS,
        )
        return HttpResponseRedirect(reverse("admin:webhooks_webhookendpoint_changelist"))

    @admin.action(description="Excluir (desativa e mantém o histórico)", permissions=["delete"])
    def delete_selected(self, request: HttpRequest, queryset: QuerySet[WebhookEndpoint]) -> HttpResponse | None:
        """Django's bulk delete, as the API's soft delete."""
        endpoints = list(queryset)
        if request.POST.get("post"):
            for endpoint in endpoints:
                services.endpoint_delete(endpoint=endpoint)
                self.log_change(request, endpoint, "Excluído (desativado; histórico de entregas mantido)")
            self.message_user(
                request,
                plural(
                    len(endpoints),
                    "{n} endpoint excluído: desativado, com o histórico de entregas mantido.",
                    "{n} endpoints excluídos: desativados, com o histórico de entregas mantido.",
                ),
                messages.SUCCESS,
            )
            return None
        context = {
            **self.admin_site.each_context(request),
            "title": "Excluir endpoints de webhook",
            "opts": self.opts,
            "endpoints": endpoints,
            "deleted_objects": [str(endpoint) for endpoint in endpoints],
            "action_checkbox_name": admin.helpers.ACTION_CHECKBOX_NAME,
        }
        return TemplateResponse(request, DELETE_SELECTED_TEMPLATE, context)

    # ----------------------------------------------------------------- state and secret

    @admin.action(description="Ativar", permissions=["change"])
    def enable(self, request: HttpRequest, queryset: QuerySet[WebhookEndpoint]) -> None:
        for endpoint in queryset:
            services.endpoint_enable(endpoint=endpoint)
            self.log_change(request, endpoint, "Ativado")
        self.message_user(
            request, plural(queryset.count(), "{n} endpoint ativado.", "{n} endpoints ativados."), messages.SUCCESS
        )

    @admin.action(description="Desativar", permissions=["change"])
    def disable(self, request: HttpRequest, queryset: QuerySet[WebhookEndpoint]) -> None:
        for endpoint in queryset:
            services.endpoint_disable(endpoint=endpoint, reason=f"disabled by {request.user.get_username()}")
            self.log_change(request, endpoint, "Desativado")
        self.message_user(
            request,
            plural(queryset.count(), "{n} endpoint desativado.", "{n} endpoints desativados."),
            messages.SUCCESS,
        )

    @admin.action(description="Rotacionar segredo (exibido uma vez)", permissions=["change"])
    def rotate_secret(self, request: HttpRequest, queryset: QuerySet[WebhookEndpoint]) -> HttpResponse:
        pairs = []
        for endpoint in queryset:
            pairs.append((endpoint, services.endpoint_rotate_secret(endpoint=endpoint)))
            self.log_change(request, endpoint, "Segredo rotacionado")
        return _secrets_page(self, request, pairs)
