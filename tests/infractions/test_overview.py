"""What the back office's index and ``/metrics`` say about MED infractions:
how many are open, what they block, the nearest deadline nobody answered,
and how many end within 24 h with no defence (the alert's gauge); each
figure's link lands on exactly the infractions it counts."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from accounts.models import Account
from acquirers.adapters.base import InfractionStatus
from acquirers.models import Acquirer
from infractions.approvals import infraction_request_action
from infractions.defenses import infraction_defend
from infractions.models import Infraction
from observability import selectors
from tests.helpers import staff_user
from tests.infractions.conftest import paid_charge, reported

pytestmark = pytest.mark.django_db

TOKEN = "metrics-token-for-the-infractions-tests"


@pytest.fixture
def infractions(account: Account, with_api: Acquirer) -> dict[str, Infraction]:
    """One of each: only ``near`` ends within 24 h undefended."""

    def on_charge(amount: int, **kwargs: Any) -> Infraction:
        return reported(with_api, paid_charge(account, with_api, amount=amount), **kwargs)

    found = {
        "near": on_charge(10_000, deadline=dt.timedelta(hours=5)),
        "later": on_charge(20_000, deadline=dt.timedelta(days=3), blocked=5_000),
        "defended": on_charge(30_000, deadline=dt.timedelta(hours=10)),
        "waived": on_charge(40_000, deadline=dt.timedelta(hours=2)),
        "passed": on_charge(50_000, deadline=dt.timedelta(hours=1)),
        "closed": on_charge(60_000, deadline=dt.timedelta(hours=3), status=InfractionStatus.REJECTED),
    }
    infraction_defend(infraction_id=found["defended"].pk, text="entregue", by="loja", account=account)
    Infraction.objects.filter(pk=found["waived"].pk).update(defense_waived_at=timezone.now())
    Infraction.objects.filter(pk=found["passed"].pk).update(defense_deadline=timezone.now() - dt.timedelta(hours=1))
    return found


def test_the_figures(infractions: dict[str, Infraction]) -> None:
    found = selectors.infractions()
    assert found.open == 5
    assert found.blocked == 10_000 + 5_000 + 30_000 + 40_000 + 50_000
    # What the balances keep back: each block up to the charge's liquid amount (1% fee here).
    assert found.held == 9_900 + 5_000 + 29_700 + 39_600 + 49_500
    assert found.nearest_deadline == Infraction.objects.get(pk=infractions["near"].pk).defense_deadline
    assert found.deadline_near == 1


def tile(page: str, figure: str) -> tuple[str, str]:
    """(href, value) of the MED card's tile ``figure``."""
    card = page[page.index('id="overview-infractions"') :]
    match = re.search(rf'href="([^"]+)" data-figure="{figure}">\s*<div class="n">([^<]*)</div>', card)
    assert match, figure
    return match.group(1).replace("&amp;", "&"), match.group(2)


def test_the_card_and_its_links(admin_client: Client, infractions: dict[str, Infraction]) -> None:
    page = admin_client.get(reverse("admin:index")).content.decode()

    assert tile(page, "open")[1] == "5"
    assert tile(page, "blocked")[1] == "R$ 1.350,00"
    deadline = timezone.localtime(infractions["near"].defense_deadline)
    assert tile(page, "nearest-deadline")[1] == deadline.strftime("%d/%m %H:%M")
    url, value = tile(page, "deadline-near")
    assert value == "1"
    assert 'class="tile hot" href="' + url.replace("&", "&amp;") in page
    assert [i.pk for i in admin_client.get(url).context["cl"].result_list] == [infractions["near"].pk]
    opened = admin_client.get(tile(page, "open")[0]).context["cl"].result_list
    assert {i.pk for i in opened} == {i.pk for k, i in infractions.items() if k != "closed"}
    # The nearest deadline's list starts with it.
    first = admin_client.get(tile(page, "nearest-deadline")[0]).context["cl"].result_list[0]
    assert first.pk == infractions["near"].pk


def test_requests_waiting_show_among_what_waits_for_staff(
    admin_client: Client, infractions: dict[str, Infraction]
) -> None:
    maker = staff_user("operations", "otavio")
    infraction_request_action(infraction=infractions["near"], kind="accept_return", requested_by=maker, reason="x")
    page = admin_client.get(reverse("admin:index")).content.decode()
    attention = page[page.index('id="overview-attention"') : page.index('id="overview-infractions"')]
    match = re.search(r'<div class="n">(\d+)</div>\s*<div class="t">Pedidos sobre infrações MED', attention)
    assert match
    assert match.group(1) == "1"


def scrape(client: Client) -> dict[str, float]:
    response = client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 200
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(response.content.decode())
        for sample in family.samples
        if sample.name.startswith("pix_infractions_")
    }


def test_the_alert_gauge_counts_what_the_card_does(
    settings: Any, client: Client, account: Account, infractions: dict[str, Infraction]
) -> None:
    settings.METRICS_TOKEN = TOKEN
    assert scrape(client) == {"pix_infractions_deadline_near": 1.0, "pix_infractions_open": 5.0}
    # Defended: nothing left to alert on.
    infraction_defend(infraction_id=infractions["near"].pk, text="comprovante", by="loja", account=account)
    assert scrape(client) == {"pix_infractions_deadline_near": 0.0, "pix_infractions_open": 5.0}


def test_staff_who_cannot_see_infractions_get_no_card(client: Client, infractions: dict[str, Infraction]) -> None:
    from django.contrib.auth.models import Permission

    from tests.helpers import staff_login

    user = staff_user("support", "sem-infracoes")
    user.user_permissions.set(Permission.objects.filter(codename="view_charge"))
    user.groups.clear()
    page = staff_login(client, user).get(reverse("admin:index")).content.decode()
    assert 'id="overview"' in page
    assert 'id="overview-infractions"' not in page
