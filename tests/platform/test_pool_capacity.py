"""Waiting on an acquirer costs no database connection (issue 13).

gunicorn as deployed (gthread), 24 threads but a pool of only 2 PostgreSQL
connections that a request waits at most 2 s for; the acquirer (the sandbox
adapter, ``charge: slow``) answers in 300 ms. 20 charges at once: if each
kept its connection while its acquirer answered, the pool would serve them
two by two (about 3 s for the last ones, past the pool's timeout: 500s);
released before the call, they share the two connections for their few
queries and all succeed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from django.db import connection

from accounts.models import ApiCredential
from accounts.services import credential_issue
from acquirers.models import Acquirer
from payments.models import Charge, ChargeAttempt
from tests.factories import AccountFactory, AcquirerFactory
from tests.realworld import POOL_OF_TWO, WebServer, run_concurrently, web_server

# gunicorn is another process: it sees only committed rows.
pytestmark = pytest.mark.django_db(transaction=True)

CONCURRENT = 20
THREADS = 24
BODY = {
    "payment_method": "pix",
    "amount": 1000,
    "buyer": {"buyer_name": "Fulano", "buyer_document": "52998224725", "buyer_phone": "11999998888"},
}


@pytest.fixture
def web(transactional_db: Any, tmp_path: Path) -> Iterator[WebServer]:
    # The acquirer's in-flight cap is not what this test is about: room for all.
    env = {**POOL_OF_TWO, "ACQUIRER_MAX_IN_FLIGHT": str(THREADS), "OUTBOUND_POOL_CHARGE": str(THREADS)}
    with web_server(str(connection.settings_dict["NAME"]), tmp_path, env=env, threads=THREADS) as server:
        yield server


@pytest.fixture
def slow_acquirer(transactional_db: Any) -> Acquirer:
    # The sandbox's "slow" answers after half its deadline: 300 ms of a 600 ms one.
    return AcquirerFactory(
        key="slow", default_priority=1, options={"charge": "slow"}, connect_timeout_ms=100, read_timeout_ms=500
    )


def test_concurrent_charges_on_a_slow_acquirer_all_succeed_on_a_pool_of_two(
    web: WebServer, slow_acquirer: Acquirer
) -> None:
    account = AccountFactory()
    issued = credential_issue(account=account, permission=ApiCredential.Permission.ALL)
    headers = {"X-Public-Key": issued.credential.public_key, "X-Secret-Key": issued.secret_key}

    def charge() -> requests.Response:
        return requests.post(f"{web.url}/api/transactions", json=BODY, headers=headers, timeout=30)

    assert charge().status_code == 201  # warm: imports and the pool's first connection
    responses = run_concurrently([charge] * CONCURRENT)

    statuses = [r.status_code if isinstance(r, requests.Response) else repr(r) for r in responses]
    assert statuses == [201] * CONCURRENT, web.output()[-3000:]
    assert Charge.objects.filter(account=account, acquirer=slow_acquirer).count() == CONCURRENT + 1
    # Every charge waited on the acquirer, none moved on for lack of a connection.
    assert set(ChargeAttempt.objects.filter(account=account).values_list("outcome", flat=True)) == {"ok"}
    assert "PoolTimeout" not in web.output()
