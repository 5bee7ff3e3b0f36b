"""Back office for webhooks: endpoints, events, deliveries, resending."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from accounts.models import Account
from webhooks.models import EventType, WebhookDelivery, WebhookEndpoint, WebhookEvent
from webhooks.services import endpoint_create

pytestmark = pytest.mark.django_db

ENDPOINTS = reverse("admin:webhooks_webhookendpoint_changelist")
EVENTS = reverse("admin:webhooks_webhookevent_changelist")


def make_event(account: Account, endpoint: WebhookEndpoint, status: str) -> WebhookEvent:
    event = WebhookEvent.objects.create(
        account=account, event_type=EventType.TRANSACTION, record_id=account.pk, status="paid", data={"id": "x"}
    )
    WebhookDelivery.objects.create(
        event=event,
        endpoint=endpoint,
        url=endpoint.url,
        status=status,
        attempt_count=3,
        next_attempt_at=timezone.now() if status == "pending" else None,
    )
    return event


def test_health_filter_shows_failing_and_disabled(admin_client: Client, account: Account) -> None:
    healthy = endpoint_create(account=account, url="https://a.example/hook").endpoint
    failing = endpoint_create(account=account, url="https://b.example/hook").endpoint
    disabled = endpoint_create(account=account, url="https://c.example/hook").endpoint
    WebhookEndpoint.objects.filter(pk=failing.pk).update(failing_since=timezone.now() - dt.timedelta(hours=3))
    WebhookEndpoint.objects.filter(pk=disabled.pk).update(is_active=False, disabled_reason="410 Gone")

    def listed(health: str) -> set[str]:
        page = admin_client.get(ENDPOINTS, {"health": health}).content.decode()
        return {e.url for e in (healthy, failing, disabled) if e.url in page}

    assert listed("failing") == {failing.url}
    assert listed("disabled") == {disabled.url}
    assert listed("healthy") == {healthy.url}


def test_secret_is_never_shown_on_the_change_page(admin_client: Client, account: Account) -> None:
    created = endpoint_create(account=account, url="https://a.example/hook")
    page = admin_client.get(reverse("admin:webhooks_webhookendpoint_change", args=[created.endpoint.pk]))
    assert page.status_code == 200
    assert created.secret not in page.content.decode()


def test_rotate_shows_the_new_secret_once(admin_client: Client, account: Account) -> None:
    created = endpoint_create(account=account, url="https://a.example/hook")
    posted = admin_client.post(ENDPOINTS, {"action": "rotate_secret", "_selected_action": [str(created.endpoint.pk)]})
    endpoint = WebhookEndpoint.objects.get(pk=created.endpoint.pk)
    assert endpoint.secret != created.secret
    assert endpoint.previous_secret == created.secret
    # Post/Redirect/Get: the POST answers with a redirect, the page after it shows the secret.
    assert posted.status_code == 303
    assert endpoint.secret not in posted.content.decode()
    response = admin_client.get(posted["Location"])
    assert endpoint.secret in response.content.decode()
    assert "no-store" in response["Cache-Control"]
    later = admin_client.get(reverse("admin:webhooks_webhookendpoint_change", args=[endpoint.pk])).content.decode()
    assert endpoint.secret not in later
    # Reloading the page rotates nothing again and shows nothing.
    reloaded = admin_client.get(posted["Location"], follow=True).content.decode()
    assert endpoint.secret not in reloaded
    assert WebhookEndpoint.objects.get(pk=endpoint.pk).secret == endpoint.secret


def test_adding_an_endpoint_shows_its_secret(admin_client: Client, account: Account) -> None:
    response = admin_client.post(
        reverse("admin:webhooks_webhookendpoint_add"),
        {
            "account": str(account.pk),
            "ref": "",
            "url": "https://new.example/hook",
            "description": "",
            "is_active": "on",
        },
    )
    endpoint = WebhookEndpoint.objects.get(url="https://new.example/hook")
    assert response.status_code == 303
    assert endpoint.secret in admin_client.get(response["Location"]).content.decode()
    assert endpoint.secret not in admin_client.get(response["Location"], follow=True).content.decode()


def test_disable_and_enable(admin_client: Client, account: Account) -> None:
    endpoint = endpoint_create(account=account, url="https://a.example/hook").endpoint
    pending = make_event(account, endpoint, "pending")
    admin_client.post(ENDPOINTS, {"action": "disable", "_selected_action": [str(endpoint.pk)]})
    endpoint.refresh_from_db()
    assert not endpoint.is_active
    assert "admin" in endpoint.disabled_reason
    assert pending.deliveries.get().status == "failed"

    admin_client.post(ENDPOINTS, {"action": "enable", "_selected_action": [str(endpoint.pk)]})
    endpoint.refresh_from_db()
    assert endpoint.is_active
    assert endpoint.disabled_reason == ""


def test_resend_restarts_every_delivery(
    admin_client: Client, account: Account, django_capture_on_commit_callbacks: Any
) -> None:
    endpoint = endpoint_create(account=account, url="https://a.example/hook").endpoint
    event = make_event(account, endpoint, "succeeded")
    with django_capture_on_commit_callbacks() as callbacks:
        admin_client.post(EVENTS, {"action": "resend", "_selected_action": [str(event.pk)]})
    delivery = event.deliveries.get()
    assert (delivery.status, delivery.attempt_count) == ("pending", 0)
    assert len(callbacks) == 1


def test_event_list_and_search(admin_client: Client, account: Account) -> None:
    endpoint = endpoint_create(account=account, url="https://a.example/hook").endpoint
    event = make_event(account, endpoint, "failed")
    assert str(event.pk) in admin_client.get(EVENTS, {"q": str(event.pk)}).content.decode()
    assert admin_client.get(EVENTS, {"q": "not-a-uuid"}).status_code == 200
    page = admin_client.get(reverse("admin:webhooks_webhookevent_change", args=[event.pk])).content.decode()
    assert endpoint.url in page  # its deliveries inline
    assert admin_client.get(reverse("admin:webhooks_webhookevent_add")).status_code == 403


def test_support_cannot_act(staff_client: Any, account: Account) -> None:
    client = staff_client("support")
    endpoint = endpoint_create(account=account, url="https://a.example/hook").endpoint
    assert client.get(ENDPOINTS).status_code == 200
    client.post(ENDPOINTS, {"action": "disable", "_selected_action": [str(endpoint.pk)]})
    endpoint.refresh_from_db()
    assert endpoint.is_active
    assert 'value="resend"' not in client.get(EVENTS).content.decode()


def test_operations_can_resend(staff_client: Any, account: Account) -> None:
    client = staff_client("operations")
    endpoint = endpoint_create(account=account, url="https://a.example/hook").endpoint
    event = make_event(account, endpoint, "failed")
    client.post(EVENTS, {"action": "resend", "_selected_action": [str(event.pk)]})
    assert event.deliveries.get().status == "pending"
