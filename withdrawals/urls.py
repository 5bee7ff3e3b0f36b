from django.conf import settings
from django.urls import URLPattern, URLResolver, path

from withdrawals.apis import (
    BalanceApi,
    SandboxWithdrawalReturnApi,
    SettlementApi,
    StatementApi,
    StatementCsvApi,
    WithdrawalDetailApi,
    WithdrawalsApi,
    WithdrawalsCsvApi,
)
from withdrawals.batch_apis import PayoutBatchCsvApi, PayoutBatchDetailApi, PayoutBatchesApi, PayoutBatchItemsApi
from withdrawals.receipt_apis import WithdrawalReceiptApi, WithdrawalReceiptPdfApi
from withdrawals.scheduled_apis import WithdrawalCancelApi

urlpatterns: list[URLPattern | URLResolver] = [
    path("withdrawals", WithdrawalsApi.as_view(), name="withdrawals"),
    path("withdrawals.csv", WithdrawalsCsvApi.as_view(), name="withdrawals-csv"),
    # Before the detail route: "balance" is not an id.
    path("withdrawals/balance", BalanceApi.as_view(), name="withdrawals-balance"),
    path("withdrawals/batches", PayoutBatchesApi.as_view(), name="withdrawal-batches"),
    path("withdrawals/batches/<str:batch_id>", PayoutBatchDetailApi.as_view(), name="withdrawal-batch"),
    path("withdrawals/batches/<str:batch_id>/items", PayoutBatchItemsApi.as_view(), name="withdrawal-batch-items"),
    path("withdrawals/batches/<str:batch_id>/items.csv", PayoutBatchCsvApi.as_view(), name="withdrawal-batch-csv"),
    path("withdrawals/<str:withdrawal_id>", WithdrawalDetailApi.as_view(), name="withdrawal-detail"),
    path("withdrawals/<str:withdrawal_id>/cancel", WithdrawalCancelApi.as_view(), name="withdrawal-cancel"),
    path("withdrawals/<str:withdrawal_id>/receipt", WithdrawalReceiptApi.as_view(), name="withdrawal-receipt"),
    path(
        "withdrawals/<str:withdrawal_id>/receipt.pdf", WithdrawalReceiptPdfApi.as_view(), name="withdrawal-receipt-pdf"
    ),
    path("statement", StatementApi.as_view(), name="statement"),
    path("statement.csv", StatementCsvApi.as_view(), name="statement-csv"),
    path("settlements", SettlementApi.as_view(), name="settlements"),
]

if settings.PIX_SANDBOX:
    urlpatterns.append(
        path(
            "sandbox/withdrawals/<str:withdrawal_id>/return",
            SandboxWithdrawalReturnApi.as_view(),
            name="sandbox-withdrawal-return",
        )
    )
