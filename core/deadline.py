"""Calls to the outside world under a hard wall-clock deadline, cut at the socket.

Socket timeouts bound each read, not the whole exchange: a peer that
drip-feeds bytes can hold a call for ever. So a call runs in its caller's
thread inside a :func:`scope`, and when the scope's deadline passes the
connections opened or reused in it (see :mod:`core.http`) are shut down:
the read blocked on them fails at once, the caller gets its thread back and
the connection is gone. Nothing of the call outlives it: no worker thread
left running, no answer arriving later.

One watchdog thread per process keeps the scopes' deadlines in a heap and
cuts each at its time (a thread per call is what a flood of slow peers must
not get). Code deep in an adapter learns the current deadline from
:func:`remaining`; an in-process adapter that waits uses :func:`sleep`,
which ends at the deadline as a cut socket would.
"""

from __future__ import annotations

import contextlib
import contextvars
import heapq
import itertools
import math
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

T = TypeVar("T")


class DeadlineExceeded(TimeoutError):
    """No complete answer within the deadline."""


class Scope:
    """One deadline and the sockets to cut when it passes.

    It keeps a duplicate descriptor of each socket: shutting that down ends a
    read blocked on the other one at once (a TLS handshake included), and
    while it is held the descriptor number cannot be reused by another
    connection of the process, so the cut never hits a stranger's socket.
    """

    def __init__(self, seconds: float, parent: Scope | None) -> None:
        expires_at = time.monotonic() + max(0.0, seconds)
        # A scope inside another ends no later than it.
        self.expires_at: float = min(expires_at, parent.expires_at) if parent is not None else expires_at
        self._lock = threading.Lock()
        self._guards: list[socket.socket] = []
        self._closers: list[Callable[[], None]] = []
        self._fired = threading.Event()
        self._finished = False

    @property
    def fired(self) -> bool:
        """The watchdog cut this scope's connections."""
        return self._fired.is_set()

    @property
    def expired(self) -> bool:
        """Past the deadline, whether or not the watchdog got to it yet."""
        return self.fired or time.monotonic() >= self.expires_at

    def remaining(self) -> float:
        return max(0.0, self.expires_at - time.monotonic())

    def watch(self, sock: socket.socket, close: Callable[[], None] | None = None) -> None:
        """Cut ``sock`` at this scope's deadline (at once if it passed).
        ``close``, if the scope was cut, runs when it ends, in its thread:
        whatever owns a cut socket closes it then, rather than keep it (a
        pool would, when the cut read looked like the end of an answer)."""
        # fromfd, not dup(): a kept-alive connection's socket may be TLS-wrapped.
        guard = socket.fromfd(sock.fileno(), sock.family, sock.type)
        with self._lock:
            if self._finished:
                guard.close()
                return
            self._guards.append(guard)
            if close is not None:
                self._closers.append(close)
            if self._fired.is_set():
                # Connected after the deadline (a slow name lookup): end it before it sends.
                _shut(guard)

    def wait(self, seconds: float) -> bool:
        """Wait ``seconds`` or until the deadline, whichever is first; True at the deadline."""
        return self._fired.wait(seconds)

    def _fire(self) -> None:
        with self._lock:
            if self._finished:
                return
            self._fired.set()
            for guard in self._guards:
                _shut(guard)

    def _finish(self) -> None:
        with self._lock:
            self._finished = True
            for guard in self._guards:
                guard.close()
            self._guards.clear()
            closers, self._closers = (self._closers if self._fired.is_set() else []), []
        for close in closers:
            # The peer must see the connection closed now, not when a pool lets go of it.
            with contextlib.suppress(OSError):
                close()


def _shut(sock: socket.socket) -> None:
    # Fails only when the peer already closed it or it never connected.
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


class _Watchdog:
    """The process's one thread that fires scopes at their deadlines."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, Scope]] = []
        self._order = itertools.count()
        self._thread: threading.Thread | None = None

    def add(self, scope: Scope) -> None:
        with self._cond:
            heapq.heappush(self._heap, (scope.expires_at, next(self._order), scope))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="deadline-watchdog", daemon=True)
                self._thread.start()
            if self._heap[0][2] is scope:
                self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while True:
                    # A scope that ended before its deadline has nothing left to cut.
                    while self._heap and self._heap[0][2]._finished:
                        heapq.heappop(self._heap)
                    if not self._heap:
                        self._cond.wait()
                        continue
                    wait = self._heap[0][0] - time.monotonic()
                    if wait <= 0:
                        break
                    self._cond.wait(wait)
                _, _, due = heapq.heappop(self._heap)
            due._fire()


_watchdog = _Watchdog()
_current: contextvars.ContextVar[Scope | None] = contextvars.ContextVar("deadline_scope", default=None)


def _after_fork() -> None:
    # A forked child (a Celery pool process) has no watchdog thread: it starts its own.
    global _watchdog
    _watchdog = _Watchdog()


os.register_at_fork(after_in_child=_after_fork)


@contextlib.contextmanager
def scope(seconds: float) -> Iterator[Scope]:
    """Everything inside must end within ``seconds``: connections made or
    reused in it through :mod:`core.http` are cut when they pass. Inside
    another scope, the earlier deadline wins."""
    current = Scope(seconds, _current.get())
    _watchdog.add(current)
    token = _current.set(current)
    try:
        yield current
    finally:
        _current.reset(token)
        current._finish()


def current() -> Scope | None:
    """The scope this code runs in, if any."""
    return _current.get()


def remaining() -> float:
    """Seconds left before the current deadline (infinite outside a scope)."""
    active = _current.get()
    return active.remaining() if active is not None else math.inf


def sleep(seconds: float) -> None:
    """``time.sleep`` that ends at the current deadline, raising
    :class:`DeadlineExceeded` there as a cut connection would fail."""
    active = _current.get()
    if active is None:
        time.sleep(seconds)
    elif active.wait(seconds):
        raise DeadlineExceeded("the deadline passed while waiting")


def call_with_deadline(func: Callable[[], T], timeout: float) -> T:
    """``func()`` in this thread, its connections cut after ``timeout``
    seconds. Whatever a call past its deadline raised (a connection error
    from the cut, most likely) or returned becomes :class:`DeadlineExceeded`:
    the caller stopped waiting then."""
    with scope(timeout) as active:
        try:
            result = func()
        except Exception as exc:
            if active.expired:
                raise DeadlineExceeded(f"no complete answer within {timeout:.1f}s") from exc
            raise
        if active.expired:
            raise DeadlineExceeded(f"answered after its deadline of {timeout:.1f}s")
        return result
