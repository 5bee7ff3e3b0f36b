"""Shared benchmark harness: a dedicated database, the real server
(gunicorn, as deployed), a bounded closed-loop load and a printed table.

Benchmarks never touch the development or test databases: they use
``pix_bench`` on the embedded PostgreSQL, or ``<DATABASE_URL's db>_bench``.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parent.parent


def bench_env() -> dict[str, str]:
    env = dict(os.environ)
    env["DJANGO_SETTINGS_MODULE"] = "pix_service.settings.local"
    env["DEBUG"] = "false"
    env["LOG_LEVEL"] = "WARNING"
    if env.get("DATABASE_URL"):
        base, _, name = env["DATABASE_URL"].rpartition("/")
        env["DATABASE_URL"] = f"{base}/{name.split('?')[0]}_bench"
        _create_database_on(base + "/postgres", name.split("?")[0] + "_bench")
    else:
        env["PIX_EMBEDDED_DB_NAME"] = "pix_bench"
    return env


def _create_database_on(admin_url: str, name: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(admin_url, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def setup_django(env: dict[str, str]) -> None:
    os.environ.update(env)
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", interactive=False, verbosity=0)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def gunicorn(env: dict[str, str], workers: int = 2, threads: int = 4) -> Iterator[str]:
    port = free_port()
    process = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "gunicorn"),
            "pix_service.wsgi:application",
            "--bind", f"127.0.0.1:{port}",
            "--workers", str(workers),
            "--threads", str(threads),
            "--log-level", "warning",
        ],
        cwd=ROOT,
        env=env,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(requests.RequestException):
                if requests.get(f"{base}/api/health", timeout=2).status_code == 200:
                    break
            if time.monotonic() > deadline or process.poll() is not None:
                raise RuntimeError("gunicorn did not become healthy")
            time.sleep(0.2)
        yield base
    finally:
        process.terminate()
        process.wait(timeout=30)


@dataclass
class LoadResult:
    name: str
    requests: int
    errors: int
    seconds: float
    latencies: list[float]
    queries: float | None = None

    @property
    def rps(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    def percentile(self, q: float) -> float:
        if not self.latencies:
            return 0.0
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def run_load(
    name: str,
    call: Callable[[requests.Session, int], int],
    *,
    total: int,
    concurrency: int,
    warmup: int = 20,
) -> LoadResult:
    """Closed loop: ``concurrency`` threads share ``total`` calls; ``call``
    returns the HTTP status (2xx counts as success)."""
    session_local = threading.local()

    def session() -> requests.Session:
        if not hasattr(session_local, "s"):
            session_local.s = requests.Session()
        return session_local.s

    for i in range(warmup):
        call(session(), -1 - i)

    counter = iter(range(total))
    lock = threading.Lock()
    latencies: list[float] = []
    errors = 0

    def worker() -> None:
        nonlocal errors
        while True:
            with lock:
                index = next(counter, None)
            if index is None:
                return
            started = time.perf_counter()
            status = call(session(), index)
            elapsed = time.perf_counter() - started
            with lock:
                latencies.append(elapsed)
                if not 200 <= status < 300:
                    errors += 1

    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return LoadResult(name, total, errors, time.perf_counter() - started, latencies)


def print_table(results: list[LoadResult], concurrency: int) -> None:
    print(f"\nconcurrency {concurrency}, {os.cpu_count()} CPUs")
    header = f"| {'scenario':<44} | {'req/s':>8} | {'p50 ms':>7} | {'p99 ms':>7} | {'errors':>6} | {'SQL/req':>7} |"
    print(header)
    print("|" + "|".join("-" * (len(cell)) for cell in header.split("|")[1:-1]) + "|")
    for r in results:
        queries = f"{r.queries:.1f}" if r.queries is not None else "-"
        print(
            f"| {r.name:<44} | {r.rps:>8.1f} | {r.percentile(0.5):>7.1f} | {r.percentile(0.99):>7.1f} "
            f"| {r.errors:>6} | {queries:>7} |"
        )
