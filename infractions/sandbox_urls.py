"""The sandbox's MED drivers (infractions.sandbox), under ``/api/``; none at
all when PIX_SANDBOX is off (decisions §8), like the charge drivers."""

from django.conf import settings
from django.urls import URLPattern, URLResolver, path

from infractions.sandbox import DECISIONS, SandboxInfractionDecisionApi, SandboxInfractionOpenApi

urlpatterns: list[URLPattern | URLResolver] = []

if settings.PIX_SANDBOX:
    urlpatterns.append(
        path(
            "sandbox/transactions/<str:charge_id>/infraction",
            SandboxInfractionOpenApi.as_view(),
            name="sandbox-transaction-infraction",
        )
    )
    # One route per decision (no path parameter for it): each is its own operation.
    urlpatterns += [
        path(
            f"sandbox/infractions/<str:infraction_id>/{decision}",
            SandboxInfractionDecisionApi.as_view(),
            {"decision": decision},
            name=f"sandbox-infraction-{decision}",
        )
        for decision in DECISIONS
    ]
