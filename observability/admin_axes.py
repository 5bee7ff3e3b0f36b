"""django-axes' back-office pages in pt-BR, without touching its models (a
verbose name is migration state: renaming one would ask for a migration in a
third-party app). Its pages are re-registered with the names staff read:
page titles, and the one column its own catalogue leaves in English
(``Attempt Time``). The other labels come translated from django-axes."""

from __future__ import annotations

from typing import Any

from axes.admin import AccessAttemptAdmin, AccessFailureLogAdmin, AccessLogAdmin
from axes.models import AccessAttempt, AccessFailureLog, AccessLog
from django.contrib import admin
from django.http import HttpRequest, HttpResponse

from core.admin.lists import titled

#: Model → (singular, plural) as the index and the pages name them.
NAMES: dict[type[Any], tuple[str, str]] = {
    AccessAttempt: ("tentativa de login", "Tentativas de login bloqueáveis"),
    AccessFailureLog: ("falha de login", "Falhas de login"),
    AccessLog: ("registro de login", "Registro de logins"),
}


@admin.display(description="momento", ordering="attempt_time")
def attempt_time(record: Any) -> Any:
    return record.attempt_time


def _pt_br(base: type[admin.ModelAdmin[Any]], model: type[Any]) -> type[admin.ModelAdmin[Any]]:
    singular, plural = NAMES[model]

    class PtBr(base):  # type: ignore[valid-type,misc]
        list_display = [attempt_time if name == "attempt_time" else name for name in base.list_display]
        list_filter = [
            ("attempt_time", titled(admin.DateFieldListFilter, "momento")) if name == "attempt_time" else name
            for name in base.list_filter
        ]

        def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
            return super().changelist_view(request, {"title": plural, **(extra_context or {})})  # type: ignore[no-any-return]

        def change_view(
            self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: dict[str, Any] | None = None
        ) -> HttpResponse:
            context = {"title": singular.capitalize(), **(extra_context or {})}
            return super().change_view(request, object_id, form_url, context)  # type: ignore[no-any-return]

    PtBr.__name__ = base.__name__
    return PtBr


def register(site: admin.AdminSite) -> None:
    """Replace django-axes' registrations on ``site`` with the pt-BR ones."""
    for model, base in (
        (AccessAttempt, AccessAttemptAdmin),
        (AccessFailureLog, AccessFailureLogAdmin),
        (AccessLog, AccessLogAdmin),
    ):
        if site.is_registered(model):
            site.unregister(model)
        site.register(model, _pt_br(base, model))
