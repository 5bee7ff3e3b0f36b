"""Calls to the outside world under a hard wall-clock deadline.

Socket timeouts bound each read, not the whole exchange: a peer that
drip-feeds bytes can hold a call for ever. The call runs in a worker thread
and the caller stops waiting at the deadline; a call still queued then is
cancelled before it starts.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import TypeVar

T = TypeVar("T")

# Sized for the concurrent requests/tasks of one process.
_EXECUTOR = ThreadPoolExecutor(max_workers=32, thread_name_prefix="deadline-call")


class DeadlineExceeded(TimeoutError):
    """No answer within the deadline."""


def call_with_deadline(func: Callable[[], T], timeout: float) -> T:
    future: Future[T] = _EXECUTOR.submit(func)
    try:
        return future.result(timeout=timeout)
    except FutureTimeout:
        future.cancel()
        raise DeadlineExceeded(f"no answer within {timeout:.1f}s") from None
