"""Credentials issued by staff reach the merchant through a one-time link
e-mailed to the account's contact, never staff: the link's page shows a
button (a mail scanner's GET consumes nothing), its POST makes the secret and
shows it once; an expired, used, replaced or unknown link shows a clear
pt-BR page and changes nothing; two claims at once give the secret once."""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import re
import smtplib
import threading
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import Group, User
from django.core import mail
from django.core.mail.backends.base import BaseEmailBackend
from django.core.management import call_command
from django.test import Client, override_settings
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from accounts import credential_links
from accounts.account_changes import account_change_approve, account_change_request
from accounts.credential_links import (
    credential_claim,
    credential_issue_for_claim,
    credential_link_send,
)
from accounts.exceptions import ClaimRefused, CredentialLinkNotSent, CredentialLinkRefused
from accounts.models import Account, ApiCredential, CredentialLink
from accounts.services import credential_issue, credential_revoke
from core.logging import REDACTED, redact
from core.tokens import hash_secret
from tests.factories import AccountFactory
from tests.helpers import admin_action, admin_messages
from tests.realworld import run_concurrently
from tests.security.test_secrets import stored_values

pytestmark = pytest.mark.django_db

BASE = "https://pix.example.com"
LINK = re.compile(r"https?://[^/\s]+/resgatar-credencial/(?P<token>[A-Za-z0-9_-]{40,})/")
SECRET = re.compile(r"sk_[A-Za-z0-9_-]{40,}")
CREDENTIALS = reverse("admin:accounts_apicredential_changelist")


@pytest.fixture
def account(db: Any) -> Account:
    return AccountFactory(name="Loja Azul Ltda", email="financeiro@lojaazul.com.br")


@pytest.fixture
def operator(db: Any) -> User:
    user = User.objects.create_user(username="olivia", password="x", is_staff=True)
    user.groups.add(Group.objects.get(name="operations"))
    return user


def issue(account: Account, operator: User, permission: str = "all") -> tuple[ApiCredential, str]:
    """A credential waiting for its claim, and the token of the link e-mailed for it."""
    credential = credential_issue_for_claim(account=account, permission=permission, label="ERP")
    credential_link_send(credential_id=credential.pk, sent_by=operator)
    return credential, token_in(str(mail.outbox[-1].body))


def token_in(body: str) -> str:
    found = LINK.search(body)
    assert found is not None, body
    return found.group("token")


def claim_url(token: str) -> str:
    return reverse("credential_claim", args=[token])


def html(response: Any) -> str:
    return response.content.decode()


def press_the_button(token: str) -> Any:
    """What the merchant's browser does: open the link, then submit its form
    with the CSRF token the page gave (CSRF checked, as in production)."""
    browser = Client(enforce_csrf_checks=True)
    page = browser.get(claim_url(token))
    found = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html(page))
    assert found is not None, html(page)
    return browser.post(claim_url(token), {"csrfmiddlewaretoken": found.group(1)})


def state(credential: ApiCredential) -> tuple[bool, str, str]:
    credential.refresh_from_db()
    return credential.is_active, credential.secret_hash, credential.secret_hint


# --------------------------------------------------------------------------- delivery


def test_the_link_goes_to_the_contact_email_and_only_its_hash_is_stored(account: Account, operator: User) -> None:
    with override_settings(PUBLIC_BASE_URL=BASE + "/"):
        credential, token = issue(account, operator)

    (email,) = mail.outbox
    assert email.to == ["financeiro@lojaazul.com.br"]
    assert "resgate a chave secreta" in email.subject
    for words in ("Olá, Loja Azul Ltda.", credential.public_key, "Permissão: Todas", "uma única vez"):
        assert words in str(email.body)
    assert f"{BASE}/resgatar-credencial/{token}/" in str(email.body)  # at PUBLIC_BASE_URL, always
    assert SECRET.search(str(email.body)) is None  # no secret exists yet
    assert state(credential) == (False, "", "")
    link = CredentialLink.objects.get(credential=credential)
    assert (link.token_hash, link.sent_to, link.sent_by) == (hash_secret(token), account.email, operator)
    assert dt.timedelta(hours=23, minutes=59) < link.expires_at - timezone.now() <= dt.timedelta(hours=24)
    assert [(t, c) for t, c, v in stored_values() if token in v] == []
    # A credential waiting for its claim authenticates nothing.
    client = APIClient()
    client.credentials(HTTP_X_PUBLIC_KEY=credential.public_key, HTTP_X_SECRET_KEY="sk_" + "x" * 43)
    assert client.get("/api/withdrawals/balance").status_code == 401


