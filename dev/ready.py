"""When ``make run``'s processes answer: web its readiness probe
(``/api/health/ready``: database, broker, a worker's heartbeat) and each
Celery worker of the Procfile a ping by its node name. ``dev/run.py``
prints its banner then, so the keys and URLs are the last thing on the
screen instead of scrolling away under the processes' start-up lines."""

from __future__ import annotations

import re
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: Seconds to wait before printing the banner anyway (a slow first start of
#: the embedded engines takes a few; a broken process would never answer).
TIMEOUT = 120.0
_NODE_NAME = re.compile(r"\s-n\s+(\S+)")


def worker_names(procfile: Path = ROOT / "Procfile") -> set[str]:
    """The node names of the Procfile's Celery workers (``-n``, or Celery's
    default ``celery@%h``), with ``%h`` as the worker expands it."""
    from celery.utils.nodenames import default_nodename, host_format

    names = set()
    for line in procfile.read_text().splitlines():
        _, _, command = line.partition(":")
        if re.search(r"\scelery\s.*\sworker(\s|$)", f" {command} "):
            match = _NODE_NAME.search(command)
            names.add(host_format(match.group(1)) if match else default_nodename(""))
    return names


def web_ready(port: str) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health/ready", timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def workers_answering(names: set[str]) -> bool:
    # A bare app on the same broker: dev sits below config (the layer test),
    # and a ping needs nothing of the project's Celery configuration.
    from celery import Celery
    from django.conf import settings

    with Celery("pix-dev-ready", broker=settings.CELERY_BROKER_URL, set_as_current=False) as app:
        replies = app.control.ping(destination=sorted(names), timeout=1.0, limit=len(names)) or []
    return names <= {name for reply in replies for name in reply}


def wait_until_answering(port: str, process: subprocess.Popen[bytes], timeout: float = TIMEOUT) -> bool:
    """True once web and every worker answer; False when ``process`` (honcho)
    ends first or ``timeout`` seconds pass."""
    names = worker_names()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        if web_ready(port) and workers_answering(names):
            return True
        time.sleep(0.5)
    return False
