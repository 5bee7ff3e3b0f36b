"""A task for the broker-restart test, loaded only by the worker that test
starts (``celery worker -I``): it holds its message delivered and not yet
acknowledged (tasks are acknowledged late) until the test lets it go."""

from __future__ import annotations

import time
from pathlib import Path

from celery import shared_task

NAME = "tests.faults.blocking_task.hold"


@shared_task(name=NAME)
def hold(directory: str, tag: str) -> None:
    """Writes ``<tag>.started``, waits for ``<tag>.release`` (30 s at most),
    then writes ``<tag>.done``."""
    base = Path(directory)
    (base / f"{tag}.started").touch()
    deadline = time.monotonic() + 30
    while not (base / f"{tag}.release").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    (base / f"{tag}.done").touch()
