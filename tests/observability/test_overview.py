"""The back office's overview: exact figures on known data, São Paulo days,
links that land on exactly the records counted, and a bounded query count."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from accounts.models import Account
from acquirers import breaker
from acquirers.models import Acquirer
from observability import selectors
from observability.selectors import Figure
from tests.factories import (
    AccountFactory,
    AcquirerFactory,
    ChargeAttemptFactory,
    ChargeFactory,
    WithdrawalFactory,
)
from tests.helpers import staff_login
from webhooks.models import WebhookDelivery, WebhookEndpoint, WebhookEvent
from withdrawals.models import PayoutBatch

pytestmark = pytest.mark.django_db

UTC = dt.UTC
# 22:30 on 25/11 in São Paulo (UTC-3), already 26/11 in UTC.
NOW = dt.datetime(2026, 11, 26, 1, 30, tzinfo=UTC)


def at(hours_ago: float) -> dt.datetime:
    return NOW - dt.timedelta(hours=hours_ago)


@pytest.fixture
def alpha() -> Acquirer:
    return AcquirerFactory(key="alpha", name="Alpha", default_priority=1)


@pytest.fixture
def beta() -> Acquirer:
    return AcquirerFactory(key="beta", name="Beta", default_priority=2)


def test_today_is_the_sao_paulo_day(account: Account, alpha: Acquirer) -> None:
    ChargeFactory(account=account, acquirer=alpha, amount=1_000, status="paid", created_at=at(22))  # 25/11 00:30 SP
    ChargeFactory(account=account, acquirer=alpha, amount=2_000, status="paid", created_at=at(23))  # 24/11 23:30 SP
    ChargeFactory(account=account, acquirer=alpha, amount=4_000, status="pending", created_at=at(0.5))
    volume = selectors.charge_volume(now=NOW)
    assert volume.days[-1] == dt.date(2026, 11, 25)
    assert volume.today == {"paid": Figure(1, 1_000), "pending": Figure(1, 4_000)}
    assert volume.by_day[dt.date(2026, 11, 24)] == {"paid": Figure(1, 2_000)}


def test_the_week_is_seven_sao_paulo_days(account: Account, alpha: Acquirer) -> None:
    # 19/11 00:00 SP is the window's first instant; 18/11 23:59 SP is out.
    first = dt.datetime(2026, 11, 19, 3, 0, tzinfo=UTC)
    ChargeFactory(account=account, acquirer=alpha, amount=500, status="paid", created_at=first)
    ChargeFactory(
        account=account, acquirer=alpha, amount=700, status="paid", created_at=first - dt.timedelta(minutes=1)
    )
    ChargeFactory(account=account, acquirer=alpha, amount=300, status="failed", created_at=at(1))
    WithdrawalFactory(account=account, amount=5_000, status="paid", created_at=at(2))
    WithdrawalFactory(account=account, amount=1_000, status="pending", created_at=at(30))
    charges = selectors.charge_volume(now=NOW)
    assert charges.days[0] == dt.date(2026, 11, 19)
    assert len(charges.days) == 7
    assert charges.week == {"paid": Figure(1, 500), "failed": Figure(1, 300)}
    withdrawals = selectors.withdrawal_volume(now=NOW)
    assert withdrawals.today == {"paid": Figure(1, 5_000)}
    assert withdrawals.week == {"paid": Figure(1, 5_000), "pending": Figure(1, 1_000)}


def test_acquirer_health_over_the_last_24_hours(account: Account, alpha: Acquirer, beta: Acquirer) -> None:
    for latency in (100, 200, 300, 400):
        ChargeAttemptFactory(charge__account=account, charge__acquirer=alpha, latency_ms=latency, created_at=at(1))
    failed = ChargeFactory(account=account, acquirer=beta, status="pending", created_at=at(2))
    ChargeAttemptFactory(charge=failed, acquirer=alpha, outcome="timeout", latency_ms=3_000, created_at=at(2))
    ChargeAttemptFactory(charge=failed, acquirer=beta, position=2, latency_ms=50, created_at=at(2))
    ChargeAttemptFactory(
        charge=failed, acquirer=beta, position=1, outcome="circuit_open", latency_ms=0, created_at=at(3)
    )
    # Older than 24 h: not counted.
    ChargeAttemptFactory(charge__account=account, charge__acquirer=alpha, outcome="error", created_at=at(25))
    health = {h.acquirer.key: h for h in selectors.acquirer_health(now=NOW)}
    a, b = health["alpha"], health["beta"]
    assert (a.calls, a.succeeded, a.fallbacks, a.skipped) == (5, 4, 0, 0)
    assert a.success_rate == 0.8
    # percentile_cont over 100, 200, 300, 400, 3000: interpolated.
    assert a.p50_ms == 300
    assert a.p95_ms == pytest.approx(400 + 0.8 * 2_600)
    assert (b.calls, b.succeeded, b.fallbacks, b.skipped) == (1, 1, 1, 1)
    assert (b.p50_ms, b.p95_ms) == (50, 50)
    assert a.circuit == b.circuit == "fechado"


def test_an_open_circuit_shows_as_the_acquirer_admin_shows_it(alpha: Acquirer) -> None:
    for _ in range(10):
        breaker.record(alpha, outcome="timeout", latency_ms=3_000)
    assert breaker.snapshot(alpha) is not None
    (health,) = selectors.acquirer_health(now=NOW)
    assert health.circuit == "aberto"


def test_attention_counts(account: Account, alpha: Acquirer) -> None:
    manual = AccountFactory(withdrawals_need_approval=True)
    WithdrawalFactory(account=manual, amount=2_500, status="pending")
    WithdrawalFactory(account=account, amount=9_999, status="pending")  # automatic: not waiting for staff
    WithdrawalFactory(account=account, amount=7_000, status="approved", payout_unclear_since=timezone.now())
    WithdrawalFactory(account=account, amount=8_000, status="paid", payout_unclear_since=timezone.now())
    ChargeFactory(account=account, acquirer=alpha, amount=12_345, status="chargeback")
    ChargeFactory(account=account, acquirer=alpha, amount=1, status="paid")
    endpoints = [WebhookEndpoint.objects.create(account=account, url=f"https://e{i}.example.com") for i in range(3)]
    WebhookEndpoint.objects.filter(pk=endpoints[0].pk).update(failing_since=timezone.now())
    WebhookEndpoint.objects.filter(pk=endpoints[1].pk).update(is_active=False)
    event = WebhookEvent.objects.create(
        account=account, event_type="transaction", record_id=account.pk, status="paid", data={}
    )
    for status in ("pending", "pending", "failed", "succeeded"):
        WebhookDelivery.objects.create(
            event=event, url="https://e.example.com", status=status, next_attempt_at=timezone.now()
        )
    for status in ("awaiting_approval", "processing"):
        PayoutBatch.objects.create(account=manual, status=status, item_count=2, total_amount=4_000, total_debit=4_100)
    found = selectors.attention()
    assert found.withdrawals_awaiting_approval == Figure(1, 2_500)
    assert found.payout_batches_awaiting_approval == Figure(1, 4_000)
    assert found.undetermined_payouts == Figure(1, 7_000)
    assert found.open_chargebacks == Figure(1, 12_345)
    assert found.money_actions_pending == Figure(0, 0)
    assert (found.deliveries_pending, found.deliveries_failed) == (2, 1)
    assert (found.endpoints_failing, found.endpoints_disabled) == (1, 1)


# --------------------------------------------------------------------------- the index page


def figure_link(page: str, attribute: str) -> str:
    match = re.search(rf'href="([^"]+)"[^>]*data-figure="{re.escape(attribute)}"', page)
    assert match, attribute
    return match.group(1).replace("&amp;", "&")


def test_index_shows_the_overview_and_its_links_land_on_those_records(
    admin_client: Client, account: Account, alpha: Acquirer
) -> None:
    now = timezone.now()
    paid = [ChargeFactory(account=account, acquirer=alpha, amount=a, status="paid") for a in (15_000, 2_550)]
    ChargeFactory(account=account, acquirer=alpha, amount=99_900, status="pending")
    old = ChargeFactory(
        account=account, acquirer=alpha, amount=1_000, status="paid", created_at=now - dt.timedelta(days=8)
    )
    page = admin_client.get(reverse("admin:index")).content.decode()
    assert "PIX Service — Back office" in page
    assert "Ver o site" not in page
    charges = page[page.index('id="overview-cobrancas"') :]
    assert "R$ 1.174,50" in charges  # today, every status
    assert "R$ 175,50" in charges  # paid today
    link = figure_link(charges, "today-paid-count")
    assert urlsplit(link).path == reverse("admin:payments_charge_changelist")
    listed = admin_client.get(link)
    assert listed.status_code == 200
    shown = listed.context["cl"].result_list
    assert {c.pk for c in shown} == {c.pk for c in paid}
    assert old.pk not in {c.pk for c in shown}


def test_every_overview_link_is_a_filter_the_list_accepts(admin_client: Client, account: Account) -> None:
    AcquirerFactory(key="alpha", default_priority=1)
    page = admin_client.get(reverse("admin:index")).content.decode()
    section = page[page.index('id="overview"') : page.index("</section>")]
    links = {href.replace("&amp;", "&") for href in re.findall(r'href="([^"]+)"', section)}
    assert len(links) > 20
    for link in links:
        response = admin_client.get(link)
        # An unknown filter parameter makes the admin redirect with ?e=1.
        assert response.status_code == 200, link


def test_apps_in_a_merchants_order_with_pt_br_names(admin_client: Client) -> None:
    apps = [app["name"] for app in admin_client.get(reverse("admin:index")).context["app_list"]]
    assert apps[:7] == ["Contas", "Cobranças", "Saques", "Infrações MED", "Pix Automático", "Adquirentes", "Webhooks"]
    assert apps.index("Usuários e permissões") < apps.index("Bloqueio de login (axes)")
    axes = admin_client.get(reverse("admin:index")).context["app_list"][apps.index("Bloqueio de login (axes)")]
    assert "Tentativas de login bloqueáveis" in [m["name"] for m in axes["models"]]


def test_staff_without_access_to_charges_see_no_overview(client: Client, django_user_model: Any) -> None:
    user = django_user_model.objects.create_user(username="nobody", password="x", is_staff=True)
    staff_login(client, user)
    response = client.get(reverse("admin:index"))
    assert response.status_code == 200
    assert 'id="overview"' not in response.content.decode()


def test_the_overview_costs_a_bounded_number_of_queries(
    admin_client: Client, django_assert_max_num_queries: Any, account: Account
) -> None:
    acquirers = [AcquirerFactory(key=f"q{i}", default_priority=i) for i in range(1, 4)]
    for i in range(30):
        charge = ChargeFactory(
            account=account,
            acquirer=acquirers[i % 3],
            status="paid",
            created_at=timezone.now() - dt.timedelta(days=i % 7),
        )
        ChargeAttemptFactory(charge=charge, latency_ms=10 * i)
        WithdrawalFactory(account=account, status="pending")
    admin_client.get(reverse("admin:index"))  # warm caches (content types, permissions)
    # 20: account changes waiting, late payments waiting and cancels the acquirer
    # never answered are one count each; the MED card is one aggregate of the
    # open infractions and one count of the requests about them; due-date
    # charges due today and overdue are one aggregate; Pix Automático's card is
    # one count of the recurrences waiting and one aggregate of the cycles;
    # payout batches waiting for staff are one aggregate.
    with django_assert_max_num_queries(23):
        assert admin_client.get(reverse("admin:index")).status_code == 200
