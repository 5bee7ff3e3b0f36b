"""Secrets at rest and in logs (decisions §2, §6), and the admin behind a
staff login.

API secret keys are shown once and stored only as their SHA-256; webhook
signing secrets are stored (they are needed in clear to sign) but only in
their own columns. Neither ever reaches a log line, in any formatter of the
project, whatever the request did: good or bad credentials, a 500, webhook
registration, rotation and delivery.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import re
import secrets
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import redis
from django.conf import settings
from django.db import connection, transaction
from django.test import Client, override_settings
from django.urls import reverse
from rest_framework.test import APIClient

from accounts.models import Account, ApiCredential, LedgerEntry
from accounts.services import IssuedCredential, credential_issue, credential_revoke, credential_rotate, ledger_post
from core.logging import RequestIdFilter
from tests.conftest import client_for
from tests.factories import AccountFactory, AcquirerFactory
from tests.helpers import project_formatters
from tests.realworld import Receiver
from webhooks.delivery import delivery_attempt
from webhooks.models import WebhookDelivery, WebhookEndpoint

CHARGE = {
    "payment_method": "pix",
    "amount": 1000,
    "buyer": {"buyer_name": "Fulano", "buyer_document": "52998224725", "buyer_phone": "11999998888"},
}
TEXT_TYPES = ["text", "character varying", "character", "json", "jsonb", "ARRAY"]
SECRET_KEY_SHAPE = re.compile(r"sk_[A-Za-z0-9_-]{43}")
WEBHOOK_SECRET_SHAPE = re.compile(r"whsec_[A-Za-z0-9+/]{32}")
# Where a webhook signing secret may rest: it signs every delivery.
WEBHOOK_SECRET_COLUMNS = {
    ("webhooks_webhookendpoint", "secret"),
    ("webhooks_webhookendpoint", "previous_secret"),
    ("accounts_account", "postback_secret"),
}

pytestmark = pytest.mark.django_db


class FormattedLines(logging.Handler):
    """Formats every record with each of the project's formatters, with the
    request id filter the project's handler uses."""

    def __init__(self, formatters: list[logging.Formatter]) -> None:
        super().__init__(level=logging.DEBUG)
        self.formatters = formatters
        self.lines: list[str] = []
        self.addFilter(RequestIdFilter())

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.extend(formatter.format(record) for formatter in self.formatters)


@dataclass
class Exercised:
    issued: list[IssuedCredential]
    presented_wrong: list[str]
    webhook_secrets: list[str]
    records: list[logging.LogRecord] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)

    @property
    def secret_keys(self) -> list[str]:
        return [i.secret_key for i in self.issued] + self.presented_wrong

    @property
    def everything(self) -> list[str]:
        return self.secret_keys + self.webhook_secrets


def with_keys(public_key: str, secret_key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_X_PUBLIC_KEY=public_key, HTTP_X_SECRET_KEY=secret_key)
    return client


