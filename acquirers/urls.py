from django.urls import path

from acquirers.apis import AcquirerSelectionApi
from acquirers.callbacks import (
    AcquirerNotificationApi,
    AcquirerTokenCobrNotificationApi,
    AcquirerTokenNotificationApi,
    AcquirerTokenPixNotificationApi,
    AcquirerTokenRecNotificationApi,
)

urlpatterns = [
    path("pix-cash-in/acquirers", AcquirerSelectionApi.as_view(), name="acquirer-selection"),
    path("acquirers/<str:key>/notifications", AcquirerNotificationApi.as_view(), name="acquirer-notifications"),
    # The URL registered with an API Pix PSP carries a secret segment; the PSP appends /pix
    # (PUT /webhook/{chave}), /rec (PUT /webhookrec) or /cobr (PUT /webhookcobr).
    path(
        "acquirers/<str:key>/notifications/<str:token>",
        AcquirerTokenNotificationApi.as_view(),
        name="acquirer-notifications-token",
    ),
    path(
        "acquirers/<str:key>/notifications/<str:token>/pix",
        AcquirerTokenPixNotificationApi.as_view(),
        name="acquirer-notifications-token-pix",
    ),
    path(
        "acquirers/<str:key>/notifications/<str:token>/rec",
        AcquirerTokenRecNotificationApi.as_view(),
        name="acquirer-notifications-token-rec",
    ),
    path(
        "acquirers/<str:key>/notifications/<str:token>/cobr",
        AcquirerTokenCobrNotificationApi.as_view(),
        name="acquirer-notifications-token-cobr",
    ),
]
