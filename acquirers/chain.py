"""Running a charge through the acquirer chain.

Each acquirer gets one guarded call (:mod:`acquirers.calls`: its hard
deadline, the outcome, metrics, breaker). The first acquirer that returns a
valid BR Code for the amount takes the charge; any failure (unavailable,
timeout, refusal, invalid answer, adapter bug) moves on to the next. No
database transaction or lock is held while waiting.

Acquirers whose circuit breaker is open (:mod:`acquirers.breaker`) are passed
over without a call and recorded as ``circuit_open`` attempts. If every
acquirer of the chain is open, the one that may be tried again soonest is
called anyway, as the breaker's probe: a charge is never refused on breaker
state alone, and while every acquirer is down a request waits for one of
them, not for the whole chain.

An acquirer whose calls in flight are at their cap, or a process whose pool
for charges is full (:mod:`acquirers.capacity`), is passed over the same way,
without a call, and recorded as a ``busy`` attempt. A busy acquirer is never
forced: that would undo the cap. If every acquirer is skipped, the soonest
open one among them is probed as above; if all of them are busy, the charge
fails at once as any charge no acquirer took (the spec's "try again later"
answer), rather than wait for a slot behind slow calls.

A due-date charge (cobv) goes through the same loop
(:func:`run_due_charge_chain`); only the call and the usable check differ.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from acquirers import brcode, breaker, calls
from acquirers.adapters.apipix.formats import centavos
from acquirers.adapters.base import (
    AcquirerAdapter,
    ChargeRequest,
    ChargeResult,
    DueChargeRequest,
    DueChargeResult,
    InvalidResponse,
    RecurrenceCreated,
    RecurrenceRequest,
)
from acquirers.adapters.recurrence import JOURNEY_QR
from acquirers.calls import Outcome
from acquirers.models import Acquirer
from core import metrics

logger = logging.getLogger(__name__)

OPERATION = "create_charge"
DUE_OPERATION = "create_due_charge"
RECURRENCE_OPERATION = "create_recurrence"

#: What a chain creates: an immediate charge or a due-date one (both have
#: ``provider_charge_id`` and ``emv``).
Created = ChargeResult | DueChargeResult | RecurrenceCreated
R = TypeVar("R", ChargeResult, DueChargeResult, RecurrenceCreated)


@dataclass(frozen=True)
class Attempt:
    acquirer: Acquirer
    position: int
    outcome: Outcome
    latency_ms: int
    error_class: str = ""
    error_message: str = ""


@dataclass
class ChainResult(Generic[R]):
    attempts: list[Attempt] = field(default_factory=list)
    acquirer: Acquirer | None = None
    result: R | None = None
    #: Acquirers that may hold a live charge we will not use: they timed out,
    #: or answered with something we refuse (an invalid BR Code or answer).
    #: The caller asks them to cancel it.
    to_cancel: list[Acquirer] = field(default_factory=list)


def run_charge_chain(chain: Sequence[Acquirer], request: ChargeRequest) -> ChainResult[ChargeResult]:
    def usable(result: ChargeResult) -> None:
        brcode.check(result.emv, amount=request.amount)
        _check_storable(result)

    return _run(chain, _Creation(OPERATION, lambda adapter: adapter.create_charge(request), usable))


def run_due_charge_chain(chain: Sequence[Acquirer], request: DueChargeRequest) -> ChainResult[DueChargeResult]:
    """:func:`run_charge_chain` for a due-date charge (cobv): the same
    admission, probe, fallback and ``to_cancel``. Usable: a dynamic BR Code
    whose amount, when it carries one, is ``valor.original`` (the amount of
    the pay day is fetched from its location), and a storable provider id."""
    original = centavos(request.valor.get("original"))  # validated upstream: raises on our own bug

    def usable(result: DueChargeResult) -> None:
        brcode.check_due(result.emv, original=original)
        _check_storable(result)

    return _run(chain, _Creation(DUE_OPERATION, lambda adapter: adapter.create_due_charge(request), usable))


def run_recurrence_chain(chain: Sequence[Acquirer], request: RecurrenceRequest) -> ChainResult[RecurrenceCreated]:
    """:func:`run_charge_chain` for a Pix Automático recurrence (``POST
    /rec``): the same admission, probe, fallback and ``to_cancel`` (an
    acquirer that timed out may hold a recurrence: the caller finds and
    cancels it). Usable: an ``idRec`` that fits its column and, for the QR
    journey, a code that parses as a BR Code (structure and CRC; its
    recurrence's URL may sit in field 80, not 26, so no location is asked of
    the code itself) and the location the payer's app reads.
    Once created, the recurrence never moves: its cycles go to that acquirer only."""

    def usable(result: RecurrenceCreated) -> None:
        if not isinstance(result.id_rec, str) or not 1 <= len(result.id_rec) <= 35 or not result.id_rec.isalnum():
            raise InvalidResponse(f"unusable idRec {str(result.id_rec)[:60]!r}")
        if request.journey == JOURNEY_QR:
            brcode.parse(result.emv)
            if not result.location or len(result.location) > 255:
                raise InvalidResponse("a recurrence's QR journey needs its location")

    return _run(chain, _Creation(RECURRENCE_OPERATION, lambda adapter: adapter.create_recurrence(request), usable))


@dataclass(frozen=True)
class _Creation(Generic[R]):
    """One kind of charge as a chain creates it: the operation's name, the
    adapter's call and the check that its answer is usable."""

    operation: str
    create: Callable[[AcquirerAdapter], R]
    usable: Callable[[R], None]


