"""No single staff member can move a merchant's money out (issue 29, part 1).

The issue's reproduction, replayed against every path the back office
offers: a member of the operations group tries to get a credential that can
cash out, to redirect where credentials are sent, to switch off manual
approval, to raise limits, to refund to herself, and to approve a
withdrawal herself. Each attempt either only asks (a second staff member
must approve) or is refused; no secret reaches any page, message, e-mail
of hers or log line; the balance and the ledger do not move."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core import mail
from django.db import transaction
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.account_changes import account_change_approve
from accounts.exceptions import ApprovalRefused
from accounts.models import Account, AccountChangeRequest, ApiCredential, LedgerEntry, MoneyActionRequest
from accounts.selectors import available_balance, ledger_sum
from accounts.services import credential_issue, ledger_post
from payments.models import Charge, ChargeStatus
from payments.services import charge_transition
from tests.accounts.test_admin import account_form, inline_management
from tests.factories import AccountFactory, AcquirerFactory
from tests.helpers import admin_action, admin_messages, project_formatters
from tests.security.test_secrets import FormattedLines, stored_values
from withdrawals.models import Withdrawal, WithdrawalStatus

pytestmark = pytest.mark.django_db

SECRET = re.compile(r"sk_[A-Za-z0-9_-]{40,}")
CLAIM = re.compile(r"/resgatar-credencial/(?P<token>[A-Za-z0-9_-]{40,})/")
ACCOUNTS = reverse("admin:accounts_account_changelist")
CREDENTIALS = reverse("admin:accounts_apicredential_changelist")
CHANGES = reverse("admin:accounts_accountchangerequest_changelist")
REQUESTS = reverse("admin:accounts_moneyactionrequest_changelist")
WITHDRAWALS = reverse("admin:withdrawals_withdrawal_changelist")
CHARGES = reverse("admin:payments_charge_changelist")
MERCHANT_EMAIL = "financeiro@lojaazul.com.br"
INSIDER_EMAIL = "mallory@gmail.com"


@dataclass
class Seen:
    """Everything the insider's browser received, and every log line written."""

    pages: list[str] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)

    def keep(self, response: Any) -> Any:
        # Messages are on the page that shows them (redirects are followed).
        self.pages.append(response.content.decode(errors="replace"))
        return response


@pytest.fixture
def seen(caplog: pytest.LogCaptureFixture) -> Iterator[Seen]:
    handler = FormattedLines(project_formatters())
    root = logging.getLogger()
    caplog.set_level(logging.DEBUG)
    root.addHandler(handler)
    found = Seen(lines=handler.lines)
    try:
        yield found
    finally:
        root.removeHandler(handler)


@pytest.fixture
def merchant(db: Any) -> Account:
    """R$ 2.500,00 on the balance, withdrawals approved by a person, as in the issue."""
    AcquirerFactory(key="alpha", default_priority=1)
    account = AccountFactory(name="Loja Azul Ltda", email=MERCHANT_EMAIL, withdrawals_need_approval=True)
    with transaction.atomic():
        ledger_post(account_id=account.pk, amount=250_000, kind=LedgerEntry.Kind.CHARGE_PAID, reference="seed:azul")
    return account


def money(account: Account) -> tuple[int, int, list[tuple[str, int]], list[tuple[str, str]]]:
    """The balance, the ledger and every withdrawal: what must not move on a refusal."""
    return (
        available_balance(account),
        ledger_sum(account),
        list(LedgerEntry.objects.filter(account=account).order_by("id").values_list("kind", "amount")),
        [(str(pk), status) for pk, status in Withdrawal.objects.filter(account=account).values_list("pk", "status")],
    )


def contact(account: Account) -> tuple[str, bool, int, int]:
    account.refresh_from_db()
    return (
        account.email,
        account.withdrawals_need_approval,
        account.withdrawal_per_request_limit,
        account.withdrawal_daily_limit,
    )


