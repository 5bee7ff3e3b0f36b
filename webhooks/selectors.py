"""Reads for webhooks."""

from __future__ import annotations

from typing import Any

import django_filters
from django.db.models import QuerySet

from accounts.models import Account
from api.listing import ListingFilterSet, timestamp_filter
from core.selectors import get_by_uuid
from webhooks.exceptions import EndpointNotFound, EventNotFound
from webhooks.models import EventType, WebhookDelivery, WebhookEndpoint, WebhookEvent


def endpoints_of(account: Account) -> QuerySet[WebhookEndpoint]:
    return WebhookEndpoint.objects.filter(account=account, deleted_at__isnull=True)


def endpoints_counted(*, account_id: Any) -> int:
    """The account's endpoints that count towards its limit: every one not
    deleted (a disabled one may be enabled again)."""
    return WebhookEndpoint.objects.filter(account_id=account_id, deleted_at__isnull=True).count()


def endpoint_get(*, account: Account, endpoint_id: Any) -> WebhookEndpoint:
    return get_by_uuid(endpoints_of(account), endpoint_id, EndpointNotFound)


def event_get(*, account: Account, event_id: Any) -> WebhookEvent:
    return get_by_uuid(WebhookEvent.objects.filter(account=account), event_id, EventNotFound)


class DeliveryFilterSet(ListingFilterSet):
    status = django_filters.ChoiceFilter(field_name="status", choices=WebhookDelivery.Status.choices)
    event_type = django_filters.ChoiceFilter(field_name="event__event_type", choices=EventType.choices)
    created_at_start = timestamp_filter("created_at", "gte")
    created_at_end = timestamp_filter("created_at", "lte")

    class Meta:
        model = WebhookDelivery
        fields: list[str] = []


def deliveries_of(endpoint: WebhookEndpoint) -> QuerySet[WebhookDelivery]:
    return WebhookDelivery.objects.filter(endpoint=endpoint).select_related("event")
