"""The service as deployed, for the soak: every process of the Procfile
(gunicorn, each Celery worker, beat) started from its own line, on a
database of the soak's own and on a private redis-server that the faults
may restart."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import requests

from bench.harness import ROOT, _create_database_on
from tests.realworld import free_port, wait_for

PROCFILE = ROOT / "Procfile"
#: What the soak changes in the deployed configuration, and why.
SOAK_SETTINGS = {
    "DJANGO_SETTINGS_MODULE": "config.settings.local",
    "DEBUG": "false",
    # The sandbox acquirer and the /api/sandbox/* drivers are the traffic's acquirers.
    "PIX_SANDBOX": "true",
    # The receiver is on loopback.
    "WEBHOOKS_ALLOW_PRIVATE_NETWORKS": "true",
    # Far above what the soak sends: a 429 would only hide the answers under test.
    "API_RATE_LIMIT_PER_MINUTE": str(10**9),
    # Retries that outlast any receiver fault of the schedule (about 3 min in
    # all) yet converge within the run; a hanging receiver is cut at 5 s.
    "WEBHOOK_RETRY_SCHEDULE": "0,2,4,8,15,20,30,30,30,30",
    "WEBHOOK_CONNECT_TIMEOUT": "1",
    "WEBHOOK_TIMEOUT": "5",
    # What a broker outage left unsent is relayed within seconds.
    "WEBHOOK_RELAY_INTERVAL": "2",
    "WEBHOOK_RELAY_GRACE": "2",
    "LOG_LEVEL": "INFO",
}


@dataclass
class Redis:
    """A private redis-server on a loopback port. Unlike the tests' empty
    restart (tests/faults/test_redis_outage.py), it persists (AOF, fsync
    always) and is stopped with SIGTERM, so a restart keeps the queues and
    the sandbox acquirer's memory of the payouts it made: a real acquirer
    does not forget a transfer because our broker restarted."""

    directory: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def answers(self) -> bool:
        import redis

        try:
            client = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=1, socket_connect_timeout=1)
            return bool(client.ping())
        except redis.RedisError:
            return False

    def start(self) -> None:
        from dev.embedded import _redis_binary

        binary = Path("/usr/bin/redis-server")
        binary = binary if binary.exists() else _redis_binary()
        with open(self.directory / "redis.log", "ab") as log:
            self.process = subprocess.Popen(
                [
                    str(binary), "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                    "--appendonly", "yes", "--appendfsync", "always", "--dir", str(self.directory),
                ],
                stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip
        wait_for(lambda: self.answers() or self.process is None or self.process.poll() is not None, timeout=30)
        if not self.answers():
            raise RuntimeError(f"redis-server did not start on {self.port}; see {self.directory / 'redis.log'}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=20)
        self.process = None


def soak_env(redis_url: str) -> dict[str, str]:
    """The environment of every process: the database is DATABASE_URL's
    server with ``_soak`` appended to its name, else ``pix_soak`` on the
    embedded PostgreSQL; the broker and cache are the private Redis."""
    env = {**os.environ, **SOAK_SETTINGS, "REDIS_URL": redis_url}
    env.pop("CELERY_BROKER_URL", None)
    database_url = os.environ.get("DATABASE_URL", "")
    if database_url:
        base, _, name = database_url.rpartition("/")
        name = name.split("?")[0].removesuffix("_soak") + "_soak"
        _create_database_on(base + "/postgres", name)
        env["DATABASE_URL"] = f"{base}/{name}"
        env.pop("PIX_EMBEDDED_DB_NAME", None)
    else:
        env["PIX_EMBEDDED_DB_NAME"] = "pix_soak"
    env.pop("PIX_DATABASE_NAME", None)
    return env


@dataclass
class Process:
    name: str
    command: str
    process: subprocess.Popen[bytes]
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def children(self) -> list[int]:
        """The pool's child processes (prefork); none for a threads pool."""
        path = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children")
        with contextlib.suppress(OSError):
            return [int(pid) for pid in path.read_text().split()]
        return []

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=20)


def procfile() -> dict[str, str]:
    """``name: command`` lines of the Procfile, in order."""
    entries: dict[str, str] = {}
    for line in PROCFILE.read_text().splitlines():
        match = re.fullmatch(r"([A-Za-z0-9_-]+):\s*(.+)", line.strip())
        if match:
            entries[match.group(1)] = match.group(2)
    return entries


def consumed_queues(command: str, env: dict[str, str]) -> set[str]:
    """The queues a Procfile worker line consumes (``-Q`` expanded by the shell)."""
    match = re.search(r"-Q\s+(\S+)", command)
    if not match:
        return set()
    expanded = subprocess.run(
        ["bash", "-c", f"echo {match.group(1)}"], env=env, capture_output=True, text=True, check=True
    ).stdout.strip()
    return set(expanded.split(","))


