"""The anchor under gunicorn in its best shape, beside the service, on the
same PostgreSQL (the bench database of ``env``).

Shape (SHAPE), measured once with ``python -m bench.measure`` (wrk -t2 -c16,
GET /anchor/<id> over 200 charge ids, 2 rounds of 8 s per shape, alternated,
one shape up at a time), 2026-11-25 on the 2 shared CPUs with the load
average at 2-6 (others measuring beside):

    shape                                              req/s  p50 ms  p99 ms  CPU ms/req  PG ms/req
    2 sync workers, a persistent connection each       819.7    18.0    39.9        1.24       0.20
    1 x 8 gthread, a persistent connection per thread  646.8    23.6    56.6        1.33       0.27
    2 x 4 gthread, a persistent connection per thread  682.8    22.0   289.6        1.55       0.26
    1 x 8 gthread, a psycopg pool of 8                 563.6    27.5    65.5        1.53       0.28

2 sync workers win on every figure: a request that never waits long needs no
threads, and sync workers pay no thread hand-off or GIL switching; a pool
costs a checkout and a return per request that a persistent connection does not.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path

from bench.anchor import APP_NAME
from bench.harness import Server, serve

#: (workers, threads): threads == 0 runs the sync worker class.
SHAPE = (2, 0)
#: Any valid id: the anchor answers 404 without a row, which proves Django and the database answer.
HEALTH_PATH = "/anchor/00000000-0000-0000-0000-000000000000"


@contextlib.contextmanager
def running(env: dict[str, str], shape: tuple[int, int] = SHAPE, *, pool: int = 0) -> Iterator[Server]:
    """The anchor's gunicorn on a free port; ``pool`` > 0 gives each
    process a psycopg pool of that size instead of persistent connections."""
    workers, threads = shape
    command = [
        str(Path(sys.executable).parent / "gunicorn"),
        "bench.anchor.wsgi:application",
        "--workers", str(workers),
        "--log-level", "warning",
        # As the service's config: the heartbeat file in memory.
        "--worker-tmp-dir", "/dev/shm" if Path("/dev/shm").is_dir() else "/tmp",  # noqa: S108
    ]  # fmt: skip
    if threads:
        command += ["--worker-class", "gthread", "--threads", str(threads)]
    else:
        command += ["--worker-class", "sync"]
    anchor_env = {**env, "DJANGO_SETTINGS_MODULE": "bench.anchor.settings", "PGAPPNAME": APP_NAME}
    anchor_env["ANCHOR_DB_POOL"] = str(pool)
    anchor_env["ANCHOR_DATABASE"] = json.dumps(database())
    with serve(command, anchor_env, HEALTH_PATH, ready=404) as server:
        yield server


def database() -> dict[str, str]:
    """The service's database as this (bench) process's Django reaches it:
    the anchor reads the same one, embedded engines included."""
    from django.db import connection

    db = connection.settings_dict
    return {key: str(db.get(key) or "") for key in ("NAME", "USER", "PASSWORD", "HOST", "PORT")}


def describe(shape: tuple[int, int] = SHAPE) -> str:
    workers, threads = shape
    if threads:
        return f"{workers} x {threads} gthread, a persistent connection per thread"
    return f"{workers} sync workers, a persistent connection each"
