"""Per-credential request counts for the rate limit (decisions §7): a fixed
one-minute window counted in Redis with INCR and EXPIRE in one round trip, so
every process of the service shares one exact count.

A key-authenticated request already makes one Redis round trip, for the
snapshot generation (:mod:`core.snapshots`). When the presented secret
matches a credential this process remembers, authentication counts the
request in that same round trip (:func:`count_with_generation`; a plain
pipeline there: INCR then EXPIRE still run in order, and a key left without
its TTL by a connection lost between them would be a past minute's key that
nobody reads again) and leaves
the count on the request; the throttle (``api.throttling``) then uses it
instead of asking Redis again (:func:`counted`). Each round trip measured
about a tenth of a key-authenticated read (``make bench``).

Counting at authentication rather than at the throttle also counts a
request the permission check then refuses (403): every request a valid
credential makes counts, as at Stripe. Only a secret that matches is
counted: a public key alone cannot spend another merchant's allowance.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from core import snapshots
from core.redis import UNAVAILABLE as REDIS_UNAVAILABLE
from core.redis import direct as redis_direct

logger = logging.getLogger(__name__)

WINDOW_SECONDS = 60
#: Seconds since the epoch, for the window; tests pin it.
clock = time.time
#: Where authentication leaves the count on the (DRF) request.
ATTRIBUTE = "_pix_rate_count"


@dataclass(frozen=True, slots=True)
class Count:
    public_key: str
    #: Requests in the window so far, this one included; None when Redis
    #: could not count (the limit then fails open).
    value: int | None
    #: Seconds left in the window when counted (a 429's Retry-After).
    remaining: float


def _key(public_key: str, now: float) -> str:
    # The public key, not the row id: ids repeat across databases sharing one Redis.
    return f"pix:ratelimit:{public_key}:{int(now // WINDOW_SECONDS)}"


def _counting(key: str) -> tuple[tuple[Any, ...], ...]:
    """The commands that count one request under ``key``: INCR, then EXPIRE."""
    return ("INCR", key), ("EXPIRE", key, 2 * WINDOW_SECONDS)


def count(public_key: str) -> Count:
    """Count one request of ``public_key`` now: a round trip of its own."""
    now = clock()
    key = _key(public_key, now)
    try:
        # Short timeout: this sits on every API request, and fails open anyway.
        value: int | None = int(redis_direct(settings.REDIS_URL, timeout=0.5).execute(*_counting(key))[0])
    except REDIS_UNAVAILABLE:
        logger.warning("rate limit unavailable; request allowed", exc_info=True)
        value = None
    return Count(public_key, value, WINDOW_SECONDS - now % WINDOW_SECONDS)


def count_with_generation(request: Any, public_key: str) -> None:
    """Count one request of ``public_key`` in the round trip that reads the
    request's snapshot generation, and leave the count on ``request``."""
    if settings.API_RATE_LIMIT_PER_MINUTE <= 0:
        return  # no limit: nothing to count
    now = clock()
    key = _key(public_key, now)
    results = snapshots.read_generation_with(*_counting(key))
    if results is None:
        logger.warning("rate limit unavailable; request allowed")
    value = int(results[0]) if results is not None else None
    setattr(request, ATTRIBUTE, Count(public_key, value, WINDOW_SECONDS - now % WINDOW_SECONDS))


def counted(request: Any, public_key: str) -> Count:
    """This request's count for ``public_key``: the one authentication made,
    or a new one."""
    found = getattr(request, ATTRIBUTE, None)
    if isinstance(found, Count) and found.public_key == public_key:
        return found
    return count(public_key)
