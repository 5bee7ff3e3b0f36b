from django.urls import path

from webhooks.apis import (
    WebhookDeliveriesApi,
    WebhookDetailApi,
    WebhookEventRedeliverApi,
    WebhookRotateSecretApi,
    WebhooksApi,
)

urlpatterns = [
    path("webhooks", WebhooksApi.as_view(), name="webhooks"),
    path("webhooks/<str:endpoint_id>", WebhookDetailApi.as_view(), name="webhook-detail"),
    path("webhooks/<str:endpoint_id>/rotate-secret", WebhookRotateSecretApi.as_view(), name="webhook-rotate"),
    path("webhooks/<str:endpoint_id>/deliveries", WebhookDeliveriesApi.as_view(), name="webhook-deliveries"),
    path("webhook-events/<str:event_id>/redeliver", WebhookEventRedeliverApi.as_view(), name="webhook-redeliver"),
]
