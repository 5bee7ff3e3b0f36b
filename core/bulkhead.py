"""Bulkheads: bounded counts of calls in flight that refuse, rather than
queue, past their limit.

A caller that finds its bulkhead full is told so at once (or after a short
wait it chose): waiting in line for a slot held by a slow peer is exactly
how one slow party stalls everyone, so the caller goes elsewhere or comes
back later instead. Counts are per process; the bound per deployment is
processes x limit.

The limit is read on every acquisition (a callable), so a changed setting
applies to the next call, and a slot is taken and given back in one ``with``
(:meth:`Bulkhead.slot`): an exception cannot leak it.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator

from core import metrics


class Bulkhead:
    """At most ``limit()`` holders at once in this process."""

    def __init__(self, name: str, limit: Callable[[], int]) -> None:
        self.name = name
        self._limit = limit
        self._in_flight = 0
        self._changed = threading.Condition()

    @property
    def in_flight(self) -> int:
        with self._changed:
            return self._in_flight

    def full(self) -> bool:
        """No slot free now (a hint: another thread may take or free one next)."""
        with self._changed:
            return self._in_flight >= self._limit()

    def try_acquire(self, timeout: float = 0.0) -> bool:
        """Take a slot if one is free within ``timeout`` seconds (0: now or
        never). False, counted as a rejection, when none was."""
        give_up_at = time.monotonic() + timeout
        with self._changed:
            while self._in_flight >= self._limit():
                left = give_up_at - time.monotonic()
                if left <= 0:
                    metrics.OUTBOUND_REJECTED.labels(self.name).inc()
                    return False
                self._changed.wait(left)
            self._in_flight += 1
        metrics.OUTBOUND_IN_FLIGHT.labels(self.name).inc()
        return True

    def release(self) -> None:
        with self._changed:
            if self._in_flight <= 0:
                raise RuntimeError(f"bulkhead {self.name}: released more slots than were taken")
            self._in_flight -= 1
            self._changed.notify()
        metrics.OUTBOUND_IN_FLIGHT.labels(self.name).dec()

    @contextlib.contextmanager
    def slot(self, timeout: float = 0.0) -> Iterator[bool]:
        """``with bulkhead.slot() as taken:`` — the slot, if ``taken``, is
        given back however the block ends."""
        taken = self.try_acquire(timeout)
        try:
            yield taken
        finally:
            if taken:
                self.release()


@contextlib.contextmanager
def all_of(*bulkheads: Bulkhead, timeout: float = 0.0) -> Iterator[bool]:
    """A slot of every one of ``bulkheads`` or of none: taken in order, and
    those already taken given back when a later one is full. Non-blocking
    (or a short ``timeout`` for each) so that no order of takers deadlocks."""
    with contextlib.ExitStack() as stack:
        for bulkhead in bulkheads:
            if not stack.enter_context(bulkhead.slot(timeout)):
                yield False
                return
        yield True
