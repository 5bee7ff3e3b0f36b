"""Maker-checker: an action that credits an account is asked for by one staff
member and carried out only when another approves it; the requester can never
approve (service and database), nothing moves before the approval, and both
steps are in the audit log."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import Group, User
from django.db import IntegrityError, transaction
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from accounts.exceptions import ActionNotExecutable, ApprovalRefused
from accounts.models import Account, LedgerEntry, MoneyActionRequest
from accounts.selectors import available_balance, ledger_sum
from accounts.services import ledger_post, money_action_approve, money_action_reject, money_action_request
from payments.models import Charge, ChargeStatus, ChargeTransition
from payments.services import charge_transition
from tests.factories import AccountFactory, AcquirerFactory
from tests.helpers import admin_action, admin_messages
from tests.realworld import run_concurrently

pytestmark = pytest.mark.django_db

CHARGES = reverse("admin:payments_charge_changelist")
REQUESTS = reverse("admin:accounts_moneyactionrequest_changelist")
RESOLVE = MoneyActionRequest.Action.RESOLVE_CHARGEBACK
AMOUNT = 10_000
LIQUID = 9_850  # 10_000 - (50 + 1 %)


def staff(username: str, group: str) -> User:
    user = User.objects.create_user(username=username, password="x", is_staff=True)
    user.groups.add(Group.objects.get(name=group))
    return user


def charged_back(account: Account) -> Charge:
    """A paid charge the payer contested (MED): its liquid amount is off the balance."""
    acquirer = AcquirerFactory(key=f"a{uuid.uuid4().hex[:8]}")
    charge = Charge.objects.create(
        account=account,
        amount=AMOUNT,
        platform_tax=AMOUNT - LIQUID,
        liquid_amount=LIQUID,
        txid=uuid.uuid4().hex,
        emv="000201",
        acquirer=acquirer,
        expires_at=timezone.now(),
    )
    charge_transition(charge_id=charge.pk, to_status=ChargeStatus.PAID, source="sandbox")
    charge_transition(charge_id=charge.pk, to_status=ChargeStatus.CHARGEBACK, source="acquirer")
    return charge


@pytest.fixture
def account(db: Any) -> Account:
    account = AccountFactory()
    with transaction.atomic():
        ledger_post(account_id=account.pk, amount=1, kind=LedgerEntry.Kind.CHARGE_PAID, reference="seed")
    return account


@pytest.fixture
def operator(db: Any) -> User:
    return staff("olivia", "operations")


@pytest.fixture
def checker(db: Any) -> User:
    return staff("fernanda", "finance")


def snapshot(charge: Charge) -> tuple[Any, ...]:
    charge.refresh_from_db()
    return (
        charge.status,
        available_balance(charge.account),
        LedgerEntry.objects.filter(account=charge.account).count(),
        ChargeTransition.objects.filter(charge=charge).count(),
    )


# --------------------------------------------------------------------------- the service


def test_a_request_moves_nothing_and_the_approval_credits_once(account: Account, operator: User, checker: User) -> None:
    charge = charged_back(account)
    before = snapshot(charge)

    pending = money_action_request(action=RESOLVE, target_id=charge.pk, requested_by=operator, reason="MED negado")

    assert snapshot(charge) == before
    assert (pending.state, pending.amount, pending.account_id) == ("pending", LIQUID, account.pk)

    approved = money_action_approve(request_id=pending.pk, approver=checker, note="conferido")

    assert (approved.state, approved.decided_by, approved.decision_note) == ("approved", checker, "conferido")
    charge.refresh_from_db()
    assert charge.status == ChargeStatus.PAID
    assert available_balance(account) == 1 + LIQUID == ledger_sum(account)
    entry = LedgerEntry.objects.filter(account=account).latest("id")
    assert (entry.kind, entry.amount) == (LedgerEntry.Kind.CHARGEBACK_REVERSAL, LIQUID)
    transition = ChargeTransition.objects.filter(charge=charge).latest("id")
    assert (transition.source, transition.actor) == ("staff", f"fernanda (aprovou o pedido #{pending.pk} de olivia)")

    with pytest.raises(ApprovalRefused, match="já foi decidido"):
        money_action_approve(request_id=pending.pk, approver=staff("gabriel", "finance"))
    assert available_balance(account) == 1 + LIQUID


def test_the_requester_can_never_approve_their_own_request(account: Account, operator: User) -> None:
    charge = charged_back(account)
    # Even a requester who also holds the approval permission.
    operator.groups.add(Group.objects.get(name="finance"))
    operator = User.objects.get(pk=operator.pk)  # drop the cached permissions
    pending = money_action_request(action=RESOLVE, target_id=charge.pk, requested_by=operator, reason="MED negado")
    before = snapshot(charge)

    with pytest.raises(ApprovalRefused, match="foi feito por você"):
        money_action_approve(request_id=pending.pk, approver=operator)
    with pytest.raises(ApprovalRefused, match="foi feito por você"):
        money_action_reject(request_id=pending.pk, staff=operator)

    assert snapshot(charge) == before
    pending.refresh_from_db()
    assert (pending.state, pending.decided_by) == ("pending", None)
    # The database refuses it too, whatever code writes the row.
    with pytest.raises(IntegrityError), transaction.atomic():
        MoneyActionRequest.objects.filter(pk=pending.pk).update(
            state="approved", decided_by=operator, decided_at=timezone.now()
        )


def test_only_staff_with_the_approval_permission_may_approve(account: Account, operator: User) -> None:
    charge = charged_back(account)
    pending = money_action_request(action=RESOLVE, target_id=charge.pk, requested_by=operator, reason="MED negado")
    before = snapshot(charge)

    for other in (staff("otavio", "operations"), staff("sofia", "support")):
        with pytest.raises(ApprovalRefused, match="Sem permissão"):
            money_action_approve(request_id=pending.pk, approver=other)

    assert snapshot(charge) == before
    pending.refresh_from_db()
    assert pending.state == "pending"


def test_a_rejected_request_moves_nothing(account: Account, operator: User, checker: User) -> None:
    charge = charged_back(account)
    pending = money_action_request(action=RESOLVE, target_id=charge.pk, requested_by=operator, reason="MED negado")
    before = snapshot(charge)

    rejected = money_action_reject(request_id=pending.pk, staff=checker, note="MED procedente")

    assert (rejected.state, rejected.decided_by, rejected.decision_note) == ("rejected", checker, "MED procedente")
    assert snapshot(charge) == before
    with pytest.raises(ApprovalRefused):
        money_action_approve(request_id=pending.pk, approver=checker)
    assert snapshot(charge) == before


def test_a_record_that_moved_on_fails_the_approval_and_credits_nothing(
    account: Account, operator: User, checker: User
) -> None:
    charge = charged_back(account)
    pending = money_action_request(action=RESOLVE, target_id=charge.pk, requested_by=operator, reason="MED negado")
    # Meanwhile the acquirer settled the dispute the other way (refunded in MED).
    charge_transition(charge_id=charge.pk, to_status=ChargeStatus.REFUNDED, source="acquirer")
    before = snapshot(charge)

    decided = money_action_approve(request_id=pending.pk, approver=checker)

    assert decided.state == "failed"
    assert "Estornada" in decided.outcome
    assert snapshot(charge) == before


def test_requests_are_refused_for_records_that_do_not_allow_them_and_never_twice(
    account: Account, operator: User
) -> None:
    charge = charged_back(account)
    money_action_request(action=RESOLVE, target_id=charge.pk, requested_by=operator, reason="MED negado")

    with pytest.raises(ApprovalRefused, match="Já existe um pedido"):
        money_action_request(action=RESOLVE, target_id=charge.pk, requested_by=operator, reason="de novo")
    with pytest.raises(ApprovalRefused, match="motivo"):
        money_action_request(action=RESOLVE, target_id=charged_back(account).pk, requested_by=operator, reason=" ")
    paid = charged_back(account)
    charge_transition(charge_id=paid.pk, to_status=ChargeStatus.PAID, source="acquirer")
    with pytest.raises(ActionNotExecutable, match="não em contestação"):
        money_action_request(action=RESOLVE, target_id=paid.pk, requested_by=operator, reason="MED negado")
    with pytest.raises(ActionNotExecutable, match="não encontrada"):
        money_action_request(action=RESOLVE, target_id="not-a-uuid", requested_by=operator, reason="MED negado")
    assert MoneyActionRequest.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_two_approvers_at_once_credit_once(account: Account, operator: User, checker: User) -> None:
    charge = charged_back(account)
    pending = money_action_request(action=RESOLVE, target_id=charge.pk, requested_by=operator, reason="MED negado")
    second = staff("gabriel", "finance")

    outcomes = run_concurrently(
        [
            lambda: money_action_approve(request_id=pending.pk, approver=checker),
            lambda: money_action_approve(request_id=pending.pk, approver=second),
        ],
        timeout=30,
    )

    assert sorted(type(outcome).__name__ for outcome in outcomes) == ["ApprovalRefused", "MoneyActionRequest"]
    assert available_balance(account) == 1 + LIQUID == ledger_sum(account)
    assert LedgerEntry.objects.filter(kind=LedgerEntry.Kind.CHARGEBACK_REVERSAL).count() == 1


# --------------------------------------------------------------------------- the back office


def test_in_admin_the_requester_is_refused_and_another_staff_member_approves(
    staff_member: Callable[[str, str], Client], account: Account
) -> None:
    charge = charged_back(account)
    maker = staff_member("operations", "olivia")
    before = snapshot(charge)

    confirm = admin_action(maker, CHARGES, "resolve_chargeback", [charge.pk])
    assert "R$ 98,50" in confirm.content.decode()
    assert "outro membro da equipe precisa aprovar" in confirm.content.decode()
    admin_action(maker, CHARGES, "resolve_chargeback", [charge.pk], reason="MED negado pelo banco")
    pending = MoneyActionRequest.objects.get()
    assert snapshot(charge) == before

    # Operations asks but may not approve, not even someone else's request.
    listing = maker.get(REQUESTS).content.decode()
    assert "MED negado" in listing
    assert 'value="approve_requests"' not in listing
    admin_action(maker, REQUESTS, "approve_requests", [pending.pk], reason="eu mesma")
    assert snapshot(charge) == before

    checker = staff_member("finance", "fernanda")
    page = admin_action(checker, REQUESTS, "approve_requests", [pending.pk])
    assert "R$ 98,50" in page.content.decode()
    assert snapshot(charge) == before  # the confirmation page moved nothing
    done = admin_action(checker, REQUESTS, "approve_requests", [pending.pk], reason="comprovante conferido")

    assert admin_messages(done) == ["1 pedido aprovado e executado."]
    charge.refresh_from_db()
    assert charge.status == ChargeStatus.PAID
    assert available_balance(account) == 1 + LIQUID
    # Both steps in the audit log, on the request and on the charge.
    on_charge = LogEntry.objects.filter(object_id=str(charge.pk)).order_by("action_time")
    assert [(e.user.username, e.change_message) for e in on_charge] == [
        (
            "olivia",
            f"Resolver contestação a favor da conta: pedido #{pending.pk} aguardando aprovação. "
            "Motivo: MED negado pelo banco",
        ),
        (
            "fernanda",
            f"Aprovado pedido #{pending.pk} (Resolver contestação a favor da conta, R$ 98,50). "
            "Observação: comprovante conferido",
        ),
    ]
    on_request = LogEntry.objects.filter(object_id=str(pending.pk), content_type__model="moneyactionrequest")
    assert sorted(e.user.username for e in on_request) == ["fernanda", "olivia"]


def test_a_superuser_cannot_approve_what_they_asked_for_in_admin(admin_client: Client, account: Account) -> None:
    charge = charged_back(account)
    admin_action(admin_client, CHARGES, "resolve_chargeback", [charge.pk], reason="MED negado")
    pending = MoneyActionRequest.objects.get()
    before = snapshot(charge)

    response = admin_action(admin_client, REQUESTS, "approve_requests", [pending.pk], reason="aprovo")

    assert admin_messages(response) == [f"O pedido #{pending.pk} foi feito por você: outra pessoa precisa decidi-lo."]
    assert snapshot(charge) == before
    pending.refresh_from_db()
    assert pending.state == "pending"


def test_support_sees_the_queue_but_cannot_decide(
    staff_member: Callable[[str, str], Client], account: Account, operator: User
) -> None:
    charge = charged_back(account)
    pending = money_action_request(action=RESOLVE, target_id=charge.pk, requested_by=operator, reason="MED negado")
    support = staff_member("support", "sofia")

    listing = support.get(REQUESTS)
    assert listing.status_code == 200
    assert "R$ 98,50" in listing.content.decode()
    assert 'value="approve_requests"' not in listing.content.decode()
    assert support.get(reverse("admin:accounts_moneyactionrequest_change", args=[pending.pk])).status_code == 200
    admin_action(support, REQUESTS, "approve_requests", [pending.pk], reason="x")
    admin_action(support, CHARGES, "resolve_chargeback", [charge.pk], reason="x")

    pending.refresh_from_db()
    assert pending.state == "pending"
    assert MoneyActionRequest.objects.count() == 1
    charge.refresh_from_db()
    assert charge.status == ChargeStatus.CHARGEBACK
