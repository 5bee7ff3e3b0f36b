"""Where the sandbox acquirer keeps what it "created" and received: the
cache's Redis, shared by every process, so they all see one acquirer."""

from __future__ import annotations

from django.conf import settings
from redis import Redis

from core.redis import client as redis_client

#: How long the sandbox remembers anything (a week).
STATE_TTL = 7 * 24 * 3600


def state() -> Redis:
    """The cache's Redis, through one client per process. Django's
    ``RedisCache`` builds a new ``redis.Redis`` on every operation: that was
    5% of a sandbox charge's CPU (make bench, py-spy)."""
    return redis_client(settings.CACHES["default"]["LOCATION"], timeout=5.0, decode_responses=True)
