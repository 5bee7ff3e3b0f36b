"""Faults on a fixed, seeded schedule, injected into the soak's own
processes only: its Celery pool children, its database's backends, its
private Redis, its loopback receiver and its sandbox acquirer.

Each fault leaves a window; only the windows of faults that take a
dependency of the API away (PostgreSQL backends, Redis) excuse a 5xx, up to
``GRACE`` seconds after they end. A worker killed, a receiver misbehaving or
an acquirer slowing to its deadline must never show in an API answer.
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from tests.realworld import Receiver
from tests.soak.service import Redis, Service, kill_pool_child

#: Seconds after a fault's end during which its after-effects are excused.
GRACE = 10.0
#: Seconds between faults, and the quiet start and end of the traffic.
SPACING = 20.0
LEAD = 15.0
#: How long a lasting fault lasts.
HOLD = 15.0
#: Faults whose after-effects may wait for beat's poll of stuck payouts (every
#: minute, payouts idle for 2, once the lease of 5 minutes has run out): each
#: cycle starts with them, so the run waits the least for what they leave.
SLOW = ("pg_terminate",)
#: A pool child killed is not among them: its payout is handed back at once
#: and taken up again within seconds (docs/operations/queues-and-workers.md,
#: "The payout worker"); the invariant "interrupted payouts resumed within a
#: minute" holds it to that.
FAST = ("worker_child", "redis_restart", "receiver_500", "receiver_hang", "acquirer_slow")
#: Seconds after a slow fault within which what it left must have settled.
SETTLE_AFTER = 5 * 60 + 60 + 40
#: Seconds after a pool child is killed within which what it left must have settled.
WORKER_CHILD_SETTLE_AFTER = 60
#: The acquirer a fault slows down: the first of every account's cash-in chain.
SLOWED_ACQUIRER = "soak_primary"


@dataclass
class Window:
    kind: str
    started: float
    ended: float
    excuses_5xx: bool
    note: str = ""

    def covers(self, started: float, ended: float) -> bool:
        """Whether a call over [started, ended] overlapped the window or its grace."""
        return self.excuses_5xx and started <= self.ended + GRACE and ended >= self.started


def schedule(seed: int, traffic_seconds: float) -> list[tuple[float, str]]:
    """Every kind once per cycle, the SLOW ones first, each group in an order
    the seed shuffles; one fault every SPACING seconds from LEAD until
    SPACING before the traffic ends."""
    rng = random.Random(seed)
    plan: list[tuple[float, str]] = []
    at = LEAD
    cycle: list[str] = []
    while at + SPACING <= traffic_seconds:
        if not cycle:
            slow, fast = list(SLOW), list(FAST)
            rng.shuffle(slow)
            rng.shuffle(fast)
            cycle = slow + fast
        plan.append((at, cycle.pop(0)))
        at += SPACING
    return plan


def settle_by(plan: list[tuple[float, str]], traffic_seconds: float) -> float:
    """Seconds from the start by which every event must have settled: SETTLE_AFTER
    past the last SLOW fault, WORKER_CHILD_SETTLE_AFTER past the last pool child
    killed, and never less than 90 s after the traffic."""
    last_slow = max((at for at, kind in plan if kind in SLOW), default=0.0)
    last_kill = max((at for at, kind in plan if kind == "worker_child"), default=0.0)
    return max(last_slow + SETTLE_AFTER, last_kill + WORKER_CHILD_SETTLE_AFTER, traffic_seconds + 90.0)


def terminate_backends() -> int:
    """pg_terminate_backend on every other connection to the soak's database
    (web, workers, beat): what a failover or an operator's kill does."""
    from django.db import connection

    try:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
            row = cursor.fetchone()
        return int(row[0]) if row else 0
    finally:
        connection.close()


def set_acquirer_charge(behaviour: str) -> None:
    from django.db import connection

    from acquirers.models import Acquirer

    try:
        Acquirer.objects.filter(key=SLOWED_ACQUIRER).update(options={"charge": behaviour, "payout": "ok"})
    finally:
        connection.close()


@dataclass
class Injector:
    service: Service
    redis: Redis
    receiver: Receiver
    seed: int
    windows: list[Window] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def _hold(self, stop: threading.Event, begin: Callable[[], None], end: Callable[[], None]) -> tuple[float, float]:
        started = time.monotonic()
        begin()
        try:
            stop.wait(HOLD)
        finally:
            end()
        return started, time.monotonic()

    def inject(self, kind: str, index: int, stop: threading.Event) -> Window:
        if kind == "worker_child":
            now = time.monotonic()
            return Window(kind, now, now, False, kill_pool_child(self.service, self.seed + index))
        if kind == "pg_terminate":
            now = time.monotonic()
            return Window(kind, now, now, True, f"terminated {terminate_backends()} backends")
        if kind == "redis_restart":
            started = time.monotonic()
            self.redis.stop()
            stop.wait(2.0)
            self.redis.start()
            return Window(kind, started, time.monotonic(), True, "redis-server stopped 2 s, then started again")
        if kind == "receiver_500":
            started, ended = self._hold(stop, lambda: self.receiver.respond(500), lambda: self.receiver.respond(200))
            return Window(kind, started, ended, False, f"receiver answered 500 for {HOLD:.0f} s")
        if kind == "receiver_hang":

            def release() -> None:
                self.receiver.respond(200)
                # Held requests answer now; later ones are not held.
                self.receiver.released.set()
                self.receiver.released.clear()

            started, ended = self._hold(stop, lambda: self.receiver.respond((200, {}, 60.0)), release)
            return Window(kind, started, ended, False, f"receiver hung for {HOLD:.0f} s")
        if kind == "acquirer_slow":
            started, ended = self._hold(stop, lambda: set_acquirer_charge("timeout"), lambda: set_acquirer_charge("ok"))
            return Window(kind, started, ended, False, f"{SLOWED_ACQUIRER} answered charges past its deadline")
        raise ValueError(kind)

    def run(self, plan: list[tuple[float, str]], origin: float, stop: threading.Event) -> None:
        for index, (at, kind) in enumerate(plan):
            if stop.wait(max(0.0, origin + at - time.monotonic())):
                return
            try:
                window = self.inject(kind, index, stop)
            except Exception as exc:  # noqa: BLE001 - reported as a failure of the run
                with self.lock:
                    self.errors.append(f"fault {kind} at {at:.0f}s could not be injected: {exc!r}")
                continue
            with self.lock:
                self.windows.append(window)
            print(f"  fault at {window.started - origin:6.1f}s: {kind}: {window.note}", flush=True)

    def excused(self, started: float, ended: float) -> bool:
        with self.lock:
            return any(window.covers(started, ended) for window in self.windows)


def ensure_redis(redis: Redis) -> None:
    """After the run, whatever happened: the private Redis is up."""
    if not redis.answers():
        with contextlib.suppress(RuntimeError):
            redis.start()