def test_an_operations_member_alone_moves_no_money_out(
    staff_member: Callable[[str, str], Client], merchant: Account, seen: Seen
) -> None:
    insider = staff_member("operations", "mallory")
    insider_user = User.objects.get(username="mallory")
    # The merchant's own credential (made by an operator with shell access: pix_bootstrap).
    existing = credential_issue(account=merchant, permission="all")
    before, settings_before = money(merchant), contact(merchant)

    # 1. Issue an `all` credential: a link goes to the merchant; she sees no secret.
    seen.keep(insider.get(reverse("admin:accounts_account_issue_credential", args=[merchant.pk])))
    posted = insider.post(
        reverse("admin:accounts_account_issue_credential", args=[merchant.pk]),
        {"permission": "all", "label": "Integração", "reason": "Pedido do cliente"},
        follow=True,
    )
    seen.keep(posted)
    issued = ApiCredential.objects.exclude(pk=existing.credential.pk).get(account=merchant)
    assert (issued.is_active, issued.secret_hash) == (False, "")
    assert [m.to for m in mail.outbox] == [[MERCHANT_EMAIL]]
    for url in (
        reverse("admin:accounts_account_change", args=[merchant.pk]),
        reverse("admin:accounts_apicredential_change", args=[issued.pk]),
        CREDENTIALS,
        reverse("admin:accounts_account_history", args=[merchant.pk]),
        reverse("admin:accounts_credentiallink_changelist"),
    ):
        seen.keep(insider.get(url))
    assert money(merchant) == before

    # 2. Rotate the merchant's credential: the new one waits for the merchant too.
    seen.keep(admin_action(insider, CREDENTIALS, "rotate", [existing.credential.pk]))
    seen.keep(admin_action(insider, CREDENTIALS, "rotate", [existing.credential.pk], reason="Rotação"))
    assert ApiCredential.objects.filter(account=merchant, secret_hash="").count() == 2
    assert {address for m in mail.outbox for address in m.to} == {MERCHANT_EMAIL}
    assert money(merchant) == before

    # 3. Point the contact at herself, switch manual approval off, raise the limits: only asked.
    change = merchant_form(
        email=INSIDER_EMAIL,
        withdrawals_need_approval=False,
        withdrawal_per_request_limit="10.000,00",
        withdrawal_daily_limit="50.000,00",
        change_reason="Atualização cadastral",
    )
    seen.keep(insider.post(reverse("admin:accounts_account_change", args=[merchant.pk]), change, follow=True))
    assert contact(merchant) == settings_before
    asked = list(AccountChangeRequest.objects.filter(account=merchant, state="pending"))
    assert len(asked) == 4
    # ...and a link sent again still goes to the merchant.
    seen.keep(admin_action(insider, CREDENTIALS, "resend_link", [issued.pk], reason="Não chegou"))
    assert mail.outbox[-1].to == [MERCHANT_EMAIL]

    # 4. Approve her own requests: refused in the back office and in the service.
    seen.keep(admin_action(insider, CHANGES, "approve_changes", [p.pk for p in asked], reason="ok"))
    for pending in asked:
        with pytest.raises(ApprovalRefused):
            account_change_approve(request_id=pending.pk, approver=insider_user)
    assert contact(merchant) == settings_before
    assert AccountChangeRequest.objects.filter(account=merchant, state="pending").count() == 4
    assert money(merchant) == before

    # 5. Refund to herself a charge she paid: only asked, and not by her approved.
    charge = paid_charge(merchant)
    before = money(merchant)
    seen.keep(admin_action(insider, CHARGES, "refund", [charge.pk], reason="Desistência"))
    refund = MoneyActionRequest.objects.get(action="refund_charge", state="pending")
    seen.keep(admin_action(insider, REQUESTS, "approve_requests", [refund.pk], reason="ok"))
    refund.refresh_from_db()
    assert refund.state == "pending"
    assert money(merchant) == before

    # 6. The merchant claims its credential and asks for a withdrawal (to its own key).
    # The link sent again (step 3) replaced the first one.
    token = CLAIM.search([str(m.body) for m in mail.outbox if issued.public_key in str(m.body)][-1])
    assert token is not None
    browser = Client()
    claimed = browser.post(reverse("credential_claim", args=[token.group("token")]))
    secret = SECRET.search(claimed.content.decode())
    assert secret is not None
    api = APIClient()
    api.credentials(HTTP_X_PUBLIC_KEY=issued.public_key, HTTP_X_SECRET_KEY=secret.group())
    asked_out = api.post(
        "/api/withdrawals", {"amount": 200_000, "key_type": "cnpj", "key_value": "11222333000181"}, format="json"
    )
    assert asked_out.status_code == 201, asked_out.content
    withdrawal = Withdrawal.objects.get(pk=asked_out.json()["data"]["id"])
    before = money(merchant)

    # 7. She approves it herself: refused (segregation of duties), nothing sent.
    seen.keep(admin_action(insider, WITHDRAWALS, "approve", [withdrawal.pk]))
    done = seen.keep(admin_action(insider, WITHDRAWALS, "approve", [withdrawal.pk], reason="Conferido"))
    assert "Segregação de funções" in admin_messages(done)[0]
    withdrawal.refresh_from_db()
    assert withdrawal.status == WithdrawalStatus.PENDING
    assert money(merchant) == before

    # Nothing she received, and no log line, carries a secret or a claim token.
    tokens = [t for m in mail.outbox for t in CLAIM.findall(str(m.body))]
    assert tokens
    everything = seen.pages + seen.lines
    assert [text for text in everything if SECRET.search(text)] == []
    assert [text for text in everything for t in tokens if t in text] == []
    assert secret.group() not in "".join(seen.lines)
    # The secret and the tokens rest nowhere in the database either.
    assert [(t, c) for t, c, v in stored_values() if secret.group() in v or any(k in v for k in tokens)] == []
    # R$ 2.500,00 + the R$ 100,00 she paid - the merchant's own R$ 2.000,00, still waiting for a person.
    assert available_balance(merchant) == 60_000 == ledger_sum(merchant)