def run_scenario(account: Account, receiver: Receiver) -> Exercised:
    """Credentials issued, rotated and revoked; authenticated requests with
    good and bad secrets; charges, withdrawals, webhooks registered, rotated
    and delivered; a misdirected request; a 500."""
    AcquirerFactory(key="alpha", default_priority=1)
    full = credential_issue(account=account)
    cashin = credential_issue(account=account, permission=ApiCredential.Permission.CASHIN)
    rotated = credential_rotate(credential=full.credential)
    revoked = credential_issue(account=account)
    credential_revoke(credential=revoked.credential)
    wrong = ["sk_" + secrets.token_urlsafe(32), "sk_" + secrets.token_urlsafe(32)]
    api = client_for(full)

    assert api.get("/api/withdrawals/balance").status_code == 200
    created = api.post("/api/webhooks", {"url": receiver.url}, format="json")
    assert created.status_code == 201
    first_secret = created.json()["data"]["secret"]
    rotation = api.post(f"/api/webhooks/{created.json()['data']['id']}/rotate-secret")
    assert rotation.status_code == 200
    second_secret = rotation.json()["data"]["secret"]

    with transaction.atomic():
        ledger_post(account_id=account.pk, amount=100_000, kind=LedgerEntry.Kind.CHARGE_PAID, reference="seed:x")
    charge = api.post(
        "/api/transactions", {**CHARGE, "postback_url": receiver.url}, format="json", HTTP_IDEMPOTENCY_KEY="c-1"
    )
    assert charge.status_code == 201, charge.json()
    charge_id = charge.json()["data"]["id"]
    assert api.post(f"/api/sandbox/transactions/{charge_id}/pay").status_code == 200
    for delivery_id in WebhookDelivery.objects.values_list("pk", flat=True):
        assert delivery_attempt(delivery_id=delivery_id) == "succeeded"
    withdrawal = api.post(
        "/api/withdrawals", {"amount": 5000, "key_value": "52998224725"}, format="json", HTTP_IDEMPOTENCY_KEY="w-1"
    )
    assert withdrawal.status_code == 201, withdrawal.json()
    assert api.get("/api/transactions", {"id": charge_id}).status_code == 200
    assert api.get(f"/api/webhooks/{created.json()['data']['id']}/deliveries").status_code == 200

    assert client_for(rotated).get(f"/api/transactions/{charge_id}").status_code == 200
    assert client_for(cashin).get("/api/withdrawals").status_code == 403
    assert client_for(revoked).get("/api/transactions").status_code == 401
    assert with_keys(full.credential.public_key, wrong[0]).get("/api/transactions").status_code == 401
    assert with_keys("pk_unknown", wrong[1]).get("/api/withdrawals/balance").status_code == 401
    # A client that sends its keys on every request, to the acquirers' callback URL.
    assert api.post("/api/acquirers/alpha/notifications", {"event": "charge.paid"}, format="json").status_code == 401

    def explode(**kwargs: Any) -> Any:
        raise RuntimeError("acquirer chain exploded")

    with pytest.MonkeyPatch.context() as patched:
        patched.setattr("payments.apis.charge_create", explode)
        failed = api.post("/api/transactions", CHARGE, format="json", HTTP_IDEMPOTENCY_KEY="c-2")
    assert failed.status_code == 500

    account.refresh_from_db()
    return Exercised(
        issued=[full, cashin, rotated, revoked],
        presented_wrong=wrong,
        webhook_secrets=[first_secret, second_secret, account.postback_secret],
    )


@pytest.fixture
def exercised(account: Account, receiver: Receiver, caplog: pytest.LogCaptureFixture) -> Exercised:
    handler = FormattedLines(project_formatters())
    root = logging.getLogger()
    caplog.set_level(logging.DEBUG)
    root.addHandler(handler)
    try:
        done = run_scenario(account, receiver)
    finally:
        root.removeHandler(handler)
    done.records = list(caplog.records)
    done.lines = handler.lines
    return done


# --------------------------------------------------------------------------- at rest


def text_columns() -> dict[str, list[str]]:
    """table → its text, varchar, json and array columns, for every table of the public schema."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT c.table_name, c.column_name
            FROM information_schema.columns c
            JOIN information_schema.tables t USING (table_schema, table_name)
            WHERE c.table_schema = 'public' AND t.table_type = 'BASE TABLE' AND c.data_type = ANY(%s)
            ORDER BY 1, 2
            """,
            [TEXT_TYPES],
        )
        tables: dict[str, list[str]] = {}
        for table, column in cursor.fetchall():
            tables.setdefault(table, []).append(column)
    return tables


