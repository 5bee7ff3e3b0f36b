"""The back office: what staff see and do in the Django admin, and that every
change goes through the services (status, balance row, hashed secrets, log)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.admin.models import ADDITION, CHANGE, LogEntry
from django.contrib.auth.models import Permission
from django.contrib.contenttypes.models import ContentType
from django.core import mail
from django.db import transaction
from django.test import Client
from django.urls import reverse

from accounts.exceptions import InvalidTransition
from accounts.models import Account, AccountBalance, AccountChangeRequest, ApiCredential, LedgerEntry
from accounts.services import credential_issue, credential_revoke, ledger_post
from acquirers.models import AcquirerGrant
from tests.factories import AccountFactory, AcquirerFactory
from tests.helpers import staff_login
from webhooks.models import WebhookEndpoint

pytestmark = pytest.mark.django_db

ACCOUNTS = reverse("admin:accounts_account_changelist")
CREDENTIALS = reverse("admin:accounts_apicredential_changelist")
SECRET = re.compile(r"sk_[A-Za-z0-9_-]{40,}")
INLINE_PREFIXES = ("credentials", "acquirer_grants", "acquirer_slots", "webhook_endpoints")


def change_url(obj: Any) -> str:
    return reverse(f"admin:{obj._meta.app_label}_{obj._meta.model_name}_change", args=[obj.pk])


def issue_url(account: Account) -> str:
    return reverse("admin:accounts_account_issue_credential", args=[account.pk])


def html(response: Any) -> str:
    return response.content.decode()


def shown_messages(response: Any) -> list[str]:
    return [str(message) for message in response.context["messages"]]


def run_action(client: Client, url: str, action: str, *objects: Any) -> Any:
    return client.post(url, {"action": action, "_selected_action": [str(o.pk) for o in objects]}, follow=True)


def confirm_action(client: Client, url: str, action: str, *objects: Any, reason: str = "Pedido do suporte") -> Any:
    """An action of the list submitted from its confirmation page, with a reason."""
    data = {"action": action, "_selected_action": [str(o.pk) for o in objects], "confirmed": "yes", "reason": reason}
    return client.post(url, data, follow=True)


def log_messages(obj: Any) -> list[str]:
    return list(
        LogEntry.objects.filter(
            content_type=ContentType.objects.get_for_model(obj), object_id=str(obj.pk), action_flag=CHANGE
        ).values_list("change_message", flat=True)
    )


def inline_management(**existing: int) -> dict[str, str]:
    """Management-form data of the account page's inlines (existing rows per prefix)."""
    data: dict[str, str] = {}
    for prefix in INLINE_PREFIXES:
        count = str(existing.get(prefix, 0))
        data |= {
            f"{prefix}-TOTAL_FORMS": count,
            f"{prefix}-INITIAL_FORMS": count,
            f"{prefix}-MIN_NUM_FORMS": "0",
            f"{prefix}-MAX_NUM_FORMS": "1000",
        }
    return data


def account_form(**overrides: Any) -> dict[str, Any]:
    return {
        "name": "Padaria Nova Ltda",
        "document": "11222333000181",
        "status": "pending",
        "payment_methods": ["pix"],
        # Money typed in reais, as staff do.
        "cashin_fee_fixed": "0,50",
        "cashin_fee_bps": "150",
        "withdrawal_fee_fixed": "1,00",
        "withdrawal_fee_bps": "0",
        "withdrawal_minimum": "10,00",
        "withdrawal_per_request_limit": "5.000,00",
        "withdrawal_daily_limit": "20.000,00",
        "charge_expiry_seconds": "3600",
        **overrides,
    }


# --------------------------------------------------------------------------- account list


def test_account_list_shows_columns_and_balance(admin_client: Client) -> None:
    account = AccountFactory(name="Mercado Azul", document="12345678000199")
    with transaction.atomic():
        ledger_post(account_id=account.pk, amount=123456, kind=LedgerEntry.Kind.CHARGE_PAID, reference="charge:x:1")

    response = admin_client.get(ACCOUNTS)

    assert response.status_code == 200
    page = html(response)
    assert "Mercado Azul" in page
    assert "12.345.678/0001-99" in page
    assert "Aprovada" in page
    assert "R$ 1.234,56" in page


def test_account_list_search_and_filters(admin_client: Client) -> None:
    blue = AccountFactory(name="Mercado Azul", document="12345678000199")
    red = AccountFactory(name="Loja Vermelha", document="98765432000100", status=Account.Status.PENDING)
    AccountFactory(name="Bazar Verde", is_blocked=True)

    def listed(query: str) -> set[str]:
        response = admin_client.get(f"{ACCOUNTS}?{query}")
        assert response.status_code == 200
        return {account.name for account in response.context["cl"].result_list}

    assert listed("q=Azul") == {blue.name}
    assert listed("q=98765432000100") == {red.name}
    assert listed("status__exact=pending") == {red.name}
    assert listed("is_blocked__exact=1") == {"Bazar Verde"}


# --------------------------------------------------------------------------- account actions


def test_approve_changes_pending_accounts_logs_and_skips_approved(admin_client: Client) -> None:
    pending = AccountFactory(status=Account.Status.PENDING)
    approved = AccountFactory(status=Account.Status.APPROVED)

    response = confirm_action(admin_client, ACCOUNTS, "approve", pending, approved, reason="Documentos conferidos")

    assert response.status_code == 200
    pending.refresh_from_db()
    assert pending.status == Account.Status.APPROVED
    assert log_messages(pending) == ["Aprovada. Motivo: Documentos conferidos"]
    assert log_messages(approved) == []
    assert shown_messages(response) == ["1 conta aprovada.", "1 conta já estava assim; nada mudou."]


