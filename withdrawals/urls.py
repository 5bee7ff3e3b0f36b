from django.conf import settings
from django.urls import URLPattern, URLResolver, path

from withdrawals.apis import BalanceApi, SandboxWithdrawalReturnApi, WithdrawalDetailApi, WithdrawalsApi

urlpatterns: list[URLPattern | URLResolver] = [
    path("withdrawals", WithdrawalsApi.as_view(), name="withdrawals"),
    # Before the detail route: "balance" is not an id.
    path("withdrawals/balance", BalanceApi.as_view(), name="withdrawals-balance"),
    path("withdrawals/<str:withdrawal_id>", WithdrawalDetailApi.as_view(), name="withdrawal-detail"),
]

if settings.PIX_SANDBOX:
    urlpatterns.append(
        path(
            "sandbox/withdrawals/<str:withdrawal_id>/return",
            SandboxWithdrawalReturnApi.as_view(),
            name="sandbox-withdrawal-return",
        )
    )
