"""Back office for acquirers: pt-BR labels, the max ticket in reais, the
circuit reset from the acquirer's page, constraints said on their field,
read-only notifications."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.admin.models import LogEntry
from django.test import Client
from django.urls import reverse

from accounts.models import Account
from acquirers import breaker
from acquirers.admin import MAX_TICKET_NEGATIVE, PRIORITY_RANGE, AcquirerSlotForm
from acquirers.models import Acquirer, AcquirerSlot, InboundNotification
from tests.factories import AcquirerFactory

pytestmark = pytest.mark.django_db

ACQUIRERS = reverse("admin:acquirers_acquirer_changelist")
ADD = reverse("admin:acquirers_acquirer_add")
FAILURES = 3
FORM = {
    "key": "nova_adq",
    "name": "Nova",
    "nominal": "",
    "adapter": "sandbox",
    "options": '{"charge": "ok"}',
    "enabled": "on",
    "max_ticket": "1.234,56",
    "conversion_percent_override": "90",
    "default_priority": "",
    "connect_timeout_ms": "3000",
    "read_timeout_ms": "10000",
}


@pytest.fixture(autouse=True)
def _breaker(settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    settings.ACQUIRER_BREAKER_ENABLED = True
    settings.ACQUIRER_BREAKER_FAILURES = FAILURES
    settings.ACQUIRER_BREAKER_MIN_CALLS = 10
    settings.ACQUIRER_BREAKER_COOLDOWN = 30.0
    monkeypatch.setattr(breaker, "_suspended_until", 0.0)


def opened(acquirer: Acquirer) -> None:
    for _ in range(FAILURES):
        breaker.record(acquirer, outcome="unavailable", latency_ms=5)
    assert breaker.snapshot(acquirer).state is breaker.State.OPEN  # type: ignore[union-attr]


# --------------------------------------------------------------------------- one language, money


def test_acquirer_pages_are_pt_br_and_show_money_in_reais(admin_client: Client) -> None:
    acquirer = AcquirerFactory(key="adq_reais", max_ticket=123_456)
    listing = admin_client.get(ACQUIRERS).content.decode()
    for shown in ("Adquirentes", "Chave", "Nome", "Adaptador", "Ativa", "Ticket máximo", "Prioridade padrão"):
        assert shown in listing, shown
    assert "R$ 1.234,56" in listing
    assert "123456" not in listing

    page = admin_client.get(reverse("admin:acquirers_acquirer_change", args=[acquirer.pk])).content.decode()
    assert 'value="1.234,56"' in page
    assert "Em reais, por exemplo 1.234,56." in page
    assert "Posição na cadeia padrão da plataforma" in page
    for english in ("Max ticket", "Default priority", "Connect timeout", "Position in the platform"):
        assert english not in page, english


def test_max_ticket_is_typed_in_reais(admin_client: Client) -> None:
    response = admin_client.post(ADD, FORM)
    assert response.status_code == 302, response.context["adminform"].form.errors
    assert Acquirer.objects.get(key="nova_adq").max_ticket == 123_456


def test_account_page_inlines_are_pt_br(admin_client: Client, account: Account) -> None:
    page = admin_client.get(reverse("admin:accounts_account_change", args=[account.pk])).content.decode()
    assert "Liberações de adquirente" in page
    assert "Posições de adquirente" in page
    assert "Adquirente liberadas" not in page


# --------------------------------------------------------------------------- constraints on the field


def test_a_negative_max_ticket_is_said_on_the_field_and_nothing_is_saved(admin_client: Client) -> None:
    response = admin_client.post(ADD, {**FORM, "max_ticket": "-1,00"})
    assert response.status_code == 200
    assert response.context["adminform"].form.errors == {"max_ticket": [MAX_TICKET_NEGATIVE]}
    page = response.content.decode()
    assert "Restrição" not in page
    assert "violada" not in page
    assert not Acquirer.objects.filter(key="nova_adq").exists()


def test_a_bad_key_is_said_on_the_field(admin_client: Client) -> None:
    response = admin_client.post(ADD, {**FORM, "key": "Com Espaço"})
    assert response.status_code == 200
    assert response.context["adminform"].form.errors == {"key": ["Use apenas letras minúsculas, números e _."]}
    assert "Restrição" not in response.content.decode()
    assert not Acquirer.objects.filter(name="Nova").exists()


def test_a_slot_priority_out_of_range_is_said_on_the_field(account: Account) -> None:
    acquirer = AcquirerFactory(key="adq_slot")
    form = AcquirerSlotForm(
        data={"account": str(account.pk), "acquirer": str(acquirer.pk), "purpose": "cashout", "priority": "4"}
    )
    assert not form.is_valid()
    assert form.errors == {"priority": [PRIORITY_RANGE]}
    assert not AcquirerSlot.objects.exists()


# --------------------------------------------------------------------------- circuit reset from the page


def test_reset_the_circuit_from_the_acquirer_page(admin_client: Client) -> None:
    acquirer = AcquirerFactory(key="adq_reset_page")
    opened(acquirer)
    change = reverse("admin:acquirers_acquirer_change", args=[acquirer.pk])
    reset = reverse("admin:acquirers_acquirer_reset_circuit", args=[acquirer.pk])
    assert f'href="{reset}"' in admin_client.get(change).content.decode()

    confirm = admin_client.get(reset).content.decode()
    assert "está <strong>aberto (3 falhas seguidas)</strong>" in confirm
    assert "Confirmar: resetar o circuit breaker" in confirm
    assert breaker.snapshot(acquirer).state is breaker.State.OPEN  # type: ignore[union-attr]

    response = admin_client.post(reset, follow=True)

    assert response.redirect_chain[-1][0] == change
    assert "1 circuito fechado." in response.content.decode()
    found = breaker.snapshot(acquirer)
    assert found is not None
    assert (found.state, found.failures) == (breaker.State.CLOSED, 0)
    entry = LogEntry.objects.get(object_id=str(acquirer.pk))
    assert entry.get_change_message() == "Circuit breaker resetado (circuito fechado)"


def test_support_cannot_reset_from_the_acquirer_page(staff_client: Any) -> None:
    client = staff_client("support")
    acquirer = AcquirerFactory(key="adq_reset_support")
    opened(acquirer)
    reset = reverse("admin:acquirers_acquirer_reset_circuit", args=[acquirer.pk])
    assert reset not in client.get(reverse("admin:acquirers_acquirer_change", args=[acquirer.pk])).content.decode()
    assert client.get(reset).status_code == 403
    assert client.post(reset).status_code == 403
    assert breaker.snapshot(acquirer).state is breaker.State.OPEN  # type: ignore[union-attr]


# --------------------------------------------------------------------------- read-only notifications


def test_inbound_notifications_are_read_only_and_pt_br(admin_client: Client) -> None:
    notification = InboundNotification.objects.create(
        acquirer=AcquirerFactory(key="adq_notif"), headers={}, body="{}", status="rejected", error="bad signature"
    )
    listing = admin_client.get(reverse("admin:acquirers_inboundnotification_changelist")).content.decode()
    for shown in ("Notificações recebidas", "Recebida em", "Endereço de origem", "Processada em", "Rejeitada"):
        assert shown in listing, shown
    url = reverse("admin:acquirers_inboundnotification_change", args=[notification.pk])
    page = admin_client.get(url).content.decode()
    assert 'name="_save"' not in page
    assert admin_client.post(url, {}).status_code == 403