def required_queues() -> set[str]:
    """Every queue the settings route tasks to: the default, webhooks, and
    any other ``*_QUEUE`` setting (the payouts queue when it exists)."""
    from django.conf import settings

    queues = {settings.CELERY_TASK_DEFAULT_QUEUE}
    queues |= {str(getattr(settings, name)) for name in dir(settings) if name.endswith("_QUEUE") and name.isupper()}
    queues |= {str(route["queue"]) for route in settings.CELERY_TASK_ROUTES.values() if "queue" in route}
    return queues


@dataclass
class Service:
    base: str
    processes: dict[str, Process]
    env: dict[str, str]
    logs: Path
    #: (monotonic time, what died and how): the supervisor restarted it.
    restarts: list[tuple[float, str]] = field(default_factory=list)

    def workers(self) -> list[Process]:
        return [p for p in self.processes.values() if " worker " in f" {p.command} "]

    def supervise(self, stop: threading.Event) -> None:
        """Compose runs every process with ``restart: unless-stopped``: so
        does the soak, so the run goes on, but it keeps the list: a process
        that dies on a fault fails the run ("no process exited"), since under
        ``make run`` (honcho) one exit stops the whole stack."""
        while not stop.wait(1.0):
            for name, process in list(self.processes.items()):
                code = process.process.poll()
                if code is not None:
                    lines = process.output().splitlines()
                    why = [line for line in lines if "Unrecoverable" in line] or [
                        line for line in lines if "Error" in line
                    ]
                    last = f": {why[-1].strip()[:300]}" if why else ""
                    self.restarts.append((time.monotonic(), f"{name} exited with {code}{last}"))
                    self.processes[name] = _spawn(name, process.command, self.env, self.logs)


def _spawn(name: str, command: str, env: dict[str, str], logs: Path) -> Process:
    log = logs / f"{name}.log"
    with open(log, "ab") as out:
        process = subprocess.Popen(
            ["bash", "-c", f"exec {command}"], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT
        )
    return Process(name, command, process, log)


@contextlib.contextmanager
def deployed(env: dict[str, str], logs: Path) -> Iterator[Service]:
    """Every Procfile process, as ``make run`` starts them (honcho runs the
    same lines); beat keeps its schedule file in ``logs``. Fails at once if
    a queue the settings route to has no worker in the Procfile."""
    port = free_port()
    env = {**env, "WEB_PORT": str(port), "HOST": "127.0.0.1"}
    entries = procfile()
    consumed: set[str] = set()
    for command in entries.values():
        consumed |= consumed_queues(command, env)
    missing = required_queues() - consumed
    if missing:
        raise RuntimeError(f"no Procfile worker consumes {sorted(missing)}")
    service = Service(f"http://127.0.0.1:{port}", {}, env, logs)
    stop = threading.Event()
    supervisor = threading.Thread(target=service.supervise, args=(stop,), name="supervisor")
    try:
        for name, command in entries.items():
            if " beat" in command:
                command += f" -s {logs / 'celerybeat-schedule'}"
            service.processes[name] = _spawn(name, command, env, logs)
        _wait_started(service)
        supervisor.start()
        yield service
    finally:
        stop.set()
        if supervisor.is_alive():
            supervisor.join()
        for process in service.processes.values():
            process.stop()


def _wait_started(service: Service) -> None:
    def web_up() -> bool:
        with contextlib.suppress(requests.RequestException):
            return requests.get(f"{service.base}/api/health", timeout=2).status_code == 200
        return False

    def all_up() -> bool:
        for process in service.processes.values():
            if process.process.poll() is not None:
                raise RuntimeError(f"{process.name} exited:\n{process.output()[-4000:]}")
        workers_ready = all("ready." in worker.output() for worker in service.workers())
        return workers_ready and web_up()

    wait_for(all_up, timeout=120, interval=0.5)


def kill_pool_child(service: Service, index: int) -> str:
    """SIGKILL one pool child of a prefork worker (the OOM killer's way):
    the task it ran is neither acknowledged nor finished."""
    children = [(worker, pid) for worker in service.workers() for pid in worker.children()]
    if not children:
        return "no prefork pool child to kill"
    worker, pid = children[index % len(children)]
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    return f"SIGKILLed pool child {pid} of {worker.name}"


def health(base: str, timeout: float = 90.0) -> tuple[bool, str]:
    """Liveness, then readiness (database, broker, a worker's heartbeat), polled."""
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        try:
            live = requests.get(f"{base}/api/health", timeout=5)
            ready = requests.get(f"{base}/api/health/ready", timeout=5)
            last = f"health {live.status_code}, ready {ready.status_code} {ready.text[:200]}"
            if live.status_code == 200 and ready.status_code == 200:
                return True, last
        except requests.RequestException as exc:
            last = f"{type(exc).__name__}: {exc}"
        time.sleep(1)
    return False, last
