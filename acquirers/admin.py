"""Back office for acquirers. Which acquirers an account may use (grants and
slots) is edited on the account's page, as inlines of ``accounts.admin``."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest

from acquirers import adapters
from acquirers.adapters.base import InvalidOptions
from acquirers.models import Acquirer, InboundNotification
from pix_service.admin import ReadOnlyAdminMixin


def _adapter_choices() -> list[tuple[str, str]]:
    return [(name, name) for name in adapters.adapter_names()]


class AcquirerForm(forms.ModelForm[Acquirer]):
    """Options are checked by the acquirer's own adapter before they are saved."""

    adapter = forms.ChoiceField(choices=_adapter_choices)

    class Meta:
        model = Acquirer
        fields = "__all__"  # noqa: DJ007 - the admin decides what it shows

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if "adapter" in data:
            try:
                data["options"] = adapters.validate_options(data["adapter"], data.get("options") or {})
            except InvalidOptions as exc:
                self.add_error("options", str(exc))
        return data


@admin.register(Acquirer)
class AcquirerAdmin(admin.ModelAdmin[Acquirer]):
    form = AcquirerForm
    list_display = ("key", "name", "adapter", "enabled", "max_ticket", "default_priority")
    list_filter = ("enabled", "adapter")
    search_fields = ("key", "name")
    readonly_fields = ("created_at", "updated_at")

    def get_exclude(self, request: HttpRequest, obj: Acquirer | None = None) -> tuple[str, ...]:
        # Options hold the provider's credentials (e.g. notification_secret);
        # staff who may not change an acquirer have no use for them.
        if self.has_change_permission(request, obj):
            return ()
        return ("options",)


@admin.register(InboundNotification)
class InboundNotificationAdmin(ReadOnlyAdminMixin, admin.ModelAdmin[InboundNotification]):
    """What acquirers sent us, exactly as received: read-only evidence."""

    list_display = ("received_at", "acquirer", "status", "remote_addr", "processed_at")
    list_filter = ("status", "acquirer")
    search_fields = ("body", "error")
    date_hierarchy = "received_at"
    readonly_fields = ("acquirer", "headers", "body", "remote_addr", "status", "error", "received_at", "processed_at")
