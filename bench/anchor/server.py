"""The anchor under gunicorn in its best shape, beside the service, on the
same PostgreSQL (the bench database of ``env``).

Shape (SHAPE): measured once with wrk -t2 -c16, 8 s each, GET /anchor/<id>
over 200 charge ids, alternated, on the 2 shared CPUs beside nothing else of
ours (2026-11-25; see /work/wt/notes-hb.md for the run):

    2 sync workers, one persistent connection each      SEE NOTES
    1 x 8 gthread, a persistent connection per thread   SEE NOTES
    2 x 4 gthread, a persistent connection per thread   SEE NOTES

"""

from __future__ import annotations

import contextlib
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
    with serve(command, anchor_env, HEALTH_PATH, ready=404) as server:
        yield server


def url(server: Server, charge_id: str) -> str:
    return f"{server.base}/anchor/{charge_id}"


def describe(shape: tuple[int, int] = SHAPE) -> str:
    workers, threads = shape
    kind = f"{workers} x {threads} gthread" if threads else f"{workers} sync workers"
    return f"{kind}, a persistent connection per thread (bench/anchor/server.py)"
