"""Calls to the outside world under a hard wall-clock deadline.

Socket timeouts bound each read, not the whole exchange: a peer that
drip-feeds bytes can hold a call for ever. The call runs in a worker thread
and the caller stops waiting at the deadline; a call still queued then is
cancelled before it starts.

A call abandoned at its deadline goes on in its thread, and what it finally
returns or raises may matter (a payout the acquirer did make): ``on_late``
receives it there. Exactly one of the caller and ``on_late`` sees the outcome.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import TypeVar

logger = logging.getLogger(__name__)

T = TypeVar("T")

# Sized for the concurrent requests/tasks of one process.
_EXECUTOR = ThreadPoolExecutor(max_workers=32, thread_name_prefix="deadline-call")


class DeadlineExceeded(TimeoutError):
    """No answer within the deadline."""


class _Handover:
    """Who gets the outcome: the waiting caller, or (once it gave up) the hook."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.abandoned = False
        self.finished = False


def call_with_deadline(
    func: Callable[[], T],
    timeout: float,
    *,
    on_late: Callable[[T | None, BaseException | None], None] | None = None,
) -> T:
    """``func()``, or :class:`DeadlineExceeded` after ``timeout`` seconds.
    ``on_late``, if given, is called in the call's thread with the result (or
    the exception) of a call the caller gave up on; it must close any
    database connection it opens there."""
    handover = _Handover()

    def run() -> T:
        try:
            result = func()
        except BaseException as exc:
            _finish(handover, on_late, None, exc)
            raise
        _finish(handover, on_late, result, None)
        return result

    future: Future[T] = _EXECUTOR.submit(run)
    try:
        return future.result(timeout=timeout)
    except FutureTimeout:
        with handover.lock:
            if handover.finished:
                # It ended between the timeout and this lock: the answer is ours after all.
                return future.result()
            handover.abandoned = True
        future.cancel()
        raise DeadlineExceeded(f"no answer within {timeout:.1f}s") from None


def _finish(
    handover: _Handover,
    on_late: Callable[[T | None, BaseException | None], None] | None,
    result: T | None,
    error: BaseException | None,
) -> None:
    with handover.lock:
        handover.finished = True
        late = handover.abandoned
    if late and on_late is not None:
        try:
            on_late(result, error)
        except Exception:
            # The hook only records evidence; its failure must not kill the pool's thread.
            logger.exception("late-answer hook failed")
