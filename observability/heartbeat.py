"""Worker heartbeats in Redis, for readiness and ``/metrics``.

Each Celery worker process writes its name and the time into one sorted set
every ``WORKER_HEARTBEAT_INTERVAL`` seconds from a daemon thread; a worker is
alive while its last beat is younger than ``WORKER_HEARTBEAT_MAX_AGE``. A
sorted set answers "who is alive" in one command, and a worker that died
without saying goodbye simply ages out.
"""

from __future__ import annotations

import logging
import threading
import time

import redis
from django.conf import settings

from core.redis import UNAVAILABLE as REDIS_UNAVAILABLE
from core.redis import client as redis_client

logger = logging.getLogger(__name__)


def _redis() -> redis.Redis:
    # Readiness must answer quickly when Redis is down.
    return redis_client(settings.REDIS_URL, timeout=2)


def beat(name: str, at: float | None = None) -> None:
    _redis().zadd(settings.WORKER_HEARTBEAT_KEY, {name: at if at is not None else time.time()})


def forget(name: str) -> None:
    _redis().zrem(settings.WORKER_HEARTBEAT_KEY, name)


def alive() -> list[str]:
    """Names of the workers that beat recently; drops the long-dead ones."""
    key = settings.WORKER_HEARTBEAT_KEY
    oldest = time.time() - settings.WORKER_HEARTBEAT_MAX_AGE
    client = _redis()
    client.zremrangebyscore(key, "-inf", oldest - 24 * 3600)
    names: list[bytes] = client.zrangebyscore(key, oldest, "+inf")  # type: ignore[assignment]
    return [name.decode() for name in names]


class Beater:
    """The worker side: a daemon thread that beats until stopped."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pix-heartbeat", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        try:
            forget(self.name)
        except REDIS_UNAVAILABLE:
            logger.warning("heartbeat: could not remove %s", self.name)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                beat(self.name)
            except REDIS_UNAVAILABLE as exc:
                # Redis down: readiness will say so; keep trying.
                logger.warning("heartbeat: %s", exc)
            self._stop.wait(settings.WORKER_HEARTBEAT_INTERVAL)
