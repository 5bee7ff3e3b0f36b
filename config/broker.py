"""The broker transport: kombu's Redis transport, made safe to close twice.

When the broker goes away under a running worker, Celery's consumer
(``on_connection_error_after_connected``, celery 5.7) first ``collect()``s
the broken connection and then ``close()``s it. The consumer channel's
first close stops at its pending BRPOP (the socket is dead), so it stays
open; ``collect()`` then detaches the transport from its connection
(``transport.client = None``). The second close gets further, to handing
back the messages delivered but not yet acknowledged (every task in flight
or prefetched: tasks are acknowledged late), and building a Redis pool for
that from the detached transport raises ``AttributeError: 'NoneType' object
has no attribute 'hostname'`` in ``_connparams``. Not a connection error,
so nothing swallows it: the worker exits with "Unrecoverable error".

Here a detached transport answers as an unreachable broker does: a
connection error, which the close ignores, as it ignores the same hand-back
failing while Redis is down. Those messages stay in Redis's unacked set and
come back after the visibility timeout, as they would have anyway (the
broker was down: nothing could be handed back). Disabling gossip and mingle
does not avoid it (tests/faults/test_redis_outage.py).

Each channel also keeps one Redis client for its commands (publishes above
all) instead of kombu's new ``redis.Redis`` per command (see
:meth:`Channel.conn_or_acquire`).

The names ``redis`` and ``rediss`` are mapped to this transport, so every
URL form (the unix-socket ``redis+socket://`` of the embedded engine too)
gets it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import redis
from kombu.transport import TRANSPORT_ALIASES
from kombu.transport import redis as kombu_redis


class Channel(kombu_redis.Channel):
    def _connparams(self, asynchronous: bool = False) -> Any:
        if self.connection.client is None:
            raise redis.ConnectionError("the broker connection is closed")
        return super()._connparams(asynchronous)  # type: ignore[misc]  # not in celery-types' stub

    @contextlib.contextmanager
    def conn_or_acquire(self, client: Any = None) -> Iterator[Any]:
        # kombu builds a redis.Redis per command here (per task published),
        # and building one copies redis-py's table of reply callbacks: 4% of a
        # withdrawal's CPU (py-spy under wrk). One client per channel, on the
        # channel's own pool as kombu's were; thread-safe, as that pool is. A
        # channel whose pools were dropped (a connection error) gets a new one.
        if client is not None:
            yield client
            return
        pool = self.pool
        kept = self.__dict__.get("_kept_client")
        if kept is None or kept.connection_pool is not pool:
            kept = self._kept_client = self._create_client()  # type: ignore[attr-defined]  # not in the stub
        yield kept


class Transport(kombu_redis.Transport):
    Channel = Channel


def register() -> None:
    for scheme in ("redis", "rediss"):
        TRANSPORT_ALIASES[scheme] = f"{__name__}:Transport"
