"""Charges and withdrawals as staff see them in a real browser (issue 15):
amounts in reais with totals that follow the filters, the approval queue
oldest first with the destination key, and approving a withdrawal from its
own page through the confirmation page with a reason."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest
from django.contrib.admin.models import LogEntry
from django.db import transaction
from playwright.sync_api import expect

from accounts.models import Account, LedgerEntry
from accounts.services import ledger_post
from payments.models import Charge, ChargeStatus
from payments.services import charge_transition
from tests.browser.conftest import screenshot
from tests.factories import AccountFactory, AcquirerFactory
from withdrawals import services
from withdrawals.models import Withdrawal, WithdrawalStatus
from withdrawals.services import withdrawal_request

BODY = {
    "payment_method": "pix",
    "buyer": {"buyer_name": "Fulano", "buyer_document": "52998224725", "buyer_phone": "11999998888"},
}


@pytest.fixture
def no_payouts(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Approving hands the payout to the workers after commit: recorded here instead."""
    calls: list[Any] = []
    monkeypatch.setattr(services, "_enqueue_processing", lambda *args, **kwargs: calls.append(args))
    return calls


@pytest.fixture
def charges(api: Any) -> list[Charge]:
    AcquirerFactory(key="alpha", name="Alpha", default_priority=1)
    made = []
    for amount, status in (
        (4990, ChargeStatus.PAID),
        (123456, ChargeStatus.PAID),
        (1500, None),
        (2000, ChargeStatus.CANCELED),
        (78900, ChargeStatus.REFUNDED),
    ):
        response = api.post("/api/transactions", {**BODY, "amount": amount}, format="json")
        assert response.status_code == 201
        charge_id = response.json()["data"]["id"]
        if status == ChargeStatus.REFUNDED:
            charge_transition(charge_id=charge_id, to_status=ChargeStatus.PAID, source="sandbox")
        if status is not None:
            charge_transition(charge_id=charge_id, to_status=status, source="sandbox")
        made.append(Charge.objects.get(pk=charge_id))
    return made


def manual_account(name: str) -> Account:
    account = AccountFactory(
        name=name, withdrawals_need_approval=True, withdrawal_fee_fixed=100, withdrawal_fee_bps=100
    )
    with transaction.atomic():
        ledger_post(
            account_id=account.pk, amount=100_000, kind=LedgerEntry.Kind.CHARGE_PAID, reference=uuid.uuid4().hex
        )
    return account


def test_charges_list_in_reais_with_totals_that_follow_the_filters(
    staff_page: Any, admin_url: Any, charges: list[Charge]
) -> None:
    page = staff_page(superuser=True)
    page.goto(admin_url("payments/charge/"))

    totals = page.locator("#list-totals")
    assert re.sub(r"\s+", " ", totals.inner_text()) == ("5 cobranças · Valor: R$ 2.108,46 · Valor líquido: R$ 2.108,46")
    rows = page.locator("#result_list tbody tr")
    assert rows.count() == 5
    assert "R$ 1.234,56" in rows.nth(3).inner_text()
    assert "Paga" in rows.nth(3).inner_text()
    expect(page.get_by_role("link", name="Exportar CSV")).to_be_visible()
    screenshot(page, "charges-list")

    page.locator("#changelist-filter").get_by_role("link", name="Paga", exact=True).click()
    page.wait_for_url(re.compile(r"status__exact=paid"))
    assert re.sub(r"\s+", " ", page.locator("#list-totals").inner_text()).startswith("2 cobranças · Valor: R$ 1.284,46")
    assert page.locator("#result_list tbody tr").count() == 2
    export = page.get_by_role("link", name="Exportar CSV").get_attribute("href")
    assert export is not None
    assert export.endswith("export/?status__exact=paid")
    assert page.errors == []


def test_withdrawal_queue_is_oldest_first_with_the_key(staff_page: Any, admin_url: Any, no_payouts: list[Any]) -> None:
    AcquirerFactory(key="alpha", default_priority=1)
    first = manual_account("Padaria Pão Quente")
    second = manual_account("Oficina Dois Irmãos")
    oldest = withdrawal_request(account=first, amount=15_000, key_type="cpf", key_value="12345678909")
    middle = withdrawal_request(account=second, amount=4_990, key_type="email", key_value="financeiro@oficina.com.br")
    newest = withdrawal_request(account=first, amount=32_000, key_type="phone", key_value="+5511999998888")
    page = staff_page("operations")
    page.goto(admin_url("withdrawals/withdrawal/"))

    page.get_by_role("link", name="Aguardando aprovação (3)").click()
    page.wait_for_url(re.compile(r"queue=awaiting"))

    rows = page.locator("#result_list tbody tr")
    texts = [rows.nth(i).inner_text() for i in range(rows.count())]
    listed = [rows.nth(i).locator("input.action-select").get_attribute("value") for i in range(rows.count())]
    assert listed == [str(oldest.pk), str(middle.pk), str(newest.pk)]
    assert "CPF: 12345678909" in texts[0]
    assert "R$ 150,00" in texts[0]
    assert "Padaria Pão Quente" in texts[0]
    assert "E-mail: financeiro@oficina.com.br" in texts[1]
    assert re.sub(r"\s+", " ", page.locator("#list-totals").inner_text()).startswith("3 saques · Valor: R$ 519,90")
    screenshot(page, "withdrawal-queue")
    assert page.errors == []


def test_approve_a_withdrawal_from_its_page_with_a_reason(
    staff_page: Any, admin_url: Any, no_payouts: list[Any]
) -> None:
    AcquirerFactory(key="alpha", default_priority=1)
    withdrawal = withdrawal_request(
        account=manual_account("Padaria Pão Quente"), amount=15_000, key_type="cpf", key_value="12345678909"
    )
    page = staff_page("operations")
    page.goto(admin_url(f"withdrawals/withdrawal/{withdrawal.pk}/change/"))
    assert page.locator("input[name=_save]").count() == 0
    assert "Saque R$ 150,00 (pendente)" in page.locator("#content").inner_text()

    screenshot(page, "withdrawal-detail")

    page.locator("#detail-actions").get_by_role("button", name="Aprovar").click()
    page.get_by_label("Motivo").fill("Conferido com o titular por telefone")
    screenshot(page, "withdrawal-approve-confirmation")
    page.get_by_role("button", name="Confirmar: Aprovar").click()

    page.wait_for_url(re.compile(rf"{withdrawal.pk}/change/$"))
    assert "Aprovar: 1 saque." in page.locator(".messagelist").inner_text()
    assert "Saque R$ 150,00 (aprovado)" in page.locator("#content").inner_text()
    withdrawal.refresh_from_db()
    assert withdrawal.status == WithdrawalStatus.APPROVED
    entry = LogEntry.objects.get(object_id=str(withdrawal.pk))
    assert entry.change_message == "Aprovar (Pendente → Aprovado). Motivo: Conferido com o titular por telefone"
    assert no_payouts == [(withdrawal.pk,)]
    assert Withdrawal.objects.get(pk=withdrawal.pk).version == 1
    assert page.errors == []
