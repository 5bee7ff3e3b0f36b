"""One circuit breaker per acquirer, shared through Redis.

Every guarded call to an acquirer (:mod:`acquirers.calls`) is admitted here
first and recorded here after, as healthy or failed. Unavailability fails it
(unavailable, timeout, invalid answer, adapter error); a decline is a healthy
answer: the acquirer is up and said no.

- **closed**: every call goes through. The circuit opens after
  ``ACQUIRER_BREAKER_FAILURES`` failures in a row, or when at least
  ``ACQUIRER_BREAKER_FAILURE_RATE`` of the calls of the last
  ``ACQUIRER_BREAKER_WINDOW`` seconds failed, once there were
  ``ACQUIRER_BREAKER_MIN_CALLS`` of them (a flapping acquirer never fails
  five times in a row, yet fails most calls).
- **open**: the chains pass it over for ``ACQUIRER_BREAKER_COOLDOWN`` seconds.
- **half-open**: after the cool-down exactly one call, the probe, is let
  through, whatever the number of processes: the claim is one Lua script, so
  it is atomic in Redis. Its success closes the circuit, its failure opens it
  for another cool-down. A probe whose process died gives its claim up after
  the acquirer's deadline (plus a margin) and the next call probes.

Each transition is one Lua script over the acquirer's hash (state, failures
in a row, opened at, open until, probe lease) and its list of recent calls
(``"<time> <1|0> <latency ms>"``, newest first, the last
``ACQUIRER_HEALTH_SAMPLES``), so every process sees one consistent breaker:
at most two round trips a call, :func:`admit` before and :func:`record` after
(a circuit this process saw closed within the last second admits without
one: see :func:`_remember`). Times
come from :data:`clock` (tests move it), not Redis's, so a test never sleeps
through a cool-down.

If Redis cannot be reached the breaker fails open, like the rate limit: every
acquirer is treated as closed and nothing is recorded, and the process leaves
Redis alone for a few seconds so an outage does not add a timeout to every call.
"""

from __future__ import annotations

import datetime as dt
import enum
import functools
import hashlib
import logging
import math
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import redis
from django.conf import settings

from acquirers import breaker_scripts as scripts
from core import metrics
from core.redis import UNAVAILABLE as REDIS_UNAVAILABLE
from core.redis import Direct
from core.redis import client as redis_client
from core.redis import direct as redis_direct

if TYPE_CHECKING:
    from acquirers.models import Acquirer

logger = logging.getLogger(__name__)

#: Wall-clock seconds; tests replace it to move time.
clock: Callable[[], float] = time.time
#: This process's own clock, for how fresh its sight of a closed circuit is.
local_clock: Callable[[], float] = time.monotonic

#: Call outcomes (:class:`acquirers.calls.Outcome`) that count as
#: unavailability. Everything else (ok, declined, and a payout's paid,
#: processing, failed, not_found) is an answer from a working acquirer.
FAILURES = frozenset({"unavailable", "timeout", "invalid_response", "error"})

# An acquirer nobody called for a day starts again from a clean slate.
_TTL_SECONDS = 24 * 3600
# After a Redis error the breaker stays out of the way this long (per process).
_REDIS_RETRY_SECONDS = 5.0
# A probe's claim outlives the acquirer's own deadline by this much: the
# guarded call enforces the deadline, so a live prober reports well within it.
_PROBE_MARGIN_SECONDS = 2.0
# How long this process admits calls to a circuit it last saw closed without
# asking Redis (_remember): one Redis round trip less on most charges and
# payout sends (make bench: about 8% of a charge's CPU).
_CLOSED_FRESH_SECONDS = 1.0


class State(enum.StrEnum):
    CLOSED = "closed"
    HALF_OPEN = "half_open"
    OPEN = "open"


STATE_LABELS = {State.CLOSED: "fechado", State.HALF_OPEN: "meio-aberto", State.OPEN: "aberto"}


class HealthUnavailable(Exception):
    """Redis could not be reached for a staff reset, which must not fail open."""


@dataclass(frozen=True)
class Gate:
    """May this call go to the acquirer now?"""

    allowed: bool
    #: This call is the half-open probe: its outcome closes or re-opens the circuit.
    probe: bool = False
    #: When skipped: when the acquirer may be tried again (epoch seconds).
    retry_at: float = 0.0
    busy: bool = False  # skipped for want of capacity (acquirers.capacity), not for its circuit


ALLOWED = Gate(allowed=True)


@dataclass(frozen=True)
class Health:
    """What the back office and ``/metrics`` show about one acquirer."""

    state: State
    failures: int  # in a row
    opened_at: dt.datetime | None  # first opening of the current outage
    retry_at: dt.datetime | None  # end of the cool-down (open) or of the probe's lease
    calls: int  # recent calls known (at most ACQUIRER_HEALTH_SAMPLES)
    since: dt.datetime | None  # time of the oldest of them
    success_rate: float | None  # healthy answers / calls
    p50_ms: int | None
    p95_ms: int | None


