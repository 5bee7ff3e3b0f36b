"""Webhooks in the back office, in a real browser: deleting an endpoint
keeps it as deactivated, an event is resent from its own page, deliveries
read in pt-BR, and read-only pages offer nothing to save."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from accounts.models import Account
from acquirers.models import InboundNotification
from tests.browser.conftest import screenshot
from tests.factories import AccountFactory, AcquirerFactory
from webhooks import services
from webhooks.models import EventType, WebhookAttempt, WebhookDelivery, WebhookEndpoint, WebhookEvent

RAW_CONNECT_TIMEOUT = (
    "ConnectionError: HTTPSConnectionPool(host='loja.example', port=443): Max retries exceeded with url: /hook "
    "(Caused by ConnectTimeoutError(<urllib3.connection.HTTPSConnection object at 0x7f3a>, "
    "'Connection to loja.example timed out. (connect timeout=3)'))"
)


@pytest.fixture
def enqueued(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Deliveries handed to workers (no broker, no network: the live server runs in this process)."""
    handed: list[Any] = []
    monkeypatch.setattr(services, "_enqueue", lambda delivery_id, countdown: handed.append(delivery_id))
    return handed


def failed_event(account: Account, endpoint: WebhookEndpoint) -> WebhookEvent:
    event = WebhookEvent.objects.create(
        account=account, event_type=EventType.TRANSACTION, record_id=account.pk, status="paid", data={"id": "x"}
    )
    delivery = WebhookDelivery.objects.create(
        event=event,
        endpoint=endpoint,
        url=endpoint.url,
        status=WebhookDelivery.Status.FAILED,
        attempt_count=2,
        last_error=RAW_CONNECT_TIMEOUT[:500],
    )
    WebhookAttempt.objects.create(
        delivery=delivery, number=1, attempted_at=timezone.now(), status_code=500, latency_ms=41, succeeded=False
    )
    WebhookAttempt.objects.create(
        delivery=delivery,
        number=2,
        attempted_at=timezone.now(),
        latency_ms=3002,
        error=RAW_CONNECT_TIMEOUT[:500],
        succeeded=False,
    )
    return event


def test_deleting_an_endpoint_from_its_page_keeps_it_deactivated(staff_page: Any, admin_url: Any) -> None:
    account = AccountFactory()
    endpoint = services.endpoint_create(account=account, url="https://loja.example/hook").endpoint
    event = failed_event(account, endpoint)
    page = staff_page(superuser=True)

    page.goto(admin_url(f"webhooks/webhookendpoint/{endpoint.pk}/change/"))
    page.get_by_role("link", name="Excluir (desativa e mantém o histórico)").click()
    page.wait_for_url(re.compile(rf"/webhooks/webhookendpoint/{endpoint.pk}/delete/$"))
    expect(page.get_by_text("Nada é apagado")).to_be_visible()
    assert "desativado" in page.locator("#content").inner_text()
    page.get_by_role("button", name="Sim, desativar e excluir").click()

    page.wait_for_url(re.compile(r"/webhooks/webhookendpoint/$"))
    assert "excluído: desativado, com o histórico de entregas mantido" in page.locator(".messagelist").inner_text()
    endpoint.refresh_from_db()
    assert (endpoint.is_active, endpoint.deleted_at is not None) == (False, True)
    assert WebhookDelivery.objects.filter(event=event, endpoint=endpoint).count() == 1
    assert WebhookAttempt.objects.filter(delivery__endpoint=endpoint).count() == 2
    assert page.errors == []


def test_resend_an_event_from_its_page(staff_page: Any, admin_url: Any, enqueued: list[Any]) -> None:
    account = AccountFactory()
    endpoint = services.endpoint_create(account=account, url="https://loja.example/hook").endpoint
    event = failed_event(account, endpoint)
    page = staff_page("operations")

    page.goto(admin_url(f"webhooks/webhookevent/{event.pk}/change/"))
    # A read-only page: nothing to save.
    assert page.locator("input[name=_save], input[name=_continue]").count() == 0
    page.get_by_role("link", name="Reenviar").click()
    expect(page.get_by_role("button", name="Confirmar: reenviar")).to_be_visible()
    assert enqueued == []
    page.get_by_role("button", name="Confirmar: reenviar").click()

    page.wait_for_url(re.compile(rf"/webhooks/webhookevent/{event.pk}/change/$"))
    assert "1 entrega agendada." in page.locator(".messagelist").inner_text()
    delivery = event.deliveries.get()
    assert (delivery.status, delivery.attempt_count) == ("pending", 0)
    assert enqueued == [delivery.pk]
    assert page.errors == []


