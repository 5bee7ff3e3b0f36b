"""Leased slots in Redis: at most ``cap`` holders of one owner's slots at a
time across every process of the service (the per-credential cap on
concurrent CSV exports).

Each slot is a key of its own (``pix:<name>:<owner>:<n>``, n = 1..cap)
taken with ``SET NX PX``: Redis expires it by its own clock, so a holder
whose process died (SIGKILL, a lost machine) frees its slot when its lease
ends, and no process's clock decides whether another's slot has expired. A
live holder renews its lease as it goes (:meth:`Slot.renew_if_due`) and
deletes the key when it ends (:meth:`Slot.release`); both check that the key
is still its own token, so a holder whose lease ran out never frees or
extends a slot another holder has taken since.

If Redis cannot be reached the cap fails open, like the rate limit
(:mod:`core.ratelimit`): what it guards (threads held by slow clients) is
bounded anyway by the send timeout, while refusing would stop every export
of every merchant for the length of the outage.
"""

from __future__ import annotations

import hashlib
import logging
import time
import uuid
from dataclasses import dataclass, field

from django.conf import settings

from core.redis import UNAVAILABLE as REDIS_UNAVAILABLE
from core.redis import direct as redis_direct

logger = logging.getLogger(__name__)

# Short: this sits before every export, and fails open anyway.
_REDIS_TIMEOUT = 0.5

# KEYS: the owner's slots. ARGV: token, lease (ms). The number of the slot taken, or 0.
_ACQUIRE = """
for n, key in ipairs(KEYS) do
  if redis.call('SET', key, ARGV[1], 'NX', 'PX', ARGV[2]) then
    return n
  end
end
return 0
"""
# KEYS[1]: a slot. ARGV: token, lease (ms). 1 when the slot was still the token's.
_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""
# KEYS[1]: a slot. ARGV: token. 1 when the slot was still the token's (and is now free).
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""


def _sha(script: str) -> str:
    return hashlib.sha1(script.encode()).hexdigest()  # noqa: S324 - Redis names scripts by SHA-1


def _run(script: str, keys: list[str], args: list[object]) -> int:
    return int(redis_direct(settings.REDIS_URL, timeout=_REDIS_TIMEOUT).run_script(script, _sha(script), keys, args))


def slot_keys(name: str, owner: str, cap: int) -> list[str]:
    return [f"pix:{name}:{owner}:{n}" for n in range(1, cap + 1)]


@dataclass
class Slot:
    """One held slot (``key`` None: nothing was counted, the cap being off or
    Redis unreachable). Renewed and released by its holder only."""

    key: str | None
    lease_seconds: float
    token: str = field(default_factory=lambda: uuid.uuid4().hex)
    renewed_at: float = field(default_factory=time.monotonic)
    released: bool = False

    def renew_if_due(self, every: float) -> None:
        """Extend the lease when it was last extended ``every`` seconds ago
        or more: one round trip now and then, not one per write."""
        if self.key is None or self.released or time.monotonic() - self.renewed_at < every:
            return
        self.renewed_at = time.monotonic()
        try:
            if not _run(_RENEW, [self.key], [self.token, int(self.lease_seconds * 1000)]):
                # The lease ran out (a stall longer than it, Redis restarted):
                # the export goes on; another may have taken the slot meanwhile.
                logger.warning("slot %s lost its lease; the export goes on uncounted", self.key)
                self.key = None
        except REDIS_UNAVAILABLE:
            logger.warning("slot %s not renewed; it expires with its lease", self.key, exc_info=True)

    def release(self) -> None:
        """Give the slot back (at most once). A failure only keeps it until its lease ends."""
        if self.released:
            return
        self.released = True
        if self.key is None:
            return
        try:
            _run(_RELEASE, [self.key], [self.token])
        except REDIS_UNAVAILABLE:
            logger.warning("slot %s not released; it expires with its lease", self.key, exc_info=True)


def slot_take(name: str, owner: str, *, cap: int, lease_seconds: float) -> Slot | None:
    """One of ``owner``'s ``cap`` slots of ``name`` for ``lease_seconds``
    (renewable), or None when all are held. ``cap`` <= 0: no cap."""
    if cap <= 0:
        return Slot(None, lease_seconds)
    slot = Slot(None, lease_seconds)
    keys = slot_keys(name, owner, cap)
    try:
        taken = _run(_ACQUIRE, keys, [slot.token, int(lease_seconds * 1000)])
    except REDIS_UNAVAILABLE:
        logger.warning("%s cap unavailable; allowed uncounted", name, exc_info=True)
        return slot
    if not taken:
        return None
    slot.key = keys[taken - 1]
    return slot
