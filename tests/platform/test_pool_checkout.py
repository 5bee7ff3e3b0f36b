"""A pooled connection is handed out without a round trip to PostgreSQL, and
never dead (core/postgresql).

Real PostgreSQL: backends are killed with ``pg_terminate_backend`` from a
connection of the test's own, as an operator, a failover or
``idle_session_timeout`` would, and the server's own view
(``pg_stat_activity``) says when they are gone. What goes over the wire on a
checkout is read from libpq's own protocol trace.
"""

from __future__ import annotations

import copy
import os
import tempfile
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from django.db import connection, connections
from django.test import Client

from core.postgresql.base import DatabaseWrapper

# Connections go back to the pool only outside a test's transaction.
pytestmark = pytest.mark.django_db(transaction=True)


def _admin() -> psycopg.Connection[Any]:
    """A connection of the test's own, outside any pool."""
    params = connection.get_connection_params()
    for key in ("context", "cursor_factory", "prepare_threshold"):
        params.pop(key, None)
    return psycopg.connect(**params, autocommit=True)


def _terminate(pids: set[int]) -> None:
    """pg_terminate_backend each of ``pids``, then wait until the server has
    really let them go (termination is asynchronous)."""
    with _admin() as admin:
        for pid in pids:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        deadline = time.monotonic() + 10
        while admin.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)", (list(pids),)).fetchone() != (
            0,
        ):
            assert time.monotonic() < deadline, f"backends {pids} still alive"
            time.sleep(0.01)


def _backend_pid(wrapper: Any) -> int:
    with wrapper.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return int(cursor.fetchone()[0])


@pytest.fixture
def single(transactional_db: Any) -> Iterator[DatabaseWrapper]:
    """The project's backend on a pool of exactly one connection, so "the next
    checkout" has only one connection it can be."""
    settings_dict = copy.deepcopy(connection.settings_dict)
    settings_dict["OPTIONS"]["pool"] = {"min_size": 1, "max_size": 1, "timeout": 10}
    wrapper = DatabaseWrapper(settings_dict, alias="pool_checkout_test")
    yield wrapper
    wrapper.close()
    wrapper.close_pool()


def test_a_terminated_pooled_connection_is_not_handed_out(single: DatabaseWrapper) -> None:
    dead = _backend_pid(single)
    single.close()  # back to the pool
    _terminate({dead})

    # The query succeeds, on another backend: the dead one was never used.
    assert _backend_pid(single) != dead


def test_a_healthy_pooled_connection_is_reused_without_a_round_trip(single: DatabaseWrapper) -> None:
    pid = _backend_pid(single)
    raw = single.connection
    single.close()

    with tempfile.TemporaryFile() as trace:
        # libpq writes every protocol message it sends or receives to the trace.
        raw.pgconn.trace(os.dup(trace.fileno()))
        try:
            single.ensure_connection()
        finally:
            raw.pgconn.untrace()  # flushes it
        trace.seek(0)
        assert trace.read() == b""  # nothing went to the server, nothing came back
    assert single.connection is raw
    assert _backend_pid(single) == pid


def test_every_pooled_connection_terminated_at_once_requests_keep_succeeding(transactional_db: Any) -> None:
    # A pool of several connections, all back in it, as between requests.
    default = connections["default"]
    assert isinstance(default, DatabaseWrapper)  # what the settings configure
    pool = default.pool
    connection.close()
    taken = [pool.getconn() for _ in range(4)]
    pids = {conn.info.backend_pid for conn in taken}
    for conn in taken:
        pool.putconn(conn)
    _terminate(pids)

    client = Client()
    for _ in range(6):
        response = client.get("/api/health/ready")
        assert response.json()["data"]["database"] == "ok"
    assert _backend_pid(connection) not in pids
