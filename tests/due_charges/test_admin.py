"""The back office's due-date charges and batches: what each debtor owes
today, the overdue ones and the ones due today, what a paid one came to
beside our own calculation, and each batch's progress and items. Staff
read them; nothing here is typed by hand; staff without the permission are
refused."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from accounts.models import Account
from acquirers.models import Acquirer
from due_charges.models import DueChargeBatch, DueChargeBatchItem, ItemStatus
from payments.choices import ChargeKind
from payments.due_amounts import last_payable_day
from payments.due_models import DueCharge
from payments.due_payments import now_in_brazil
from payments.due_terms import DueTerms
from payments.models import Charge
from tests.factories import AccountFactory, AcquirerFactory, ChargeFactory
from tests.helpers import staff_login

pytestmark = pytest.mark.django_db

DUE = reverse("admin:payments_duecharge_changelist")
BATCHES = reverse("admin:due_charges_duechargebatch_changelist")
ITEMS = reverse("admin:due_charges_duechargebatchitem_changelist")
#: R$ 150,00, fine 2 %, interest 1 % a month in calendar days (API Pix modalidades 2 and 3).
LATE_TERMS = {"multa": {"modalidade": 2, "valorPerc": "2.00"}, "juros": {"modalidade": 3, "valorPerc": "1.00"}}


def due_charge(
    account: Account,
    acquirer: Acquirer,
    *,
    days_from_today: int,
    status: str = "pending",
    name: str = "Maria Devedora",
    document: str = "52998224725",
    valor: dict[str, Any] | None = None,
    paid: tuple[int, dict[str, int], int] | None = None,
) -> Charge:
    """A charge of kind due as the services leave it: its terms beside it,
    paid ones with the acquirer's amount and components and our own."""
    due_date = now_in_brazil() + dt.timedelta(days=days_from_today)
    terms = DueTerms.from_api(
        {
            "calendario": {"dataDeVencimento": due_date.isoformat(), "validadeAposVencimento": 30},
            "valor": {"original": "150.00", **(valor or {})},
        }
    )
    amount = paid[0] if paid else 15_000
    charge = ChargeFactory(
        account=account,
        acquirer=acquirer,
        kind=ChargeKind.DUE,
        status=status,
        amount=amount,
        buyer_name=name,
        buyer_document=document,
    )
    DueCharge.objects.create(
        charge=charge,
        terms=terms.to_api(),
        original=15_000,
        due_date=due_date,
        last_payable_date=last_payable_day(terms),
        paid_amount=paid[0] if paid else None,
        paid_components=paid[1] if paid else {},
        expected_amount=paid[2] if paid else None,
    )
    return charge


def listed(page: str) -> list[str]:
    """The charges' ids in the list's order (each row's link carries it as its title)."""
    return re.findall(r'title="([0-9a-f-]{36})"', page)


@pytest.fixture
def where() -> tuple[Account, Acquirer]:
    return AccountFactory(), AcquirerFactory()


# --------------------------------------------------------------------------- the list


def test_the_list_shows_the_amount_due_today_and_the_paid_components(
    admin_client: Client, where: tuple[Account, Acquirer]
) -> None:
    account, acquirer = where
    late = due_charge(account, acquirer, days_from_today=-10, valor=LATE_TERMS)
    paid = due_charge(
        account,
        acquirer,
        days_from_today=-20,
        status="paid",
        name="João Pagador",
        paid=(15_400, {"original": 15_000, "multa": 300, "juros": 100}, 15_350),
    )

    page = admin_client.get(DUE).content.decode()

    assert listed(page) == [str(paid.pk), str(late.pk)]  # earliest due date first
    assert "R$ 153,50" in page  # 150,00 + fine 3,00 + 10 days of 1 %/month: 0,50
    assert "original R$ 150,00 · multa R$ 3,00 · juros R$ 1,00" in page
    assert "Maria Devedora (52998224725)" in page
    assert reverse("admin:payments_charge_change", args=[late.pk]) in page

    detail = admin_client.get(reverse("admin:payments_duecharge_change", args=[paid.pk])).content.decode()
    assert "R$ 154,00" in detail  # what the acquirer reported paid, credited
    assert "R$ 153,50" in detail  # our amount that day, for staff
    assert "+R$ 0,50" in detail


