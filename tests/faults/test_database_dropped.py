"""The PostgreSQL connection of a request dropped at the worst moment: at
COMMIT, after the request wrote everything (withdrawal row and its debit;
charge row and its attempts, after the acquirer accepted). The client gets
a clean 500 in the error envelope, no trace; nothing the request wrote
survives; the next request, on the same server thread and so the same
database connection slot, succeeds.

Real parts: gunicorn serving the project on the test database, and a real
``pg_terminate_backend``. The moment is found without hooks in the code:
the test holds ``FOR UPDATE`` on a row the request's foreign keys point to,
and Django's foreign keys are ``DEFERRABLE INITIALLY DEFERRED``, so the
request runs to its COMMIT and waits there, on the lock, for its key checks.
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import psycopg
import pytest
import requests
from django.db import connection
from psycopg import sql

from accounts.models import Account, AccountBalance, ApiCredential, LedgerEntry
from accounts.selectors import available_balance, ledger_sum
from accounts.services import credential_issue
from acquirers import adapters
from acquirers.adapters.sandbox import SandboxAdapter
from acquirers.models import Acquirer
from payments.models import Charge, ChargeAttempt
from tests.factories import AcquirerFactory
from tests.faults.conftest import SEED
from tests.realworld import WebServer, redis_server, wait_for, web_server
from webhooks.models import WebhookDelivery, WebhookEvent
from withdrawals.models import Withdrawal

CPF = "52998224725"
INTERNAL_ERROR = {"success": False, "message": "Erro interno do servidor.", "data": None}
CREATE_ERROR = {"success": False, "message": "Ocorreu um erro ao criar o pagamento.", "data": None}
CHARGE = {
    "payment_method": "pix",
    "amount": 2500,
    "buyer": {"buyer_name": "Fulano", "buyer_document": CPF, "buyer_phone": "11999998888"},
}

# gunicorn is another process: it sees only committed rows.
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def web(django_db_setup: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebServer]:
    """gunicorn, one worker with one thread: every request of the module runs
    on the same thread, so on the connection a drop left behind. Its broker
    is a private Redis nothing consumes (no worker is needed here)."""
    tmp = tmp_path_factory.mktemp("web")
    with (
        redis_server(tmp) as broker,
        web_server(str(connection.settings_dict["NAME"]), tmp, env={"CELERY_BROKER_URL": broker.url}) as server,
    ):
        yield server


def pg_connect() -> psycopg.Connection[Any]:
    """A connection of the test's own, outside Django, to the test database."""
    s = connection.settings_dict
    return psycopg.connect(
        dbname=s["NAME"],
        user=s["USER"] or None,
        password=s["PASSWORD"] or None,
        host=s["HOST"] or None,
        port=s["PORT"] or None,
        autocommit=True,
    )


@contextlib.contextmanager
def row_locked(table: str, pk: Any) -> Iterator[int]:
    """Hold ``SELECT … FOR UPDATE`` on one row until the block ends; yields
    the holder's backend pid."""
    with pg_connect() as holder, holder.transaction():
        holder.execute(sql.SQL("SELECT 1 FROM {} WHERE id = %s FOR UPDATE").format(sql.Identifier(table)), (pk,))
        yield holder.info.backend_pid


def drop_the_blocked_connection(holder_pid: int) -> str:
    """Wait for the request's backend to queue behind the holder's lock,
    terminate it, and return the statement it was running."""
    # Autocommit: inside a transaction pg_stat_activity would be a snapshot.
    with pg_connect() as observer:

        def blocked() -> tuple[int, str] | None:
            row = observer.execute(
                "SELECT pid, query FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))", (holder_pid,)
            ).fetchone()
            return (int(row[0]), str(row[1])) if row else None

        pid, query = wait_for(blocked, timeout=30)
        row = observer.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone()
        assert row is not None
        assert row[0] is True
    return query


@dataclass
class Call:
    response: requests.Response | None = None
    error: BaseException | None = None