def _run(chain: Sequence[Acquirer], creation: _Creation[R]) -> ChainResult[R]:
    outcome: ChainResult[R] = ChainResult()
    skipped: list[tuple[int, Acquirer, breaker.Gate]] = []
    for position, acquirer in enumerate(chain, start=1):
        gate = calls.admit(acquirer, creation.operation)
        if not gate.allowed:
            skipped.append((position, acquirer, gate))
            outcome.attempts.append(_skip(acquirer, position, gate))
            continue
        if _try(outcome, acquirer, position, creation, decisive=gate.probe, last=position == len(chain)):
            return outcome

    tripped = [item for item in skipped if not item[2].busy]
    if tripped and all(a.outcome in (Outcome.CIRCUIT_OPEN, Outcome.BUSY) for a in outcome.attempts):
        # Every acquirer is open (or busy). Rather than refuse a charge on what
        # may be stale state, the open one whose cool-down ends first gets this
        # request as its probe; a failure opens it again and the next request
        # goes to the next one, so an outage costs each request one deadline, not all.
        position, acquirer, _ = min(tripped, key=lambda item: item[2].retry_at)
        logger.warning("every acquirer is open or busy; trying %s (open) anyway", acquirer.key)
        outcome.attempts = [a for a in outcome.attempts if a.position != position]
        _try(outcome, acquirer, position, creation, decisive=True, last=True)
        outcome.attempts.sort(key=lambda a: a.position)
    return outcome


def _try(
    outcome: ChainResult[R], acquirer: Acquirer, position: int, creation: _Creation[R], *, decisive: bool, last: bool
) -> bool:
    """One guarded call, recorded in ``outcome``; True if it took the charge."""
    operation = creation.operation
    done = calls.call(acquirer, operation, creation.create, probe=decisive, check=creation.usable)
    if done.outcome is Outcome.BUSY:
        # Its slots filled since admission: not called, so passed over as a skip.
        outcome.attempts.append(Attempt(acquirer, position, done.outcome, 0, "AcquirerBusy", done.error_message))
        return False
    if done.result is not None:
        outcome.attempts.append(Attempt(acquirer, position, done.outcome, done.latency_ms))
        outcome.acquirer, outcome.result = acquirer, done.result
        return True

    if not last:
        metrics.ACQUIRER_FALLBACKS.labels(acquirer.key, operation).inc()
    if done.outcome is not Outcome.ERROR:  # an adapter bug was logged with its trace
        logger.warning("acquirer %s attempt failed: %s: %s", acquirer.key, done.outcome, done.error)
    if done.outcome in (Outcome.TIMEOUT, Outcome.INVALID_RESPONSE):
        # It may have created the charge (late, or before answering badly).
        outcome.to_cancel.append(acquirer)
    outcome.attempts.append(
        Attempt(acquirer, position, done.outcome, done.latency_ms, done.error_class, done.error_message)
    )
    return False


#: ``Charge.provider_charge_id``'s length: a longer id would fail the insert
#: after the acquirer created the charge.
PROVIDER_CHARGE_ID_MAX_LENGTH = 100


def _check_storable(result: ChargeResult | DueChargeResult) -> None:
    """What the charge row will hold must fit it: refused here, the charge is
    another acquirer's (and this one is asked to cancel), not a failed insert."""
    charge_id = result.provider_charge_id
    if not isinstance(charge_id, str) or len(charge_id) > PROVIDER_CHARGE_ID_MAX_LENGTH or "\x00" in charge_id:
        raise InvalidResponse(f"unusable provider charge id {str(charge_id)[:120]!r}")
    if any("\ud800" <= char <= "\udfff" for char in charge_id):
        raise InvalidResponse("provider charge id with lone surrogates")


def _skip(acquirer: Acquirer, position: int, gate: breaker.Gate) -> Attempt:
    if gate.busy:
        return Attempt(acquirer, position, Outcome.BUSY, 0, "AcquirerBusy", "busy: too many calls in flight")
    until = dt.datetime.fromtimestamp(gate.retry_at, tz=dt.UTC)
    return Attempt(
        acquirer,
        position,
        Outcome.CIRCUIT_OPEN,
        0,
        "CircuitOpen",
        f"circuit open: not tried before {until:%Y-%m-%d %H:%M:%S} UTC",
    )
