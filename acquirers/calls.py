"""One guarded call to an acquirer, whatever the operation.

A charge, a payout send and a payout status lookup all go through
:func:`call`: the adapter is built and called under the acquirer's hard
deadline (its connect + read timeout, enforced here rather than trusted to
the adapter: at the deadline its connections are closed), every failure becomes one :class:`Outcome` in
:func:`classify`, and the outcome feeds the latency metric and the
acquirer's circuit breaker (:mod:`acquirers.breaker`). A call that may be
skipped asks :func:`admit` first. So a failure reads the same on every path:
an invalid answer is ``invalid_response`` for a payout as for a charge.

What follows a failure is the caller's policy, not this module's: the
charge chain moves on after any failure; the payout engine keeps a payout
whose send is unclear with that acquirer until it answers. The attempt rows
belong to the callers' apps; a :class:`Call` carries what they store. No
database transaction or lock may be held while a call waits.
"""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from acquirers import adapters, brcode, breaker, capacity
from acquirers.adapters.base import (
    AcquirerAdapter,
    AcquirerDeclined,
    AcquirerTimeout,
    AcquirerUnavailable,
    CapabilityNotSupported,
    InvalidResponse,
)
from acquirers.models import Acquirer
from core import connections, deadline, metrics

logger = logging.getLogger(__name__)
T = TypeVar("T")

#: What attempt rows keep of an error's message.
ERROR_MESSAGE_MAX_LENGTH = 500


class Outcome(enum.StrEnum):
    """What one call came to: the ``outcome`` stored on attempt rows and the
    label of the attempt metric (``payments.models.ChargeAttempt.Outcome``
    holds the same values)."""

    OK = "ok"
    UNAVAILABLE = "unavailable"
    TIMEOUT = "timeout"
    DECLINED = "declined"
    INVALID_RESPONSE = "invalid_response"
    ERROR = "error"
    #: Not called: its circuit breaker was open.
    CIRCUIT_OPEN = "circuit_open"
    #: An optional capability the adapter lacks; callers check ``supports_*``
    #: first, so the acquirer is not blamed for it (a healthy answer).
    NOT_SUPPORTED = "not_supported"
    #: Not called: its cap or the purpose's pool of calls in flight was full
    #: (:mod:`acquirers.capacity`). Nothing learned: the breaker is not fed.
    BUSY = "busy"


class DeadlineExceeded(AcquirerTimeout):
    """The acquirer did not answer within its connect + read timeout."""


def call_with_deadline(func: Callable[[], T], timeout: float) -> T:
    """An acquirer call under its deadline, in the caller's thread (see
    :mod:`core.deadline`): its connections are cut when the deadline passes.
    The one place a call past its deadline becomes :class:`DeadlineExceeded`,
    whatever the cut made the adapter raise (a connection error, mostly)."""
    try:
        return deadline.call_with_deadline(func, timeout)
    except deadline.DeadlineExceeded as exc:
        message = str(exc)
    # Raised outside the handler, with no chain: attempt rows keep the class
    # and message, and the cut's traceback (sockets in its frames) goes now.
    raise DeadlineExceeded(message)


# Most specific first: a timeout and an invalid answer are kinds of unavailability.
_CLASSES: tuple[tuple[type[BaseException], Outcome], ...] = (
    (capacity.AcquirerBusy, Outcome.BUSY),
    (brcode.InvalidBRCode, Outcome.INVALID_RESPONSE),
    (AcquirerDeclined, Outcome.DECLINED),
    (AcquirerTimeout, Outcome.TIMEOUT),
    (InvalidResponse, Outcome.INVALID_RESPONSE),
    (AcquirerUnavailable, Outcome.UNAVAILABLE),
    (CapabilityNotSupported, Outcome.NOT_SUPPORTED),
)


def classify(error: BaseException) -> Outcome:
    """The one place a failed call's exception becomes an outcome, for every
    operation. Anything not listed (a bare ``AdapterError``, a bug in an
    adapter) is :attr:`Outcome.ERROR`."""
    for cls, outcome in _CLASSES:
        if isinstance(error, cls):
            return outcome
    return Outcome.ERROR


@dataclass(frozen=True)
class Call(Generic[T]):
    """One call as its attempt row records it."""

    outcome: Outcome
    #: What the row and the metric record: the outcome, or for an answered
    #: call the caller's name for the answer (a payout's status).
    label: str
    latency_ms: int
    result: T | None = None
    error: BaseException | None = None

    @property
    def error_class(self) -> str:
        return type(self.error).__name__ if self.error is not None else ""

    @property
    def error_message(self) -> str:
        return str(self.error)[:ERROR_MESSAGE_MAX_LENGTH] if self.error is not None else ""