def test_creating_an_account_with_her_own_contact_sends_her_no_link(
    staff_member: Callable[[str, str], Client], seen: Seen
) -> None:
    """The review's path around the contact maker-checker: create the account
    with her own address as its contact, then issue a credential to it."""
    insider = staff_member("operations", "mallory")
    form = account_form(name="Loja Fantasma Ltda", email=INSIDER_EMAIL, status="approved") | inline_management()

    seen.keep(insider.post(reverse("admin:accounts_account_add"), form, follow=True))
    created = Account.objects.get(name="Loja Fantasma Ltda")
    issue = reverse("admin:accounts_account_issue_credential", args=[created.pk])
    seen.keep(insider.post(issue, {"permission": "all", "label": "ERP", "reason": "Integração"}, follow=True))
    pending = AccountChangeRequest.objects.get(account=created, state="pending")
    seen.keep(admin_action(insider, CHANGES, "approve_changes", [pending.pk], reason="ok"))

    created.refresh_from_db()
    assert created.email == ""
    assert not ApiCredential.objects.filter(account=created).exists()
    assert mail.outbox == []
    assert [text for text in seen.pages + seen.lines if SECRET.search(text)] == []


def merchant_form(**changes: Any) -> dict[str, Any]:
    values = {"name": "Loja Azul Ltda", "email": MERCHANT_EMAIL, "withdrawals_need_approval": "on", **changes}
    return {key: value for key, value in account_form(**values).items() if value is not False} | inline_management()


def paid_charge(account: Account) -> Charge:
    charge = Charge.objects.create(
        account=account,
        amount=10_000,
        platform_tax=0,
        liquid_amount=10_000,
        txid="insider0000000000000000000000001",
        emv="000201",
        acquirer=AcquirerFactory(key="alpha"),
        expires_at=timezone.now(),
        buyer_name="Mallory",
        buyer_document="52998224725",
    )
    charge_transition(charge_id=charge.pk, to_status=ChargeStatus.PAID, source="sandbox")
    return charge


def test_no_back_office_group_manages_staff_or_decides_what_it_asks() -> None:
    """Whoever may grant permissions may give herself, or a second login of
    hers, both halves of every maker-checker: no group ever gets a permission
    of auth (only superusers manage staff: docs/operations/back-office.md,
    "Groups and permissions"). And the group that asks (operations) never
    holds the approvals of what it asks."""
    from django.contrib.auth.models import Group

    granted = {
        group.name: {
            f"{p.content_type.app_label}.{p.codename}" for p in group.permissions.select_related("content_type")
        }
        for group in Group.objects.filter(name__in=["support", "operations", "finance"])
    }

    assert set(granted) == {"support", "operations", "finance"}
    assert {name: [p for p in perms if p.startswith("auth.")] for name, perms in granted.items()} == {
        "support": [],
        "operations": [],
        "finance": [],
    }
    approvals = {
        "accounts.approve_account_change",
        "accounts.approve_charge_refund",
        "accounts.approve_chargeback_resolution",
        "accounts.approve_withdrawal_return",
        "accounts.approve_undetermined_payout_failure",
        "accounts.approve_sent_payout_redebit",
    }
    assert granted["operations"] & approvals == set()
    assert granted["finance"] >= approvals
    assert "withdrawals.approve_withdrawal" not in granted["finance"]