def test_filters_select_overdue_due_today_status_and_search(
    admin_client: Client, where: tuple[Account, Acquirer]
) -> None:
    account, acquirer = where
    overdue = due_charge(account, acquirer, days_from_today=-3, name="Ana Atrasada", document="11144477735")
    today = due_charge(account, acquirer, days_from_today=0)
    upcoming = due_charge(account, acquirer, days_from_today=5)
    paid_late = due_charge(account, acquirer, days_from_today=-4, status="paid", paid=(15_000, {}, 15_000))

    def filtered(**params: Any) -> list[str]:
        return listed(admin_client.get(DUE, params).content.decode())

    assert filtered(situation="overdue") == [str(overdue.pk)]  # a paid one is not overdue
    assert filtered(situation="today") == [str(today.pk)]
    assert filtered(situation="upcoming") == [str(upcoming.pk)]
    assert filtered(status="paid") == [str(paid_late.pk)]
    assert filtered(q="11144477735") == [str(overdue.pk)]
    assert filtered(q="Atrasada") == [str(overdue.pk)]
    assert filtered(q=today.txid) == [str(today.pk)]
    assert filtered(q=str(upcoming.pk)) == [str(upcoming.pk)]
    since = (now_in_brazil() + dt.timedelta(days=1)).isoformat()
    assert filtered(due_date__gte=since) == [str(upcoming.pk)]


def test_the_list_costs_the_same_queries_with_more_rows(admin_client: Client, where: tuple[Account, Acquirer]) -> None:
    account, acquirer = where

    def queries() -> int:
        admin_client.get(DUE)  # the session and permissions cached alike
        with CaptureQueriesContext(connection) as captured:
            assert admin_client.get(DUE).status_code == 200
        return len(captured)

    due_charge(account, acquirer, days_from_today=-1, valor=LATE_TERMS)
    few = queries()
    for day in range(8):
        due_charge(AccountFactory(), AcquirerFactory(), days_from_today=day - 4, valor=LATE_TERMS)
    assert queries() == few


def test_a_due_charge_cannot_be_typed_on(admin_client: Client, where: tuple[Account, Acquirer]) -> None:
    charge = due_charge(*where, days_from_today=2)
    url = reverse("admin:payments_duecharge_change", args=[charge.pk])
    page = admin_client.get(url).content.decode()
    assert 'name="original"' not in page
    assert 'name="due_date"' not in page
    assert admin_client.post(url, {"original": "1"}).status_code == 403
    assert DueCharge.objects.get(pk=charge.pk).original == 15_000


def test_the_charges_admin_shows_the_kind_and_opens_the_terms(
    admin_client: Client, where: tuple[Account, Acquirer]
) -> None:
    charge = due_charge(*where, days_from_today=2)
    ChargeFactory(account=where[0], acquirer=where[1])
    charges = reverse("admin:payments_charge_changelist")
    assert "Com vencimento" in admin_client.get(charges).content.decode()
    page = admin_client.get(charges, {"kind__exact": "due"}).content.decode()
    assert page.count('class="action-select"') == 1
    detail = admin_client.get(reverse("admin:payments_charge_change", args=[charge.pk])).content.decode()
    assert reverse("admin:payments_duecharge_change", args=[charge.pk]) in detail


def test_the_overview_counts_the_ones_due_today_and_overdue(
    admin_client: Client, where: tuple[Account, Acquirer]
) -> None:
    account, acquirer = where
    due_charge(account, acquirer, days_from_today=0)
    due_charge(account, acquirer, days_from_today=-3)
    due_charge(account, acquirer, days_from_today=-9)
    due_charge(account, acquirer, days_from_today=-9, status="paid", paid=(15_000, {}, 15_000))
    due_charge(account, acquirer, days_from_today=4)

    page = admin_client.get(reverse("admin:index")).content.decode()

    for situation, count, amount in (("today", 1, "R$ 150,00"), ("overdue", 2, "R$ 300,00")):
        tile = re.search(rf'<a class="tile" href="([^"]+)" data-figure="{situation}">(.*?)</a>', page, re.S)
        assert tile is not None, situation
        assert f'<div class="n">{count}</div>' in tile.group(2)
        assert amount in tile.group(2)
        # The tile opens exactly those charges.
        assert len(listed(admin_client.get(tile.group(1).replace("&amp;", "&")).content.decode())) == count


