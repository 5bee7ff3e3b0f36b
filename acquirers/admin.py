"""Back office for acquirers. Which acquirers an account may use (grants and
slots) is edited on the account's page, as inlines of ``accounts.admin``."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from acquirers.models import Acquirer


@admin.register(Acquirer)
class AcquirerAdmin(admin.ModelAdmin[Acquirer]):
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
