"""Maker-checker on what decides where an account's money may go: the
contact e-mail (where credential links go), manual approval of withdrawals
and the withdrawal limits. A change that loosens them is only asked for and
applied when another staff member approves it, if the field still holds the
value the request saw; one that tightens them applies at once. The requester
never decides (service and database); one open request per account and
field; every step in the admin log with who and why."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import Group, User
from django.db import IntegrityError, transaction
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from accounts import account_changes
from accounts.account_changes import (
    account_change_approve,
    account_change_reject,
    account_change_request,
    loosens,
)
from accounts.credential_links import credential_issue_for_claim
from accounts.exceptions import ApprovalRefused, CredentialLinkRefused
from accounts.models import Account, AccountChangeRequest
from accounts.segregation import withdrawal_approval_conflict
from observability import selectors
from tests.accounts.test_admin import account_form, inline_management
from tests.factories import AccountFactory
from tests.helpers import admin_action, admin_messages
from tests.realworld import run_concurrently

pytestmark = pytest.mark.django_db

CHANGES = reverse("admin:accounts_accountchangerequest_changelist")


def staff(username: str, group: str) -> User:
    user = User.objects.create_user(username=username, password="x", is_staff=True)
    user.groups.add(Group.objects.get(name=group))
    return user


@pytest.fixture
def account(db: Any) -> Account:
    # account_form()'s limits, so that a form posting them changes none.
    return AccountFactory(
        name="Padaria Nova Ltda",
        email="contato@padaria.com.br",
        withdrawals_need_approval=True,
        withdrawal_minimum=1000,
        withdrawal_per_request_limit=500_000,
        withdrawal_daily_limit=2_000_000,
    )


@pytest.fixture
def operator(db: Any) -> User:
    return staff("olivia", "operations")


@pytest.fixture
def checker(db: Any) -> User:
    return staff("fernanda", "finance")


def fields(account: Account) -> tuple[Any, ...]:
    account.refresh_from_db()
    return (
        account.email,
        account.withdrawals_need_approval,
        account.withdrawal_minimum,
        account.withdrawal_per_request_limit,
        account.withdrawal_daily_limit,
    )


def change_url(account: Account) -> str:
    return reverse("admin:accounts_account_change", args=[account.pk])


def post_account(client: Client, account: Account, **changes: Any) -> Any:
    """The account page's form as loaded, with ``changes`` typed in (False unticks a box)."""
    values = {"name": account.name, "email": account.email, "withdrawals_need_approval": "on", **changes}
    data = {key: value for key, value in account_form(**values).items() if value is not False}
    return client.post(change_url(account), data | inline_management(), follow=True)


# --------------------------------------------------------------------------- the service


@pytest.mark.parametrize(
    ("field", "old", "new", "loosened"),
    [
        (AccountChangeRequest.Field.EMAIL, "a@loja.com.br", "b@loja.com.br", True),
        (AccountChangeRequest.Field.EMAIL, "", "b@loja.com.br", True),
        (AccountChangeRequest.Field.EMAIL, "a@loja.com.br", "", True),
        (AccountChangeRequest.Field.WITHDRAWALS_NEED_APPROVAL, True, False, True),
        (AccountChangeRequest.Field.WITHDRAWALS_NEED_APPROVAL, False, True, False),
        (AccountChangeRequest.Field.PAYOUTS_SAME_OWNERSHIP_ONLY, True, False, True),
        (AccountChangeRequest.Field.PAYOUTS_SAME_OWNERSHIP_ONLY, False, True, False),
        (AccountChangeRequest.Field.DOCUMENT, "11222333000181", "52998224725", True),
        (AccountChangeRequest.Field.DOCUMENT, "", "52998224725", True),
        (AccountChangeRequest.Field.WITHDRAWAL_MINIMUM, 1000, 500, True),
        (AccountChangeRequest.Field.WITHDRAWAL_MINIMUM, 1000, 5000, False),
        (AccountChangeRequest.Field.WITHDRAWAL_PER_REQUEST_LIMIT, 500_000, 900_000, True),
        (AccountChangeRequest.Field.WITHDRAWAL_PER_REQUEST_LIMIT, 500_000, 100_000, False),
        (AccountChangeRequest.Field.WITHDRAWAL_DAILY_LIMIT, 2_000_000, 3_000_000, True),
        (AccountChangeRequest.Field.WITHDRAWAL_DAILY_LIMIT, 2_000_000, 0, False),
    ],
)
def test_what_loosens_and_what_only_tightens(field: str, old: Any, new: Any, loosened: bool) -> None:
    assert loosens(field, old, new) is loosened


