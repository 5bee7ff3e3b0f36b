"""Running a charge through the acquirer chain.

Each acquirer gets one attempt with a hard deadline (its connect + read
timeout), enforced here rather than trusted to the adapter. The first
acquirer that returns a valid BR Code for the amount takes the charge; any
failure (unavailable, timeout, refusal, invalid answer, adapter bug) moves on
to the next. No database transaction or lock is held while waiting.

Acquirers whose circuit breaker is open (:mod:`acquirers.health`) are passed
over without a call and recorded as ``circuit_open`` attempts; every call's
outcome feeds the breaker. If every acquirer of the chain is open, the one
that may be tried again soonest is called anyway, as the breaker's probe: a
charge is never refused on breaker state alone, and while every acquirer is
down a request waits for one of them, not for the whole chain.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from acquirers import adapters, brcode, health
from acquirers.adapters.base import AcquirerTimeout, AdapterError, ChargeRequest, ChargeResult, InvalidResponse
from acquirers.models import Acquirer
from core import deadline, metrics

logger = logging.getLogger(__name__)
T = TypeVar("T")


class DeadlineExceeded(AcquirerTimeout):
    """The acquirer did not answer within its connect + read timeout."""


def call_with_deadline(
    func: Callable[[], T],
    timeout: float,
    *,
    on_late: Callable[[T | None, BaseException | None], None] | None = None,
) -> T:
    """An acquirer call under its deadline (see :mod:`core.deadline`);
    ``on_late`` hears what a call abandoned at its deadline finally did."""
    try:
        return deadline.call_with_deadline(func, timeout, on_late=on_late)
    except deadline.DeadlineExceeded as exc:
        raise DeadlineExceeded(str(exc)) from None


@dataclass(frozen=True)
class Attempt:
    acquirer: Acquirer
    position: int
    outcome: str  # payments.models.ChargeAttempt.Outcome values
    latency_ms: int
    error_class: str = ""
    error_message: str = ""


@dataclass
class ChainResult:
    attempts: list[Attempt] = field(default_factory=list)
    acquirer: Acquirer | None = None
    result: ChargeResult | None = None
    #: Acquirers that may hold a live charge we will not use: they timed out,
    #: or answered with something we refuse (an invalid BR Code or answer).
    #: The caller asks them to cancel it.
    to_cancel: list[Acquirer] = field(default_factory=list)


def run_charge_chain(chain: Sequence[Acquirer], request: ChargeRequest) -> ChainResult:
    outcome = ChainResult()
    skipped: list[tuple[int, Acquirer, health.Gate]] = []
    for position, acquirer in enumerate(chain, start=1):
        gate = health.admit(acquirer)
        if not gate.allowed:
            health.skipped(acquirer, "create_charge", gate)
            skipped.append((position, acquirer, gate))
            outcome.attempts.append(_skip(acquirer, position, gate))
            continue
        if _try(outcome, acquirer, position, request, decisive=gate.probe, last=position == len(chain)):
            return outcome

    if skipped and len(skipped) == len(outcome.attempts):
        # Every acquirer is open. Rather than refuse a charge on what may be
        # stale state, the one whose cool-down ends first gets this request as
        # its probe; a failure opens it again and the next request goes to the
        # next one, so an outage costs each request one deadline, not all.
        position, acquirer, _ = min(skipped, key=lambda item: item[2].retry_at)
        logger.warning("every acquirer's circuit is open; trying %s anyway", acquirer.key)
        outcome.attempts = [a for a in outcome.attempts if a.position != position]
        _try(outcome, acquirer, position, request, decisive=True, last=True)
        outcome.attempts.sort(key=lambda a: a.position)
    return outcome


def _try(
    outcome: ChainResult, acquirer: Acquirer, position: int, request: ChargeRequest, *, decisive: bool, last: bool
) -> bool:
    """One call, recorded in ``outcome`` and fed to the breaker; True if it took the charge."""
    started = time.monotonic()
    error: BaseException | None = None
    try:
        adapter = adapters.build(acquirer)
        deadline = acquirer.deadline_seconds
        result = call_with_deadline(lambda adapter=adapter: adapter.create_charge(request), deadline)  # type: ignore[misc]
        brcode.check(result.emv, amount=request.amount)
        _check_storable(result)
    except Exception as exc:  # noqa: BLE001 - any failure of one acquirer moves the chain on
        error = exc
    elapsed = time.monotonic() - started
    latency = int(elapsed * 1000)
    kind = "ok" if error is None else _classify(error)
    metrics.ACQUIRER_ATTEMPT_LATENCY.labels(acquirer.key, "create_charge", kind).observe(elapsed)
    health.record(acquirer, outcome=kind, latency_ms=latency, decisive=decisive)

    if error is None:
        outcome.attempts.append(Attempt(acquirer, position, "ok", latency))
        outcome.acquirer, outcome.result = acquirer, result
        return True

    if not last:
        metrics.ACQUIRER_FALLBACKS.labels(acquirer.key, "create_charge").inc()
    if kind == "error":
        logger.exception("acquirer %s adapter failed unexpectedly", acquirer.key, exc_info=error)
    else:
        logger.warning("acquirer %s attempt failed: %s: %s", acquirer.key, kind, error)
    if isinstance(error, AcquirerTimeout | InvalidResponse | brcode.InvalidBRCode):
        # It may have created the charge (late, or before answering badly).
        outcome.to_cancel.append(acquirer)
    outcome.attempts.append(Attempt(acquirer, position, kind, latency, type(error).__name__, str(error)[:500]))
    return False


#: ``Charge.provider_charge_id``'s length: a longer id would fail the insert
#: after the acquirer created the charge.
PROVIDER_CHARGE_ID_MAX_LENGTH = 100


def _check_storable(result: ChargeResult) -> None:
    """What the charge row will hold must fit it: refused here, the charge is
    another acquirer's (and this one is asked to cancel), not a failed insert."""
    charge_id = result.provider_charge_id
    if not isinstance(charge_id, str) or len(charge_id) > PROVIDER_CHARGE_ID_MAX_LENGTH or "\x00" in charge_id:
        raise InvalidResponse(f"unusable provider charge id {str(charge_id)[:120]!r}")
    if any("\ud800" <= char <= "\udfff" for char in charge_id):
        raise InvalidResponse("provider charge id with lone surrogates")


def _skip(acquirer: Acquirer, position: int, gate: health.Gate) -> Attempt:
    until = dt.datetime.fromtimestamp(gate.retry_at, tz=dt.UTC)
    return Attempt(
        acquirer,
        position,
        "circuit_open",
        0,
        "CircuitOpen",
        f"circuit open: not tried before {until:%Y-%m-%d %H:%M:%S} UTC",
    )


def _classify(error: BaseException) -> str:
    if isinstance(error, brcode.InvalidBRCode):
        return "invalid_response"
    if isinstance(error, AdapterError):
        return error.error_class
    return "error"