def admit(acquirer: Acquirer, operation: str) -> breaker.Gate:
    """Admission before a call that may be skipped (a charge, a new payout
    send): refused when the acquirer is busy (its cap or the purpose's pool
    full, :mod:`acquirers.capacity`; asked first, so a busy acquirer's probe
    is not claimed for nothing) or its circuit is open. A skip is counted and
    logged here."""
    full = capacity.busy(acquirer, operation)
    if full:
        metrics.ACQUIRER_CIRCUIT_SKIPS.labels(acquirer.key, operation, Outcome.BUSY).inc()
        logger.info("acquirer %s skipped for %s: busy (%s)", acquirer.key, operation, full)
        return breaker.Gate(allowed=False, retry_at=breaker.clock() + capacity.BUSY_RETRY_SECONDS, busy=True)
    gate = breaker.admit(acquirer)
    if not gate.allowed:
        metrics.ACQUIRER_CIRCUIT_SKIPS.labels(acquirer.key, operation, Outcome.CIRCUIT_OPEN).inc()
        logger.info("acquirer %s skipped for %s: circuit open until %.0f", acquirer.key, operation, gate.retry_at)
    return gate


def call(
    acquirer: Acquirer,
    operation: str,
    func: Callable[[AcquirerAdapter], T],
    *,
    probe: bool = False,
    check: Callable[[T], None] | None = None,
    label: Callable[[T], str] | None = None,
) -> Call[T]:
    """The guarded call (:func:`_guarded`: its parameters), holding a slot of
    the operation's pool and of the acquirer's cap (:mod:`acquirers.capacity`)
    for as long as it runs, given back however it ends. With none free it is
    not made: :attr:`Outcome.BUSY`, an :class:`~acquirers.capacity.AcquirerBusy`
    error, nothing fed to the breaker (nothing was learned)."""
    with capacity.slot(acquirer, operation) as taken:
        if not taken:
            metrics.ACQUIRER_CIRCUIT_SKIPS.labels(acquirer.key, operation, Outcome.BUSY).inc()
            logger.info("acquirer %s not called for %s: busy", acquirer.key, operation)
            busy = capacity.AcquirerBusy(f"{acquirer.key}: too many calls in flight for {operation}")
            return Call(outcome=Outcome.BUSY, label=Outcome.BUSY, latency_ms=0, error=busy)
        return _guarded(acquirer, operation, func, probe=probe, check=check, label=label)


def _guarded(
    acquirer: Acquirer,
    operation: str,
    func: Callable[[AcquirerAdapter], T],
    *,
    probe: bool = False,
    check: Callable[[T], None] | None = None,
    label: Callable[[T], str] | None = None,
) -> Call[T]:
    """``func(adapter)`` under the acquirer's deadline, classified, measured
    and fed to its breaker. Never raises what the call raised.

    ``check`` may refuse a returned answer by raising (an unusable BR Code):
    it then counts as the acquirer's failure. ``label`` names an answered
    call for the row, the metric and the breaker (default ``ok``). ``probe``:
    the call is the breaker's half-open probe, or forced through an open
    circuit; its outcome decides the circuit. A call past its deadline has
    its connections closed and is a timeout: no part of it goes on."""
    connections.release_connections(before=f"acquirer {acquirer.key} {operation}")
    started = time.monotonic()
    result: T | None = None
    error: BaseException | None = None
    recorded: str = Outcome.OK
    try:
        adapter = adapters.build(acquirer)
        answer = call_with_deadline(lambda: func(adapter), acquirer.deadline_seconds)
        if check is not None:
            check(answer)
        if label is not None:
            recorded = label(answer)
        result = answer
    except Exception as exc:  # noqa: BLE001 - every failure is classified and recorded
        error = exc
    elapsed = time.monotonic() - started
    latency_ms = int(elapsed * 1000)
    outcome = Outcome.OK if error is None else classify(error)
    if error is not None:
        recorded = outcome
    metrics.ACQUIRER_ATTEMPT_LATENCY.labels(acquirer.key, operation, recorded).observe(elapsed)
    breaker.record(acquirer, outcome=recorded, latency_ms=latency_ms, decisive=probe)
    if outcome is Outcome.ERROR:
        logger.error("acquirer %s: %s failed unexpectedly", acquirer.key, operation, exc_info=error)
    return Call(outcome=outcome, label=recorded, latency_ms=latency_ms, result=result, error=error)
