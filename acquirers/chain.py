"""Running a charge through the acquirer chain.

Each acquirer gets one attempt with a hard deadline (its connect + read
timeout), enforced here rather than trusted to the adapter. The first
acquirer that returns a valid BR Code for the amount takes the charge; any
failure (unavailable, timeout, refusal, invalid answer, adapter bug) moves on
to the next. No database transaction or lock is held while waiting.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from acquirers import adapters, brcode
from acquirers.adapters.base import AcquirerTimeout, AdapterError, ChargeRequest, ChargeResult
from acquirers.models import Acquirer
from pix_service import deadline, metrics

logger = logging.getLogger(__name__)
T = TypeVar("T")


class DeadlineExceeded(AcquirerTimeout):
    """The acquirer did not answer within its connect + read timeout."""


def call_with_deadline(func: Callable[[], T], timeout: float) -> T:
    """An acquirer call under its deadline (see :mod:`pix_service.deadline`)."""
    try:
        return deadline.call_with_deadline(func, timeout)
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
    #: Acquirers that timed out: they may hold a live charge we must cancel.
    timed_out: list[Acquirer] = field(default_factory=list)


def run_charge_chain(chain: Sequence[Acquirer], request: ChargeRequest) -> ChainResult:
    outcome = ChainResult()
    for position, acquirer in enumerate(chain, start=1):
        started = time.monotonic()
        error: BaseException | None = None
        try:
            adapter = adapters.build(acquirer)
            deadline = acquirer.connect_timeout_ms / 1000 + acquirer.read_timeout_ms / 1000
            result = call_with_deadline(lambda adapter=adapter: adapter.create_charge(request), deadline)  # type: ignore[misc]
            brcode.check(result.emv, amount=request.amount)
        except Exception as exc:  # noqa: BLE001 - any failure of one acquirer moves the chain on
            error = exc
        elapsed = time.monotonic() - started
        latency = int(elapsed * 1000)
        kind = "ok" if error is None else _classify(error)
        metrics.ACQUIRER_ATTEMPT_LATENCY.labels(acquirer.key, "create_charge", kind).observe(elapsed)

        if error is None:
            outcome.attempts.append(Attempt(acquirer, position, "ok", latency))
            outcome.acquirer, outcome.result = acquirer, result
            return outcome

        if position < len(chain):
            metrics.ACQUIRER_FALLBACKS.labels(acquirer.key, "create_charge").inc()
        if kind == "error":
            logger.exception("acquirer %s adapter failed unexpectedly", acquirer.key, exc_info=error)
        else:
            logger.warning("acquirer %s attempt failed: %s: %s", acquirer.key, kind, error)
        if isinstance(error, AcquirerTimeout):
            outcome.timed_out.append(acquirer)
        outcome.attempts.append(Attempt(acquirer, position, kind, latency, type(error).__name__, str(error)[:500]))
    return outcome


def _classify(error: BaseException) -> str:
    if isinstance(error, brcode.InvalidBRCode):
        return "invalid_response"
    if isinstance(error, AdapterError):
        return error.error_class
    return "error"
