"""The back office's admin site: pt-BR names, apps in the order a merchant's
business reads (accounts, money in, money out, providers, notifications),
and the overview on the index (``observability.overview``)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import URLPattern, URLResolver
from django.utils.decorators import method_decorator
from django.views.decorators.cache import never_cache

from observability.overview import overview_context
from staff.access import awaiting_second_factor, second_factor_passed
from staff.views import second_factor_urls, to_second_step

#: App label → pt-BR name and place on the index; apps not listed come after, as Django sorts them.
APP_ORDER = {
    "accounts": "Contas",
    "payments": "Cobranças",
    "withdrawals": "Saques",
    "infractions": "Infrações MED",
    "recurrences": "Pix Automático",
    "acquirers": "Adquirentes",
    "webhooks": "Webhooks",
    "auth": "Usuários e permissões",
    "axes": "Bloqueio de login (axes)",
}
#: django-axes ships English names; renamed here, not in its models (no migration in a third-party app).
MODEL_NAMES = {
    ("axes", "AccessAttempt"): "Tentativas de login bloqueáveis",
    ("axes", "AccessFailureLog"): "Falhas de login",
    ("axes", "AccessLog"): "Registro de logins",
    ("axes", "AccessAttemptExpiration"): "Expirações de tentativas",
}


class PixAdminSite(admin.AdminSite):
    site_header = "PIX Service — Back office"
    site_title = "PIX Service"
    index_title = "Visão geral"
    # No public site behind the back office: no "Ver o site" link.
    site_url = None
    # Lists get the whole width: with Django's app sidebar beside the filters,
    # a charge's last date column was cut at 1440 px. The index (overview and
    # app list) and the breadcrumbs are the way between lists.
    enable_nav_sidebar = False

    def has_permission(self, request: HttpRequest) -> bool:
        """Active staff past the second factor, as django-otp's OTPAdminSite
        asks: a session verified by a password alone reaches no admin page."""
        return super().has_permission(request) and second_factor_passed(request)

    @method_decorator(never_cache)
    def login(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        """The password step (django-axes throttles it); a member past it goes
        on to the code step (staff.views), or to enrol an authenticator app."""
        answer = super().login(request, extra_context)
        if awaiting_second_factor(request):
            return to_second_step(request, answer)
        return answer

    def get_urls(self) -> list[URLResolver | URLPattern]:
        return [*second_factor_urls(self), *super().get_urls()]

    def get_app_list(self, request: HttpRequest, app_label: str | None = None) -> list[dict[str, Any]]:
        apps = super().get_app_list(request, app_label)
        for app in apps:
            app["name"] = APP_ORDER.get(app["app_label"], app["name"])
            for model in app["models"]:
                model["name"] = MODEL_NAMES.get((app["app_label"], model["object_name"]), model["name"])
        place = {label: i for i, label in enumerate(APP_ORDER)}
        # Stable: apps not listed keep Django's alphabetical order, after the others.
        return sorted(apps, key=lambda app: place.get(app["app_label"], len(place)))

    def index(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> TemplateResponse:
        context = {"overview": overview_context(request, self.name), **(extra_context or {})}
        return super().index(request, context)
