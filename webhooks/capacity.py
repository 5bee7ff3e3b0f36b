"""Per-destination cap on concurrent webhook deliveries (a bulkhead).

Each destination (an endpoint, or an account's postback URL) may have at
most ``WEBHOOK_MAX_CONCURRENT_PER_ENDPOINT`` deliveries in flight across
every worker process, so one receiver that hangs holds that many worker
threads at most and every other destination keeps the rest.

The semaphore is a Redis sorted set per destination: its members are the
holders, their scores the time their lease ends. A holder whose process died
never releases, so a lease outlives the longest a delivery can take (its
connect and total timeouts plus a margin) and a later acquire drops expired
holders. Acquiring is one Lua script (drop expired, count, add), so two
workers cannot both take the last slot. Times come from :data:`clock`
(tests move it), not Redis's, as the acquirer breaker does.

If Redis cannot be reached the cap fails open, like the rate limit and the
breaker: a delivery goes out uncapped rather than not at all. The cap
protects the service's threads from a slow receiver; with Redis down the
webhook worker's own bounded pool still bounds them, while refusing would
stop every delivery of every account for the length of the outage.
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from collections.abc import Callable, Iterator

import redis
from django.conf import settings

from core.redis import UNAVAILABLE as REDIS_UNAVAILABLE
from core.redis import client as redis_client

logger = logging.getLogger(__name__)

#: Wall-clock seconds; tests replace it to move time.
clock: Callable[[], float] = time.time

# A lease outlives the delivery's own timeouts by this much: the database
# writes around the HTTP call (claim, attempt row, outcome) take place inside it.
LEASE_MARGIN_SECONDS = 30.0
# Short: this sits before every delivery, and fails open anyway.
_REDIS_TIMEOUT = 0.5

# KEYS[1] holders (sorted set, score = lease end). ARGV: now, cap, lease end, holder.
# Returns 1 when the holder got a slot, 0 when the destination is at its cap.
_ACQUIRE = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then
  return 0
end
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[4])
redis.call('EXPIREAT', KEYS[1], math.ceil(tonumber(ARGV[3])) + 1)
return 1
"""


def destination_key(*, endpoint_id: object | None, account_id: object) -> str:
    """An endpoint's own semaphore, or the account's for its postbacks (a
    postback URL is per charge, so the account is what they share)."""
    if endpoint_id is not None:
        return f"pix:webhook:inflight:endpoint:{endpoint_id}"
    return f"pix:webhook:inflight:postback:{account_id}"


def lease_seconds() -> float:
    return float(settings.WEBHOOK_CONNECT_TIMEOUT + settings.WEBHOOK_TIMEOUT) + LEASE_MARGIN_SECONDS


def _client() -> redis.Redis:
    return redis_client(settings.REDIS_URL, timeout=_REDIS_TIMEOUT)


def acquire(key: str, *, cap: int | None = None, lease: float | None = None) -> str | None:
    """Take a slot of ``key``: the holder's token, or None when it is full.
    Fails open: with Redis unreachable every caller gets a token."""
    cap = settings.WEBHOOK_MAX_CONCURRENT_PER_ENDPOINT if cap is None else cap
    holder = uuid.uuid4().hex
    if cap <= 0:  # no cap configured
        return holder
    now = clock()
    lease_end = now + (lease_seconds() if lease is None else lease)
    try:
        taken = _client().eval(_ACQUIRE, 1, key, f"{now:.3f}", cap, f"{lease_end:.3f}", holder)
    except REDIS_UNAVAILABLE:
        logger.warning("webhook concurrency cap unavailable; delivery allowed", exc_info=True)
        return holder
    return holder if int(taken) else None


def release(key: str, holder: str) -> None:
    """Give the slot back. A failure here only keeps it until its lease ends."""
    try:
        _client().zrem(key, holder)
    except REDIS_UNAVAILABLE:
        logger.warning("webhook concurrency slot %s not released; it expires with its lease", key, exc_info=True)


def holders(key: str) -> int:
    """Slots of ``key`` held now (expired leases not counted)."""
    return int(_client().zcount(key, f"({clock():.3f}", "+inf"))


@contextlib.contextmanager
def slot(key: str) -> Iterator[bool]:
    """``with slot(key) as got:`` holds a slot for the block when ``got``;
    released however the block ends."""
    holder = acquire(key)
    if holder is None:
        yield False
        return
    try:
        yield True
    finally:
        release(key, holder)
