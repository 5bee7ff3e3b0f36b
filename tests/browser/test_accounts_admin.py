"""The accounts back office in a real browser, as operations staff use it:
find a merchant by its formatted CNPJ, open its page, go to its charges,
block it with a reason through the confirmation page."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.admin.models import LogEntry
from django.db import transaction
from django.utils import timezone
from playwright.sync_api import expect

from accounts.models import Account, LedgerEntry
from accounts.services import ledger_post
from payments.models import Charge
from tests.browser.conftest import screenshot
from tests.factories import AccountFactory, AcquirerFactory

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def merchant() -> Account:
    account = AccountFactory(name="Padaria Pão Quente", document="11222333000181", email="contato@paoquente.com.br")
    neighbour = AccountFactory(name="Loja Vizinha", document="98765432000100")
    with transaction.atomic():
        ledger_post(account_id=account.pk, amount=123456, kind=LedgerEntry.Kind.CHARGE_PAID, reference="charge:x:1")
    acquirer = AcquirerFactory()
    for owner in (account, neighbour):
        Charge.objects.create(
            account=owner,
            amount=2500,
            platform_tax=0,
            liquid_amount=2500,
            txid=f"tx{owner.pk.hex[:20]}",
            emv="000201",
            acquirer=acquirer,
            expires_at=timezone.now(),
        )
    return account


def test_find_by_formatted_cnpj_open_the_page_and_reach_its_charges(
    staff_page: Any, admin_url: Any, merchant: Account
) -> None:
    page = staff_page("operations")
    page.goto(admin_url("accounts/account/"))
    page.fill("#searchbar", "11.222.333/0001-81")
    page.press("#searchbar", "Enter")
    page.wait_for_url("**q=11.222.333*")

    rows = page.locator("#result_list tbody tr")
    assert rows.count() == 1
    assert "11.222.333/0001-81" in rows.first.inner_text()
    screenshot(page, "account-search")
    rows.first.get_by_role("link", name="Padaria Pão Quente").click()

    # The list's search travels along as ?_changelist_filters=...
    page.wait_for_url(lambda url: f"/{merchant.pk}/change/" in url)
    summary = page.locator(".field-balance_summary")
    assert "R$ 1.234,56" in summary.inner_text()
    screenshot(page, "account-page")

    page.locator(".account-records").get_by_role("link", name="Cobranças").click()
    page.wait_for_url(f"**account__id__exact={merchant.pk}")
    # Only this merchant's charge, not the neighbour's.
    assert page.locator("#result_list tbody tr").count() == 1
    assert "Padaria Pão Quente" in page.locator("#result_list tbody").inner_text()
    assert page.errors == []


def test_block_with_a_reason_through_the_confirmation_page(staff_page: Any, admin_url: Any, merchant: Account) -> None:
    page = staff_page("operations")
    page.goto(admin_url(f"accounts/account/{merchant.pk}/change/"))

    page.locator(".object-tools").get_by_role("link", name="Bloquear").click()
    page.wait_for_url(f"**/{merchant.pk}/block/")
    assert "Padaria Pão Quente" in page.locator("#content").inner_text()
    merchant.refresh_from_db()
    assert merchant.is_blocked is False

    page.fill("textarea[name=reason]", "Suspeita de fraude, chamado 981")
    page.get_by_role("button", name="Confirmar: bloquear").click()
    page.wait_for_url(f"**/{merchant.pk}/change/")

    assert "A conta “Padaria Pão Quente” foi bloqueada." in page.locator(".messagelist").inner_text()
    expect(page.locator(".object-tools").get_by_role("link", name="Desbloquear")).to_be_visible()
    merchant.refresh_from_db()
    assert merchant.is_blocked is True
    assert LogEntry.objects.filter(object_id=str(merchant.pk)).get().change_message == (
        "Bloqueada. Motivo: Suspeita de fraude, chamado 981"
    )
    screenshot(page, "account-blocked")
    assert page.errors == []


def test_ledger_entry_page_is_view_only(staff_page: Any, admin_url: Any, merchant: Account) -> None:
    entry = LedgerEntry.objects.get(account=merchant)
    page = staff_page("operations")
    page.goto(admin_url(f"accounts/ledgerentry/{entry.pk}/change/"))

    assert "R$ 1.234,56" in page.locator("#content-main").inner_text()
    assert page.locator("input[name=_save]").count() == 0
    expect(page.get_by_role("link", name="Fechar")).to_be_visible()
    assert page.errors == []
