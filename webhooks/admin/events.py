"""Back office for webhook events, their deliveries and attempts (read-only,
failures in readable pt-BR), and resending from the list or an event's page."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html

from core.admin.records import ReadOnlyAdminMixin, ReadOnlyInlineMixin, UUIDSearchMixin
from core.plural import plural
from webhooks import readable, services
from webhooks.models import WebhookAttempt, WebhookDelivery, WebhookEvent

RESEND_TEMPLATE = "admin/webhooks/webhookevent/confirm_resend.html"


def _error_cell(error: str, status_code: int | None) -> str:
    """The readable failure, with the stored text under a collapsed "detalhes técnicos"."""
    text = readable.delivery_error(error, status_code)
    if not error:
        return text or "-"
    return format_html(
        '{}<details class="technical"><summary>detalhes técnicos</summary><code>{}</code></details>', text, error
    )


class WebhookAttemptInline(ReadOnlyInlineMixin, admin.TabularInline[WebhookAttempt, WebhookDelivery]):
    model = WebhookAttempt
    fields = ("number", "attempted_at", "status_code", "latency_ms", "succeeded", "failure", "response_body")
    readonly_fields = fields

    @admin.display(description="falha")
    def failure(self, attempt: WebhookAttempt) -> str:
        return _error_cell(attempt.error, attempt.status_code)


class WebhookDeliveryInline(ReadOnlyInlineMixin, admin.TabularInline[WebhookDelivery, WebhookEvent]):
    model = WebhookDelivery
    show_change_link = True
    fields = ("url", "status", "attempt_count", "last_status_code", "next_attempt_at", "last_failure")
    readonly_fields = fields

    @admin.display(description="última falha")
    def last_failure(self, delivery: WebhookDelivery) -> str:
        return _error_cell(delivery.last_error, delivery.last_status_code)


class EventStatusFilter(admin.SimpleListFilter):
    title = "status"
    parameter_name = "status"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        labels: dict[str, set[str]] = {}
        for statuses in readable.EVENT_STATUS_LABELS.values():
            for value, label in statuses.items():
                labels.setdefault(value, set()).add(label)
        return [(value, " / ".join(sorted(found))) for value, found in labels.items()]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        return queryset.filter(status=self.value()) if self.value() else queryset


@admin.register(WebhookEvent)
class WebhookEventAdmin(UUIDSearchMixin, ReadOnlyAdminMixin, admin.ModelAdmin[WebhookEvent]):
    list_display = ("event_id", "event_type", "status_label", "record_id", "account", "created_at")
    list_filter = ("event_type", EventStatusFilter)
    # The id by index through UUIDSearchMixin (a "=id" field would compare it as text).
    search_fields = ("=record_id",)
    list_select_related = ("account",)
    date_hierarchy = "created_at"
    fields = ("event_id", "account", "event_type", "record_id", "status_label", "data", "created_at")
    readonly_fields = fields
    inlines = [WebhookDeliveryInline]
    actions = ["resend"]

    @admin.display(description="ID", ordering="id")
    def event_id(self, event: WebhookEvent) -> str:
        return str(event.pk)

    @admin.display(description="status", ordering="status")
    def status_label(self, event: WebhookEvent) -> str:
        return readable.event_status_label(event.event_type, event.status)

    def has_resend_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("webhooks.change_webhookdelivery")

    @admin.action(description="Reenviar", permissions=["resend"])
    def resend(self, request: HttpRequest, queryset: QuerySet[WebhookEvent]) -> None:
        total = 0
        for event in queryset:
            total += services.event_resend(event=event)
            self.log_change(request, event, "Reenviado")
        self.message_user(request, plural(total, "{n} entrega agendada.", "{n} entregas agendadas."), messages.SUCCESS)

    def get_urls(self) -> list[URLPattern]:
        resend = path(
            "<path:object_id>/resend/",
            self.admin_site.admin_view(self.resend_view),
            name="webhooks_webhookevent_resend",
        )
        return [resend, *super().get_urls()]

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        extra = {**(extra_context or {}), "can_resend": self.has_resend_permission(request)}
        return super().change_view(request, object_id, form_url, extra)

    def resend_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """The detail page's "Reenviar": a confirmation, then the list action's service."""
        if not self.has_resend_permission(request):
            raise PermissionDenied
        event = get_object_or_404(WebhookEvent.objects.select_related("account"), pk=object_id)
        back = reverse("admin:webhooks_webhookevent_change", args=[event.pk])
        if request.method == "POST":
            self.resend(request, WebhookEvent.objects.filter(pk=event.pk))
            return HttpResponseRedirect(back)
        deliveries = list(event.deliveries.select_related("endpoint"))
        context = {
            **self.admin_site.each_context(request),
            "title": "Reenviar o evento?",
            "opts": self.opts,
            "original": event,
            "deliveries": deliveries,
            "back_url": back,
        }
        return TemplateResponse(request, RESEND_TEMPLATE, context)


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(ReadOnlyAdminMixin, admin.ModelAdmin[WebhookDelivery]):
    list_display = (
        "event_summary",
        "url",
        "status",
        "attempts",
        "http_status",
        "failure",
        "next_attempt_at",
        "created_at",
    )
    list_filter = ("status", "event__event_type")
    search_fields = ("=event__id", "url")
    list_select_related = ("event",)
    fieldsets = (
        (
            None,
            {
                "fields": (
                    "event",
                    "endpoint",
                    "url",
                    "status",
                    "attempt_count",
                    "next_attempt_at",
                    "last_attempt_at",
                    "last_status_code",
                    "failure",
                    "created_at",
                )
            },
        ),
        ("Detalhes técnicos", {"classes": ("collapse",), "fields": ("last_error",)}),
    )
    readonly_fields = (
        "event",
        "endpoint",
        "url",
        "status",
        "attempt_count",
        "next_attempt_at",
        "last_attempt_at",
        "last_status_code",
        "failure",
        "last_error",
        "created_at",
    )
    inlines = [WebhookAttemptInline]

    @admin.display(description="última falha")
    def failure(self, delivery: WebhookDelivery) -> str:
        return readable.delivery_error(delivery.last_error, delivery.last_status_code) or "-"

    # Short list columns: the readable failure must fit the page without scrolling.

    @admin.display(description="evento", ordering="event__created_at")
    def event_summary(self, delivery: WebhookDelivery) -> str:
        event = delivery.event
        return f"{event.get_event_type_display()} · {readable.event_status_label(event.event_type, event.status)}"

    @admin.display(description="tentativas", ordering="attempt_count")
    def attempts(self, delivery: WebhookDelivery) -> int:
        return delivery.attempt_count

    @admin.display(description="HTTP", ordering="last_status_code")
    def http_status(self, delivery: WebhookDelivery) -> str:
        return str(delivery.last_status_code or "-")
