"""Credentials, accounts and chains are read from per-process snapshots
(core/snapshots.py) and a change still takes effect on the next request,
in this process and in another one (gunicorn as deployed), and within the
TTL when Redis cannot be read."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import requests
from django.db import connection
from django.test import override_settings

from accounts.models import Account, ApiCredential
from accounts.services import account_set_blocked, credential_issue, credential_revoke, credential_rotate
from core import snapshots
from payments.models import Charge
from tests.factories import AccountFactory, AcquirerFactory
from tests.realworld import WebServer, web_server

BODY = {
    "payment_method": "pix",
    "amount": 1000,
    "buyer": {"buyer_name": "Fulano", "buyer_document": "52998224725", "buyer_phone": "11999998888"},
}


def keys(public: str, secret: str) -> dict[str, str]:
    return {"X-Public-Key": public, "X-Secret-Key": secret}


@pytest.fixture
def web(transactional_db: Any, tmp_path: Path) -> Iterator[WebServer]:
    # One process, so that its snapshot is the one every request reads.
    env = {"API_RATE_LIMIT_PER_MINUTE": "100000"}
    with web_server(str(connection.settings_dict["NAME"]), tmp_path, env=env, workers=1, threads=4) as server:
        yield server


@pytest.mark.django_db(transaction=True)
def test_revocation_rotation_and_blocking_reach_another_process_on_its_next_request(web: WebServer) -> None:
    AcquirerFactory(key="snap_sandbox", default_priority=1)
    account = AccountFactory()
    issued = credential_issue(account=account, permission=ApiCredential.Permission.ALL)
    old = keys(issued.credential.public_key, issued.secret_key)
    balance = f"{web.url}/api/withdrawals/balance"
    assert requests.get(balance, headers=old, timeout=10).status_code == 200  # snapshot taken there

    rotated = credential_rotate(credential=issued.credential)
    new = keys(rotated.credential.public_key, rotated.secret_key)
    assert requests.get(balance, headers=new, timeout=10).status_code == 200
    credential_revoke(credential=issued.credential)  # the old pair, once clients moved
    assert requests.get(balance, headers=old, timeout=10).status_code == 401
    assert requests.get(balance, headers=new, timeout=10).status_code == 200

    account_set_blocked(account=account, blocked=True)
    refused = requests.post(f"{web.url}/api/transactions", json=BODY, headers=new, timeout=10)
    assert refused.status_code == 403
    assert not Charge.objects.filter(account=account).exists()
    account_set_blocked(account=Account.objects.get(pk=account.pk), blocked=False)
    assert requests.post(f"{web.url}/api/transactions", json=BODY, headers=new, timeout=10).status_code == 201

    credential_revoke(credential=ApiCredential.objects.get(pk=rotated.credential.pk))
    assert requests.get(balance, headers=new, timeout=10).status_code == 401


def test_a_bulk_update_is_seen_by_the_next_request(api: Any, account: Account) -> None:
    assert api.get("/api/withdrawals/balance").status_code == 200
    Account.objects.filter(pk=account.pk).update(is_blocked=True)
    assert api.post("/api/transactions", BODY, format="json").status_code == 403


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_without_redis_a_snapshot_lives_the_ttl_and_no_longer(monkeypatch: pytest.MonkeyPatch) -> None:
    loads: list[str] = []

    def load(key: str) -> str:
        loads.append(key)
        return f"{key}:{len(loads)}"

    clock = Clock()
    monkeypatch.setattr(snapshots, "clock", clock)
    cache: snapshots.Snapshots[str, str] = snapshots.Snapshots(load)
    # A port nothing listens on: the generation cannot be read, nor bumped.
    with override_settings(REDIS_URL="redis://127.0.0.1:9/0", SNAPSHOT_TTL_SECONDS=1.0):
        assert snapshots.generation() is None
        assert cache.get("k") == "k:1"
        clock.now += 0.9
        assert cache.get("k") == "k:1"
        clock.now += 0.2
        assert cache.get("k") == "k:2"
        # A write in this process drops it at once, Redis or not.
        snapshots.changed()
        assert cache.get("k") == "k:3"
    assert loads == ["k", "k", "k"]


def test_nothing_found_is_not_remembered() -> None:
    loads: list[str] = []

    def load(key: str) -> None:
        loads.append(key)

    cache: snapshots.Snapshots[str, str] = snapshots.Snapshots(load)
    assert cache.get("unknown") is None
    assert cache.get("unknown") is None
    assert loads == ["unknown", "unknown"]


def test_a_redis_socket_closed_mid_call_fails_open(api: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # What redis-py lets through when its timeout closes a socket mid-handshake
    # (seen under make bench): the rate limit and the snapshots' generation fail
    # open on it as on any outage, instead of a 500.
    def closed(*args: Any, **kwargs: Any) -> Any:
        raise ValueError("I/O operation on closed file.")

    monkeypatch.setattr(redis.client.Redis, "execute_command", closed)
    monkeypatch.setattr(redis.client.Pipeline, "execute", closed)
    response = api.get("/api/withdrawals/balance")
    assert response.status_code == 200, response.content
    assert api.get("/api/withdrawals/balance").status_code == 200
