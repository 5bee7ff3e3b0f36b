"""/api/due-charges (merchant)."""

from __future__ import annotations

from django.urls import URLPattern, URLResolver, path

from due_charges.apis import DueChargeCancelApi, DueChargeDetailApi, DueChargesApi, DueChargesCsvApi
from due_charges.batch_apis import BatchCsvApi, BatchDetailApi, BatchesApi, BatchItemsApi

# Batches. "batches" is not a charge id: these must stay before the
# due-charges/<str:due_charge_id> pattern, or a GET of the batches' paths reads as a charge's.
urlpatterns: list[URLPattern | URLResolver] = [
    path("due-charges/batches", BatchesApi.as_view(), name="due-charge-batches"),
    path("due-charges/batches/<str:batch_id>", BatchDetailApi.as_view(), name="due-charge-batch-detail"),
    path("due-charges/batches/<str:batch_id>/items", BatchItemsApi.as_view(), name="due-charge-batch-items"),
    path("due-charges/batches/<str:batch_id>/items.csv", BatchCsvApi.as_view(), name="due-charge-batch-csv"),
    path("due-charges", DueChargesApi.as_view(), name="due-charges"),
    path("due-charges.csv", DueChargesCsvApi.as_view(), name="due-charges-csv"),
    path("due-charges/<str:due_charge_id>", DueChargeDetailApi.as_view(), name="due-charge-detail"),
    path("due-charges/<str:due_charge_id>/cancel", DueChargeCancelApi.as_view(), name="due-charge-cancel"),
]
