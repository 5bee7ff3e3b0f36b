"""The overview on the back office's index, as staff see it in a browser:
the day's figures, the acquirers' health, the queues, and a figure that
opens the list of exactly the records it counts."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.conf import settings
from django.utils import timezone

from acquirers import breaker
from tests.browser.conftest import screenshot
from tests.factories import AccountFactory, AcquirerFactory, ChargeAttemptFactory, ChargeFactory, WithdrawalFactory
from webhooks.models import WebhookEndpoint

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def business() -> dict[str, Any]:
    """A few days of two merchants on two acquirers, one of them failing."""
    now = timezone.now()
    shop, market = (
        AccountFactory(name="Loja Aurora Ltda"),
        AccountFactory(name="Mercado Sol Ltda", withdrawals_need_approval=True),
    )
    efi = AcquirerFactory(key="efi", name="Efí", default_priority=1)
    bank = AcquirerFactory(key="banco_pix", name="Banco Pix", default_priority=2)
    paid = []
    for amount, latency in ((15_000, 120), (2_550, 180), (48_990, 240)):
        charge = ChargeFactory(account=shop, acquirer=efi, amount=amount, status="paid")
        ChargeAttemptFactory(charge=charge, latency_ms=latency)
        paid.append(charge)
    # Efí timed out once; the charge went to Banco Pix (a fallback).
    rescued = ChargeFactory(account=market, acquirer=bank, amount=7_000, status="pending")
    ChargeAttemptFactory(charge=rescued, acquirer=efi, outcome="timeout", latency_ms=3_000)
    ChargeAttemptFactory(charge=rescued, acquirer=bank, position=2, latency_ms=90)
    ChargeFactory(account=market, acquirer=bank, amount=3_000, status="failed")
    ChargeFactory(
        account=market, acquirer=efi, amount=21_000, status="chargeback", created_at=now - dt.timedelta(days=3)
    )
    for days, amount in ((1, 80_000), (2, 55_000), (3, 120_000), (4, 30_000), (5, 64_000), (6, 91_000)):
        ChargeFactory(
            account=shop, acquirer=efi, amount=amount, status="paid", created_at=now - dt.timedelta(days=days)
        )
        ChargeFactory(
            account=market,
            acquirer=bank,
            amount=amount // 3,
            status="canceled",
            created_at=now - dt.timedelta(days=days),
        )
        WithdrawalFactory(account=shop, amount=amount // 2, status="paid", created_at=now - dt.timedelta(days=days))
    WithdrawalFactory(account=shop, amount=40_000, status="paid")
    waiting = WithdrawalFactory(account=market, amount=12_500, status="pending")
    endpoint = WebhookEndpoint.objects.create(account=market, url="https://hooks.mercadosol.example/pix")
    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(failing_since=now - dt.timedelta(hours=2))
    for _ in range(settings.ACQUIRER_BREAKER_FAILURES):
        breaker.record(bank, outcome="timeout", latency_ms=3_000)
    return {"paid": paid, "waiting": waiting}


def test_overview_shows_the_day_and_opens_the_records_behind_a_figure(
    staff_page: Any, admin_url: Any, business: dict[str, Any]
) -> None:
    page = staff_page("operations")
    assert page.goto(admin_url()).status == 200
    assert page.locator("#site-name").inner_text() == "PIX Service — Back office"
    assert page.get_by_text("Ver o site").count() == 0

    charges = page.locator("#overview-cobrancas")
    assert charges.locator('[data-figure="today-amount"]').inner_text() == "R$ 765,40"
    assert charges.locator('[data-figure="today-count"]').inner_text() == "5 registros"
    assert charges.locator('[data-figure="today-paid-amount"]').inner_text() == "R$ 665,40"
    assert charges.locator("svg.bars rect.paid").count() == 7
    withdrawals = page.locator("#overview-saques")
    assert withdrawals.locator('[data-figure="today-paid-amount"]').inner_text() == "R$ 400,00"

    efi = page.locator('#overview-acquirers tr[data-acquirer="efi"]')
    assert efi.locator('[data-figure="success-rate"]').inner_text() == "75,0%"
    bank = page.locator('#overview-acquirers tr[data-acquirer="banco_pix"]')
    assert bank.locator(".badge").inner_text() == "aberto"
    assert bank.locator("td").nth(6).inner_text() == "1"  # calls as a fallback

    approval = page.locator('#overview-attention a[data-figure="Saques aguardando aprovação"]')
    assert approval.locator(".n").inner_text() == "1"
    assert page.locator('#overview-webhooks a[data-figure="Endpoints falhando"] .n').inner_text() == "1"
    assert page.locator('#overview-attention a[data-figure="Contestações abertas (MED)"] .n').inner_text() == "1"

    shot = screenshot(page, "overview")
    # The back office page's picture (docs/screenshots/overview.png, shown by
    # docs/operations/back-office.md) is this first screen, copied by hand.
    page.screenshot(path=str(shot.with_name("overview-viewport.png")))

    charges.locator('[data-figure="today-paid-count"]').click()
    page.wait_for_url("**/payments/charge/**")
    rows = page.locator("#result_list tbody tr")
    assert rows.count() == 3
    # Lists show an id's first characters; the whole id is its title (on hover).
    listed = {rows.nth(i).locator("th, td").nth(1).locator("span[title]").get_attribute("title") for i in range(3)}
    assert listed == {str(c.pk) for c in business["paid"]}

    # The approval queue's tile opens the one withdrawal waiting for staff.
    page.goto(admin_url())
    approval.click()
    page.wait_for_url("**/withdrawals/withdrawal/?queue=awaiting")
    assert page.locator("#result_list tbody tr").count() == 1
    waiting = page.locator("#result_list tbody tr span[title]").first.get_attribute("title")
    assert waiting == str(business["waiting"].pk)
    assert page.errors == []