@pytest.mark.parametrize(
    ("action", "initial", "expected", "logged"),
    [
        ("reject", {"status": Account.Status.PENDING}, {"status": Account.Status.REJECTED}, "Rejeitada"),
        ("reject", {"status": Account.Status.APPROVED}, {"status": Account.Status.REJECTED}, "Rejeitada"),
        ("approve", {"status": Account.Status.REJECTED}, {"status": Account.Status.APPROVED}, "Aprovada"),
        ("block", {"is_blocked": False}, {"is_blocked": True}, "Bloqueada"),
        ("unblock", {"is_blocked": True}, {"is_blocked": False}, "Desbloqueada"),
    ],
)
def test_account_actions(
    admin_client: Client, action: str, initial: dict[str, Any], expected: dict[str, Any], logged: str
) -> None:
    account = AccountFactory(**initial)

    response = confirm_action(admin_client, ACCOUNTS, action, account, reason="Pedido do suporte")

    assert response.status_code == 200
    account.refresh_from_db()
    assert {field: getattr(account, field) for field in expected} == expected
    assert log_messages(account) == [f"{logged}. Motivo: Pedido do suporte"]


def test_repeated_block_is_a_no_op(admin_client: Client) -> None:
    account = AccountFactory(is_blocked=True)

    response = confirm_action(admin_client, ACCOUNTS, "block", account)

    assert shown_messages(response) == [f"A conta “{account.name}” já estava bloqueada; nada mudou."]
    assert log_messages(account) == []


