"""The service's own Redis clients (rate limit, worker heartbeats, acquirer
breakers), one per URL and timeout per process.

No client retries: every caller fails fast (and mostly fails open) when Redis
is down, so a retry would only add a connect timeout to every request.
Callers choose the timeout: a request path wants it short, readiness can wait
a little longer.
"""

from __future__ import annotations

import functools

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


def celery_broker_url(url: str) -> str:
    """Kombu spells a redis unix socket ``redis+socket://``; redis-py ``unix://``."""
    if url.startswith("unix://"):
        return "redis+socket://" + url.removeprefix("unix://").replace("?db=", "?virtual_host=")
    return url
