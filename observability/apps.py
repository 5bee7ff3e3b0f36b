"""The back office's admin site (``observability.admin_site``) in place of
Django's default one: every app's ``@admin.register`` lands on it."""

from __future__ import annotations

from django.contrib.admin.apps import AdminConfig


class PixAdminConfig(AdminConfig):
    default_site = "observability.admin_site.PixAdminSite"

    def ready(self) -> None:
        super().ready()  # autodiscover: every app's admin, django-axes' included
        from django.contrib import admin

        from observability.admin_axes import register
        from staff.admin import register as register_staff

        register(admin.site)
        register_staff(admin.site)
