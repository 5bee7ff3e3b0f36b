"""/api/recurrences (merchant) and the sandbox's payer's bank of Pix Automático."""

from __future__ import annotations

from django.conf import settings
from django.urls import URLPattern, URLResolver, path

from recurrences.apis import (
    RecurrenceCancelApi,
    RecurrenceCycleAmountApi,
    RecurrenceCycleApi,
    RecurrenceCyclesApi,
    RecurrenceDetailApi,
    RecurrencesApi,
)
from recurrences.sandbox_apis import (
    SandboxCycleFailApi,
    SandboxCyclePayApi,
    SandboxRecurrenceApproveApi,
    SandboxRecurrenceExpireApi,
    SandboxRecurrencePayerCancelApi,
    SandboxRecurrenceRejectApi,
)

urlpatterns: list[URLPattern | URLResolver] = [
    path("recurrences", RecurrencesApi.as_view(), name="recurrences"),
    path("recurrences/<str:recurrence_id>", RecurrenceDetailApi.as_view(), name="recurrence-detail"),
    path("recurrences/<str:recurrence_id>/cancel", RecurrenceCancelApi.as_view(), name="recurrence-cancel"),
    path("recurrences/<str:recurrence_id>/cycles", RecurrenceCyclesApi.as_view(), name="recurrence-cycles"),
    path("recurrences/<str:recurrence_id>/cycles/<str:index>", RecurrenceCycleApi.as_view(), name="recurrence-cycle"),
    path(
        "recurrences/<str:recurrence_id>/cycles/<str:index>/amount",
        RecurrenceCycleAmountApi.as_view(),
        name="recurrence-cycle-amount",
    ),
]

# Decisions §8: the sandbox's payer's bank does not exist at all when PIX_SANDBOX is off.
if settings.PIX_SANDBOX:
    _SANDBOX = "sandbox/recurrences/<str:recurrence_id>"
    urlpatterns += [
        path(f"{_SANDBOX}/approve", SandboxRecurrenceApproveApi.as_view(), name="sandbox-recurrence-approve"),
        path(f"{_SANDBOX}/reject", SandboxRecurrenceRejectApi.as_view(), name="sandbox-recurrence-reject"),
        path(f"{_SANDBOX}/expire", SandboxRecurrenceExpireApi.as_view(), name="sandbox-recurrence-expire"),
        path(
            f"{_SANDBOX}/payer-cancel",
            SandboxRecurrencePayerCancelApi.as_view(),
            name="sandbox-recurrence-payer-cancel",
        ),
        path(f"{_SANDBOX}/cycles/<str:index>/pay", SandboxCyclePayApi.as_view(), name="sandbox-cycle-pay"),
        path(f"{_SANDBOX}/cycles/<str:index>/fail", SandboxCycleFailApi.as_view(), name="sandbox-cycle-fail"),
    ]