def stored_values() -> Iterator[tuple[str, str, str]]:
    """(table, column, value as text) of every non-null text-like cell."""
    quote = connection.ops.quote_name
    for table, columns in text_columns().items():
        with connection.cursor() as cursor:
            selected = ", ".join(f"{quote(column)}::text" for column in columns)
            cursor.execute(f"SELECT {selected} FROM {quote(table)}")  # noqa: S608 - names from the catalog
            for row in cursor.fetchall():
                for column, value in zip(columns, row, strict=True):
                    if value is not None:
                        yield table, column, value


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def test_only_hashes_of_api_secrets_are_stored(exercised: Exercised) -> None:
    cells = list(stored_values())
    assert {table for table, _, _ in cells} >= {
        "accounts_apicredential",
        "acquirers_inboundnotification",
        "payments_charge",
        "pix_service_idempotencyrecord",
    }

    assert [(t, c) for t, c, v in cells if SECRET_KEY_SHAPE.search(v)] == []
    for secret in exercised.secret_keys:
        assert [(t, c) for t, c, v in cells if secret in v] == []
    for issued in exercised.issued:
        assert [(t, c) for t, c, v in cells if sha256(issued.secret_key) in v] == [
            ("accounts_apicredential", "secret_hash")
        ]
    for secret in exercised.presented_wrong:
        assert [(t, c) for t, c, v in cells if sha256(secret) in v] == []

    redis_client = redis.Redis.from_url(settings.REDIS_URL)
    for secret in exercised.secret_keys:
        assert list(redis_client.scan_iter(match=f"*{secret}*", count=1000)) == []


def test_webhook_secrets_rest_only_in_their_own_columns(exercised: Exercised) -> None:
    cells = list(stored_values())
    where = {(t, c) for t, c, v in cells if WEBHOOK_SECRET_SHAPE.search(v)}
    assert where <= WEBHOOK_SECRET_COLUMNS
    first, second = exercised.webhook_secrets[:2]
    endpoint = WebhookEndpoint.objects.get()
    assert (endpoint.secret, endpoint.previous_secret) == (second, first)
    for secret in exercised.webhook_secrets:
        assert {(t, c) for t, c, v in cells if secret in v} <= WEBHOOK_SECRET_COLUMNS


# --------------------------------------------------------------------------- in logs


def test_secrets_never_reach_the_logs(exercised: Exercised) -> None:
    records, lines = exercised.records, exercised.lines
    # Not vacuous: the 500 was logged with its trace, and every formatter ran.
    assert any(r.name == "pix_service.errors" and r.exc_info for r in records)
    assert len(lines) == 2 * len(records)
    assert any('"level": "ERROR"' in line and "Traceback" in line for line in lines)

    texts = list(lines)
    for record in records:
        texts += [record.getMessage(), repr(record.args), repr(record.msg), str(record.exc_text or "")]
        texts.append(repr({k: v for k, v in vars(record).items() if k not in ("exc_info", "stack_info")}))
    for text in texts:
        assert not SECRET_KEY_SHAPE.search(text), text
        assert not WEBHOOK_SECRET_SHAPE.search(text), text
        for secret in exercised.everything:
            assert secret not in text, text


def test_webhook_requests_carry_signatures_not_secrets(exercised: Exercised, receiver: Receiver) -> None:
    assert len(receiver.requests) == 2  # the endpoint and the postback URL
    for request in receiver.requests:
        assert request.headers["webhook-signature"].startswith("v1,")
        sent = repr(request.headers) + request.body.decode()
        for secret in exercised.everything:
            assert secret not in sent


# --------------------------------------------------------------------------- admin


def test_admin_is_mounted_at_admin_url() -> None:
    assert reverse("admin:index").startswith("/" + settings.ADMIN_URL)
    assert reverse("admin:index") == "/" + settings.ADMIN_URL


def test_admin_needs_a_staff_login(client: Client, django_user_model: Any) -> None:
    index, login = reverse("admin:index"), reverse("admin:login")
    expected = f"{login}?next={index}"

    anonymous = client.get(index)
    assert (anonymous.status_code, anonymous["Location"]) == (302, expected)

    client.force_login(django_user_model.objects.create_user(username="merchant", password="x", is_staff=False))
    not_staff = client.get(index)
    assert (not_staff.status_code, not_staff["Location"]) == (302, expected)

    # An API credential is no way in either.
    issued = credential_issue(account=AccountFactory())
    keyed = Client(HTTP_X_PUBLIC_KEY=issued.credential.public_key, HTTP_X_SECRET_KEY=issued.secret_key)
    assert keyed.get(index).status_code == 302