# --------------------------------------------------------------------------- batches


def positions(page: str) -> list[int]:
    """The items' positions in the list's order (the first column links to each item)."""
    return [int(n) for n in re.findall(r'class="field-position"><a href="[^"]*">(\d+)</a>', page)]


def batch_of(account: Account, statuses: list[str], charges: tuple[Charge, ...] = ()) -> DueChargeBatch:
    """Items as the workers leave them; the first ones point at ``charges``."""
    batch = DueChargeBatch.objects.create(account=account, total=len(statuses))
    for position, status in enumerate(statuses):
        errors = {"debtor.document": ["CPF ou CNPJ inválido."]} if status == ItemStatus.FAILED else {}
        ids = {"charge_id": charges[position].pk} if position < len(charges) else {}
        DueChargeBatchItem.objects.create(batch=batch, position=position, status=status, errors=errors, **ids)
    return batch


def test_batches_show_their_progress_and_items(admin_client: Client, where: tuple[Account, Acquirer]) -> None:
    account, acquirer = where
    charge = due_charge(account, acquirer, days_from_today=3)
    batch = batch_of(account, ["created", "created", "failed", "pending"], (charge,))

    page = admin_client.get(BATCHES).content.decode()
    assert "75% · 2 criadas · 1 com erro · 1 pendentes" in page

    detail = admin_client.get(reverse("admin:due_charges_duechargebatch_change", args=[batch.pk])).content.decode()
    assert "Com erro (1)" in detail

    items = admin_client.get(ITEMS, {"batch__id__exact": str(batch.pk)}).content.decode()
    assert "CPF ou CNPJ inválido." in items
    assert reverse("admin:payments_charge_change", args=[charge.pk]) in items
    failed = admin_client.get(ITEMS, {"batch__id__exact": str(batch.pk), "status__exact": "failed"}).content.decode()
    assert positions(failed) == [2]
    assert positions(admin_client.get(ITEMS, {"batch__id__exact": str(batch.pk)}).content.decode()) == [0, 1, 2, 3]


def test_the_batch_list_costs_the_same_queries_with_more_batches(admin_client: Client, account: Account) -> None:
    def queries() -> int:
        admin_client.get(BATCHES)
        with CaptureQueriesContext(connection) as captured:
            assert admin_client.get(BATCHES).status_code == 200
        return len(captured)

    batch_of(account, ["created", "failed"])
    few = queries()
    for _ in range(5):
        batch_of(AccountFactory(), ["created", "pending", "failed"])
    assert queries() == few


# --------------------------------------------------------------------------- who sees them


@pytest.mark.parametrize("group", ["support", "operations", "finance"])
def test_every_staff_group_sees_them(
    staff_member: Callable[[str, str], Client], where: tuple[Account, Acquirer], group: str
) -> None:
    charge = due_charge(*where, days_from_today=-2, valor=LATE_TERMS)
    batch = batch_of(where[0], ["created"])
    client = staff_member(group, "pessoa")
    assert client.get(DUE).status_code == 200
    assert client.get(reverse("admin:payments_duecharge_change", args=[charge.pk])).status_code == 200
    assert client.get(BATCHES).status_code == 200
    assert client.get(reverse("admin:due_charges_duechargebatch_change", args=[batch.pk])).status_code == 200


def test_staff_without_the_permission_are_refused(client: Client, where: tuple[Account, Acquirer]) -> None:
    charge = due_charge(*where, days_from_today=-2)
    batch = batch_of(where[0], ["failed"])
    nobody = staff_login(client, User.objects.create_user(username="sem_grupo", password="x", is_staff=True))
    for url in (
        DUE,
        reverse("admin:payments_duecharge_change", args=[charge.pk]),
        BATCHES,
        reverse("admin:due_charges_duechargebatch_change", args=[batch.pk]),
        ITEMS,
    ):
        assert nobody.get(url).status_code == 403, url