def test_a_contact_change_applies_only_when_another_staff_member_approves(
    account: Account, operator: User, checker: User
) -> None:
    before = fields(account)

    pending = account_change_request(
        account=account,
        field=AccountChangeRequest.Field.EMAIL,
        new_value="novo@padaria.com.br",
        requested_by=operator,
        reason="Troca de sócio",
    )

    assert fields(account) == before
    assert (pending.state, pending.old_value, pending.new_value) == (
        "pending",
        "contato@padaria.com.br",
        "novo@padaria.com.br",
    )
    approved = account_change_approve(request_id=pending.pk, approver=checker, note="confirmado por telefone")
    assert (approved.state, approved.decided_by, approved.decision_note) == (
        "approved",
        checker,
        "confirmado por telefone",
    )
    assert fields(account) == ("novo@padaria.com.br", *before[1:])
    with pytest.raises(ApprovalRefused, match="já foi decidido"):
        account_change_approve(request_id=pending.pk, approver=staff("gabriel", "finance"))


def test_the_requester_can_never_decide_their_own_change(account: Account, operator: User) -> None:
    # Even one who also holds the approval permission.
    operator.groups.add(Group.objects.get(name="finance"))
    operator = User.objects.get(pk=operator.pk)
    pending = account_change_request(
        account=account,
        field=AccountChangeRequest.Field.WITHDRAWALS_NEED_APPROVAL,
        new_value=False,
        requested_by=operator,
        reason="Cliente",
    )
    before = fields(account)

    with pytest.raises(ApprovalRefused, match="foi feito por você"):
        account_change_approve(request_id=pending.pk, approver=operator)
    with pytest.raises(ApprovalRefused, match="foi feito por você"):
        account_change_reject(request_id=pending.pk, staff=operator)

    assert fields(account) == before
    pending.refresh_from_db()
    assert (pending.state, pending.decided_by) == ("pending", None)
    # The database refuses it too, whatever code writes the row.
    with pytest.raises(IntegrityError), transaction.atomic():
        AccountChangeRequest.objects.filter(pk=pending.pk).update(
            state="approved", decided_by=operator, decided_at=timezone.now()
        )


def test_only_staff_with_the_permission_may_decide(account: Account, operator: User) -> None:
    pending = account_change_request(
        account=account,
        field=AccountChangeRequest.Field.WITHDRAWAL_DAILY_LIMIT,
        new_value=9_000_000,
        requested_by=operator,
        reason="Black Friday",
    )
    before = fields(account)

    for other in (staff("otavio", "operations"), staff("sofia", "support")):
        with pytest.raises(ApprovalRefused, match="Sem permissão"):
            account_change_approve(request_id=pending.pk, approver=other)

    assert fields(account) == before


