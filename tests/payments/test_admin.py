"""Back office for charges and acquirers: finding, inspecting, acting
through the transition service, and what each staff group may do."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.admin.models import LogEntry
from django.test import Client
from django.urls import reverse

from accounts.models import Account, LedgerEntry, MoneyActionRequest
from accounts.selectors import available_balance
from acquirers.models import Acquirer, InboundNotification
from payments.models import Charge, ChargeStatus, ChargeTransition
from payments.services import charge_transition
from tests.factories import AcquirerFactory
from tests.helpers import admin_action, admin_messages

pytestmark = pytest.mark.django_db

CHARGES = reverse("admin:payments_charge_changelist")
REQUESTS = reverse("admin:accounts_moneyactionrequest_changelist")
REASON = "MED analisado pelo time de risco"
BODY = {
    "payment_method": "pix",
    "amount": 1000,
    "buyer": {"buyer_name": "Fulano", "buyer_document": "52998224725", "buyer_phone": "11999998888"},
}


@pytest.fixture
def charge(api: Any, account: Account) -> Charge:
    AcquirerFactory(key="alpha", default_priority=1)
    response = api.post("/api/transactions", BODY, format="json")
    assert response.status_code == 201
    return Charge.objects.get(pk=response.json()["data"]["id"])


def act(client: Client, action: str, charge: Charge, reason: str | None = REASON) -> Any:
    """The action, confirmed with ``reason`` when it moves money (``None``: the changelist's POST only)."""
    return admin_action(client, CHARGES, action, [charge.pk], reason=reason)


def ledger_kinds(account: Account) -> list[str]:
    return list(LedgerEntry.objects.filter(account=account).order_by("id").values_list("kind", flat=True))


def test_list_filters_and_search(admin_client: Client, charge: Charge) -> None:
    for query in (
        "",
        "?status__exact=pending",
        f"?acquirer__id__exact={charge.acquirer_id}",
        "?created_at__gte=2020-01-01+00%3A00%3A00-03%3A00",
    ):
        response = admin_client.get(CHARGES + query)
        assert response.status_code == 200, query
        assert str(charge.pk) in response.content.decode(), query
    for term in (str(charge.pk), charge.txid, charge.buyer_document):
        assert str(charge.pk) in admin_client.get(CHARGES, {"q": term}).content.decode(), term
    # A term that is not a UUID must not break the UUID column search.
    assert admin_client.get(CHARGES, {"q": "not-a-uuid"}).status_code == 200


def test_change_page_shows_attempts_and_history(admin_client: Client, charge: Charge) -> None:
    charge_transition(charge_id=charge.pk, to_status=ChargeStatus.PAID, source="sandbox")
    page = admin_client.get(reverse("admin:payments_charge_change", args=[charge.pk])).content.decode()
    assert "alpha" in page  # the attempt's acquirer
    assert "Sandbox" in page  # the transition's source
    assert 'name="status"' not in page  # nothing editable by hand


def test_cancel_action_goes_through_the_service(admin_client: Client, charge: Charge) -> None:
    act(admin_client, "cancel", charge)
    charge.refresh_from_db()
    assert charge.status == ChargeStatus.CANCELED
    transition = ChargeTransition.objects.get(charge=charge)
    assert (transition.source, transition.actor) == ("staff", "admin")
    assert LogEntry.objects.filter(object_id=str(charge.pk)).exists()


def test_refund_chargeback_and_resolve_move_money(
    admin_client: Client, staff_member: Any, charge: Charge, account: Account
) -> None:
    charge_transition(charge_id=charge.pk, to_status=ChargeStatus.PAID, source="sandbox")
    assert available_balance(account) == charge.liquid_amount

    act(admin_client, "mark_chargeback", charge)
    assert available_balance(account) == 0
    act(admin_client, "resolve_chargeback", charge)
    # Asked, not done: crediting needs a second staff member.
    assert available_balance(account) == 0
    pending = MoneyActionRequest.objects.get(state="pending")
    admin_action(staff_member("finance", "fernanda"), REQUESTS, "approve_requests", [pending.pk], reason="ok")
    assert available_balance(account) == charge.liquid_amount
    act(admin_client, "refund", charge)
    charge.refresh_from_db()
    assert charge.status == ChargeStatus.REFUNDED
    assert available_balance(account) == 0
    assert ledger_kinds(account) == ["charge_paid", "charge_chargeback", "chargeback_reversal", "charge_refund"]
    reasons = LogEntry.objects.filter(object_id=str(charge.pk), user__username="admin")
    assert all(entry.change_message.endswith(f"Motivo: {REASON}") for entry in reasons)
    assert reasons.count() == 3


def test_refund_shows_the_amounts_and_asks_a_reason_first(admin_client: Client, charge: Charge) -> None:
    charge_transition(charge_id=charge.pk, to_status=ChargeStatus.PAID, source="sandbox")
    charge.refresh_from_db()
    before = ledger_kinds(charge.account)

    page = act(admin_client, "refund", charge, reason=None)

    assert page.status_code == 200
    html = page.content.decode()
    assert "a adquirente devolve o Pix ao pagador" in html
    assert charge.liquid_amount == 1000  # no cash-in fee on this account
    assert '<td class="amount">R$ 10,00</td>' in html  # debited from the account
    assert '<th class="total">R$ 10,00</th>' in html
    assert 'name="reason"' in html
    charge.refresh_from_db()
    assert charge.status == ChargeStatus.PAID
    assert ledger_kinds(charge.account) == before
    assert not LogEntry.objects.filter(object_id=str(charge.pk)).exists()

    act(admin_client, "refund", charge, reason="")
    charge.refresh_from_db()
    assert charge.status == ChargeStatus.PAID


def test_action_not_allowed_by_status_changes_nothing(admin_client: Client, charge: Charge) -> None:
    response = act(admin_client, "refund", charge)  # pending cannot be refunded
    assert admin_messages(response) == ["Estornar: nenhum registro selecionado está em um status que permita."]
    charge.refresh_from_db()
    assert charge.status == ChargeStatus.PENDING
    assert not ChargeTransition.objects.filter(charge=charge).exists()


def test_charges_cannot_be_added_or_deleted(admin_client: Client, charge: Charge) -> None:
    assert admin_client.get(reverse("admin:payments_charge_add")).status_code == 403
    assert admin_client.get(reverse("admin:payments_charge_delete", args=[charge.pk])).status_code == 403


def test_support_sees_charges_but_cannot_act(staff_client: Any, charge: Charge) -> None:
    client = staff_client("support")
    listing = client.get(CHARGES)
    assert listing.status_code == 200
    assert 'value="cancel"' not in listing.content.decode()
    act(client, "cancel", charge)
    charge.refresh_from_db()
    assert charge.status == ChargeStatus.PENDING


def test_operations_can_act_on_charges(staff_client: Any, charge: Charge) -> None:
    act(staff_client("operations"), "cancel", charge)
    charge.refresh_from_db()
    assert charge.status == ChargeStatus.CANCELED


def test_acquirer_options_are_checked_by_the_adapter(admin_client: Client) -> None:
    url = reverse("admin:acquirers_acquirer_add")
    form = {
        "key": "beta",
        "name": "Beta",
        "nominal": "",
        "adapter": "sandbox",
        "options": '{"charge": "sometimes"}',
        "enabled": "on",
        "max_ticket": "300000",
        "conversion_percent": "90",
        "connect_timeout_ms": "3000",
        "read_timeout_ms": "10000",
    }
    response = admin_client.post(url, form)
    assert response.status_code == 200
    assert "charge must be one of" in response.content.decode()
    assert not Acquirer.objects.filter(key="beta").exists()

    admin_client.post(url, {**form, "options": '{"charge": "timeout"}'})
    assert Acquirer.objects.get(key="beta").options == {"charge": "timeout", "payout": "ok"}


def test_inbound_notifications_are_read_only(admin_client: Client) -> None:
    acquirer = AcquirerFactory(key="gamma")
    notification = InboundNotification.objects.create(acquirer=acquirer, headers={}, body="{}")
    assert admin_client.get(reverse("admin:acquirers_inboundnotification_changelist")).status_code == 200
    assert admin_client.get(reverse("admin:acquirers_inboundnotification_add")).status_code == 403
    page = admin_client.post(reverse("admin:acquirers_inboundnotification_change", args=[notification.pk]), {})
    assert page.status_code == 403
