"""Process-local snapshots of rows that every request reads and staff rarely
change: a credential with its account, an account's acquirer chain.

Reading them from PostgreSQL cost a third of a key-authenticated read's CPU
(``make bench``, py-spy). A snapshot is used only while all of these hold:

- it is younger than ``SNAPSHOT_TTL_SECONDS`` (1 s): whatever happens to
  Redis, a revoked key or a blocked account is refused everywhere within it;
- the *generation* in Redis is the one read before the snapshot was taken:
  every write to a watched model bumps it (at once, and again when its
  transaction commits), so other processes drop their snapshots on their
  next request, not a second later; when Redis cannot be read, the TTL rules;
- this process has not written to a watched model since (a local epoch).

The generation is read once per request (a thread-local memo between
Django's ``request_started`` and ``request_finished``) and on every lookup
elsewhere (tasks). Why the bump comes twice: the first reaches processes
whose readers would otherwise keep the old row until the TTL; one that read
the old row between the first bump and the commit stored it under the new
generation, and the second bump, after the commit, drops it.

Writes are watched through :class:`WatchedQuerySet` (``update``, ``delete``,
``bulk_create``, ``bulk_update``) and the ``post_save``/``post_delete``
signals of the models given to :func:`watch`. Raw SQL is not seen: call
:func:`changed` after it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from django.conf import settings
from django.core.signals import request_finished, request_started
from django.db import models, transaction
from django.db.models.signals import post_delete, post_save

from core.redis import UNAVAILABLE as REDIS_UNAVAILABLE
from core.redis import client as redis_client
from core.redis import direct as redis_direct

logger = logging.getLogger(__name__)

GENERATION_KEY = "pix:snapshots:generation"
#: Entries per cache; past it the cache starts again (keys are credentials and accounts).
MAX_ENTRIES = 20_000

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

#: Seconds, for the TTL; tests replace it.
clock = time.monotonic

_OFF = object()  # outside a request: every lookup reads the generation
_UNREAD = object()  # in a request, not read yet
_local = threading.local()
_epoch = 0


def _generation_from_redis() -> bytes | None:
    try:
        # Short timeout, as the rate limit's: this sits on every API request.
        value = redis_client(settings.REDIS_URL, timeout=0.5).get(GENERATION_KEY)
    except REDIS_UNAVAILABLE:
        return None
    return value if isinstance(value, bytes) else b"0"


def generation() -> bytes | None:
    """The current generation, or None when Redis cannot say (then only the TTL holds)."""
    memo = getattr(_local, "memo", _OFF)
    if memo is _OFF:
        return _generation_from_redis()
    if memo is _UNREAD:
        memo = _local.memo = _generation_from_redis()
    return memo  # type: ignore[return-value]


def read_generation_with(*commands: tuple[Any, ...]) -> list[Any] | None:
    """Read the generation now, in one pipelined round trip with
    ``commands``: Redis commands another module sends on this request anyway
    (the rate limit's count, :mod:`core.ratelimit`), so both share one round
    trip, on this thread's own connection (:class:`core.redis.Direct`). A plain
    pipeline, not a MULTI: nothing here needs the commands isolated from other
    clients (Redis runs them in order all the same), and MULTI's extra replies
    were a third of the round trip's client CPU. The generation is remembered
    for the rest of the request as :func:`generation` remembers it. Returns
    the replies to ``commands``, or None when Redis could not answer (the
    generation is then unknown too: the TTL rules)."""
    try:
        results = redis_direct(settings.REDIS_URL, timeout=0.5).execute(("GET", GENERATION_KEY), *commands)
    except REDIS_UNAVAILABLE:
        value, extra = None, None
    else:
        value = results[0] if isinstance(results[0], bytes) else b"0"
        extra = list(results[1:])
    if getattr(_local, "memo", _OFF) is not _OFF:
        _local.memo = value
    return extra


def _request_started(**_: Any) -> None:
    _local.memo = _UNREAD


def _request_finished(**_: Any) -> None:
    _local.memo = _OFF


request_started.connect(_request_started, dispatch_uid="core.snapshots.started")
request_finished.connect(_request_finished, dispatch_uid="core.snapshots.finished")


def _bump() -> None:
    global _epoch  # one counter per process, bumped under the GIL
    _epoch += 1
    if getattr(_local, "memo", _OFF) is not _OFF:
        _local.memo = _UNREAD
    try:
        redis_client(settings.REDIS_URL, timeout=0.5).incr(GENERATION_KEY)
    except REDIS_UNAVAILABLE:
        # Other processes keep their snapshots until the TTL; this one has dropped its own.
        logger.warning("snapshot generation not bumped (Redis unavailable); others catch up within the TTL")


def changed() -> None:
    """A watched row changed (or is about to, in the current transaction):
    every process drops its snapshots now, and again once it commits."""
    _bump()
    if transaction.get_connection().in_atomic_block:
        transaction.on_commit(_bump)


def forget_all() -> None:
    """Drop this process's snapshots (tests, between cases)."""
    _bump()


@dataclass(frozen=True, slots=True)
class _Entry(Generic[V]):
    generation: bytes | None
    epoch: int
    taken: float
    value: V


class Snapshots(Generic[K, V]):
    """``load(key)`` remembered per process under the rules above. ``None``
    (nothing found) is never remembered: an unknown key is asked again."""

    def __init__(self, load: Callable[[K], V | None]) -> None:
        self._load = load
        self._entries: dict[K, _Entry[V]] = {}

    def remembered(self, key: K) -> V | None:
        """What this process last loaded for ``key``, however old (no Redis,
        no database): a hint, never an authority: use :meth:`get` for that."""
        entry = self._entries.get(key)
        return entry.value if entry is not None else None

    def get(self, key: K) -> V | None:
        current = generation()
        now = clock()
        entry = self._entries.get(key)
        if (
            entry is not None
            and entry.epoch == _epoch
            and now - entry.taken < settings.SNAPSHOT_TTL_SECONDS
            and (current is None or entry.generation == current)
        ):
            return entry.value
        # Epoch and generation as they were before the load: a write racing
        # it leaves this entry already stale, never fresh-looking.
        epoch = _epoch
        value = self._load(key)
        if value is not None and settings.SNAPSHOT_TTL_SECONDS > 0:
            if len(self._entries) >= MAX_ENTRIES:
                self._entries.clear()
            self._entries[key] = _Entry(current, epoch, now, value)
        return value


_M = TypeVar("_M", bound=models.Model)


class WatchedQuerySet(models.QuerySet[_M]):
    """Bulk writes of a watched model drop every snapshot."""

    def update(self, **kwargs: Any) -> int:
        changed()
        return super().update(**kwargs)

    def update_unwatched(self, **kwargs: Any) -> int:
        """An update of fields no snapshot relies on (``last_used_at``)."""
        return super().update(**kwargs)

    def delete(self) -> tuple[int, dict[str, int]]:
        changed()
        return super().delete()

    def bulk_create(self, *args: Any, **kwargs: Any) -> list[_M]:
        changed()
        return super().bulk_create(*args, **kwargs)

    def bulk_update(self, *args: Any, **kwargs: Any) -> int:
        changed()
        return super().bulk_update(*args, **kwargs)


def _on_write(**_: Any) -> None:
    changed()


def watch(*watched: type[models.Model]) -> None:
    """Saves and deletes of these models drop every snapshot."""
    for model in watched:
        label = model._meta.label
        post_save.connect(_on_write, sender=model, dispatch_uid=f"core.snapshots.save.{label}")
        post_delete.connect(_on_write, sender=model, dispatch_uid=f"core.snapshots.delete.{label}")