def test_one_open_request_per_account_and_field(account: Account, operator: User) -> None:
    account_change_request(
        account=account,
        field=AccountChangeRequest.Field.EMAIL,
        new_value="x@y.com.br",
        requested_by=operator,
        reason="a",
    )

    with pytest.raises(ApprovalRefused, match="já existe um pedido de alteração"):
        account_change_request(
            account=account,
            field=AccountChangeRequest.Field.EMAIL,
            new_value="z@y.com.br",
            requested_by=operator,
            reason="b",
        )
    with pytest.raises(ApprovalRefused, match="motivo"):
        account_change_request(
            account=account,
            field=AccountChangeRequest.Field.WITHDRAWAL_MINIMUM,
            new_value=1,
            requested_by=operator,
            reason=" ",
        )
    with pytest.raises(ApprovalRefused, match="o valor pedido é o atual"):
        account_change_request(
            account=account,
            field=AccountChangeRequest.Field.WITHDRAWAL_MINIMUM,
            new_value=1000,
            requested_by=operator,
            reason="c",
        )
    with pytest.raises(ApprovalRefused, match="inválido"):
        account_change_request(
            account=account,
            field=AccountChangeRequest.Field.EMAIL,
            new_value="não é e-mail",
            requested_by=operator,
            reason="d",
        )
    # Another field, another account: their own requests.
    account_change_request(
        account=account,
        field=AccountChangeRequest.Field.WITHDRAWAL_MINIMUM,
        new_value=1,
        requested_by=operator,
        reason="e",
    )
    other = AccountFactory(email="o@loja.com.br")
    account_change_request(
        account=other,
        field=AccountChangeRequest.Field.EMAIL,
        new_value="p@loja.com.br",
        requested_by=operator,
        reason="f",
    )
    assert AccountChangeRequest.objects.filter(state="pending").count() == 3


def test_a_field_changed_since_the_request_fails_the_approval_and_changes_nothing(
    account: Account, operator: User, checker: User
) -> None:
    pending = account_change_request(
        account=account,
        field=AccountChangeRequest.Field.WITHDRAWAL_DAILY_LIMIT,
        new_value=5_000_000,
        requested_by=operator,
        reason="Cliente",
    )
    # Meanwhile someone lowered the limit (tightening applies at once).
    Account.objects.filter(pk=account.pk).update(withdrawal_daily_limit=1_000_000)

    decided = account_change_approve(request_id=pending.pk, approver=checker)

    assert decided.state == "failed"
    assert decided.outcome == (
        "Limite diário de saques mudou desde o pedido (era R$ 20.000,00, agora R$ 10.000,00): nada foi aplicado."
    )
    assert fields(account)[4] == 1_000_000


def test_a_rejected_change_changes_nothing(account: Account, operator: User, checker: User) -> None:
    pending = account_change_request(
        account=account,
        field=AccountChangeRequest.Field.EMAIL,
        new_value="eu@insider.com",
        requested_by=operator,
        reason="Pedido",
    )
    before = fields(account)

    rejected = account_change_reject(request_id=pending.pk, staff=checker, note="o cliente não pediu")

    assert (rejected.state, rejected.decided_by) == ("rejected", checker)
    assert fields(account) == before


