"""An ``Idempotency-Key`` whose first request died: the gunicorn worker
killed mid-request, or its PostgreSQL connection terminated. Its retry
never answers 409 for longer than a request may run (``WEB_TIMEOUT``, set
small for this server): it replays what the first request stored, or, when
the first left no effect, runs again. Exactly one effect either way.

Real parts: gunicorn serving the project on the test database, SIGKILL of
its worker, ``pg_terminate_backend`` on a connection waiting for a row lock
the test holds.
"""

from __future__ import annotations

import signal
import time
import uuid
from collections.abc import Iterator
from typing import Any

import psutil
import pytest
import requests
from django.db import connection

from accounts.models import Account, AccountBalance
from accounts.selectors import available_balance, ledger_sum
from acquirers.models import Acquirer
from api.models import IdempotencyRecord
from payments.models import Charge
from tests.factories import AcquirerFactory
from tests.faults.conftest import SEED
from tests.faults.test_database_dropped import (
    CHARGE,
    CPF,
    INTERNAL_ERROR,
    drop_the_blocked_connection,
    headers_for,
    in_background,
    pg_connect,
    snapshot,
)
from tests.realworld import WebServer, redis_server, wait_for, web_server

IN_FLIGHT = {
    "success": False,
    "message": "Uma requisição com esta chave de idempotência ainda está em processamento.",
    "data": None,
}
#: The server's WEB_TIMEOUT: long enough for a new worker to boot and answer
#: the first retry while the claim is young, short enough to wait out.
CLAIM_SECONDS = 8

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def web(django_db_setup: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebServer]:
    tmp = tmp_path_factory.mktemp("web")
    env = {"WEB_TIMEOUT": str(CLAIM_SECONDS)}
    with (
        redis_server(tmp) as broker,
        web_server(str(connection.settings_dict["NAME"]), tmp, env={"CELERY_BROKER_URL": broker.url, **env}) as server,
    ):
        yield server


def kill_the_worker(web: WebServer) -> None:
    """SIGKILL, as the OOM killer would: no finally block, no finaliser runs."""
    [worker] = psutil.Process(web.pid).children()
    worker.send_signal(signal.SIGKILL)
    worker.wait(timeout=20)


def test_a_charge_whose_worker_was_killed_runs_again_once_its_claim_expires(web: WebServer, account: Account) -> None:
    # The acquirer takes ~10 s: the worker dies while the request waits on it.
    acquirer = AcquirerFactory(
        key=f"sbx_slow_{uuid.uuid4().hex[:8]}",
        default_priority=1,
        options={"charge": "slow", "payout": "ok"},
        read_timeout_ms=20_000,
    )
    headers = {**headers_for(account), "Idempotency-Key": "killed-1"}
    url = f"{web.url}/api/transactions"

    with in_background("POST", url, json=CHARGE, headers=headers) as call:
        record = wait_for(lambda: IdempotencyRecord.objects.filter(key="killed-1").first(), timeout=30)
        kill_the_worker(web)
    assert isinstance(call.error, requests.ConnectionError), call.response
    Acquirer.objects.filter(pk=acquirer.pk).update(options={"charge": "ok", "payout": "ok"})

    # Young, the claim may belong to a request still running: 409.
    early = requests.post(url, json=CHARGE, headers=headers, timeout=60)
    assert (early.status_code, early.json()) == (409, IN_FLIGHT)
    assert time.time() - record.created_at.timestamp() < CLAIM_SECONDS

    def retried() -> requests.Response | None:
        response = requests.post(url, json=CHARGE, headers=headers, timeout=60)
        return None if response.status_code == 409 else response

    response = wait_for(retried, timeout=CLAIM_SECONDS * 4, interval=0.5)

    assert time.time() - record.created_at.timestamp() >= CLAIM_SECONDS
    assert response.status_code == 201, response.text
    assert "Idempotent-Replayed" not in response.headers
    charge = Charge.objects.get()
    assert str(charge.pk) == response.json()["data"]["id"]
    again = requests.post(url, json=CHARGE, headers=headers, timeout=60)
    assert (again.status_code, again.json(), again.headers.get("Idempotent-Replayed")) == (
        201,
        response.json(),
        "true",
    )
    assert Charge.objects.count() == 1


def test_a_withdrawal_whose_connection_dies_before_commit_is_replayed_not_409(web: WebServer, account: Account) -> None:
    headers = {**headers_for(account), "Idempotency-Key": "dropped-1"}
    body = {"amount": 4000, "key_value": CPF}
    url = f"{web.url}/api/withdrawals"
    before = snapshot(account)

    # Hold the balance row: the request claims its key and waits inside its
    # transaction; then hold the claim's row and let the request go on to
    # the key's answer, where its connection is terminated.
    with pg_connect() as balance_holder, pg_connect() as claim_holder:
        balance_holder.execute("BEGIN")
        balance_holder.execute(
            f'SELECT 1 FROM "{AccountBalance._meta.db_table}" WHERE account_id = %s FOR UPDATE',  # noqa: S608
            (account.pk,),
        )
        with in_background("POST", url, json=body, headers=headers) as call:
            record = wait_for(lambda: IdempotencyRecord.objects.filter(key="dropped-1").first(), timeout=30)
            claim_holder.execute("BEGIN")
            claim_holder.execute(
                f'SELECT 1 FROM "{IdempotencyRecord._meta.db_table}" WHERE id = %s FOR UPDATE',  # noqa: S608
                (record.pk,),
            )
            balance_holder.execute("COMMIT")
            query = drop_the_blocked_connection(claim_holder.info.backend_pid)
            claim_holder.execute("COMMIT")
    assert query.startswith(f'UPDATE "{IdempotencyRecord._meta.db_table}"'), query

    assert call.response is not None, call.error
    assert (call.response.status_code, call.response.json()) == (500, INTERNAL_ERROR)
    assert snapshot(account) == before
    retry = requests.post(url, json=body, headers=headers, timeout=60)
    assert (retry.status_code, retry.json(), retry.headers.get("Idempotent-Replayed")) == (500, INTERNAL_ERROR, "true")
    assert snapshot(account) == before
    assert available_balance(account) == SEED == ledger_sum(account)
