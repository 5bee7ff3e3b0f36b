"""``make stop``: stop what ``make run`` started, as Ctrl-C on it does
(web, workers, beat, honcho, then the embedded engines it started), then
the embedded engines themselves. ``dev/run.py`` writes its pid to
``var/run.pid`` and removes it when it ends; stopping only the engines under
a running stack left web, workers and beat answering 500."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from pathlib import Path

PID_FILE = "run.pid"
#: Seconds for the stack to stop before dev/run.py is killed (its engines
#: are stopped below in any case).
GRACE = 60.0


def write_pid_file(var: Path, honcho: int) -> None:
    """This process's pid, then honcho's (stopped directly when this one hangs)."""
    (var / PID_FILE).write_text(f"{os.getpid()}\n{honcho}\n")


def remove_pid_file(var: Path) -> None:
    path = var / PID_FILE
    # Only our own: a later run may have written its pid since.
    with contextlib.suppress(FileNotFoundError, ValueError, IndexError):
        if int(path.read_text().split()[0]) == os.getpid():
            path.unlink()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _is_make_run(pid: int) -> bool:
    """Whether ``pid`` is still ``python -m dev.run`` (not a reused pid)."""
    cmdline = Path(f"/proc/{pid}/cmdline")
    if not cmdline.exists():  # no /proc (macOS): trust the file dev/run.py keeps
        return _alive(pid)
    try:
        return b"dev.run" in cmdline.read_bytes().split(b"\0")
    except OSError:
        return False


def _wait_gone(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def stop_run(var: Path) -> bool:
    """Stop the running ``make run`` of ``var``, if any; True when one was running."""
    path = var / PID_FILE
    try:
        pid, honcho = (int(word) for word in path.read_text().split())
    except (FileNotFoundError, ValueError):
        return False
    if not _is_make_run(pid):
        path.unlink(missing_ok=True)  # left by a run that was killed
        return False
    print(f"== stopping make run (pid {pid}): web, workers, beat", flush=True)
    # dev/run.py takes SIGTERM as Ctrl-C: it hands SIGINT to honcho, which
    # stops every process of the Procfile, then it stops the engines it started.
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    if not _wait_gone(pid, GRACE):
        # honcho stops its processes on SIGTERM itself.
        for target, sig in ((honcho, signal.SIGTERM), (pid, signal.SIGKILL)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(target, sig)
        _wait_gone(honcho, 20)
        _wait_gone(pid, 10)
    path.unlink(missing_ok=True)
    return True


def main() -> int:
    from dev import embedded

    stop_run(embedded.var_dir())
    embedded.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