@pytest.mark.parametrize("public_base_url", [BASE, ""])
def test_a_forged_host_header_never_reaches_the_link(
    staff_member: Callable[[str, str], Client], account: Account, public_base_url: str
) -> None:
    """An insider who can reach the back office under any Host (a permissive
    ALLOWED_HOSTS) cannot make the official e-mail carry a link to her server:
    links are built from PUBLIC_BASE_URL alone; without it nothing is sent."""
    insider = staff_member("operations", "mallory")

    with override_settings(PUBLIC_BASE_URL=public_base_url, ALLOWED_HOSTS=["*"]):
        done = insider.post(
            reverse("admin:accounts_account_issue_credential", args=[account.pk]),
            {"permission": "all", "label": "ERP", "reason": "Pedido do cliente"},
            HTTP_HOST="mallory.example",
            follow=True,
        )

    assert [body for m in mail.outbox if "mallory.example" in (body := str(m.body))] == []
    if public_base_url:
        assert f"{BASE}/resgatar-credencial/" in str(mail.outbox[-1].body)
    else:
        assert mail.outbox == []
        assert any("PUBLIC_BASE_URL" in message for message in admin_messages(done))
        assert not CredentialLink.objects.exists()


def test_a_name_stored_with_line_breaks_stays_on_the_greeting_line(account: Account, operator: User) -> None:
    """Names are refused with control characters (tests/accounts/test_admin.py);
    one stored before that, or by a path that skipped the check, cannot add
    lines of its own to the claim e-mail."""
    Account.objects.filter(pk=account.pk).update(name="Loja Azul\r\n\r\nURGENTE: responda com a chave\tsecreta")

    issue(account, operator)

    lines = str(mail.outbox[-1].body).splitlines()
    assert lines[0] == "Olá, Loja Azul    URGENTE: responda com a chave secreta."
    assert not any(line.startswith("URGENTE") for line in lines)


def test_an_account_without_a_contact_email_gets_no_link(operator: User) -> None:
    account = AccountFactory(email="")

    with pytest.raises(CredentialLinkRefused, match="não tem e-mail de contato"):
        credential_issue_for_claim(account=account, permission="cashout")

    assert not ApiCredential.objects.filter(account=account).exists()
    assert mail.outbox == []


class RefusingSmtp(BaseEmailBackend):
    """An SMTP server that drops the connection."""

    def send_messages(self, email_messages: Any) -> int:
        raise smtplib.SMTPServerDisconnected("connection unexpectedly closed")


def test_an_email_that_did_not_leave_delivers_nothing_and_the_link_can_be_sent_again(
    account: Account, operator: User
) -> None:
    credential = credential_issue_for_claim(account=account, permission="all")
    backend = f"{__name__}.RefusingSmtp"

    with override_settings(EMAIL_BACKEND=backend), pytest.raises(CredentialLinkNotSent, match="Reenviar link"):
        credential_link_send(credential_id=credential.pk, sent_by=operator)

    assert state(credential) == (False, "", "")
    # Not left as a link sent and valid: it never was.
    failed = CredentialLink.objects.get(credential=credential)
    assert failed.send_failed_at is not None
    assert failed.replaced_at == failed.send_failed_at
    credential_link_send(credential_id=credential.pk, sent_by=operator)
    assert press_the_button(token_in(str(mail.outbox[-1].body))).status_code == 200
    assert state(credential)[0] is True


