"""/api/due-charges (merchant) and the sandbox's due-date drivers."""

from __future__ import annotations

from django.urls import URLPattern, URLResolver, path

from due_charges.batch_apis import BatchCsvApi, BatchDetailApi, BatchesApi, BatchItemsApi

urlpatterns: list[URLPattern | URLResolver] = []

# Batches. "batches" is not a charge id: these must stay before any
# due-charges/<str:charge_id> pattern, or a GET of the batches' paths reads as a charge's.
urlpatterns[:0] = [
    path("due-charges/batches", BatchesApi.as_view(), name="due-charge-batches"),
    path("due-charges/batches/<str:batch_id>", BatchDetailApi.as_view(), name="due-charge-batch-detail"),
    path("due-charges/batches/<str:batch_id>/items", BatchItemsApi.as_view(), name="due-charge-batch-items"),
    path("due-charges/batches/<str:batch_id>/items.csv", BatchCsvApi.as_view(), name="due-charge-batch-csv"),
]
