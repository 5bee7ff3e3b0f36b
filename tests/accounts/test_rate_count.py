"""The rate limit's count rides along the snapshot generation's read
(core/ratelimit.py): a request with a remembered credential makes one Redis
round trip for both, is counted once, and only a matching secret counts."""

from __future__ import annotations

import time
from typing import Any

import pytest
import redis.connection
from rest_framework.test import APIClient

from core import ratelimit

BALANCE = "/api/withdrawals/balance"


@pytest.fixture
def pinned(monkeypatch: pytest.MonkeyPatch) -> None:
    # Mid-minute: the requests of a test must land in one window.
    moment = (time.time() // 60) * 60 + 30
    monkeypatch.setattr(ratelimit, "clock", lambda: moment)


class RoundTrips:
    """Every write redis-py makes to a Redis socket (a pipeline is one)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        send = redis.connection.AbstractConnection.send_packed_command

        def counted(connection: Any, command: Any, check_health: bool = True) -> None:
            self.count += 1
            send(connection, command, check_health)

        monkeypatch.setattr(redis.connection.AbstractConnection, "send_packed_command", counted)


@pytest.fixture
def round_trips(monkeypatch: pytest.MonkeyPatch) -> RoundTrips:
    return RoundTrips(monkeypatch)


def test_a_remembered_credential_costs_one_redis_round_trip(api: APIClient, round_trips: RoundTrips) -> None:
    assert api.get(BALANCE).status_code == 200  # the snapshot is taken here
    round_trips.count = 0
    assert api.get(BALANCE).status_code == 200
    # The generation and the rate count, in one pipelined write.
    assert round_trips.count == 1


def test_each_request_is_counted_once(api: APIClient, pinned: None, settings: Any) -> None:
    settings.API_RATE_LIMIT_PER_MINUTE = 5
    assert [api.get(BALANCE).status_code for _ in range(6)] == [200] * 5 + [429]


def test_a_wrong_secret_does_not_spend_the_credentials_allowance(api: APIClient, pinned: None, settings: Any) -> None:
    settings.API_RATE_LIMIT_PER_MINUTE = 3
    assert api.get(BALANCE).status_code == 200  # remembered from here on
    public_key = api._credentials["HTTP_X_PUBLIC_KEY"]  # type: ignore[attr-defined]
    guesser = APIClient()
    guesser.credentials(HTTP_X_PUBLIC_KEY=public_key, HTTP_X_SECRET_KEY="sk_" + "0" * 64)
    assert {guesser.get(BALANCE).status_code for _ in range(10)} == {401}

    assert [api.get(BALANCE).status_code for _ in range(3)] == [200, 200, 429]
    throttled = api.get(BALANCE)
    assert throttled.json() == {
        "success": False,
        "message": "Limite de requisições excedido. Tente novamente em instantes.",
        "data": None,
    }
    assert 1 <= int(throttled.headers["Retry-After"]) <= 60
