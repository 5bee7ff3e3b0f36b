"""Segregation of duties on withdrawal approval: whoever sent the claim link
of a credential of an account that can cash out, or asked for or approved a
change of its contact e-mail, cannot approve that account's withdrawals for
``STAFF_SEGREGATION_DAYS`` (in the service, whatever the screen offered);
and the approval screen shows where the Pix goes and to whom, as the
withdrawal knows it."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.db import transaction
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from accounts.account_changes import account_change_approve, account_change_reject, account_change_request
from accounts.credential_links import credential_issue_for_claim, credential_link_send
from accounts.exceptions import SegregationOfDuties
from accounts.models import Account, AccountChangeRequest, LedgerEntry
from accounts.segregation import withdrawal_approval_conflict
from accounts.services import ledger_post
from tests.factories import AccountFactory
from tests.helpers import admin_action, admin_messages
from tests.withdrawals.conftest import snapshot
from withdrawals.approvals import withdrawal_staff_approve
from withdrawals.models import Withdrawal, WithdrawalStatus
from withdrawals.services import withdrawal_request

pytestmark = pytest.mark.django_db

WITHDRAWALS = reverse("admin:withdrawals_withdrawal_changelist")


def staff(username: str, *groups: str) -> User:
    user = User.objects.create_user(username=username, password="x", is_staff=True)
    user.groups.add(*Group.objects.filter(name__in=groups))
    return User.objects.get(pk=user.pk)


@pytest.fixture
def account(db: Any) -> Account:
    account = AccountFactory(name="Loja Azul Ltda", email="financeiro@lojaazul.com.br", withdrawals_need_approval=True)
    with transaction.atomic():
        ledger_post(account_id=account.pk, amount=250_000, kind=LedgerEntry.Kind.CHARGE_PAID, reference="seed:azul")
    return account


def pending(account: Account, key_type: str = "cpf", key_value: str = "52998224725") -> Withdrawal:
    return withdrawal_request(account=account, amount=100_000, key_type=key_type, key_value=key_value)


def send_link(account: Account, user: User, permission: str = "all") -> None:
    credential = credential_issue_for_claim(account=account, permission=permission)
    credential_link_send(credential_id=credential.pk, sent_by=user)


def status(withdrawal: Withdrawal) -> str:
    withdrawal.refresh_from_db()
    return withdrawal.status


# --------------------------------------------------------------------------- the rule, in the service


def test_whoever_sent_a_cash_out_credential_link_cannot_approve_that_accounts_withdrawals(
    account: Account, no_enqueue: list[Any]
) -> None:
    insider = staff("olivia", "operations")
    send_link(account, insider)
    withdrawal = pending(account)
    before = snapshot(account)

    with pytest.raises(SegregationOfDuties) as refused:
        withdrawal_staff_approve(withdrawal_id=withdrawal.pk, staff=insider)

    today = timezone.localtime()
    until = timezone.localtime(timezone.now() + dt.timedelta(days=30))
    assert refused.value.message.startswith("Segregação de funções: você enviou o link de resgate da credencial pk_")
    assert f"(Todas) desta conta em {today:%d/%m/%Y} e não pode aprovar saques desta conta até {until:%d/%m/%Y}" in (
        refused.value.message
    )
    assert refused.value.message.endswith("Outra pessoa da equipe precisa aprová-los.")
    assert status(withdrawal) == WithdrawalStatus.PENDING
    assert snapshot(account) == before
    assert no_enqueue == []

    # Another staff member may; and the insider may approve other accounts' withdrawals.
    assert withdrawal_staff_approve(withdrawal_id=withdrawal.pk, staff=staff("otavio", "operations")) is True
    assert status(withdrawal) == WithdrawalStatus.APPROVED
    other = AccountFactory(withdrawals_need_approval=True)
    with transaction.atomic():
        ledger_post(account_id=other.pk, amount=250_000, kind=LedgerEntry.Kind.CHARGE_PAID, reference="seed:other")
    elsewhere = pending(other)
    assert withdrawal_staff_approve(withdrawal_id=elsewhere.pk, staff=insider) is True


def test_a_cashin_credential_link_does_not_bar_its_sender(account: Account, no_enqueue: list[Any]) -> None:
    operator = staff("olivia", "operations")
    send_link(account, operator, permission="cashin")

    assert withdrawal_staff_approve(withdrawal_id=pending(account).pk, staff=operator) is True


def test_the_bar_lasts_the_segregation_period(account: Account) -> None:
    insider = staff("olivia", "operations")
    send_link(account, insider, permission="cashout")
    now = timezone.now()

    assert withdrawal_approval_conflict(user_id=insider.pk, account_id=account.pk, now=now + dt.timedelta(days=29))
    assert (
        withdrawal_approval_conflict(user_id=insider.pk, account_id=account.pk, now=now + dt.timedelta(days=31)) is None
    )


def test_whoever_asked_for_or_approved_a_contact_change_cannot_approve(account: Account, no_enqueue: list[Any]) -> None:
    maker = staff("olivia", "operations")
    # A checker who may also approve withdrawals (both groups).
    checker = staff("fernanda", "finance", "operations")
    change = account_change_request(
        account=account, field="email", new_value="olivia@gmail.com", requested_by=maker, reason="Pedido"
    )
    withdrawal = pending(account)
    before = snapshot(account)

    asked = f"pediu a alteração do e-mail de contato desta conta \\(pedido #{change.pk}\\)"
    with pytest.raises(SegregationOfDuties, match=asked):
        withdrawal_staff_approve(withdrawal_id=withdrawal.pk, staff=maker)
    assert withdrawal_approval_conflict(user_id=checker.pk, account_id=account.pk) is None  # not yet

    account_change_approve(request_id=change.pk, approver=checker)

    approved = f"aprovou a alteração do e-mail de contato desta conta \\(pedido #{change.pk}\\)"
    with pytest.raises(SegregationOfDuties, match=approved):
        withdrawal_staff_approve(withdrawal_id=withdrawal.pk, staff=checker)
    with pytest.raises(SegregationOfDuties, match=asked):
        withdrawal_staff_approve(withdrawal_id=withdrawal.pk, staff=maker)
    assert status(withdrawal) == WithdrawalStatus.PENDING
    assert snapshot(account) == before
    assert no_enqueue == []


def test_a_rejected_contact_change_bars_nobody(account: Account) -> None:
    maker = staff("olivia", "operations")
    change = account_change_request(
        account=account, field="email", new_value="olivia@gmail.com", requested_by=maker, reason="Pedido"
    )
    account_change_reject(request_id=change.pk, staff=staff("fernanda", "finance"))

    assert withdrawal_approval_conflict(user_id=maker.pk, account_id=account.pk) is None
    # Limits are not the contact: changing them bars nobody.
    account_change_request(
        account=account, field="withdrawal_daily_limit", new_value=9_000_000, requested_by=maker, reason="Pedido"
    )
    assert withdrawal_approval_conflict(user_id=maker.pk, account_id=account.pk) is None
    assert AccountChangeRequest.objects.count() == 2


# --------------------------------------------------------------------------- the back office


def test_the_approval_screen_shows_the_key_and_its_holder_and_refuses_the_insider(
    staff_member: Callable[[str, str], Client], account: Account, no_enqueue: list[Any]
) -> None:
    insider = staff_member("operations", "olivia")
    send_link(account, User.objects.get(username="olivia"))
    by_cpf = pending(account)
    by_email = pending(account, key_type="email", key_value="olivia@gmail.com")
    before = snapshot(account)

    confirm = admin_action(insider, WITHDRAWALS, "approve", [by_cpf.pk, by_email.pk]).content.decode()
    assert "CPF: 52998224725" in confirm
    assert "CPF 529.982.247-25 (a própria chave); nome não informado" in confirm
    assert "E-mail: olivia@gmail.com" in confirm
    assert "Desconhecido: o saque informa só a chave, sem o nome nem o documento do titular" in confirm
    assert "segregação de funções" in confirm
    page = insider.get(reverse("admin:withdrawals_withdrawal_change", args=[by_email.pk])).content.decode()
    assert "Titular da chave" in page
    assert "Desconhecido: o saque informa só a chave" in page

    done = admin_action(insider, WITHDRAWALS, "approve", [by_cpf.pk, by_email.pk], reason="Conferido")

    messages = admin_messages(done)
    assert len(messages) == 2
    assert all("Segregação de funções: você enviou o link de resgate" in message for message in messages)
    assert {status(by_cpf), status(by_email)} == {WithdrawalStatus.PENDING}
    assert snapshot(account) == before
    assert no_enqueue == []

    colleague = staff_member("operations", "otavio")
    approved = admin_action(colleague, WITHDRAWALS, "approve", [by_cpf.pk], reason="Conferido com o titular")
    assert admin_messages(approved) == ["Aprovar: 1 saque."]
    assert status(by_cpf) == WithdrawalStatus.APPROVED


def test_the_approval_screens_show_the_accounts_document_and_flag_a_key_of_another(
    staff_member: Callable[[str, str], Client], account: Account
) -> None:
    someone_else = pending(account)  # a CPF key; the account is a CNPJ
    its_own = pending(account, key_type="cnpj", key_value="11222333000181")
    colleague = staff_member("operations", "otavio")

    confirm = admin_action(colleague, WITHDRAWALS, "approve", [someone_else.pk, its_own.pk]).content.decode()
    page = colleague.get(reverse("admin:withdrawals_withdrawal_change", args=[someone_else.pk])).content.decode()

    flagged = "CPF 529.982.247-25 (a própria chave); nome não informado. ATENÇÃO: não é o documento da conta"
    for text in (confirm, page):
        assert "CPF/CNPJ da conta" in text
        assert f"{flagged} (11.222.333/0001-81)" in text
    assert "CNPJ 11.222.333/0001-81 (a própria chave); nome não informado: o documento da própria conta" in confirm
    assert confirm.count("ATENÇÃO") == 1
    assert {status(someone_else), status(its_own)} == {WithdrawalStatus.PENDING}


def test_the_withdrawal_page_shows_a_cnpj_key_holder(
    staff_member: Callable[[str, str], Client], account: Account
) -> None:
    withdrawal = pending(account, key_type="cnpj", key_value="11222333000181")

    page = staff_member("support", "sofia").get(reverse("admin:withdrawals_withdrawal_change", args=[withdrawal.pk]))

    assert "CNPJ 11.222.333/0001-81 (a própria chave); nome não informado" in page.content.decode()