def test_deliveries_read_in_pt_br(staff_page: Any, admin_url: Any) -> None:
    account = AccountFactory()
    endpoint = services.endpoint_create(account=account, url="https://loja.example/hook").endpoint
    event = failed_event(account, endpoint)
    delivery = event.deliveries.get()
    page = staff_page("support")

    page.goto(admin_url("webhooks/webhookdelivery/"))
    listing = page.locator("#result_list").inner_text()
    assert "Tempo esgotado ao conectar" in listing
    assert "HTTPSConnectionPool" not in listing
    assert screenshot(page, "webhook-deliveries").stat().st_size > 0

    page.goto(admin_url(f"webhooks/webhookdelivery/{delivery.pk}/change/"))
    assert page.locator("input[name=_save], input[name=_continue]").count() == 0
    expect(page.get_by_text("Resposta HTTP 500")).to_be_visible()
    # The stored text stays, folded under "Detalhes técnicos" until asked for.
    raw = page.locator(".field-last_error .readonly")
    expect(raw).to_be_hidden()
    page.locator("summary", has_text="Detalhes técnicos").first.click()
    assert "HTTPSConnectionPool" in raw.inner_text()
    screenshot(page, "webhook-delivery")

    page.goto(admin_url(f"webhooks/webhookevent/{event.pk}/change/"))
    assert page.locator("input[name=_save], input[name=_continue]").count() == 0
    assert page.errors == []


def test_inbound_notifications_offer_nothing_to_save(staff_page: Any, admin_url: Any) -> None:
    notification = InboundNotification.objects.create(
        acquirer=AcquirerFactory(key="browser_notif"), headers={}, body="{}", status="rejected", error="bad signature"
    )
    page = staff_page(superuser=True)  # even a superuser: evidence is never edited
    page.goto(admin_url(f"acquirers/inboundnotification/{notification.pk}/change/"))
    expect(page.get_by_role("heading", name="Visualizar notificação recebida")).to_be_visible()
    assert page.locator("input[name=_save], input[name=_continue], .deletelink").count() == 0
    expect(page.get_by_text("Rejeitada")).to_be_visible()
    assert page.errors == []


def test_reset_a_circuit_from_the_acquirer_page(
    staff_page: Any, admin_url: Any, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from acquirers import breaker

    settings.ACQUIRER_BREAKER_ENABLED = True
    settings.ACQUIRER_BREAKER_FAILURES = 3
    monkeypatch.setattr(breaker, "_suspended_until", 0.0)
    acquirer = AcquirerFactory(key="browser_reset", name="Adquirente Teste", max_ticket=123_456)
    for _ in range(3):
        breaker.record(acquirer, outcome="unavailable", latency_ms=5)
    page = staff_page("operations")

    page.goto(admin_url("acquirers/acquirer/"))
    assert "R$ 1.234,56" in page.locator("#result_list").inner_text()
    screenshot(page, "acquirers")
    page.get_by_role("link", name="browser_reset").click()
    page.get_by_role("link", name="Resetar o circuit breaker").click()
    assert "aberto (3 falhas seguidas)" in page.locator("#content").inner_text()
    page.get_by_role("button", name="Confirmar: resetar o circuit breaker").click()

    page.wait_for_url(re.compile(rf"/acquirers/acquirer/{acquirer.pk}/change/$"))
    assert "1 circuito fechado." in page.locator(".messagelist").inner_text()
    found = breaker.snapshot(acquirer)
    assert found is not None
    assert found.state is breaker.State.CLOSED
    assert page.errors == []
