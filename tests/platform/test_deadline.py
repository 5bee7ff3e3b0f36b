"""The hard deadline around outbound calls (``core.deadline``, ``core.http``):
a call runs in its caller's thread, and at the deadline the process's one
watchdog shuts its connections down, so the blocked read fails at once and
nothing of the call is left running. Real sockets on loopback."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from core import deadline, http
from tests.realworld import drip_feeders, run_concurrently, wait_for


@contextlib.contextmanager
def silent_peer() -> Iterator[socket.socket]:
    """A connected socket whose peer never says a word."""
    listener = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(listener.getsockname())
    server, _ = listener.accept()
    try:
        yield client
    finally:
        for sock in (client, server, listener):
            sock.close()


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def watchdogs() -> int:
    return [thread.name for thread in threading.enumerate()].count("deadline-watchdog")


def test_a_call_answering_in_time_runs_in_the_callers_thread() -> None:
    assert deadline.call_with_deadline(threading.current_thread, 5.0) is threading.current_thread()


def test_a_read_blocked_past_the_deadline_is_cut_there() -> None:
    with silent_peer() as sock:

        def read() -> bytes:
            active = deadline.current()
            assert active is not None
            active.watch(sock)
            return sock.recv(1)  # the peer's silence would hold it for ever

        fds = open_fds()
        started = time.monotonic()
        with pytest.raises(deadline.DeadlineExceeded):
            deadline.call_with_deadline(read, 0.3)
        assert 0.25 <= time.monotonic() - started < 0.8
        assert open_fds() == fds  # the scope's duplicate descriptor is gone
        with pytest.raises(BrokenPipeError):
            sock.sendall(b"x")  # shut down for good


def test_a_socket_watched_after_the_deadline_is_cut_at_once() -> None:
    with silent_peer() as sock, deadline.scope(0.05) as active:
        assert active.wait(5)  # fired
        active.watch(sock)
        assert sock.recv(1) == b""


def test_an_error_before_the_deadline_is_the_callers_own() -> None:
    def fails() -> None:
        raise ConnectionRefusedError("no one there")

    with pytest.raises(ConnectionRefusedError):
        deadline.call_with_deadline(fails, 5.0)


def test_sleep_ends_at_the_deadline_as_a_cut_call_would() -> None:
    started = time.monotonic()
    with pytest.raises(deadline.DeadlineExceeded):
        deadline.call_with_deadline(lambda: deadline.sleep(5), 0.2)
    assert 0.15 <= time.monotonic() - started < 0.6
    # Within the deadline it is an ordinary sleep; outside any scope too.
    assert deadline.call_with_deadline(lambda: deadline.sleep(0.01), 5.0) is None
    deadline.sleep(0.01)


def test_remaining_and_nested_scopes() -> None:
    assert deadline.remaining() == float("inf")
    with deadline.scope(0.5):
        assert 0.3 < deadline.remaining() <= 0.5
        with deadline.scope(10) as inner:
            assert inner.remaining() <= 0.5  # no later than the scope around it
        with deadline.scope(0.1):
            assert deadline.remaining() <= 0.1
        assert deadline.remaining() > 0.1
    assert deadline.current() is None


def test_an_answer_after_the_deadline_is_not_taken() -> None:
    def answers_late() -> str:
        time.sleep(0.2)  # deaf to the deadline: in-process adapters use deadline.sleep
        return "too late"

    with pytest.raises(deadline.DeadlineExceeded):
        deadline.call_with_deadline(answers_late, 0.1)


def test_a_drip_feeding_peer_is_cut_and_leaves_nothing_behind() -> None:
    """Many concurrent calls through ``core.http`` to receivers dripping one
    byte every 0.2 s: each ends at its deadline, the peers see each
    connection closed, and one watchdog served them all."""
    count = 20
    with drip_feeders(count, interval=0.2) as drip:
        deadline.call_with_deadline(lambda: None, 1)  # the watchdog runs before the baseline
        threads, fds = threading.active_count(), open_fds()

        def call(url: str) -> float:
            started = time.monotonic()
            with contextlib.suppress(deadline.DeadlineExceeded), http.session() as session:
                deadline.call_with_deadline(lambda: session.get(url, timeout=(1, 1)).content, 1.0)
            return time.monotonic() - started

        took = run_concurrently([lambda url=url: call(url) for url in drip.urls])  # type: ignore[misc]
        assert all(0.9 <= elapsed <= 1.5 for elapsed in took), took
        wait_for(lambda: drip.closed == drip.accepted == count, timeout=5)
        assert threading.active_count() == threads
        assert open_fds() == fds
        assert watchdogs() == 1