# ---------------------------------------------------------- Redis (scripts: acquirers.breaker_scripts)


@dataclass(frozen=True)
class _Redis:
    client: redis.Redis
    admit: Callable[..., Any]  # (keys=, args=) → the script's reply
    record: Callable[..., Any]


def _script(direct: Direct, text: str) -> Callable[..., Any]:
    sha = hashlib.sha1(text.encode(), usedforsecurity=False).hexdigest()
    return lambda *, keys, args: direct.run_script(text, sha, keys, args)


@functools.cache
def _connect(url: str) -> _Redis:
    # Short timeouts: a slow Redis must not hold a charge for long (see _suspend).
    # The scripts on each thread's own connection (core.redis.Direct): they run
    # around every acquirer call.
    direct = redis_direct(url, timeout=0.5, decode_responses=True)
    return _Redis(
        redis_client(url, timeout=0.5, decode_responses=True),
        _script(direct, scripts.ADMIT),
        _script(direct, scripts.RECORD),
    )


_suspended_until = 0.0
_suspend_lock = threading.Lock()


def _redis() -> _Redis | None:
    """The connection, or None while the breaker stays out of Redis's way."""
    if time.monotonic() < _suspended_until:
        return None
    return _connect(settings.REDIS_URL)


def _suspend(operation: str) -> None:
    global _suspended_until
    with _suspend_lock:
        _suspended_until = time.monotonic() + _REDIS_RETRY_SECONDS
    logger.warning(
        "acquirer health: Redis unavailable during %s; breaker open for every call", operation, exc_info=True
    )


#: Breaker key → until when (monotonic) this process may admit a call without
#: asking Redis: the circuit was seen closed less than ``_CLOSED_FRESH_SECONDS``
#: ago. Refreshed by every admission and record that finds it closed, dropped by
#: any that finds it otherwise.
_closed_until: dict[str, float] = {}


def _remember(key: str, state: str) -> None:
    # A closed circuit lets every call through, so admitting one from this
    # process's last sight of it is what Redis would answer, save for a circuit
    # another process opened since: this process then learns it from its next
    # record (which returns the state) or within the freshness window, and
    # admits at most the calls it starts in between. Open and half-open are
    # never admitted locally: the cool-down and the single probe stay exact.
    if state == State.CLOSED:
        _closed_until[key] = local_clock() + _CLOSED_FRESH_SECONDS
    else:
        _closed_until.pop(key, None)


def _key(acquirer: Acquirer) -> str:
    # The primary key alone repeats across databases that share one Redis
    # (two test suites, a re-created database); with its creation time it
    # does not. The cache's prefix keeps test keys apart from the service's.
    prefix = settings.CACHES["default"].get("KEY_PREFIX") or "pix"
    created = int(acquirer.created_at.timestamp() * 1_000_000)
    return f"{prefix}:breaker:{acquirer.pk}:{created}"


def _stamp(moment: float) -> str:
    return f"{moment:.3f}"


def _lease(acquirer: Acquirer) -> float:
    return acquirer.deadline_seconds + _PROBE_MARGIN_SECONDS


# --------------------------------------------------------------------------- the guarded call's side


def admit(acquirer: Acquirer) -> Gate:
    """Before a call that may be skipped (a charge, a new payout send): closed
    lets it through, open says when to come back, half-open lets exactly one
    caller through as the probe. One Redis round trip; fails open."""
    if not settings.ACQUIRER_BREAKER_ENABLED:
        return ALLOWED
    conn = _redis()
    if conn is None:
        return ALLOWED
    key = _key(acquirer)
    if _closed_until.get(key, 0.0) > local_clock():
        return ALLOWED
    try:
        decision, at = conn.admit(keys=[key], args=[_stamp(clock()), _stamp(_lease(acquirer))])
    except REDIS_UNAVAILABLE:
        _suspend("admit")
        return ALLOWED
    _remember(key, decision)
    if decision == "closed":
        return ALLOWED
    if decision == "probe":
        logger.info("acquirer %s: cool-down over, this call is the probe", acquirer.key)
        return Gate(allowed=True, probe=True)
    return Gate(allowed=False, retry_at=float(at))