# --------------------------------------------------------------------------- the claim


def test_opening_the_link_consumes_nothing_and_the_button_shows_the_secret_once(
    account: Account, operator: User
) -> None:
    credential, token = issue(account, operator)

    # A mail scanner, a link preview, the merchant reading twice: nothing changes.
    for _ in range(2):
        page = Client().get(claim_url(token))
        assert page.status_code == 200
        assert "Revelar a chave secreta" in html(page)
        assert credential.public_key in html(page)
        assert SECRET.search(html(page)) is None
        assert state(credential) == (False, "", "")
    assert page["Cache-Control"] == "no-store, private"
    assert page["Referrer-Policy"] == "no-referrer"

    claimed = press_the_button(token)

    assert claimed.status_code == 200
    assert claimed["Cache-Control"] == "no-store, private"
    secret = SECRET.search(html(claimed))
    assert secret is not None
    assert "não será exibida novamente" in html(claimed)
    active, secret_hash, hint = state(credential)
    assert (active, secret_hash, hint) == (True, hash_secret(secret.group()), secret.group()[-4:])
    assert CredentialLink.objects.get(credential=credential).used_at is not None
    assert [(t, c) for t, c, v in stored_values() if secret.group() in v] == []
    api = APIClient()
    api.credentials(HTTP_X_PUBLIC_KEY=credential.public_key, HTTP_X_SECRET_KEY=secret.group())
    assert api.get("/api/withdrawals/balance").status_code == 200

    # Used: reloading the answer (a POST again) or opening the link shows nothing.
    for again in (Client().post(claim_url(token)), Client().get(claim_url(token)), press_the_button_after_use(token)):
        assert again.status_code == 410
        assert "Este link já foi usado" in html(again)
        assert SECRET.search(html(again)) is None
    assert state(credential) == (True, hash_secret(secret.group()), secret.group()[-4:])


def press_the_button_after_use(token: str) -> Any:
    return Client().post(claim_url(token))


def test_an_unknown_token_is_a_clear_404_and_changes_nothing(account: Account, operator: User) -> None:
    credential, token = issue(account, operator)
    wrong = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")

    for response in (Client().get(claim_url(wrong)), Client().post(claim_url(wrong))):
        assert response.status_code == 404
        assert "Este link de resgate não existe" in html(response)
        assert response["Cache-Control"] == "no-store, private"
    with pytest.raises(ClaimRefused) as refused:
        credential_claim(token=wrong)
    assert refused.value.code == "unknown"
    assert state(credential) == (False, "", "")
    assert press_the_button(token).status_code == 200  # the right one still works


