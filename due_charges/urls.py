"""/api/due-charges (merchant) and the sandbox's due-date drivers."""

from __future__ import annotations

from django.conf import settings
from django.urls import URLPattern, URLResolver, path

from due_charges.sandbox import SandboxDueChargePayApi

urlpatterns: list[URLPattern | URLResolver] = []

# Decisions §8: the sandbox's payer does not exist at all when PIX_SANDBOX is off.
if settings.PIX_SANDBOX:
    urlpatterns.append(
        path("sandbox/due-charges/<str:charge_id>/pay", SandboxDueChargePayApi.as_view(), name="sandbox-due-charge-pay")
    )