def record(acquirer: Acquirer, *, outcome: str, latency_ms: int, decisive: bool = False) -> None:
    """After every call, skippable or not. ``decisive``: the call was the
    probe, or forced through an open circuit; its outcome closes or re-opens
    the circuit. One Redis round trip; a Redis error loses the sample."""
    if not settings.ACQUIRER_BREAKER_ENABLED:
        return
    conn = _redis()
    if conn is None:
        return
    healthy = outcome not in FAILURES
    key = _key(acquirer)
    try:
        transition, failures, state = conn.record(
            keys=[key, key + ":calls"],
            args=[
                _stamp(clock()),
                "1" if healthy else "0",
                max(0, latency_ms),
                "1" if decisive else "0",
                settings.ACQUIRER_BREAKER_FAILURES,
                settings.ACQUIRER_BREAKER_FAILURE_RATE,
                settings.ACQUIRER_BREAKER_MIN_CALLS,
                settings.ACQUIRER_BREAKER_WINDOW,
                settings.ACQUIRER_BREAKER_COOLDOWN,
                settings.ACQUIRER_HEALTH_SAMPLES,
                _TTL_SECONDS,
            ],
        )
    except REDIS_UNAVAILABLE:
        _suspend("record")
        return
    _remember(key, state)
    if transition in ("opened", "reopened"):
        metrics.ACQUIRER_CIRCUIT_OPENS.labels(acquirer.key).inc()
        logger.warning(
            "acquirer %s: circuit %s with %s failures in a row (last: %s); skipped for %ss",
            acquirer.key,
            transition,
            failures,
            outcome,
            settings.ACQUIRER_BREAKER_COOLDOWN,
        )
    elif transition == "closed":
        logger.info("acquirer %s: circuit closed (the probe was answered: %s)", acquirer.key, outcome)


# --------------------------------------------------------------------------- the back office's side


def reset(acquirer: Acquirer) -> None:
    """Close the circuit now (staff). Recent calls stay for display, but no
    longer count towards the failure rate. Raises :class:`HealthUnavailable`
    rather than pretend it worked."""
    try:
        client = _connect(settings.REDIS_URL).client
        pipe = client.pipeline(transaction=True)
        key = _key(acquirer)
        pipe.hset(key, mapping={"state": State.CLOSED.value, "failures": "0", "closed_at": _stamp(clock())})
        pipe.hdel(key, "opened_at", "open_until", "probe_until")
        pipe.expire(key, _TTL_SECONDS)
        pipe.execute()
    except REDIS_UNAVAILABLE as exc:
        raise HealthUnavailable(str(exc)) from exc


def snapshots(acquirers: Iterable[Acquirer]) -> dict[int, Health] | None:
    """Every acquirer's health, in one round trip; None if Redis cannot be reached."""
    rows = list(acquirers)
    if not rows:
        return {}
    try:
        pipe = _connect(settings.REDIS_URL).client.pipeline(transaction=False)
        for acquirer in rows:
            pipe.hgetall(_key(acquirer))
            pipe.lrange(_key(acquirer) + ":calls", 0, -1)
        replies = pipe.execute()
    except REDIS_UNAVAILABLE:
        logger.warning("acquirer health: Redis unavailable; health not shown", exc_info=True)
        return None
    now = clock()
    return {acquirer.pk: _health(replies[2 * i], replies[2 * i + 1], now) for i, acquirer in enumerate(rows)}


def snapshot(acquirer: Acquirer) -> Health | None:
    found = snapshots([acquirer])
    return None if found is None else found[acquirer.pk]


def _moment(value: str | float | None) -> dt.datetime | None:
    return dt.datetime.fromtimestamp(float(value), tz=dt.UTC) if value else None


def _health(fields: dict[str, str], calls: list[str], now: float) -> Health:
    stored = fields.get("state", State.CLOSED.value)
    open_until = float(fields.get("open_until") or 0)
    probe_until = float(fields.get("probe_until") or 0)
    retry_at: float | None
    if stored == State.CLOSED:
        state, retry_at = State.CLOSED, None
    elif now < open_until:
        state, retry_at = State.OPEN, open_until
    else:
        # Cool-down over: the next call probes (or one is probing now).
        state, retry_at = State.HALF_OPEN, (probe_until if probe_until > now else None)
    samples = [entry.split(" ") for entry in calls]
    latencies = sorted(int(latency) for _, _, latency in samples)
    return Health(
        state=state,
        failures=int(fields.get("failures") or 0),
        opened_at=_moment(fields.get("opened_at")) if state is not State.CLOSED else None,
        retry_at=_moment(retry_at),
        calls=len(samples),
        since=_moment(samples[-1][0]) if samples else None,
        success_rate=sum(healthy == "1" for _, healthy, _ in samples) / len(samples) if samples else None,
        p50_ms=_percentile(latencies, 50),
        p95_ms=_percentile(latencies, 95),
    )


def _percentile(ordered: list[int], pct: int) -> int | None:
    """Nearest-rank percentile of an ascending list."""
    if not ordered:
        return None
    return ordered[max(0, math.ceil(pct / 100 * len(ordered)) - 1)]