@pytest.mark.django_db(transaction=True)
def test_two_approvers_at_once_apply_once(
    account: Account, operator: User, checker: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    pending = account_change_request(
        account=account,
        field=AccountChangeRequest.Field.EMAIL,
        new_value="novo@padaria.com.br",
        requested_by=operator,
        reason="Troca",
    )
    second = staff("gabriel", "finance")
    # Each approval, once it has read the request, waits for the other to have
    # read it too (with the row lock the first waits alone until the gate gives up).
    gate = threading.Barrier(2, timeout=2)
    real = account_changes._decision

    def read_then_wait(request_id: Any, staff: User) -> AccountChangeRequest:
        request = real(request_id, staff)
        with contextlib.suppress(threading.BrokenBarrierError):
            gate.wait()
        return request

    monkeypatch.setattr(account_changes, "_decision", read_then_wait)

    outcomes = run_concurrently(
        [
            lambda: account_change_approve(request_id=pending.pk, approver=checker),
            lambda: account_change_approve(request_id=pending.pk, approver=second),
        ],
        timeout=30,
    )

    assert sorted(type(outcome).__name__ for outcome in outcomes) == ["AccountChangeRequest", "ApprovalRefused"]
    pending.refresh_from_db()
    assert pending.state == "approved"
    assert fields(account)[0] == "novo@padaria.com.br"


# --------------------------------------------------------------------------- the back office


def test_the_account_form_only_asks_and_another_staff_member_approves(
    staff_member: Callable[[str, str], Client], account: Account
) -> None:
    maker = staff_member("operations", "olivia")
    before = fields(account)

    response = post_account(
        maker,
        account,
        email="olivia@gmail.com",
        withdrawals_need_approval=False,
        withdrawal_daily_limit="1.000.000,00",
        cashin_fee_bps="200",
        change_reason="Pedido do cliente por telefone",
    )

    assert response.status_code == 200
    assert fields(account) == before  # none of the three changed
    account.refresh_from_db()
    assert account.cashin_fee_bps == 200  # a fee is not one of them: saved
    asked = {p.field: p for p in AccountChangeRequest.objects.filter(account=account, state="pending")}
    assert set(asked) == {
        AccountChangeRequest.Field.EMAIL,
        AccountChangeRequest.Field.WITHDRAWALS_NEED_APPROVAL,
        AccountChangeRequest.Field.WITHDRAWAL_DAILY_LIMIT,
    }
    messages = admin_messages(response)
    assert (
        f"E-mail de contato: contato@padaria.com.br → olivia@gmail.com: nada mudou ainda. O pedido "
        f"#{asked[AccountChangeRequest.Field.EMAIL].pk} aguarda a aprovação de outra pessoa da equipe "
        "(Contas: Pedidos de alteração de conta)."
    ) in messages
    page = maker.get(change_url(account)).content.decode()
    assert (
        f"#{asked[AccountChangeRequest.Field.EMAIL].pk} E-mail de contato: contato@padaria.com.br → olivia@gmail.com"
        in page
    )
    history = list(
        LogEntry.objects.filter(object_id=str(account.pk), content_type__model="account").values_list(
            "change_message", flat=True
        )
    )
    assert any(
        f"Pedido de alteração #{asked[AccountChangeRequest.Field.EMAIL].pk} (E-mail de contato" in m for m in history
    )
    assert all("olivia@gmail.com" not in m or "Pedido de alteração" in m for m in history)

    # The maker cannot decide: no action offered, and the service refuses it anyway.
    listing = maker.get(CHANGES).content.decode()
    assert 'value="approve_changes"' not in listing
    admin_action(maker, CHANGES, "approve_changes", [asked[AccountChangeRequest.Field.EMAIL].pk], reason="eu mesma")
    assert fields(account) == before

    checker = staff_member("finance", "fernanda")
    confirm = admin_action(checker, CHANGES, "approve_changes", [asked[AccountChangeRequest.Field.EMAIL].pk])
    assert "contato@padaria.com.br" in confirm.content.decode()
    assert "<strong>olivia@gmail.com</strong>" in confirm.content.decode()
    assert fields(account) == before  # the confirmation page changed nothing
    done = admin_action(
        checker,
        CHANGES,
        "approve_changes",
        [asked[AccountChangeRequest.Field.EMAIL].pk],
        reason="Confirmado com o sócio",
    )

    assert admin_messages(done) == ["1 pedido aprovado e aplicado."]
    assert fields(account)[0] == "olivia@gmail.com"
    on_account = LogEntry.objects.filter(object_id=str(account.pk), user__username="fernanda").get()
    assert on_account.change_message == (
        f"Aprovado pedido de alteração #{asked[AccountChangeRequest.Field.EMAIL].pk} "
        "(E-mail de contato: contato@padaria.com.br → "
        "olivia@gmail.com). Observação: Confirmado com o sócio"
    )


def test_tightening_applies_at_once_with_its_reason(staff_member: Callable[[str, str], Client]) -> None:
    account = AccountFactory(name="Padaria Nova Ltda", withdrawals_need_approval=False)
    maker = staff_member("operations", "olivia")
    data = account_form(
        name=account.name, withdrawals_need_approval="on", withdrawal_daily_limit="100,00", change_reason="Fraude"
    )

    response = maker.post(change_url(account), data | inline_management(), follow=True)

    assert response.status_code == 200
    account.refresh_from_db()
    assert (account.withdrawals_need_approval, account.withdrawal_daily_limit) == (True, 10_000)
    assert not AccountChangeRequest.objects.exists()
    history = LogEntry.objects.filter(object_id=str(account.pk)).values_list("change_message", flat=True)
    assert (
        "Alteração mais restritiva aplicada já (Saques exigem aprovação manual: Não → Sim). Motivo: Fraude" in history
    )


def test_same_ownership_only_is_switched_on_at_once_and_off_only_by_a_second_person(
    staff_member: Callable[[str, str], Client],
) -> None:
    account = AccountFactory(name="Casa de Apostas Ltda", withdrawals_need_approval=False)
    maker = staff_member("operations", "olivia")

    on = account_form(name=account.name, payouts_same_ownership_only="on", change_reason="Regra de apostas")
    assert maker.post(change_url(account), on | inline_management(), follow=True).status_code == 200
    account.refresh_from_db()
    assert account.payouts_same_ownership_only is True
    assert not AccountChangeRequest.objects.exists()

    off = account_form(name=account.name, change_reason="Cliente pediu")
    assert maker.post(change_url(account), off | inline_management(), follow=True).status_code == 200
    account.refresh_from_db()
    assert account.payouts_same_ownership_only is True  # loosening waits for another staff member
    pending = AccountChangeRequest.objects.get()
    assert (pending.field, pending.old_value, pending.new_value) == ("payouts_same_ownership_only", True, False)


def test_a_change_without_a_reason_or_with_a_request_already_open_saves_nothing(
    staff_member: Callable[[str, str], Client], account: Account, operator: User
) -> None:
    maker = staff_member("operations", "otavio")
    before = Account.objects.values().get(pk=account.pk)

    no_reason = post_account(maker, account, email="x@y.com.br", cashin_fee_bps="300")
    assert no_reason.context["adminform"].form.errors == {
        "change_reason": ["Informe o motivo da alteração do e-mail de contato, da aprovação ou dos limites."]
    }
    pending = account_change_request(
        account=account,
        field=AccountChangeRequest.Field.EMAIL,
        new_value="z@y.com.br",
        requested_by=operator,
        reason="antes",
    )
    twice = post_account(maker, account, email="x@y.com.br", cashin_fee_bps="300", change_reason="de novo")
    assert twice.context["adminform"].form.errors == {
        "email": [f"Já existe um pedido de alteração (#{pending.pk}) aguardando aprovação."]
    }

    assert Account.objects.values().get(pk=account.pk) == before
    assert AccountChangeRequest.objects.count() == 1


def test_creating_an_account_only_asks_for_its_contact_email(
    staff_member: Callable[[str, str], Client], checker: User
) -> None:
    """One person creating an account cannot also choose, alone, where its
    credentials' links go: the e-mail typed at creation waits for another
    staff member, no link can go to it meanwhile, and the creator counts in
    segregation of duties as its requester. The other first values are set as given."""
    data = account_form(email="novo@loja.com.br", withdrawal_daily_limit="90.000,00") | inline_management()
    creator = staff_member("operations", "olivia")

    response = creator.post(reverse("admin:accounts_account_add"), data)
    assert response.status_code == 303

    created = Account.objects.get(name="Padaria Nova Ltda")
    assert (created.email, created.withdrawal_daily_limit) == ("", 9_000_000)
    pending = AccountChangeRequest.objects.get(account=created)
    olivia = User.objects.get(username="olivia")
    assert (pending.field, pending.old_value, pending.new_value, pending.state, pending.requested_by) == (
        AccountChangeRequest.Field.EMAIL,
        "",
        "novo@loja.com.br",
        "pending",
        olivia,
    )
    assert any(f"#{pending.pk}" in message for message in log_messages(created))
    with pytest.raises(CredentialLinkRefused, match="não tem e-mail de contato"):
        credential_issue_for_claim(account=created, permission="all")
    with pytest.raises(ApprovalRefused, match="feito por você"):
        account_change_approve(request_id=pending.pk, approver=olivia)
    assert withdrawal_approval_conflict(user_id=olivia.pk, account_id=created.pk) is not None

    account_change_approve(request_id=pending.pk, approver=checker)
    created.refresh_from_db()
    assert created.email == "novo@loja.com.br"
    assert withdrawal_approval_conflict(user_id=olivia.pk, account_id=created.pk) is not None


def test_an_account_created_without_a_contact_email_asks_for_nothing(
    staff_member: Callable[[str, str], Client],
) -> None:
    response = staff_member("operations", "olivia").post(
        reverse("admin:accounts_account_add"), account_form() | inline_management()
    )

    assert response.status_code == 303
    assert Account.objects.get(name="Padaria Nova Ltda").email == ""
    assert not AccountChangeRequest.objects.exists()


def log_messages(account: Account) -> list[str]:
    return list(LogEntry.objects.filter(object_id=str(account.pk)).values_list("change_message", flat=True))


def test_the_overview_counts_changes_waiting_for_a_person(
    account: Account, operator: User, staff_member: Callable[[str, str], Client]
) -> None:
    account_change_request(
        account=account,
        field=AccountChangeRequest.Field.EMAIL,
        new_value="x@y.com.br",
        requested_by=operator,
        reason="a",
    )

    assert selectors.attention().account_changes_pending == 1
    index = staff_member("support", "sofia").get(reverse("admin:index")).content.decode()
    assert 'data-figure="Alterações de conta (e-mail, aprovação, limites)"' in index
    assert f"{CHANGES}?state__exact=pending" in index


class Recorded:
    """A stand-in for the account admin: what the save logs and tells staff."""

    def __init__(self) -> None:
        self.logged: list[str] = []
        self.told: list[str] = []

    def log_change(self, request: Any, obj: Any, message: str) -> None:
        self.logged.append(message)

    def log_addition(self, request: Any, obj: Any, message: str) -> None:
        self.logged.append(message)

    def message_user(self, request: Any, message: str, level: Any = None) -> None:
        self.told.append(message)


def test_tightening_is_judged_against_the_value_under_the_lock_not_the_form(
    account: Account, operator: User, rf: Any
) -> None:
    from django.contrib import admin as django_admin

    from accounts.admin.changes import save_controlled_changes

    # The page was built with a daily limit of R$ 20.000,00; meanwhile it was lowered to R$ 1.000,00.
    stale = Account.objects.get(pk=account.pk)
    Account.objects.filter(pk=account.pk).update(withdrawal_daily_limit=100_000)
    data = account_form(
        name=account.name,
        email=account.email,
        withdrawals_need_approval="on",
        withdrawal_daily_limit="3.000,00",
        change_reason="Contrato",
    )
    request = rf.post("/")
    request.user = operator
    # The account page's own form class (amounts typed in reais).
    form = django_admin.site._registry[Account].get_form(request, stale, change=True)(data=data, instance=stale)
    assert form.is_valid(), form.errors
    admin = Recorded()

    with transaction.atomic():
        left = save_controlled_changes(admin, request, form.instance, form)

    # R$ 1.000,00 → R$ 3.000,00 loosens it: asked, not applied, whatever the form saw.
    assert "withdrawal_daily_limit" in left
    assert form.instance.withdrawal_daily_limit == 100_000
    pending = AccountChangeRequest.objects.get(account=account)
    assert (pending.old_value, pending.new_value) == (100_000, 300_000)
    assert fields(account)[4] == 100_000
