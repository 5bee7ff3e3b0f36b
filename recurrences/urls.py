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
    pass
