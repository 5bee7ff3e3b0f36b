from django.urls import path

from withdrawals.apis import BalanceApi

urlpatterns = [
    path("withdrawals/balance", BalanceApi.as_view(), name="withdrawals-balance"),
]
