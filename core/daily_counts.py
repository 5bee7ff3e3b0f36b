"""Counters per owner and day (America/Sao_Paulo) in the cache's Redis: a
number the back office shows beside a record (the payee check's DICT
lookups of an account, withdrawals.payees), kept three days. Best effort:
Redis unavailable, nothing is counted and zero is read."""

from __future__ import annotations

import datetime as dt
import logging
import uuid

from django.conf import settings
from django.core.cache import cache
from django.utils import timezone

from core.redis import UNAVAILABLE
from core.redis import client as redis_client

logger = logging.getLogger(__name__)

#: Seconds a day's count is kept (today's is what is shown; a margin for the day's turn).
KEPT = 3 * 24 * 3600


#: The payee check's lookups made at acquirers: counted by withdrawals.payees,
#: shown on the account's page (accounts.admin, which may not import withdrawals).
PAYEE_LOOKUPS = "payee_lookups"


def _key(name: str, owner_id: uuid.UUID | str, day: dt.date) -> str:
    # Under the cache's prefix: test runs sharing one Redis stay apart.
    return cache.make_key(f"daily:{name}:{owner_id}:{day.isoformat()}")


def daily_count_add(name: str, owner_id: uuid.UUID | str) -> None:
    """One more ``name`` today for ``owner_id``."""
    key = _key(name, owner_id, timezone.localdate())
    try:
        pipe = redis_client(settings.CACHES["default"]["LOCATION"], timeout=2.0).pipeline(transaction=True)
        pipe.incr(key)
        pipe.expire(key, KEPT)
        pipe.execute()
    except UNAVAILABLE:
        logger.warning("%s of %s not counted: Redis unavailable", name, owner_id)


def daily_count(name: str, owner_id: uuid.UUID | str, day: dt.date | None = None) -> int:
    """How many ``name`` ``owner_id`` had on ``day`` (today by default)."""
    try:
        raw = redis_client(settings.CACHES["default"]["LOCATION"], timeout=2.0).get(
            _key(name, owner_id, day or timezone.localdate())
        )
    except UNAVAILABLE:
        return 0
    return int(raw or 0)
