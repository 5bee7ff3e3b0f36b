"""Back office for webhook endpoints."""

from __future__ import annotations

from django.contrib import admin
from django.db import models

from webhooks.models import WebhookEndpoint


@admin.register(WebhookEndpoint)
class WebhookEndpointAdmin(admin.ModelAdmin[WebhookEndpoint]):
    list_display = ("url", "account", "is_active", "created_at")
    list_filter = ("is_active",)
    search_fields = ("url",)
    list_select_related = ("account",)
    autocomplete_fields = ("account",)
    fields = ("account", "ref", "url", "is_active", "code", "secret", "created_at", "updated_at")
    # Generated with the endpoint; receivers are configured with these values,
    # so editing them here would silently break every signature check.
    readonly_fields = ("code", "secret", "created_at", "updated_at")
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}