def test_admin_url_setting_moves_the_admin(client: Client) -> None:
    """The URLconf reads ADMIN_URL when it loads: loaded again under another
    value, the admin moves there and the default path is gone."""
    import config.urls

    name = "tests_security_urls_moved_admin"
    spec = importlib.util.spec_from_file_location(name, config.urls.__file__)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    with override_settings(ADMIN_URL="backoffice-7f3a/"):
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
            with override_settings(ROOT_URLCONF=name):
                assert reverse("admin:index") == "/backoffice-7f3a/"
                moved = client.get("/backoffice-7f3a/")
                assert (moved.status_code, moved["Location"]) == (302, "/backoffice-7f3a/login/?next=/backoffice-7f3a/")
                assert client.get("/admin/").status_code == 404
        finally:
            del sys.modules[name]


def _login(client: Client, password: str, *, address: str = "203.0.113.7") -> Any:
    return client.post(
        reverse("admin:login") + "?next=" + reverse("admin:index"),
        {"username": "clerk", "password": password},
        REMOTE_ADDR=address,
    )


def _passed_the_password(response: Any) -> bool:
    """The password was taken: the member goes on to the second factor (staff.views)."""
    return response.status_code == 302 and response["Location"].startswith(reverse("admin:otp_verify"))


def test_admin_login_is_throttled_per_username_and_address(client: Client, django_user_model: Any) -> None:
    django_user_model.objects.create_user(username="clerk", password="right-horse-battery", is_staff=True)
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        assert _login(client, "wrong").status_code == 200  # the form again, with its error

    locked = _login(client, "wrong")
    assert locked.status_code == 429
    assert "Acesso bloqueado temporariamente" in locked.content.decode()
    # The right password does not open a locked pair.
    after = _login(client, "right-horse-battery")
    assert after.status_code == 429
    assert "_auth_user_id" not in client.session
    assert client.get(reverse("admin:index")).status_code == 302

    # The same username from another address is a different pair: a guesser
    # elsewhere cannot lock a colleague out.
    other = Client()
    assert _passed_the_password(_login(other, "right-horse-battery", address="198.51.100.9"))


def _login_via_proxy(client: Client, password: str, *, forwarded_for: str) -> Any:
    # Every request reaches gunicorn from the TLS proxy on the same host.
    return client.post(
        reverse("admin:login") + "?next=" + reverse("admin:index"),
        {"username": "clerk", "password": password},
        REMOTE_ADDR="127.0.0.1",
        HTTP_X_FORWARDED_FOR=forwarded_for,
    )


@override_settings(TRUST_X_FORWARDED_PROTO=True)
def test_behind_the_proxy_a_guesser_locks_only_their_own_address(client: Client, django_user_model: Any) -> None:
    django_user_model.objects.create_user(username="clerk", password="right-horse-battery", is_staff=True)
    # The client's own entries come first; the proxy appends the address it saw.
    for _ in range(settings.AXES_FAILURE_LIMIT):
        _login_via_proxy(client, "wrong", forwarded_for="198.51.100.9, 203.0.113.66")
    assert _login_via_proxy(client, "right-horse-battery", forwarded_for="203.0.113.66").status_code == 429

    colleague = Client()
    assert _passed_the_password(_login_via_proxy(colleague, "right-horse-battery", forwarded_for="198.51.100.9"))


@override_settings(TRUST_X_FORWARDED_PROTO=False)
def test_without_the_proxy_a_forged_forwarded_header_does_not_dodge_the_lock(
    client: Client, django_user_model: Any
) -> None:
    django_user_model.objects.create_user(username="clerk", password="right-horse-battery", is_staff=True)
    for attempt in range(settings.AXES_FAILURE_LIMIT):
        client.post(
            reverse("admin:login"),
            {"username": "clerk", "password": "wrong"},
            REMOTE_ADDR="203.0.113.66",
            HTTP_X_FORWARDED_FOR=f"198.51.100.{attempt}",
        )

    forged = _login(client, "right-horse-battery", address="203.0.113.66")
    assert forged.status_code == 429
    assert "_auth_user_id" not in client.session
