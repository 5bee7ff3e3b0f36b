"""Staff refunds of paid charges are maker-checker: the merchant's money goes
to the payer, whom an insider can be (pay a charge, then refund it to
oneself). "Estornar" only asks; another staff member approves; then the
refund is reserved and its acquirer asked after the commit. A charge in
chargeback is still only marked refunded (no money moves)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from django.urls import reverse

from accounts.exceptions import ApprovalRefused
from accounts.models import Account, LedgerEntry, MoneyActionRequest
from accounts.selectors import available_balance, ledger_sum
from accounts.services import money_action_approve, money_action_request
from payments import refunds
from payments.models import Charge, ChargeRefund, ChargeStatus
from payments.refunds import RefundOutcome, charge_refund_pursue
from payments.services import charge_transition
from tests.factories import AcquirerFactory
from tests.helpers import admin_action, admin_messages

pytestmark = pytest.mark.django_db

CHARGES = reverse("admin:payments_charge_changelist")
REQUESTS = reverse("admin:accounts_moneyactionrequest_changelist")
REFUND = MoneyActionRequest.Action.REFUND_CHARGE
BODY = {
    "payment_method": "pix",
    "amount": 1000,
    "buyer": {"buyer_name": "Olivia", "buyer_document": "52998224725", "buyer_phone": "11999998888"},
}


@pytest.fixture
def paid(api: Any, account: Account) -> Charge:
    """A charge the insider paid herself (the buyer), now on the merchant's balance."""
    AcquirerFactory(key="alpha", default_priority=1)
    response = api.post("/api/transactions", BODY, format="json")
    assert response.status_code == 201
    charge = Charge.objects.get(pk=response.json()["data"]["id"])
    charge_transition(charge_id=charge.pk, to_status=ChargeStatus.PAID, source="sandbox")
    charge.refresh_from_db()
    return charge


