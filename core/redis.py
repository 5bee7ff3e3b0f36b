"""The service's own Redis clients (rate limit, worker heartbeats, acquirer
breakers), one per URL and timeout per process.

No client retries: every caller fails fast (and mostly fails open) when Redis
is down, so a retry would only add a connect timeout to every request.
Callers choose the timeout: a request path wants it short, readiness can wait
a little longer.
"""

from __future__ import annotations

import functools
import os
import threading
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

#: What a Redis call raises when Redis cannot answer, for callers that fail open:
#: redis-py's own errors, and a socket closed under it mid-handshake by its
#: timeout, which it lets through as ``ValueError: I/O operation on closed file``
#: (seen under ``make bench`` on a CPU-starved machine: a 500 instead of failing open).
UNAVAILABLE: tuple[type[Exception], ...] = (redis.RedisError, OSError, ValueError)


@functools.cache
def client(url: str, *, timeout: float, decode_responses: bool = False) -> redis.Redis:
    return redis.Redis.from_url(
        url,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        decode_responses=decode_responses,
        retry=Retry(NoBackoff(), 0),
    )


class Direct:
    """Commands pipelined on this thread's own connection to one Redis: for the
    round trips on every request (the snapshot generation with the rate
    count, the breaker's record, the sandbox's state). It skips what redis-py's
    client does around each command (the pool's lock, a poll of the socket
    for stray data, the command and retry wrappers): a SET measured 68 µs of
    client CPU through the client, 33 µs here. Same connection settings and
    errors as :func:`client`; replies are redis-py's parsed replies, without
    its per-command callbacks (EXPIRE answers 1, not True).

    A connection is never shared: one per thread, and a process forked after
    using it (gunicorn's workers) opens its own. One the server closed while
    it sat idle is replaced before use, as redis-py's pool replaces it; one
    that fails mid-round-trip is dropped, so the next call starts clean.
    """

    def __init__(self, pool: redis.ConnectionPool) -> None:
        self._pool = pool
        self._local = threading.local()

    def _connection(self) -> Any:
        held = getattr(self._local, "held", None)
        if held is not None and held[0] == os.getpid():
            return held[1]
        # Built from the pool's settings, not taken from the pool: the pool
        # counts what it makes against its cap and gets nothing back from a
        # thread that ends (its connection closes when the thread's locals go).
        connection = self._pool.connection_class(**self._pool.connection_kwargs)
        self._local.held = (os.getpid(), connection)
        return connection

    def execute(self, *commands: tuple[Any, ...]) -> list[Any]:
        """Send ``commands`` in one round trip; their replies, in order. An
        error reply is raised once every reply is read (the connection stays
        in step); a connection error drops the connection and is raised."""
        connection = self._connection()
        replies: list[Any] = []
        try:
            # What redis-py's pool does before handing a connection out: one
            # the server closed since its last use (a Redis restart, an idle
            # timeout) reads as ready, and is replaced here rather than fail
            # this call.
            try:
                stale = connection._sock is not None and connection.can_read()
            except (redis.ConnectionError, redis.TimeoutError, OSError):
                stale = True
            if stale:
                connection.disconnect()
            connection.send_packed_command(connection.pack_commands(commands), check_health=False)
            for _ in commands:
                try:
                    replies.append(connection.read_response())
                except redis.ResponseError as exc:
                    replies.append(exc)
        except BaseException:
            self._local.held = None
            connection.disconnect()
            raise
        for reply in replies:
            if isinstance(reply, redis.ResponseError):
                raise reply
        return replies

    def run_script(self, script: str, sha: str, keys: list[str], args: list[Any]) -> Any:
        """EVALSHA, loading ``script`` first if Redis does not know it yet."""
        try:
            return self.execute(("EVALSHA", sha, len(keys), *keys, *args))[0]
        except redis.exceptions.NoScriptError:
            self.execute(("SCRIPT", "LOAD", script))
            return self.execute(("EVALSHA", sha, len(keys), *keys, *args))[0]


@functools.cache
def direct(url: str, *, timeout: float, decode_responses: bool = False) -> Direct:
    return Direct(client(url, timeout=timeout, decode_responses=decode_responses).connection_pool)


def celery_broker_url(url: str) -> str:
    """Kombu spells a redis unix socket ``redis+socket://``; redis-py ``unix://``."""
    if url.startswith("unix://"):
        return "redis+socket://" + url.removeprefix("unix://").replace("?db=", "?virtual_host=")
    return url
