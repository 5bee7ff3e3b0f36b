"""Reads for webhooks."""

from __future__ import annotations

import uuid
from typing import Any

import django_filters
from django.db.models import QuerySet

from accounts.models import Account
from pix_service.listing import timestamp_filter
from webhooks.exceptions import EndpointNotFound, EventNotFound
from webhooks.models import EventType, WebhookDelivery, WebhookEndpoint, WebhookEvent


def endpoints_of(account: Account) -> QuerySet[WebhookEndpoint]:
    return WebhookEndpoint.objects.filter(account=account, deleted_at__isnull=True)


def endpoint_get(*, account: Account, endpoint_id: Any) -> WebhookEndpoint:
    try:
        key = uuid.UUID(str(endpoint_id))
    except ValueError:
        raise EndpointNotFound() from None
    endpoint = endpoints_of(account).filter(pk=key).first()
    if endpoint is None:
        raise EndpointNotFound()
    return endpoint


def event_get(*, account: Account, event_id: Any) -> WebhookEvent:
    try:
        key = uuid.UUID(str(event_id))
    except ValueError:
        raise EventNotFound() from None
    event = WebhookEvent.objects.filter(account=account, pk=key).first()
    if event is None:
        raise EventNotFound()
    return event


class DeliveryFilterSet(django_filters.FilterSet):
    status = django_filters.ChoiceFilter(field_name="status", choices=WebhookDelivery.Status.choices)
    event_type = django_filters.ChoiceFilter(field_name="event__event_type", choices=EventType.choices)
    created_at_start = timestamp_filter("created_at", "gte")
    created_at_end = timestamp_filter("created_at", "lte")

    class Meta:
        model = WebhookDelivery
        fields: list[str] = []


def deliveries_of(endpoint: WebhookEndpoint) -> QuerySet[WebhookDelivery]:
    return WebhookDelivery.objects.filter(endpoint=endpoint).select_related("event")
