"""A charge an open MED infraction holds moves only with it: the charge
list's money actions (mark a chargeback, ask to resolve one, refund) change
nothing on it, ask no second staff member for anything, and say why."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.test import Client
from django.urls import reverse

from accounts.models import Account, MoneyActionRequest
from acquirers.models import Acquirer
from payments import exceptions as err
from payments.models import Charge, ChargeStatus, ChargeTransition
from tests.helpers import admin_action, admin_messages
from tests.infractions.conftest import paid_charge, reported

pytestmark = pytest.mark.django_db

CHARGES = reverse("admin:payments_charge_changelist")
Money = Callable[[Account], tuple[int, list[tuple[str, int]]]]


def state(charge: Charge) -> tuple[str, bool, int]:
    charge.refresh_from_db()
    return charge.status, charge.med_open, ChargeTransition.objects.filter(charge=charge).count()


@pytest.mark.parametrize(
    ("blocked", "actions"),
    [
        # No block: the charge stays paid, marked; a block: it is in chargeback, marked.
        (0, ("mark_chargeback", "refund")),
        (None, ("resolve_chargeback", "refund")),
    ],
)
def test_money_actions_leave_a_charge_an_infraction_holds(
    admin_client: Client,
    account: Account,
    with_api: Acquirer,
    money: Money,
    blocked: int | None,
    actions: tuple[str, ...],
) -> None:
    charge = paid_charge(account, with_api)
    reported(with_api, charge, blocked=blocked)
    before, charge_before = money(account), state(charge)
    assert charge_before[:2] == (ChargeStatus.PAID if blocked == 0 else ChargeStatus.CHARGEBACK, True)

    for action in actions:
        response = admin_action(admin_client, CHARGES, action, [charge.pk], reason="pedido do cliente")
        shown = admin_messages(response)
        assert shown == [
            f"Cobrança {charge.pk}: {err.MED_OPEN} Nada foi alterado; acompanhe a infração em Infrações MED."
        ]
        assert state(charge) == charge_before
        assert money(account) == before
        assert not MoneyActionRequest.objects.exists()


def test_the_other_charges_selected_are_acted_on(
    admin_client: Client, account: Account, with_api: Acquirer, money: Money
) -> None:
    held = paid_charge(account, with_api)
    reported(with_api, held, blocked=0)
    free = paid_charge(account, with_api)

    page = admin_action(admin_client, CHARGES, "mark_chargeback", [held.pk, free.pk])
    # The confirmation page lists only the charge the action will move.
    assert str(free.pk) in page.content.decode()
    assert f'value="{held.pk}"' not in page.content.decode()
    response = admin_action(admin_client, CHARGES, "mark_chargeback", [held.pk, free.pk], reason="MED por e-mail")

    assert any(err.MED_OPEN in message for message in admin_messages(response))
    assert state(held)[0] == ChargeStatus.PAID
    assert state(free)[0] == ChargeStatus.CHARGEBACK


def test_a_charges_page_says_an_infraction_holds_it(admin_client: Client, account: Account, with_api: Acquirer) -> None:
    charge = paid_charge(account, with_api)
    reported(with_api, charge)
    page = admin_client.get(reverse("admin:payments_charge_change", args=[charge.pk])).content.decode()
    assert "infração med em aberto" in page.lower()
