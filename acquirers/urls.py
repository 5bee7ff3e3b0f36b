from django.urls import path

from acquirers.apis import AcquirerNotificationApi, AcquirerSelectionApi

urlpatterns = [
    path("pix-cash-in/acquirers", AcquirerSelectionApi.as_view(), name="acquirer-selection"),
    path("acquirers/<str:key>/notifications", AcquirerNotificationApi.as_view(), name="acquirer-notifications"),
]