def test_an_expired_link_shows_a_clear_page_and_changes_nothing(
    account: Account, operator: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent_at = timezone.now()
    with override_settings(CREDENTIAL_LINK_HOURS=24):
        credential, token = issue(account, operator)
    real_now: Callable[[], dt.datetime] = timezone.now

    monkeypatch.setattr(timezone, "now", lambda: sent_at + dt.timedelta(hours=23, minutes=59))
    assert Client().get(claim_url(token)).status_code == 200

    monkeypatch.setattr(timezone, "now", lambda: real_now() + dt.timedelta(hours=24, seconds=1))
    for response in (Client().get(claim_url(token)), Client().post(claim_url(token))):
        assert response.status_code == 410
        assert "Este link expirou." in html(response)
        assert "peça ao nosso suporte um novo link" in html(response)
        assert SECRET.search(html(response)) is None
    assert state(credential) == (False, "", "")
    assert CredentialLink.objects.get(credential=credential).used_at is None


def test_a_link_sent_again_replaces_the_old_one(account: Account, operator: User) -> None:
    credential, first = issue(account, operator)
    credential_link_send(credential_id=credential.pk, sent_by=operator)
    second = token_in(str(mail.outbox[-1].body))

    old = Client().post(claim_url(first))

    assert old.status_code == 410
    assert "substituído por um mais novo" in html(old)
    assert state(credential) == (False, "", "")
    assert press_the_button(second).status_code == 200


def test_revoking_a_credential_waiting_for_its_claim_kills_its_link(account: Account, operator: User) -> None:
    credential, token = issue(account, operator)

    assert credential_revoke(credential=credential) is True

    assert Client().post(claim_url(token)).status_code == 410
    credential.refresh_from_db()
    assert (credential.is_active, credential.secret_hash, credential.revoked_at is not None) == (False, "", True)
    with pytest.raises(CredentialLinkRefused, match="não aguarda resgate"):
        credential_link_send(credential_id=credential.pk, sent_by=operator)


def test_an_approved_contact_change_kills_the_links_sent_to_the_old_address(account: Account, operator: User) -> None:
    credential, token = issue(account, operator)
    other, others_token = issue(AccountFactory(email="contato@outra.com.br"), operator)
    checker = User.objects.create_user(username="fernanda", password="x", is_staff=True)
    checker.groups.add(Group.objects.get(name="finance"))
    pending = account_change_request(
        account=account, field="email", new_value="novo@lojaazul.com.br", requested_by=operator, reason="Troca"
    )
    assert Client().get(claim_url(token)).status_code == 200  # asked only: nothing changed yet

    approved = account_change_approve(request_id=pending.pk, approver=User.objects.get(pk=checker.pk))

    assert approved.state == "approved"
    assert approved.outcome.startswith("1 link de resgate em aberto")
    old = Client().post(claim_url(token))
    assert old.status_code == 410
    assert "o e-mail de contato da conta mudou" in html(old)
    assert state(credential) == (False, "", "")
    # The credential still waits: its link goes again, to the new contact.
    credential_link_send(credential_id=credential.pk, sent_by=operator)
    assert mail.outbox[-1].to == ["novo@lojaazul.com.br"]
    assert press_the_button(token_in(str(mail.outbox[-1].body))).status_code == 200
    # Another account's link is not touched.
    assert press_the_button(others_token).status_code == 200
    assert state(other)[0] is True


@pytest.mark.django_db(transaction=True)
def test_two_claims_at_once_give_the_secret_exactly_once(
    account: Account, operator: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    credential, token = issue(account, operator)
    # Each claim, once it has read the link, waits for the others to have read
    # it too (as far as the row locks let them: with the locks, the first
    # waits alone until the gate gives up): the widest window two claims can
    # have, every time, instead of whatever the threads' timing gives.
    claims = 5
    gate = threading.Barrier(claims, timeout=2)
    real = credential_links._usable_link

    def read_then_wait(token: str, *, lock: bool) -> CredentialLink:
        link = real(token, lock=lock)
        with contextlib.suppress(threading.BrokenBarrierError):
            gate.wait()
        return link

    monkeypatch.setattr(credential_links, "_usable_link", read_then_wait)

    outcomes = run_concurrently([lambda: credential_claim(token=token)] * claims, timeout=60)

    won = [outcome for outcome in outcomes if not isinstance(outcome, BaseException)]
    lost = [outcome for outcome in outcomes if isinstance(outcome, BaseException)]
    assert len(won) == 1, outcomes
    assert all(isinstance(outcome, ClaimRefused) and outcome.code == "used" for outcome in lost), lost
    assert state(credential) == (True, hash_secret(won[0].secret_key), won[0].secret_key[-4:])


def test_the_command_lists_the_active_credentials_no_claim_link_delivered(account: Account, operator: User) -> None:
    """What was shown to staff before claim links (or printed by pix_bootstrap)
    is found, to be rotated through a link and revoked."""
    shown_all = credential_issue(account=account, permission="all", label="antiga\tdo ERP").credential
    shown_cashout = credential_issue(account=account, permission="cashout").credential
    shown_cashin = credential_issue(account=account, permission="cashin").credential
    credential_revoke(credential=credential_issue(account=account, permission="all").credential)
    claimed, token = issue(account, operator)
    assert press_the_button(token).status_code == 200
    issue(account, operator)  # waiting for its claim: authenticates nothing

    def listed(*args: str) -> tuple[list[list[str]], str]:
        out, err = io.StringIO(), io.StringIO()
        call_command("credentials_not_delivered_by_link", *args, stdout=out, stderr=err)
        return [line.split("\t") for line in out.getvalue().splitlines()], err.getvalue()

    rows, said = listed()
    assert rows[0] == ["public_key", "permission", "account_id", "account", "label", "created_at", "last_used_at"]
    assert [row[:5] for row in rows[1:]] == [
        [shown_all.public_key, "all", str(account.pk), "Loja Azul Ltda", "antiga do ERP"],
        [shown_cashout.public_key, "cashout", str(account.pk), "Loja Azul Ltda", ""],
    ]
    assert said.strip() == "2 active credentials not delivered by a claim link"
    rows, said = listed("--all-permissions")
    assert [row[0] for row in rows[1:]] == [shown_all.public_key, shown_cashout.public_key, shown_cashin.public_key]
    assert claimed.public_key not in {row[0] for row in rows}


def test_the_claim_token_never_reaches_a_log_line() -> None:
    line = 'GET /resgatar-credencial/AbC_123-xyz/ HTTP/1.1" 410'

    assert redact(line) == f'GET /resgatar-credencial/{REDACTED}/ HTTP/1.1" 410'
    assert redact("Gone: https://pix.example.com/resgatar-credencial/AbC_123-xyz/") == (
        f"Gone: https://pix.example.com/resgatar-credencial/{REDACTED}/"
    )


# --------------------------------------------------------------------------- the back office


def test_staff_see_a_link_whose_email_failed_as_failed_and_the_attempt_is_logged(
    staff_member: Callable[[str, str], Client], account: Account, operator: User
) -> None:
    credential, _ = issue(account, operator)
    client = staff_member("operations", "otavio")

    with override_settings(EMAIL_BACKEND=f"{__name__}.RefusingSmtp"):
        done = admin_action(client, CREDENTIALS, "resend_link", [credential.pk], reason="O cliente não recebeu")

    assert "não pôde ser enviado agora (SMTPServerDisconnected)" in admin_messages(done)[0]
    assert not CredentialLink.objects.filter(credential=credential, used_at=None, replaced_at=None).exists()
    page = html(client.get(reverse("admin:accounts_apicredential_change", args=[credential.pk])))
    assert "o e-mail para financeiro@lojaazul.com.br falhou em" in page
    assert "válido até" not in page
    logged = LogEntry.objects.filter(object_id=str(credential.pk), user__username="otavio")
    assert [entry.change_message for entry in logged] == [
        "Link de resgate não enviado: O e-mail para financeiro@lojaazul.com.br não pôde ser enviado agora "
        "(SMTPServerDisconnected): nada foi entregue. Use «Reenviar link de resgate» na credencial. "
        "Motivo: O cliente não recebeu"
    ]


def test_staff_send_the_link_again_from_the_credentials_list(
    staff_member: Callable[[str, str], Client], account: Account, operator: User
) -> None:
    credential, first = issue(account, operator)
    client = staff_member("operations", "otavio")

    confirm = admin_action(client, CREDENTIALS, "resend_link", [credential.pk])
    assert "financeiro@lojaazul.com.br" in html(confirm)
    assert len(mail.outbox) == 1  # the confirmation page sent nothing
    done = admin_action(client, CREDENTIALS, "resend_link", [credential.pk], reason="O cliente não recebeu")

    assert admin_messages(done)[0].startswith(f"{credential.public_key} (Todas): link de resgate enviado para ")
    assert SECRET.search(html(done)) is None
    second = token_in(str(mail.outbox[-1].body))
    assert f"http://testserver/resgatar-credencial/{second}/" in str(mail.outbox[-1].body)
    assert second not in html(done)
    assert Client().post(claim_url(first)).status_code == 410
    assert press_the_button(second).status_code == 200
    assert CredentialLink.objects.filter(credential=credential).latest("created_at").sent_by.username == "otavio"
