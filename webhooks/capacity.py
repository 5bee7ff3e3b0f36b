"""Caps on concurrent webhook deliveries (bulkheads), per destination and
per account.

Each destination (an endpoint, or an account's postback URLs together) may
have at most ``WEBHOOK_MAX_CONCURRENT_PER_ENDPOINT`` deliveries in flight
across every worker process, and always fewer than its account's cap
(:func:`destination_cap`), so one receiver that hangs holds that many worker
threads at most and leaves its account's other destinations a slot. Each
account, all its endpoints and postbacks together, may have at most
``WEBHOOK_ACCOUNT_SHARE`` of the webhook worker's threads
(:func:`account_cap`), so an account with several receivers that hang still
leaves the rest of the pool to every other account.

Each cap is a semaphore in Redis: a sorted set whose members are the holders
and whose scores are the time their lease ends. A holder whose process died
never releases, so a lease outlives the longest a delivery can take (its
connect and total timeouts plus a margin) and a later acquire drops expired
holders. A delivery takes a slot of every cap it is under in one Lua script
(drop expired, count each, add to every set or to none), so two workers
cannot both take the last slot and a refused delivery holds nothing.

Every time is Redis's (``TIME`` inside the script, ``EXPIRE`` counted by the
server), never a worker's: the holders were written by many machines, and a
worker whose clock ran ahead would read the live leases of the others as
expired and drop them, one whose clock lagged would write leases the others
drop at once, or a key expiry in the past that wipes the set.

If Redis cannot be reached the caps fail open, like the rate limit and the
breaker: a delivery goes out uncapped rather than not at all. The caps
protect the service's threads from slow receivers; with Redis down the
webhook worker's own bounded pool still bounds them, while refusing would
stop every delivery of every account for the length of the outage.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import redis
from django.conf import settings

from core.redis import UNAVAILABLE as REDIS_UNAVAILABLE
from core.redis import client as redis_client

logger = logging.getLogger(__name__)

# A lease outlives the delivery's own timeouts by this much: the database
# writes around the HTTP call (claim, attempt row, outcome) take place inside it.
LEASE_MARGIN_SECONDS = 30.0
# Short: this sits before every delivery, and fails open anyway.
_REDIS_TIMEOUT = 0.5

# Redis's clock, in seconds with microseconds (a double holds them exactly
# for the next few centuries).
_NOW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
"""

# KEYS: the holder sets (score = lease end). ARGV: lease seconds, holder, then
# one cap per key. Returns 1 when the holder got a slot in every set, 0 (and
# took none) when any of them is at its cap.
_ACQUIRE = (
    _NOW
    + """
local lease = tonumber(ARGV[1])
for i, key in ipairs(KEYS) do
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
  if redis.call('ZCARD', key) >= tonumber(ARGV[i + 2]) then
    return 0
  end
end
for _, key in ipairs(KEYS) do
  redis.call('ZADD', key, now + lease, ARGV[2])
  -- Relative, so counted by the server: gone a second after the last lease.
  redis.call('EXPIRE', key, math.ceil(lease) + 1)
end
return 1
"""
)

# KEYS[1] a holder set. Returns the holders whose lease has not ended.
_HOLDERS = (
    _NOW
    + """
return redis.call('ZCOUNT', KEYS[1], '(' .. string.format('%.6f', now), '+inf')
"""
)

#: The webhook worker's threads, as this process's worker started them
#: (``--concurrency``); None outside a worker (WEBHOOK_WORKER_CONCURRENCY then).
worker_threads: int | None = None


def worker_started(sender: Any, **kwargs: Any) -> None:
    """Celery's ``worker_init``: remember the pool this worker really runs,
    so the account's share is of its threads even when it was started with a
    ``--concurrency`` other than WEBHOOK_WORKER_CONCURRENCY."""
    global worker_threads
    concurrency = getattr(sender, "concurrency", None)
    worker_threads = concurrency if isinstance(concurrency, int) and concurrency > 0 else None


