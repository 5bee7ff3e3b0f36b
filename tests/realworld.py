"""Real collaborators for tests: a Celery worker process on the test
database, and an HTTP receiver on loopback that records what it gets."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

#: What the test worker runs with: short retries and timeouts so schedules
#: and failures play out in seconds.
WORKER_SETTINGS = {
    "WEBHOOK_RETRY_SCHEDULE": "0,1,2,2",
    "WEBHOOK_JITTER": "0.2",
    "WEBHOOK_CONNECT_TIMEOUT": "1",
    "WEBHOOK_TIMEOUT": "2",
    "WEBHOOK_MAX_COUNTDOWN": "60",
    "WEBHOOK_RELAY_GRACE": "1",
}


def wait_for(predicate: Callable[[], Any], timeout: float = 20.0, interval: float = 0.05) -> Any:
    """Poll until ``predicate()`` is truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(interval)


@dataclass
class CeleryWorker:
    process: subprocess.Popen[bytes]
    queue: str
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")


@contextlib.contextmanager
def celery_worker(database_name: str, tmp_dir: Path, concurrency: int = 4) -> Iterator[CeleryWorker]:
    """A real worker on its own queue, joined to the test database. The test
    process's Celery app is pointed at the same queue for the duration."""
    from pix_service.celery import app

    queue = f"pix-test-{uuid.uuid4().hex[:10]}"
    previous_queue = app.conf.task_default_queue
    app.conf.task_default_queue = queue
    env = {
        **os.environ,
        **WORKER_SETTINGS,
        "DJANGO_SETTINGS_MODULE": "pix_service.settings.test",
        "PIX_DATABASE_NAME": database_name,
        "CELERY_TASK_DEFAULT_QUEUE": queue,
    }
    log = tmp_dir / f"{queue}.log"
    name = f"{queue}@localhost"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [
                sys.executable, "-m", "celery", "-A", "pix_service", "worker",
                "-Q", queue, "-n", name, "--pool", "threads", "--concurrency", str(concurrency),
                "--loglevel", "INFO", "--without-gossip", "--without-mingle", "--without-heartbeat",
            ],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    worker = CeleryWorker(process, queue, log)
    try:
        wait_for(lambda: "ready." in worker.output() or process.poll() is not None, timeout=60)
        if process.poll() is not None:
            raise RuntimeError(f"celery worker exited:\n{worker.output()}")
        yield worker
    finally:
        app.conf.task_default_queue = previous_queue
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()


@dataclass
class ReceivedRequest:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float


@dataclass
class Receiver:
    """Records every request; answers from ``responses`` in order (the last
    one repeats). A response is ``(status, headers, delay_seconds)``."""

    url: str
    requests: list[ReceivedRequest] = field(default_factory=list)
    responses: list[tuple[int, dict[str, str], float]] = field(default_factory=lambda: [(200, {}, 0.0)])
    lock: threading.Lock = field(default_factory=threading.Lock)

    def respond(self, *responses: tuple[int, dict[str, str], float] | int) -> None:
        with self.lock:
            self.responses = [r if isinstance(r, tuple) else (r, {}, 0.0) for r in responses]

    def wait_for_requests(self, count: int, timeout: float = 20.0) -> list[ReceivedRequest]:
        wait_for(lambda: len(self.requests) >= count, timeout=timeout)
        return list(self.requests)


@contextlib.contextmanager
def http_receiver() -> Iterator[Receiver]:
    receiver = Receiver(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            with receiver.lock:
                index = len(receiver.requests)
                receiver.requests.append(ReceivedRequest(self.path, dict(self.headers.items()), body, time.time()))
                status, headers, delay = receiver.responses[min(index, len(receiver.responses) - 1)]
            if delay:
                time.sleep(delay)
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", "2")
            self.end_headers()
            with contextlib.suppress(OSError):
                self.wfile.write(b"ok")

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()


def run_concurrently(calls: list[Callable[[], Any]], timeout: float = 90.0) -> list[Any]:
    """Run each call on its own thread, so on its own PostgreSQL connection,
    released together by a barrier. Returns, in order, each call's result or
    the exception it raised (callers assert on both)."""
    from django.db import connection

    outcomes: list[Any] = [None] * len(calls)
    barrier = threading.Barrier(len(calls))

    def worker(index: int, call: Callable[[], Any]) -> None:
        try:
            barrier.wait(timeout=timeout)
            outcomes[index] = call()
        except BaseException as exc:  # noqa: BLE001 - handed back to the caller
            outcomes[index] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(i, call)) for i, call in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=timeout)
    assert not any(thread.is_alive() for thread in threads), "a concurrent call did not finish"
    return outcomes
