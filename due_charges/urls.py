"""/api/due-charges (merchant) and the sandbox's payer of due-date charges."""

from __future__ import annotations

from django.conf import settings
from django.urls import URLPattern, URLResolver, path

from due_charges.apis import DueChargeCancelApi, DueChargeDetailApi, DueChargesApi, DueChargesCsvApi
from due_charges.batch_apis import BatchCsvApi, BatchDetailApi, BatchesApi, BatchItemsApi
from due_charges.sandbox import SandboxDueChargePayApi

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

# Decisions §8: the sandbox's payer does not exist at all when PIX_SANDBOX is off.
if settings.PIX_SANDBOX:
    urlpatterns.append(
        path("sandbox/due-charges/<str:charge_id>/pay", SandboxDueChargePayApi.as_view(), name="sandbox-due-charge-pay")
    )
