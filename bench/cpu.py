"""Server CPU per request: the user + system time of a gunicorn (its master
and its workers) and of the PostgreSQL backends serving it, read from /proc
before and after a load round.

A server's own figure leaves PostgreSQL's CPU out: that is the separate
``pg`` figure, the backends whose ``application_name`` (libpq's PGAPPNAME,
set per server by the bench) is the server's, found in pg_stat_activity.
The backends are read from /proc, so the PG figure exists only when
PostgreSQL runs on this machine and its /proc is readable (else None).
Backends opened during a round count from zero (their whole life is in the
round); one closed during it is lost (pools and persistent connections keep
them: the warm-up opens them first).
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TICK = 1.0 / os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> tuple[str, int] | None:
    """Command name and utime + stime (clock ticks) of ``pid`` (None: gone or unreadable)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces: fields after its ')' are fixed.
    head, _, tail = stat.rpartition(")")
    fields = tail.split()
    return head.partition("(")[2], int(fields[11]) + int(fields[12])


def _ticks(pid: int) -> int | None:
    found = _stat(pid)
    return found[1] if found else None


def children(pid: int) -> list[int]:
    found: list[int] = []
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError):
                found += [int(child) for child in (task / "children").read_text().split()]
    return found


def tree_seconds(pid: int) -> float:
    """CPU seconds of ``pid`` and its live children (a gunicorn master and its workers)."""
    total = 0
    for each in (pid, *children(pid)):
        total += _ticks(each) or 0
    return total * TICK


@dataclass
class Snapshot:
    server: float
    #: Per backend pid: CPU seconds so far (None: not readable here).
    pg: dict[int, float] | None


class Meter:
    """Reads one gunicorn's CPU and that of its PostgreSQL backends
    (``app_name``) over ``conninfo``'s database."""

    def __init__(self, pid: int, app_name: str, conninfo: dict[str, Any]) -> None:
        self.pid, self.app_name, self.conninfo = pid, app_name, conninfo

    def _backends(self) -> list[int]:
        import psycopg

        params = {k: v for k, v in self.conninfo.items() if v}
        with psycopg.connect(**params, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = %s AND application_name = %s",
                (self.conninfo["dbname"], self.app_name),
            ).fetchall()
        return [int(pid) for (pid,) in rows]

    def snapshot(self) -> Snapshot:
        backends = self._backends()
        pg: dict[int, float] = {}
        for backend in backends:
            found = _stat(backend)
            # A backend that closed since the query is skipped; a pid that is no
            # postgres here means PostgreSQL runs elsewhere (the pid is another host's).
            if found is not None and found[0] == "postgres":
                pg[backend] = found[1] * TICK
        return Snapshot(tree_seconds(self.pid), pg if pg or not backends else None)

    @staticmethod
    def spent(before: Snapshot, after: Snapshot) -> tuple[float, float | None]:
        """Server and PostgreSQL CPU seconds between two snapshots."""
        server = after.server - before.server
        if before.pg is None or after.pg is None:
            return server, None
        return server, sum(seconds - before.pg.get(pid, 0.0) for pid, seconds in after.pg.items())


def conninfo() -> dict[str, Any]:
    """The benchmark database's connection parameters (Django set up on it)."""
    from django.db import connection

    db = connection.settings_dict
    return {
        "host": db.get("HOST") or None,
        "port": db.get("PORT") or None,
        "user": db.get("USER") or None,
        "password": db.get("PASSWORD") or None,
        "dbname": db["NAME"],
    }
