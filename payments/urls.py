from django.conf import settings
from django.urls import URLPattern, URLResolver, path, re_path

from payments.apis import (
    ChargeDetailApi,
    ChargeQrCodeApi,
    ChargesApi,
    ChargesCsvApi,
    SandboxChargeApi,
)
from payments.refund_apis import ChargeRefundApi

urlpatterns: list[URLPattern | URLResolver] = [
    path("transactions", ChargesApi.as_view(), name="transactions"),
    path("transactions.csv", ChargesCsvApi.as_view(), name="transactions-csv"),
    path("transactions/<str:charge_id>", ChargeDetailApi.as_view(), name="transaction-detail"),
    path("transactions/<str:charge_id>/qrcode", ChargeQrCodeApi.as_view(), name="transaction-qrcode"),
    path("transactions/<str:charge_id>/refund", ChargeRefundApi.as_view(), name="transaction-refund"),
]

# Decisions §8: the sandbox drivers do not exist at all when PIX_SANDBOX is off.
if settings.PIX_SANDBOX:
    urlpatterns.append(
        re_path(
            r"^sandbox/transactions/(?P<charge_id>[^/]+)/(?P<action>pay|fail|refund|chargeback)$",
            SandboxChargeApi.as_view(),
            name="sandbox-transaction",
        )
    )
