"""/api/due-charges (merchant)."""

from __future__ import annotations

from django.urls import URLPattern, URLResolver, path

from due_charges.apis import DueChargeCancelApi, DueChargeDetailApi, DueChargesApi, DueChargesCsvApi

urlpatterns: list[URLPattern | URLResolver] = [
    path("due-charges", DueChargesApi.as_view(), name="due-charges"),
    path("due-charges.csv", DueChargesCsvApi.as_view(), name="due-charges-csv"),
    path("due-charges/<str:due_charge_id>", DueChargeDetailApi.as_view(), name="due-charge-detail"),
    path("due-charges/<str:due_charge_id>/cancel", DueChargeCancelApi.as_view(), name="due-charge-cancel"),
]