@contextlib.contextmanager
def in_background(method: str, url: str, **kwargs: Any) -> Iterator[Call]:
    """The request runs on a thread while the block plays with the database."""
    call = Call()

    def run() -> None:
        try:
            call.response = requests.request(method, url, timeout=60, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            call.error = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield call
    finally:
        thread.join(timeout=60)
        assert not thread.is_alive(), "the request never answered"


@dataclass(frozen=True)
class Snapshot:
    """Everything a failed request must leave as it was."""

    balance: int
    ledger: tuple[tuple[Any, ...], ...]
    withdrawals: int
    charges: int
    attempts: int
    events: int
    deliveries: int


def snapshot(account: Account) -> Snapshot:
    return Snapshot(
        balance=AccountBalance.objects.get(account=account).available,
        ledger=tuple(LedgerEntry.objects.filter(account=account).order_by("id").values_list("id", "kind", "amount")),
        withdrawals=Withdrawal.objects.count(),
        charges=Charge.objects.count(),
        attempts=ChargeAttempt.objects.count(),
        events=WebhookEvent.objects.count(),
        deliveries=WebhookDelivery.objects.count(),
    )


def headers_for(account: Account) -> dict[str, str]:
    issued = credential_issue(account=account, permission=ApiCredential.Permission.ALL)
    return {"X-Public-Key": issued.credential.public_key, "X-Secret-Key": issued.secret_key}


def assert_clean_error(call: Call, expected: dict[str, Any]) -> None:
    assert call.error is None, call.error
    assert call.response is not None
    assert call.response.status_code == 500
    assert call.response.headers["Content-Type"] == "application/json"
    assert call.response.json() == expected
    assert call.response.headers.get("X-Request-ID")
    for leak in ("Traceback", "psycopg", "terminat", "OperationalError"):
        assert leak not in call.response.text


def test_a_withdrawal_whose_connection_drops_at_commit_leaves_nothing_and_the_next_succeeds(
    web: WebServer, account: Account
) -> None:
    headers = headers_for(account)
    body = {"amount": 4000, "key_value": CPF}
    before = snapshot(account)

    # The withdrawal and its debit reference the account: their checks wait at COMMIT.
    with (
        row_locked(Account._meta.db_table, account.pk) as holder_pid,
        in_background("POST", f"{web.url}/api/withdrawals", json=body, headers=headers) as call,
    ):
        assert drop_the_blocked_connection(holder_pid) == "COMMIT"

    assert_clean_error(call, INTERNAL_ERROR)
    assert snapshot(account) == before
    # Operators get what the client does not: the error, under its request id.
    assert call.response is not None
    request_id = call.response.headers["X-Request-ID"]
    wait_for(lambda: f"[{request_id}]" in web.output(), timeout=10)
    logged = web.output().split(f"[{request_id}]", 1)[1]
    assert "OperationalError" in logged
    assert available_balance(account) == SEED == ledger_sum(account)

    response = requests.post(f"{web.url}/api/withdrawals", json=body, headers=headers, timeout=60)
    assert response.status_code == 201, response.text
    withdrawal = Withdrawal.objects.get()
    assert (str(withdrawal.pk), withdrawal.amount) == (response.json()["data"]["id"], 4000)
    assert available_balance(account) == SEED - 4000 == ledger_sum(account)
    assert LedgerEntry.objects.filter(account=account).count() == len(before.ledger) + 1


@pytest.mark.parametrize("keyed", [True, False], ids=["idempotency-key", "no-key"])
def test_a_charge_whose_connection_drops_at_commit_leaves_nothing_and_the_next_succeeds(
    web: WebServer, account: Account, keyed: bool
) -> None:
    acquirer = AcquirerFactory(key=f"sbx_dropped_{uuid.uuid4().hex[:8]}", default_priority=1)
    headers = headers_for(account)
    before = snapshot(account)

    # The charge and its attempt reference the acquirer: their checks wait at
    # the commit, after the acquirer accepted. With a key, the charge commits
    # with the key's answer (a transaction: COMMIT); without one, its single
    # INSERT statement commits on its own (the statement is what waits).
    sent = {**headers, "Idempotency-Key": uuid.uuid4().hex} if keyed else headers
    with (
        row_locked(Acquirer._meta.db_table, acquirer.pk) as holder_pid,
        in_background("POST", f"{web.url}/api/transactions", json=CHARGE, headers=sent) as call,
    ):
        dropped = drop_the_blocked_connection(holder_pid)
        assert (dropped == "COMMIT") if keyed else dropped.startswith("WITH "), dropped

    assert_clean_error(call, CREATE_ERROR)
    assert snapshot(account) == before  # no charge, no attempt, no money, no event

    response = requests.post(f"{web.url}/api/transactions", json=CHARGE, headers=headers, timeout=60)
    assert response.status_code == 201, response.text
    charge = Charge.objects.get()
    assert str(charge.pk) == response.json()["data"]["id"]
    assert charge.acquirer_id == acquirer.pk
    assert [a.outcome for a in ChargeAttempt.objects.filter(charge_id=charge.pk)] == ["ok"]
    sandbox = adapters.build(acquirer)
    assert isinstance(sandbox, SandboxAdapter)
    assert sandbox.charge_state(charge.txid) == "active"
    assert snapshot(account) == replace(before, charges=1, attempts=before.attempts + 1)
    assert available_balance(account) == SEED == ledger_sum(account)