def test_invalid_transition_is_reported_not_a_500(admin_client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    account = AccountFactory(status=Account.Status.PENDING)

    def refuse(*, account: Account) -> bool:
        raise InvalidTransition("Conta Pendente não pode passar a approved.")

    monkeypatch.setattr("accounts.admin.account_status.account_approve", refuse)

    response = confirm_action(admin_client, ACCOUNTS, "approve", account)

    assert response.status_code == 200
    assert shown_messages(response) == [f"{account.name}: uma conta pendente não pode ser aprovada; nada mudou."]
    account.refresh_from_db()
    assert account.status == Account.Status.PENDING
    assert log_messages(account) == []


# --------------------------------------------------------------------------- account form


def test_add_account_creates_it_with_its_balance_row(admin_client: Client) -> None:
    response = admin_client.post(reverse("admin:accounts_account_add"), account_form() | inline_management())

    assert response.status_code == 303
    account = Account.objects.get(name="Padaria Nova Ltda")
    assert account.status == Account.Status.PENDING
    assert account.cashin_fee_bps == 150
    assert (account.cashin_fee_fixed, account.withdrawal_fee_fixed) == (50, 100)
    assert (account.withdrawal_minimum, account.withdrawal_per_request_limit) == (1000, 500_000)
    assert account.withdrawal_daily_limit == 2_000_000
    assert account.payment_methods == ["pix"]
    assert AccountBalance.objects.get(account=account).available == 0
    assert LogEntry.objects.filter(object_id=str(account.pk), action_flag=ADDITION).exists()


def test_add_account_with_an_acquirer_grant(admin_client: Client) -> None:
    acquirer = AcquirerFactory()
    data = account_form() | inline_management() | {"acquirer_grants-TOTAL_FORMS": "1"}
    data["acquirer_grants-0-acquirer"] = str(acquirer.pk)

    response = admin_client.post(reverse("admin:accounts_account_add"), data)

    assert response.status_code == 303
    account = Account.objects.get(name="Padaria Nova Ltda")
    assert AcquirerGrant.objects.filter(account=account, acquirer=acquirer).exists()
    assert AccountBalance.objects.filter(account=account).exists()


def test_change_form_is_organised_in_fieldsets(admin_client: Client) -> None:
    account = AccountFactory()

    response = admin_client.get(change_url(account))

    assert response.status_code == 200
    page = html(response)
    for title in ("Identificação", "Taxa de cash-in", "Taxa de saque", "Limites e aprovação de saques", "Cobranças"):
        assert title in page
    assert account.postback_secret not in page  # shown once, at creation or rotation
    assert 'name="status"' not in page
    assert 'name="is_blocked"' not in page
    assert "Emitir credencial" in page


@pytest.mark.parametrize(
    "name", ["Loja Azul\r\n\r\nURGENTE: acesse http://golpe.example", "Loja\tAzul", "Loja\x1bAzul", "Loja\u2028Azul"]
)
def test_an_account_name_with_line_breaks_or_control_characters_is_refused(admin_client: Client, name: str) -> None:
    """The name greets the merchant in the claim e-mail: a crafted POST must
    not add lines of instructions to it."""
    account = AccountFactory(name="Loja Azul")
    refusal = ["Use uma única linha, sem quebras de linha, tabulações nem outros caracteres de controle."]

    changed = admin_client.post(change_url(account), account_form(name=name) | inline_management())
    added = admin_client.post(reverse("admin:accounts_account_add"), account_form(name=name) | inline_management())

    for response in (changed, added):
        assert response.status_code == 200
        assert response.context["adminform"].form.errors["name"] == refusal
    account.refresh_from_db()
    assert account.name == "Loja Azul"
    assert Account.objects.count() == 1


def test_add_account_without_approve_permission_starts_pending(client: Client, django_user_model: Any) -> None:
    clerk = django_user_model.objects.create_user(username="clerk", password="x", is_staff=True)
    clerk.user_permissions.set(
        Permission.objects.filter(content_type__app_label="accounts", codename__in=["add_account", "view_account"])
    )
    staff_login(client, clerk)

    response = client.post(reverse("admin:accounts_account_add"), account_form(status="approved") | inline_management())

    assert response.status_code == 303
    assert Account.objects.get(name="Padaria Nova Ltda").status == Account.Status.PENDING


def test_change_form_saves_settings_but_never_the_status(admin_client: Client) -> None:
    account = AccountFactory(status=Account.Status.PENDING)
    data = account_form(name=account.name, cashin_fee_bps="200", status="approved", is_blocked="on")

    response = admin_client.post(change_url(account), data | inline_management())

    assert response.status_code == 302
    account.refresh_from_db()
    assert account.cashin_fee_bps == 200
    assert account.status == Account.Status.PENDING
    assert account.is_blocked is False


def test_account_cannot_be_deleted(admin_client: Client) -> None:
    account = AccountFactory()

    assert admin_client.get(reverse("admin:accounts_account_delete", args=[account.pk])).status_code == 403
    assert Account.objects.filter(pk=account.pk).exists()


def test_account_page_lists_credentials_without_secrets(admin_client: Client) -> None:
    account = AccountFactory()
    issued = credential_issue(account=account)

    page = html(admin_client.get(change_url(account)))

    assert issued.credential.public_key in page
    assert f"sk_…{issued.secret_key[-4:]}" in page
    assert issued.secret_key not in page
    assert issued.credential.secret_hash not in page


# --------------------------------------------------------------------------- credentials


def test_issue_credential_emails_a_claim_link_and_shows_no_secret(admin_client: Client) -> None:
    account = AccountFactory(email="financeiro@loja.com.br")
    assert "financeiro@loja.com.br" in html(admin_client.get(issue_url(account)))

    posted = admin_client.post(issue_url(account), {"permission": "cashin", "label": "ERP", "reason": "Pedido do ERP"})

    # Post/Redirect/Get back to the account page: nothing secret on any page.
    assert posted.status_code == 303
    assert posted["Location"] == change_url(account)
    page = admin_client.get(posted["Location"])
    credential = ApiCredential.objects.get(account=account)
    assert (credential.permission, credential.label, credential.is_active) == ("cashin", "ERP", False)
    assert (credential.secret_hash, credential.secret_hint) == ("", "")
    assert credential.public_key in html(page)
    assert SECRET.search(html(page)) is None
    assert shown_messages(page)[0].startswith(
        f"{credential.public_key} (Cash-in): link de resgate enviado para financeiro@loja.com.br, válido até "
    )
    (email,) = mail.outbox
    assert email.to == ["financeiro@loja.com.br"]
    assert credential.public_key in str(email.body)
    assert SECRET.search(str(email.body)) is None  # the secret does not exist yet
    assert log_messages(account) == [
        f"Credencial emitida, aguardando resgate por link: {credential.public_key}. Motivo: Pedido do ERP"
    ]


def test_an_account_without_contact_email_gets_no_credential_from_the_back_office(admin_client: Client) -> None:
    account = AccountFactory(email="")
    assert "não tem e-mail de contato" in html(admin_client.get(issue_url(account)))

    response = admin_client.post(issue_url(account), {"permission": "all", "reason": "Onboarding"})

    assert response.status_code == 200
    assert "A conta não tem e-mail de contato" in html(response)
    assert not ApiCredential.objects.filter(account=account).exists()
    assert mail.outbox == []


def test_issue_credential_rejects_an_unknown_permission(admin_client: Client) -> None:
    account = AccountFactory()

    response = admin_client.post(issue_url(account), {"permission": "root"})

    assert response.status_code == 200
    assert response.context["form"].errors["permission"]
    assert not ApiCredential.objects.filter(account=account).exists()


def test_credential_list_filters_and_search(admin_client: Client) -> None:
    account = AccountFactory(name="Mercado Azul")
    cashin = credential_issue(account=account, permission=ApiCredential.Permission.CASHIN).credential
    other = credential_issue(account=AccountFactory(), permission=ApiCredential.Permission.CASHOUT).credential
    credential_revoke(credential=other)

    def listed(query: str) -> set[str]:
        response = admin_client.get(f"{CREDENTIALS}?{query}")
        assert response.status_code == 200
        assert cashin.secret_hash not in html(response)
        return {credential.public_key for credential in response.context["cl"].result_list}

    assert listed("q=Azul") == {cashin.public_key}
    assert listed(f"q={other.public_key}") == {other.public_key}
    assert listed("permission__exact=cashout") == {other.public_key}
    assert listed("is_active__exact=0") == {other.public_key}


def test_credentials_are_not_added_or_deleted_in_their_admin(admin_client: Client) -> None:
    credential = credential_issue(account=AccountFactory()).credential

    assert admin_client.get(reverse("admin:accounts_apicredential_add")).status_code == 403
    assert admin_client.get(reverse("admin:accounts_apicredential_delete", args=[credential.pk])).status_code == 403
    assert admin_client.post(change_url(credential), {"is_active": ""}).status_code == 403
    credential.refresh_from_db()
    assert credential.is_active


def test_revoke_asks_a_reason_then_deactivates(admin_client: Client) -> None:
    credential = credential_issue(account=AccountFactory(), label="ERP").credential

    confirm = run_action(admin_client, CREDENTIALS, "revoke", credential)
    assert "Revogar credenciais: confirmar" in html(confirm)
    assert credential.public_key in html(confirm)
    assert 'name="reason"' in html(confirm)
    credential.refresh_from_db()
    assert credential.is_active  # the confirmation page changed nothing

    response = confirm_action(admin_client, CREDENTIALS, "revoke", credential, reason="Chave vazou no repositório")

    assert response.status_code == 200
    credential.refresh_from_db()
    assert credential.is_active is False
    assert credential.revoked_at is not None
    assert log_messages(credential) == ["Revogada. Motivo: Chave vazou no repositório"]
    assert shown_messages(response) == ["1 credencial revogada."]


def test_revoking_only_revoked_credentials_says_so_and_asks_nothing(admin_client: Client) -> None:
    credential = credential_issue(account=AccountFactory()).credential
    credential_revoke(credential=credential)

    response = run_action(admin_client, CREDENTIALS, "revoke", credential)

    assert shown_messages(response) == ["1 credencial já estava revogada."]


def test_rotate_emails_links_for_new_credentials_and_keeps_the_old_ones_active(admin_client: Client) -> None:
    first = credential_issue(account=AccountFactory(email="a@loja.com.br"), permission="cashout").credential
    second = credential_issue(account=AccountFactory(email="b@loja.com.br"), permission="cashin").credential

    confirm = admin_client.post(CREDENTIALS, {"action": "rotate", "_selected_action": [first.pk, second.pk]})
    assert "a@loja.com.br" in html(confirm)
    assert ApiCredential.objects.count() == 2  # the confirmation page changed nothing
    response = confirm_action(admin_client, CREDENTIALS, "rotate", first, second, reason="Troca anual")

    assert response.status_code == 200
    assert SECRET.search(html(response)) is None
    for old, address in ((first, "a@loja.com.br"), (second, "b@loja.com.br")):
        old.refresh_from_db()
        assert old.is_active
        new = ApiCredential.objects.exclude(pk=old.pk).get(account=old.account)
        assert (new.permission, new.is_active, new.secret_hash) == (old.permission, False, "")
        assert new.label == f"{old.public_key} (rotacionada)"
        assert [m.to for m in mail.outbox if new.public_key in m.body] == [[address]]
        assert log_messages(old) == [f"Rotacionada: nova credencial {new.public_key}. Motivo: Troca anual"]
    assert ApiCredential.objects.count() == 4


def test_rotate_skips_revoked_credentials(admin_client: Client) -> None:
    credential = credential_issue(account=AccountFactory()).credential
    credential_revoke(credential=credential)

    response = run_action(admin_client, CREDENTIALS, "rotate", credential)

    assert shown_messages(response) == ["1 credencial revogada ou aguardando resgate ignorada."]
    assert ApiCredential.objects.count() == 1


# --------------------------------------------------------------------------- ledger and balances


def test_ledger_is_listed_and_searchable(admin_client: Client) -> None:
    account = AccountFactory(name="Mercado Azul")
    with transaction.atomic():
        ledger_post(account_id=account.pk, amount=5000, kind=LedgerEntry.Kind.CHARGE_PAID, reference="charge:a:1")
        ledger_post(account_id=account.pk, amount=-1200, kind=LedgerEntry.Kind.WITHDRAWAL, reference="withdrawal:b")
    url = reverse("admin:accounts_ledgerentry_changelist")

    def listed(query: str) -> set[str]:
        response = admin_client.get(f"{url}?{query}")
        assert response.status_code == 200
        return {entry.reference for entry in response.context["cl"].result_list}

    assert listed("") == {"charge:a:1", "withdrawal:b"}
    assert listed("q=withdrawal:b") == {"withdrawal:b"}
    assert listed("q=Azul") == {"charge:a:1", "withdrawal:b"}
    assert listed("kind__exact=withdrawal") == {"withdrawal:b"}
    assert "-R$ 12,00" in html(admin_client.get(url))


def test_ledger_refuses_add_change_and_delete(admin_client: Client) -> None:
    account = AccountFactory()
    with transaction.atomic():
        entry = ledger_post(account_id=account.pk, amount=5000, kind=LedgerEntry.Kind.CHARGE_PAID, reference="c:1")
    assert entry is not None

    assert admin_client.get(reverse("admin:accounts_ledgerentry_add")).status_code == 403
    assert admin_client.post(change_url(entry), {"amount": "999999"}).status_code == 403
    assert admin_client.post(reverse("admin:accounts_ledgerentry_delete", args=[entry.pk])).status_code == 403
    entry.refresh_from_db()
    assert entry.amount == 5000


def test_balances_are_read_only(admin_client: Client) -> None:
    account = AccountFactory(name="Mercado Azul")
    balance = AccountBalance.objects.get(account=account)

    response = admin_client.get(reverse("admin:accounts_accountbalance_changelist") + "?q=Azul")
    assert response.status_code == 200
    assert [b.pk for b in response.context["cl"].result_list] == [balance.pk]
    assert admin_client.get(reverse("admin:accounts_accountbalance_add")).status_code == 403
    assert admin_client.post(change_url(balance), {"available": "100"}).status_code == 403
    balance.refresh_from_db()
    assert balance.available == 0


# --------------------------------------------------------------------------- staff groups


def test_support_sees_accounts_but_cannot_act(staff_client: Any) -> None:
    client = staff_client("support")
    account = AccountFactory(status=Account.Status.PENDING)

    listing = client.get(ACCOUNTS)
    assert listing.status_code == 200
    assert account.name in html(listing)
    assert 'value="approve"' not in html(listing)
    assert client.get(change_url(account)).status_code == 200
    assert "Emitir credencial" not in html(client.get(change_url(account)))

    client.post(ACCOUNTS, {"action": "approve", "_selected_action": [str(account.pk)]})
    confirm_action(client, ACCOUNTS, "approve", account)
    account.refresh_from_db()
    assert account.status == Account.Status.PENDING
    assert client.post(issue_url(account), {"permission": "all"}).status_code == 403
    assert not ApiCredential.objects.filter(account=account).exists()


def test_support_cannot_revoke_credentials(staff_client: Any) -> None:
    client = staff_client("support")
    credential = credential_issue(account=AccountFactory()).credential

    assert client.get(CREDENTIALS).status_code == 200
    client.post(CREDENTIALS, {"action": "revoke", "_selected_action": [str(credential.pk)]})
    credential.refresh_from_db()
    assert credential.is_active


def test_support_can_view_every_project_model(staff_client: Any) -> None:
    client = staff_client("support")
    for name in ("acquirers_acquirer", "webhooks_webhookendpoint", "accounts_ledgerentry", "accounts_apicredential"):
        assert client.get(reverse(f"admin:{name}_changelist")).status_code == 200, name


def test_operations_approves_and_issues_credentials(staff_client: Any) -> None:
    client = staff_client("operations")
    account = AccountFactory(status=Account.Status.PENDING, email="ti@loja.com.br")

    listing = client.get(ACCOUNTS)
    assert 'value="approve"' in html(listing)
    confirm_action(client, ACCOUNTS, "approve", account)
    account.refresh_from_db()
    assert account.status == Account.Status.APPROVED

    response = client.post(issue_url(account), {"permission": "all", "reason": "Onboarding"}, follow=True)
    assert response.status_code == 200
    assert SECRET.search(html(response)) is None  # delivered by e-mail to the account, never shown
    assert ApiCredential.objects.get(account=account).awaiting_claim
    assert len(mail.outbox) == 1


# --------------------------------------------------------------------------- acquirers and webhooks


def test_acquirer_list_filters_and_search(admin_client: Client) -> None:
    AcquirerFactory(key="alpha", name="Alpha", enabled=True)
    AcquirerFactory(key="beta", name="Beta", enabled=False)
    url = reverse("admin:acquirers_acquirer_changelist")

    def listed(query: str) -> set[str]:
        response = admin_client.get(f"{url}?{query}")
        assert response.status_code == 200
        return {acquirer.key for acquirer in response.context["cl"].result_list}

    assert listed("") == {"alpha", "beta"}
    assert listed("q=Beta") == {"beta"}
    assert listed("enabled__exact=1") == {"alpha"}
    assert listed("adapter=sandbox") == {"alpha", "beta"}


def test_acquirer_options_are_hidden_from_view_only_staff(
    admin_client: Client, client: Client, django_user_model: Any
) -> None:
    acquirer = AcquirerFactory(options={"charge": "ok", "notification_secret": "very-secret-value-123"})
    assert "very-secret-value-123" in html(admin_client.get(change_url(acquirer)))
    viewer = django_user_model.objects.create_user(username="viewer", password="x", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(content_type__app_label="acquirers", codename="view_acquirer"))
    staff_login(client, viewer)

    response = client.get(change_url(acquirer))
    assert response.status_code == 200
    assert acquirer.name in html(response)
    assert "very-secret-value-123" not in html(response)


def test_webhook_endpoint_secret_is_never_shown_after_creation(admin_client: Client) -> None:
    endpoint = WebhookEndpoint.objects.create(account=AccountFactory(), url="https://example.com/hook")
    url = reverse("admin:webhooks_webhookendpoint_changelist")

    listing = admin_client.get(url)
    assert "https://example.com/hook" in html(listing)
    assert endpoint.secret not in html(listing)
    assert endpoint.code not in html(listing)
    assert list(admin_client.get(f"{url}?q=example.com").context["cl"].result_list) == [endpoint]
    assert list(admin_client.get(f"{url}?q=elsewhere.org").context["cl"].result_list) == []

    page = html(admin_client.get(change_url(endpoint)))
    # Shown once, at creation or rotation (tests/webhooks/test_admin.py), never again.
    assert endpoint.secret not in page
    assert 'name="secret"' not in page
    assert 'name="code"' not in page


# --------------------------------------------------------------------------- the postback secret


def test_a_new_accounts_postback_secret_is_shown_once_to_whoever_created_it(admin_client: Client) -> None:
    posted = admin_client.post(reverse("admin:accounts_account_add"), account_form() | inline_management())
    account = Account.objects.get(name="Padaria Nova Ltda")

    assert posted.status_code == 303
    assert account.postback_secret not in html(posted)
    shown = admin_client.get(posted["Location"])
    assert account.postback_secret in html(shown)
    assert "no-store" in shown["Cache-Control"]

    assert account.postback_secret not in html(admin_client.get(posted["Location"], follow=True))
    assert account.postback_secret not in html(admin_client.get(change_url(account)))
    assert account.postback_secret not in html(admin_client.get(ACCOUNTS))


def test_rotating_the_postback_secret_shows_the_new_one_once(admin_client: Client) -> None:
    account = AccountFactory()
    old = account.postback_secret

    posted = run_action(admin_client, ACCOUNTS, "rotate_postback_secret", account)

    account.refresh_from_db()
    assert account.postback_secret != old
    assert account.previous_postback_secret == old
    assert account.previous_postback_secret_expires_at is not None
    assert account.postback_secret in html(posted)
    assert log_messages(account) == ["Segredo de postback rotacionado"]
    # Reloading the page rotates nothing and shows nothing.
    reloaded = admin_client.get(posted.redirect_chain[-1][0], follow=True)
    assert account.postback_secret not in html(reloaded)
    assert Account.objects.get(pk=account.pk).postback_secret == account.postback_secret
    assert account.postback_secret not in html(admin_client.get(change_url(account)))


def test_support_never_sees_a_secret(staff_client: Any, admin_client: Client) -> None:
    account = AccountFactory()
    issued = credential_issue(account=account)
    endpoint = WebhookEndpoint.objects.create(account=account, url="https://example.com/hook")
    acquirer = AcquirerFactory(options={"charge": "ok", "notification_secret": "very-secret-value-123"})
    # A rotation by someone else, waiting to be shown in their session.
    run_action(admin_client, ACCOUNTS, "rotate_postback_secret", account)
    account.refresh_from_db()
    secrets = [
        account.postback_secret,
        account.previous_postback_secret,
        issued.secret_key,
        issued.credential.secret_hash,
        endpoint.secret,
        "very-secret-value-123",
    ]
    client = staff_client("support")
    pages = [
        ACCOUNTS,
        change_url(account),
        reverse("admin:accounts_account_history", args=[account.pk]),
        CREDENTIALS,
        change_url(issued.credential),
        reverse("admin:accounts_ledgerentry_changelist"),
        reverse("admin:accounts_accountbalance_changelist"),
        reverse("admin:accounts_moneyactionrequest_changelist"),
        reverse("admin:webhooks_webhookendpoint_changelist"),
        change_url(endpoint),
        change_url(acquirer),
    ]

    for url in pages:
        response = client.get(url, follow=True)
        assert response.status_code == 200, url
        assert not [secret for secret in secrets if secret in html(response)], url
    # What support cannot open shows nothing either.
    assert client.get(issue_url(account)).status_code == 403
    rotated = run_action(client, ACCOUNTS, "rotate_postback_secret", account)
    assert not [secret for secret in secrets if secret in html(rotated)]
    assert Account.objects.get(pk=account.pk).postback_secret == account.postback_secret


# =========================================================================== issue 15: the accounts back office

ACCOUNT_CONSTRAINT_FIELDS = {
    "cashin_fee_fixed",
    "withdrawal_fee_fixed",
    "cashin_fee_bps",
    "withdrawal_fee_bps",
    "withdrawal_minimum",
    "withdrawal_per_request_limit",
    "withdrawal_daily_limit",
    "charge_expiry_seconds",
}


def transition_url(account: Account, name: str) -> str:
    return reverse(f"admin:accounts_account_{name}", args=[account.pk])


def account_state(account: Account) -> tuple[str, bool, int]:
    account.refresh_from_db()
    return account.status, account.is_blocked, len(log_messages(account))


def form_errors(response: Any) -> dict[str, list[str]]:
    return {field: [str(e) for e in errors] for field, errors in response.context["adminform"].form.errors.items()}


# --------------------------------------------------------------------------- one language


def test_every_accounts_label_is_portuguese(admin_client: Client) -> None:
    from django.apps import apps

    for model in apps.get_app_config("accounts").get_models():
        for field in model._meta.concrete_fields:
            if field.name in {
                "id",
                "postback_secret",
                "previous_postback_secret",
                "previous_postback_secret_expires_at",
            }:
                continue
            # Without a verbose name Django shows the attribute's English name.
            assert field.verbose_name != field.name.replace("_", " "), f"{model.__name__}.{field.name}"
            assert "centavos)" not in str(field.verbose_name), f"{model.__name__}.{field.name}"
        for _, name in model._meta.permissions:
            assert name.startswith("Pode "), name

    page = html(admin_client.get(reverse("admin:app_list", args=["accounts"])))
    for plural in ("Contas", "Credenciais de API", "Lançamentos", "Saldos", "Pedidos de aprovação"):
        assert f">{plural}<" in page, plural
    assert "Ledger" not in page
    assert "entrys" not in page


def test_saving_an_account_says_so_in_the_feminine(admin_client: Client) -> None:
    account = AccountFactory(name="Padaria Nova Ltda")

    response = admin_client.post(change_url(account), account_form() | inline_management(), follow=True)

    [message] = shown_messages(response)
    assert re.sub(r"<[^>]+>", "", message) == "A conta “Padaria Nova Ltda” foi alterada com sucesso."


# --------------------------------------------------------------------------- money in reais


def test_account_page_shows_and_takes_fees_and_limits_in_reais(admin_client: Client) -> None:
    account = AccountFactory(cashin_fee_fixed=50, withdrawal_minimum=123456, withdrawal_daily_limit=2_000_000)

    page = html(admin_client.get(change_url(account)))

    assert 'name="cashin_fee_fixed" value="0,50"' in page
    assert 'name="withdrawal_minimum" value="1.234,56"' in page
    assert 'name="withdrawal_daily_limit" value="20.000,00"' in page
    assert "Taxa fixa de cash-in" in page
    assert "centavos)" not in page

    data = account_form(
        name=account.name, withdrawal_minimum="R$ 25,90", withdrawal_daily_limit="1.000", change_reason="Contrato"
    )
    assert admin_client.post(change_url(account), data | inline_management()).status_code == 302
    account.refresh_from_db()
    # The lower daily limit only tightens: applied. The lower minimum loosens: asked for.
    assert (account.withdrawal_minimum, account.withdrawal_daily_limit) == (123456, 100_000)
    pending = AccountChangeRequest.objects.get(account=account)
    assert (pending.field, pending.old_value, pending.new_value) == ("withdrawal_minimum", 123456, 2590)


def test_an_amount_with_three_decimals_is_refused_not_rounded(admin_client: Client) -> None:
    account = AccountFactory(withdrawal_minimum=1000)

    response = admin_client.post(
        change_url(account), account_form(name=account.name, withdrawal_minimum="10,005") | inline_management()
    )

    assert response.status_code == 200
    assert "withdrawal_minimum" in form_errors(response)
    account.refresh_from_db()
    assert account.withdrawal_minimum == 1000


def test_ledger_and_balance_titles_show_reais() -> None:
    account = AccountFactory(name="Mercado Azul")
    with transaction.atomic():
        entry = ledger_post(account_id=account.pk, amount=1234, kind=LedgerEntry.Kind.CHARGE_PAID, reference="c:1")

    assert str(entry) == "Cobrança paga +R$ 12,34 (c:1)"
    assert str(AccountBalance.objects.get(account=account)) == "Saldo de Mercado Azul: R$ 12,34"


# --------------------------------------------------------------------------- constraints on the field


@pytest.mark.parametrize(
    ("field", "typed", "message"),
    [
        ("cashin_fee_fixed", "-0,01", "Deve ser no mínimo R$ 0,00."),
        ("withdrawal_fee_fixed", "-5,00", "Deve ser no mínimo R$ 0,00."),
        ("cashin_fee_bps", "-1", "Deve ser no mínimo 0 bps."),
        ("cashin_fee_bps", "10001", "Deve ser no máximo 10.000 bps."),
        ("withdrawal_fee_bps", "10001", "Deve ser no máximo 10.000 bps."),
        ("withdrawal_minimum", "-1,00", "Deve ser no mínimo R$ 0,00."),
        ("withdrawal_per_request_limit", "-1,00", "Deve ser no mínimo R$ 0,00."),
        ("withdrawal_daily_limit", "-1,00", "Deve ser no mínimo R$ 0,00."),
        ("charge_expiry_seconds", "59", "Deve ser no mínimo 60 segundos."),
    ],
)
def test_a_value_the_database_would_refuse_is_shown_on_its_field(
    admin_client: Client, field: str, typed: str, message: str
) -> None:
    account = AccountFactory(name="Padaria Nova Ltda")
    before = Account.objects.values().get(pk=account.pk)

    response = admin_client.post(change_url(account), account_form(**{field: typed}) | inline_management())

    assert response.status_code == 200
    assert form_errors(response) == {field: [message]}
    page = html(response)
    assert "Restrição" not in page
    assert Account.objects.values().get(pk=account.pk) == before
    assert log_messages(account) == []


def test_every_account_constraint_is_checked_on_the_form() -> None:
    from accounts.admin.account_form import _constraint_rules

    assert {field for field, _, _ in _constraint_rules()} == ACCOUNT_CONSTRAINT_FIELDS


# --------------------------------------------------------------------------- documents, e-mail and search


def test_documents_are_shown_formatted_and_found_formatted_or_bare(admin_client: Client) -> None:
    company = AccountFactory(name="Mercado Azul", document="11222333000181", email="financeiro@azul.com.br")
    person = AccountFactory(name="Ana Souza", document="52998224725")
    AccountFactory(name="Loja Vermelha", document="98765432000100")

    def listed(term: str) -> set[str]:
        response = admin_client.get(ACCOUNTS, {"q": term})
        assert response.status_code == 200
        return {account.name for account in response.context["cl"].result_list}

    page = html(admin_client.get(ACCOUNTS))
    assert "Por bloqueio" in page
    assert "11.222.333/0001-81" in page
    assert "529.982.247-25" in page
    assert "financeiro@azul.com.br" in page
    assert listed("11.222.333/0001-81") == {company.name}
    assert listed(" 11222333000181 ") == {company.name}
    assert listed("11.222.333") == {company.name}
    assert listed("529.982.247-25") == {person.name}
    assert listed("azul.com.br") == {company.name}
    assert listed("mercado") == {company.name}
    assert listed(str(person.pk)[:8]) == {person.name}
    assert listed(str(person.pk)) == {person.name}
    assert listed("00.000.000/0000-00") == set()


def test_the_document_is_typed_with_or_without_punctuation_and_checked(admin_client: Client) -> None:
    account = AccountFactory(document="")

    response = admin_client.post(
        change_url(account),
        account_form(document="11.222.333/0001-81", email="c@x.com.br", change_reason="Cadastro") | inline_management(),
    )
    assert response.status_code == 302
    account.refresh_from_db()
    # The contact e-mail and the document (same ownership only compares payees with it)
    # wait for a second person; the document is asked for as stored.
    assert (account.document, account.email) == ("", "")
    asked = dict(AccountChangeRequest.objects.filter(account=account).values_list("field", "new_value"))
    assert asked == {"email": "c@x.com.br", "document": "11222333000181"}
    Account.objects.filter(pk=account.pk).update(document="11222333000181")
    assert 'name="document" value="11.222.333/0001-81"' in html(admin_client.get(change_url(account)))

    refused = admin_client.post(change_url(account), account_form(document="11.222.333/0001-82") | inline_management())
    assert refused.status_code == 200
    assert form_errors(refused) == {"document": ["CPF ou CNPJ inválido: confira os dígitos."]}
    account.refresh_from_db()
    assert account.document == "11222333000181"


# --------------------------------------------------------------------------- the merchant's page


def test_account_page_shows_the_balance_and_links_to_its_records(admin_client: Client) -> None:
    from payments.models import Charge
    from webhooks.models import WebhookEndpoint, WebhookEvent

    account = AccountFactory(name="Mercado Azul")
    other = AccountFactory(name="Loja Vermelha")
    with transaction.atomic():
        ledger_post(account_id=account.pk, amount=123456, kind=LedgerEntry.Kind.CHARGE_PAID, reference="c:1")
    acquirer = AcquirerFactory()
    for owner, txid in ((account, "a1"), (account, "a2"), (other, "b1")):
        Charge.objects.create(
            account=owner,
            amount=100,
            platform_tax=0,
            liquid_amount=100,
            txid=txid,
            emv="0002",
            acquirer=acquirer,
            expires_at="2030-01-01T00:00:00Z",
        )
    WebhookEndpoint.objects.create(account=account, url="https://loja.example/hook")
    WebhookEvent.objects.create(account=account, event_type="charge", record_id=account.pk, status="paid", data={})

    page = html(admin_client.get(change_url(account)))

    assert "R$ 1.234,56" in page
    links = dict(re.findall(r'<li[^>]*><a href="([^"]+)">([^<]+)</a>', page.split('class="account-records"')[1]))
    assert set(links.values()) >= {
        "Cobranças",
        "Saques",
        "Lançamentos (extrato)",
        "Endpoints de webhook",
        "Eventos de webhook",
    }
    assert "Cobranças</a> (2)" in page
    assert "Lançamentos (extrato)</a> (1)" in page
    assert "Endpoints de webhook</a> (1)" in page
    for url in links:
        assert url.endswith(f"?account__id__exact={account.pk}")
        response = admin_client.get(url)
        # An unsupported filter would redirect to "?e=1".
        assert response.status_code == 200, url
        assert {str(record.account_id) for record in response.context["cl"].result_list} <= {str(account.pk)}, url
    charges_url = next(url for url, label in links.items() if label == "Cobranças")
    assert {c.txid for c in admin_client.get(charges_url).context["cl"].result_list} == {"a1", "a2"}


# --------------------------------------------------------------------------- status changes with a reason


@pytest.mark.parametrize(
    ("name", "initial", "expected", "logged", "message"),
    [
        ("approve", {"status": "pending"}, ("approved", False), "Aprovada", "foi aprovada"),
        ("reject", {"status": "approved"}, ("rejected", False), "Rejeitada", "foi rejeitada"),
        ("block", {"is_blocked": False}, ("approved", True), "Bloqueada", "foi bloqueada"),
        ("unblock", {"is_blocked": True}, ("approved", False), "Desbloqueada", "foi desbloqueada"),
    ],
)
def test_account_page_action_asks_for_confirmation_and_a_reason(
    admin_client: Client, name: str, initial: dict[str, Any], expected: tuple[str, bool], logged: str, message: str
) -> None:
    account = AccountFactory(name="Mercado Azul", **initial)
    before = account_state(account)

    assert transition_url(account, name) in html(admin_client.get(change_url(account)))
    confirmation = admin_client.get(transition_url(account, name))
    assert confirmation.status_code == 200
    assert "Motivo" in html(confirmation)
    assert "Mercado Azul" in html(confirmation)
    assert account_state(account) == before

    no_reason = admin_client.post(transition_url(account, name), {"reason": "  "})
    assert no_reason.status_code == 200
    assert "Este campo é obrigatório." in html(no_reason)
    assert account_state(account) == before

    done = admin_client.post(transition_url(account, name), {"reason": "Chamado 4512"})
    assert done.status_code == 302
    assert done["Location"] == change_url(account)
    assert account_state(account) == (*expected, 1)
    assert log_messages(account) == [f"{logged}. Motivo: Chamado 4512"]
    assert shown_messages(admin_client.get(change_url(account))) == [f"A conta “Mercado Azul” {message}."]


def test_account_page_offers_only_the_actions_that_apply(admin_client: Client) -> None:
    blocked = AccountFactory(is_blocked=True, status=Account.Status.APPROVED)

    page = html(admin_client.get(change_url(blocked)))

    assert transition_url(blocked, "unblock") in page
    assert transition_url(blocked, "reject") in page
    assert transition_url(blocked, "block") not in page
    assert transition_url(blocked, "approve") not in page


def test_a_refused_transition_changes_nothing(admin_client: Client) -> None:
    # pending → rejected is allowed; approved stays; rejected → pending does not exist, so
    # force a refusal: approving an approved account is a no-op, blocking a blocked one too.
    account = AccountFactory(is_blocked=True)
    before = account_state(account)

    response = admin_client.post(transition_url(account, "block"), {"reason": "de novo"}, follow=True)

    assert shown_messages(response) == [f"A conta “{account.name}” já estava bloqueada; nada mudou."]
    assert account_state(account) == before


def test_staff_without_the_permission_cannot_change_an_account_from_its_page(staff_client: Any) -> None:
    client = staff_client("support")
    account = AccountFactory(status=Account.Status.PENDING)
    before = account_state(account)

    assert transition_url(account, "approve") not in html(client.get(change_url(account)))
    assert client.get(transition_url(account, "approve")).status_code == 403
    assert client.post(transition_url(account, "approve"), {"reason": "x"}).status_code == 403
    assert account_state(account) == before


def test_list_action_shows_a_confirmation_and_needs_a_reason(admin_client: Client) -> None:
    account = AccountFactory(name="Mercado Azul", document="11222333000181")
    before = account_state(account)

    page = admin_client.post(ACCOUNTS, {"action": "block", "_selected_action": [str(account.pk)]})
    assert page.status_code == 200
    assert "Confirmar: bloquear" in html(page)
    assert "11.222.333/0001-81" in html(page)
    assert account_state(account) == before

    empty = confirm_action(admin_client, ACCOUNTS, "block", account, reason="")
    assert "Este campo é obrigatório." in html(empty)
    assert account_state(account) == before


# --------------------------------------------------------------------------- read-only pages


def test_read_only_pages_have_no_save_button(admin_client: Client) -> None:
    account = AccountFactory()
    with transaction.atomic():
        entry = ledger_post(account_id=account.pk, amount=123456, kind=LedgerEntry.Kind.CHARGE_PAID, reference="c:1")
    credential = credential_issue(account=account).credential
    balance = AccountBalance.objects.get(account=account)

    for record in (entry, balance, credential):
        response = admin_client.get(change_url(record))
        assert response.status_code == 200
        page = html(response)
        assert 'name="_save"' not in page, record
        assert 'name="_continue"' not in page, record
        assert "Fechar" in page, record
    for record in (entry, balance):
        page = html(admin_client.get(change_url(record)))
        assert "R$ 1.234,56" in page
        assert "123456" not in page


# --------------------------------------------------------------------------- the approval queue


def test_the_approval_queue_puts_pending_requests_first_oldest_first(admin_client: Client) -> None:
    from datetime import timedelta

    from django.contrib.auth.models import User
    from django.utils import timezone

    from accounts.models import MoneyActionRequest

    account = AccountFactory()
    maker = User.objects.create_user(username="maker", is_staff=True)
    checker = User.objects.create_user(username="checker", is_staff=True)
    now = timezone.now()

    def make(target: str, age_hours: int, *, decided: bool = False) -> MoneyActionRequest:
        extra = {"state": "rejected", "decided_by": checker, "decided_at": now} if decided else {}
        pending = MoneyActionRequest.objects.create(
            action=MoneyActionRequest.Action.RESOLVE_CHARGEBACK,
            target_type="payments.charge",
            target_id=target,
            account=account,
            amount=1000,
            reason="r",
            requested_by=maker,
            **extra,
        )
        MoneyActionRequest.objects.filter(pk=pending.pk).update(requested_at=now - timedelta(hours=age_hours))
        return pending

    decided_old = make("a", 10, decided=True)
    newest = make("b", 1)
    oldest = make("c", 5)

    response = admin_client.get(reverse("admin:accounts_moneyactionrequest_changelist"))

    assert [r.pk for r in response.context["cl"].result_list] == [oldest.pk, newest.pk, decided_old.pk]
    page = html(admin_client.get(change_url(oldest)))
    assert "Aprovar e executar" in page
    assert 'value="reject_requests"' in page
    assert 'name="_save"' not in page
    assert 'value="approve_requests"' not in html(admin_client.get(change_url(decided_old)))
    # The request page's button opens the same confirmation as the list's action; nothing is decided yet.
    confirmation = admin_client.post(
        reverse("admin:accounts_moneyactionrequest_changelist"),
        {"action": "reject_requests", "_selected_action": [str(oldest.pk)]},
    )
    assert confirmation.status_code == 200
    assert "Confirmar: Rejeitar os pedidos selecionados" in html(confirmation)
    oldest.refresh_from_db()
    assert oldest.state == MoneyActionRequest.State.PENDING
