"""Django's PostgreSQL backend, with a cheaper check of pooled connections.

With ``CONN_HEALTH_CHECKS`` on, Django gives its psycopg pool
``ConnectionPool.check_connection`` as ``check``: an empty query, a full
round trip to PostgreSQL, on every checkout; at least one per request, two
per charge (its connection is given back before the acquirer call, core/connections.py).
That round trip measured about 8% of a GET's throughput.

Here a pooled connection is instead handed out when it is *quiet*: open,
idle, and with nothing to read on its socket. An idle connection receives
nothing unless the server closed it (PostgreSQL sends a FATAL, then EOF, on
``pg_terminate_backend``, a shutdown or ``idle_session_timeout``) or sent an
asynchronous message (NOTIFY, a changed parameter): one ``poll`` with no
timeout, no round trip, tells. Only a connection with something to read
gets the real check; one that fails it is closed and given back, and the
pool opens a replacement.

What it cannot see is a peer that vanished without a word (a host powered
off, a network partition: no FIN, nothing to read); the real check would
wait on TCP then, and the request's own query fails instead.

Settings give this backend a pool with ``CONN_HEALTH_CHECKS`` off (so the
pool's own check is None); without a pool it is Django's backend unchanged.
"""

from __future__ import annotations

import select
from typing import Any

import psycopg
from django.db.backends.postgresql import base
from psycopg import pq
from psycopg_pool import ConnectionPool


class DatabaseWrapper(base.DatabaseWrapper):
    def get_new_connection(self, conn_params: dict[str, Any]) -> Any:
        pool = self.pool
        if pool is None:
            return super().get_new_connection(conn_params)
        # Every connection the pool holds may be dead at once (the server
        # restarted): each is given back and replaced, so past max_size tries
        # the pool hands out fresh ones, and a failure then is the server's.
        error: psycopg.Error | None = None
        for _ in range(pool.max_size + 1):
            conn = super().get_new_connection(conn_params)
            if is_quiet(conn):
                return conn
            try:
                ConnectionPool.check_connection(conn)
            except psycopg.Error as exc:
                error = exc
                # Closed, it is discarded by the pool, which opens another.
                conn.close()
                pool.putconn(conn)
                continue
            return conn
        assert error is not None
        raise error


def is_quiet(conn: psycopg.Connection[Any]) -> bool:
    """Whether ``conn`` is open, idle, and the server sent it nothing since
    its last exchange: then it is usable, without asking the server."""
    if conn.closed or conn.broken:
        return False
    pgconn = conn.pgconn
    if pgconn.status != pq.ConnStatus.OK or pgconn.transaction_status != pq.TransactionStatus.IDLE:
        return False
    # poll, not select: a busy process has descriptors past select's 1024.
    # POLLHUP and POLLERR are reported whether asked for or not.
    poller = select.poll()
    poller.register(pgconn.socket, select.POLLIN | select.POLLPRI)
    return not poller.poll(0)