@pytest.fixture
def handed(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Refunds handed to the worker after commit (recorded, not sent to a broker)."""
    ids: list[int] = []
    monkeypatch.setattr(refunds, "refund_pursue_later", lambda *, refund_id, countdown=0: ids.append(refund_id))
    return ids


def money(charge: Charge) -> tuple[Any, ...]:
    charge.refresh_from_db()
    return (
        charge.status,
        available_balance(charge.account),
        ledger_sum(charge.account),
        list(LedgerEntry.objects.filter(account=charge.account).values_list("kind", flat=True)),
        ChargeRefund.objects.filter(charge=charge).count(),
    )


def test_estornar_on_a_paid_charge_only_asks_and_a_second_person_refunds(
    staff_member: Callable[[str, str], Client],
    paid: Charge,
    handed: list[int],
    django_capture_on_commit_callbacks: Callable[..., Any],
) -> None:
    insider = staff_member("operations", "olivia")
    before = money(paid)

    confirm = admin_action(insider, CHARGES, "refund", [paid.pk]).content.decode()
    assert "nada é debitado nem devolvido agora" in confirm
    done = admin_action(insider, CHARGES, "refund", [paid.pk], reason="O cliente desistiu")

    assert admin_messages(done) == [
        "Estornar: 1 pedido de aprovação criado. Nada foi debitado nem devolvido: outro membro da equipe precisa "
        "aprovar em Pedidos de aprovação (Contas)."
    ]
    assert money(paid) == before
    request = MoneyActionRequest.objects.get(action=REFUND, state="pending")
    assert (request.amount, request.account_id, request.target_id) == (
        paid.liquid_amount,
        paid.account_id,
        str(paid.pk),
    )
    # Her own request: refused, and operations may not decide anyway.
    admin_action(insider, REQUESTS, "approve_requests", [request.pk], reason="eu mesma")
    with pytest.raises(ApprovalRefused, match="foi feito por você"):
        money_action_approve(request_id=request.pk, approver=User.objects.get(username="olivia"))
    assert money(paid) == before
    assert handed == []

    checker = staff_member("finance", "fernanda")
    page = admin_action(checker, REQUESTS, "approve_requests", [request.pk]).content.decode()
    assert f"-R$ {paid.liquid_amount // 100},00" in page  # shown as a debit
    with django_capture_on_commit_callbacks(execute=True):
        approved = admin_action(checker, REQUESTS, "approve_requests", [request.pk], reason="Pedido do cliente")

    assert admin_messages(approved) == ["1 pedido aprovado e executado."]
    (refund,) = ChargeRefund.objects.filter(charge=paid)
    assert (refund.source, refund.status, refund.amount, refund.reason) == (
        ChargeRefund.Source.STAFF,
        ChargeRefund.Status.PROCESSING,
        paid.liquid_amount,
        "O cliente desistiu",
    )
    assert available_balance(paid.account) == before[1] - paid.liquid_amount == ledger_sum(paid.account)
    # The acquirer is asked after the commit, by the refund's task, never inside the approval.
    assert handed == [refund.pk]
    assert charge_refund_pursue(refund_id=refund.pk) == RefundOutcome.REFUNDED
    assert money(paid)[0] == ChargeStatus.REFUNDED
    assert available_balance(paid.account) == before[1] - paid.liquid_amount == ledger_sum(paid.account)


def test_the_approver_sees_to_whom_the_refund_sends_the_money(
    paid: Charge, staff_member: Callable[[str, str], Client]
) -> None:
    """The insider who paid a charge herself and asks its refund is named on
    the approver's screens: the payer as the charge knows her."""
    maker = User.objects.create_user(username="olivia", password="x", is_staff=True)
    maker.groups.add(Group.objects.get(name="operations"))
    request = money_action_request(action=REFUND, target_id=paid.pk, requested_by=maker, reason="Desistência")
    payer = "Ao pagador: Olivia, CPF 529.982.247-25 (como a cobrança o informa; a devolução volta à conta que pagou"
    checker = staff_member("finance", "fernanda")

    for page in (
        admin_action(checker, REQUESTS, "approve_requests", [request.pk]),
        admin_action(checker, REQUESTS, "reject_requests", [request.pk]),
        checker.get(reverse("admin:accounts_moneyactionrequest_change", args=[request.pk])),
    ):
        text = page.content.decode()
        assert "para onde vai o dinheiro" in text.lower()
        assert payer in text
    request.refresh_from_db()
    assert request.state == "pending"


def test_a_charge_that_moved_on_fails_the_approval_and_moves_nothing(
    paid: Charge, handed: list[int], staff_member: Callable[[str, str], Client]
) -> None:
    maker = User.objects.create_user(username="olivia", password="x", is_staff=True)
    maker.groups.add(Group.objects.get(name="operations"))
    request = money_action_request(action=REFUND, target_id=paid.pk, requested_by=maker, reason="Desistência")
    with pytest.raises(ApprovalRefused, match="Já existe um pedido"):
        money_action_request(action=REFUND, target_id=paid.pk, requested_by=maker, reason="de novo")
    charge_transition(charge_id=paid.pk, to_status=ChargeStatus.CHARGEBACK, source="acquirer")
    before = money(paid)

    checker = User.objects.create_user(username="fernanda", password="x", is_staff=True)
    checker.groups.add(Group.objects.get(name="finance"))
    decided = money_action_approve(request_id=request.pk, approver=checker)

    assert decided.state == "failed"
    assert money(paid) == before
    assert handed == []


def test_a_charge_in_chargeback_is_still_marked_refunded_at_once(
    staff_member: Callable[[str, str], Client], paid: Charge
) -> None:
    charge_transition(charge_id=paid.pk, to_status=ChargeStatus.CHARGEBACK, source="acquirer")
    balance = available_balance(paid.account)

    done = admin_action(staff_member("operations", "olivia"), CHARGES, "refund", [paid.pk], reason="MED perdido")

    assert admin_messages(done) == ["Estornar: 1 cobrança."]
    paid.refresh_from_db()
    assert paid.status == ChargeStatus.REFUNDED
    assert available_balance(paid.account) == balance  # MED took the money already
    assert not MoneyActionRequest.objects.exists()
