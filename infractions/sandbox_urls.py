"""The sandbox's MED drivers (infractions.sandbox), under ``/api/``; none at
all when PIX_SANDBOX is off (decisions §8), like the charge drivers."""

from django.conf import settings
from django.urls import URLPattern, URLResolver, path, re_path

from infractions.sandbox import SandboxInfractionDecisionApi, SandboxInfractionOpenApi

urlpatterns: list[URLPattern | URLResolver] = []

if settings.PIX_SANDBOX:
    urlpatterns += [
        path(
            "sandbox/transactions/<str:charge_id>/infraction",
            SandboxInfractionOpenApi.as_view(),
            name="sandbox-transaction-infraction",
        ),
        re_path(
            r"^sandbox/infractions/(?P<infraction_id>[^/]+)/(?P<action>accept|reject|cancel)$",
            SandboxInfractionDecisionApi.as_view(),
            name="sandbox-infraction",
        ),
    ]