def destination_key(*, endpoint_id: object | None, account_id: object) -> str:
    """An endpoint's own semaphore, or the account's for its postbacks (a
    postback URL is per charge, so the account is what they share). The
    account id is the key's hash tag: every key of a delivery sits in one
    slot of a Redis Cluster, as a script over them needs."""
    if endpoint_id is not None:
        return f"pix:webhook:inflight:{{{account_id}}}:endpoint:{endpoint_id}"
    return f"pix:webhook:inflight:{{{account_id}}}:postback"


def account_key(account_id: object) -> str:
    """The semaphore of every delivery of the account, endpoints and postbacks."""
    return f"pix:webhook:inflight:{{{account_id}}}:account"


def account_cap() -> int:
    """Deliveries one account may have in flight: ``WEBHOOK_ACCOUNT_SHARE``
    of the worker's threads, at least one. Counted across every worker
    against one worker's threads, so the bound holds on each worker whichever
    takes the deliveries, and more workers leave the others more room."""
    threads = worker_threads or settings.WEBHOOK_WORKER_CONCURRENCY
    return max(1, int(settings.WEBHOOK_ACCOUNT_SHARE * threads))


def destination_cap() -> int:
    """Deliveries one destination (an endpoint, or an account's postbacks)
    may have in flight: ``WEBHOOK_MAX_CONCURRENT_PER_ENDPOINT`` (0: none of
    its own), and always one less than its account's cap, so one destination
    that hangs never holds the account's whole share: its other endpoints and
    postbacks keep a slot. With the defaults the account's cap (4) equalled
    the endpoint's (4), and one hanging endpoint starved the rest of its
    account until its timeouts ran out. An account cap of 1 (a pool of one
    or two threads) leaves nothing to keep back: its destinations take turns."""
    below_account = max(1, account_cap() - 1)
    configured = settings.WEBHOOK_MAX_CONCURRENT_PER_ENDPOINT
    return below_account if configured <= 0 else min(configured, below_account)


def delivery_caps(*, endpoint_id: object | None, account_id: object) -> dict[str, int]:
    """The semaphores a delivery must get a slot of, with their caps."""
    return {
        destination_key(endpoint_id=endpoint_id, account_id=account_id): destination_cap(),
        account_key(account_id): account_cap(),
    }


def lease_seconds() -> float:
    return float(settings.WEBHOOK_CONNECT_TIMEOUT + settings.WEBHOOK_TIMEOUT) + LEASE_MARGIN_SECONDS


def _client() -> redis.Redis:
    return redis_client(settings.REDIS_URL, timeout=_REDIS_TIMEOUT)


def acquire(caps: Mapping[str, int], *, lease: float | None = None) -> str | None:
    """Take a slot of every key of ``caps`` (key: cap) at once: the holder's
    token, or None, holding nothing, when any of them is full. Fails open:
    with Redis unreachable every caller gets a token."""
    holder = uuid.uuid4().hex
    if not caps:
        return holder
    lease = lease_seconds() if lease is None else lease
    try:
        taken = _client().eval(_ACQUIRE, len(caps), *caps, f"{lease:.3f}", holder, *caps.values())
    except REDIS_UNAVAILABLE:
        logger.warning("webhook concurrency caps unavailable; delivery allowed", exc_info=True)
        return holder
    return holder if int(taken) else None


def release(keys: Iterable[str], holder: str) -> None:
    """Give the holder's slots of ``keys`` back. A failure here only keeps
    them until their lease ends."""
    keys = list(keys)
    if not keys:
        return
    try:
        with _client().pipeline(transaction=False) as pipe:
            for key in keys:
                pipe.zrem(key, holder)
            pipe.execute()
    except REDIS_UNAVAILABLE:
        logger.warning("webhook concurrency slots %s not released; they expire with their lease", keys, exc_info=True)


def holders(key: str) -> int:
    """Slots of ``key`` held now (leases ended by Redis's clock not counted)."""
    return int(_client().eval(_HOLDERS, 1, key))


@contextlib.contextmanager
def slot(caps: Mapping[str, int]) -> Iterator[bool]:
    """``with slot(caps) as got:`` holds a slot of every key of ``caps`` for
    the block when ``got``; released however the block ends."""
    holder = acquire(caps)
    if holder is None:
        yield False
        return
    try:
        yield True
    finally:
        release(caps, holder)
