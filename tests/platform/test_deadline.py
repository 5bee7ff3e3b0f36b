"""The hard deadline around outbound calls, and what happens to a call the
caller gave up on: its outcome goes to ``on_late``, in the call's thread."""

from __future__ import annotations

import threading

import pytest

from core.deadline import DeadlineExceeded, call_with_deadline


def test_a_call_answering_in_time_goes_to_the_caller_only() -> None:
    late: list[object] = []
    assert call_with_deadline(lambda: "ok", 5.0, on_late=lambda result, error: late.append(result)) == "ok"
    assert late == []


@pytest.mark.parametrize("fails", [False, True])
def test_an_abandoned_calls_outcome_reaches_on_late_in_its_own_thread(fails: bool) -> None:
    release = threading.Event()
    heard = threading.Event()
    late: list[tuple[object, object, str]] = []

    def call() -> str:
        release.wait(10)
        if fails:
            raise ConnectionResetError("reset after the request left")
        return "paid, late"

    def on_late(result: object, error: BaseException | None) -> None:
        late.append((result, error, threading.current_thread().name))
        heard.set()

    with pytest.raises(DeadlineExceeded):
        call_with_deadline(call, 0.1, on_late=on_late)
    assert late == []  # nothing yet: the call is still on its way
    release.set()
    assert heard.wait(10)

    ((result, error, thread),) = late
    assert thread.startswith("deadline-call")
    if fails:
        assert (result, type(error)) == (None, ConnectionResetError)
    else:
        assert (result, error) == ("paid, late", None)


def test_a_failing_hook_does_not_break_the_pool() -> None:
    release = threading.Event()

    def broken(result: object, error: BaseException | None) -> None:
        raise RuntimeError("hook bug")

    with pytest.raises(DeadlineExceeded):
        call_with_deadline(lambda: release.wait(10), 0.05, on_late=broken)
    release.set()
    assert call_with_deadline(lambda: 42, 5.0) == 42
