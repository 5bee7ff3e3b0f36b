"""The API figures of ``make bench`` (issue 14): each endpoint loaded by
wrk (native, ``-t2 -c16``) in rounds alternated with the anchor, a bare
Django + DRF app (bench/anchor/) started beside the service on the same
PostgreSQL; each row is a ratio to the anchor measured in the same run, and
carries the server CPU per request of both (bench/cpu.py).

CPU per request is the server's (gunicorn master + workers: Python, the
HTTP parsing, the drivers' client side). PostgreSQL's own CPU is not in it:
it is the separate PG column, the backends serving that server (told apart
by application_name), when PostgreSQL runs on this machine.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from bench import cpu, wrk
from bench.anchor import APP_NAME as ANCHOR_APP_NAME
from bench.anchor import server as anchor_server
from bench.harness import Server, service

#: As the issue's table: two wrk threads, 16 connections.
THREADS = 2
CONNECTIONS = 16
#: Length of one round; a figure is a few rounds alternated with the anchor's.
SECONDS = 8.0
ROUNDS = 3
#: libpq's application_name of the service's connections (as bench/isolation.py's).
SERVICE_APP_NAME = "pix-bench-web"
LEGEND = (
    f"API rows: wrk -t{THREADS} -c{CONNECTIONS} (native load), rounds alternated with the anchor "
    "(bench/anchor/: bare Django + DRF, no middleware, one primary-key read of the same charge row through "
    "the cursor, DRF Response; its own gunicorn, same PostgreSQL); ratio = req/s ÷ anchor req/s of the same "
    "run. CPU = server CPU per request in ms (gunicorn master + workers, utime+stime from /proc); PG = the "
    "CPU of the PostgreSQL backends serving that server, per request (not in CPU). req/s over all rounds, "
    "p50 request-weighted, p99 the worst round. target/met: the figures of issue 14."
)


@dataclass
class ApiResult(wrk.WrkResult):
    """A wrk row with the CPU it cost and its anchor's figures beside it."""

    cpu_seconds: float = 0.0
    #: None: PostgreSQL's backends were not readable from here.
    pg_seconds: float | None = None
    #: Requests the CPU is divided by (see :meth:`Bench.round`).
    cpu_requests: float = 0.0
    anchor: ApiResult | None = None
    #: A second ceiling beside the anchor: the same work on PostgreSQL alone
    #: (pgbench for the hot withdrawal, the listing's SQL alone), in req/s or tx/s.
    db_ceiling: float | None = None
    db_ceiling_note: str = ""

    @property
    def cpu_ms(self) -> float | None:
        # No request finished (a --quick round of a slow scenario): nothing to divide.
        return self.cpu_seconds * 1000 / self.cpu_requests if self.requests else None

    @property
    def pg_ms(self) -> float | None:
        if self.pg_seconds is None or not self.requests:
            return None
        return self.pg_seconds * 1000 / self.cpu_requests

    @property
    def db_ratio(self) -> float | None:
        return self.rps / self.db_ceiling if self.db_ceiling else None


def combine(name: str, parts: Sequence[ApiResult]) -> ApiResult:
    merged = wrk.combine(name, parts)
    pg = [p.pg_seconds for p in parts]
    return ApiResult(
        **{k: getattr(merged, k) for k in merged.__dataclass_fields__},
        cpu_seconds=sum(p.cpu_seconds for p in parts),
        pg_seconds=None if None in pg else sum(p or 0.0 for p in pg),
        cpu_requests=sum(p.cpu_requests for p in parts),
    )


def beside(row: ApiResult, anchor: ApiResult, *, target: float | None = None) -> ApiResult:
    """``row`` with ``anchor`` (rounds of the same run) as its ceiling;
    ``target``: the ratio to the anchor issue 14 holds it to."""
    row.anchor = anchor
    row.ceiling = anchor.rps
    row.ceiling_note = "bench/anchor/, measured in the same run"
    if target is not None:
        row.target = f"ratio ≥ {target}"
        row.passed = row.failed == 0 and (row.ratio or 0.0) >= target
    return row


def settle(pid: int, *, limit: float = 10.0) -> None:
    """Wait until the server stops using CPU: the requests a wrk round left
    in flight are finished before the next round's first reading."""
    deadline = time.monotonic() + limit
    last = cpu.tree_seconds(pid)
    while time.monotonic() < deadline:
        time.sleep(0.15)
        now = cpu.tree_seconds(pid)
        if now - last <= 2 * cpu.TICK:
            return
        last = now


class Bench:
    """The service and the anchor, up at once; :meth:`round` loads one of them."""

    def __init__(self, service: Server, anchor: Server, anchor_ids: Sequence[str], *, seconds: float) -> None:
        info = cpu.conninfo()
        self.servers = {"service": service, "anchor": anchor}
        self.meters = {
            "service": cpu.Meter(service.pid, SERVICE_APP_NAME, info),
            "anchor": cpu.Meter(anchor.pid, ANCHOR_APP_NAME, info),
        }
        self.anchor_rotation = [wrk.Request("GET", f"/anchor/{charge_id}", {}) for charge_id in anchor_ids]
        self.seconds = seconds

    def round(
        self, name: str, rotation: Sequence[wrk.Request], *, target: str = "service", seconds: float | None = None
    ) -> ApiResult:
        """One wrk round on ``target`` cycling through ``rotation``, with the CPU it cost."""
        server, meter = self.servers[target], self.meters[target]
        load = wrk.Load(
            name,
            server.base,
            rotation[0].path,
            rotation[0].headers,
            threads=THREADS,
            connections=CONNECTIONS,
            seconds=seconds or self.seconds,
            rotation=rotation,
        )
        settle(server.pid)
        before = meter.snapshot()
        result = wrk.run(load)
        after = meter.snapshot()
        server_seconds, pg_seconds = cpu.Meter.spent(before, after)
        # The round starts with its connections' first requests and ends with
        # as many in flight, half done on average (wrk counts only the finished
        # ones): without them the slow rows would be overcharged.
        counted = result.requests + CONNECTIONS / 2
        return ApiResult(
            **{k: getattr(result, k) for k in result.__dataclass_fields__},
            cpu_seconds=server_seconds,
            pg_seconds=pg_seconds,
            cpu_requests=counted,
        )

    def anchor_round(self, *, seconds: float | None = None) -> ApiResult:
        return self.round("anchor", self.anchor_rotation, target="anchor", seconds=seconds)

    def warm_up(self, rotations: Sequence[Sequence[wrk.Request]]) -> None:
        """Threads started, pools and connections opened, code paths imported: 1 s of each."""
        self.anchor_round(seconds=1)
        for rotation in rotations:
            self.round("warm-up", rotation, seconds=1)


@contextlib.contextmanager
def servers(env: dict[str, str], anchor_ids: Sequence[str], *, seconds: float = SECONDS) -> Iterator[Bench]:
    """The service as deployed and the anchor in its best shape, both up."""
    with (
        service({**env, "PGAPPNAME": SERVICE_APP_NAME}) as web,
        anchor_server.running(env) as anchor,
    ):
        yield Bench(web, anchor, anchor_ids, seconds=seconds)


def alternate(arms: Sequence[tuple[str, Callable[[], object]]], rounds: int) -> None:
    """Run every arm ``rounds`` times, in order on even rounds and reversed on
    odd ones, so no arm always meets the same neighbour's aftermath."""
    for r in range(rounds):
        for _, arm in arms if r % 2 == 0 else reversed(arms):
            arm()


# --------------------------------------------------------------------------- table


def _ms(value: float | None) -> str:
    return f"{value:.2f}" if value is not None else "-"


def print_table(rows: Sequence[ApiResult], *, header_lines: Sequence[str] = ()) -> None:
    """The API table: every row beside the anchor of its run (and a database ceiling where there is one)."""
    print()
    for line in header_lines:
        print(line)
    print(f"anchor: gunicorn {anchor_server.describe()} (bench/anchor/server.py)")
    width = max([44, *(len(r.name) for r in rows)])
    goal = max([6, *(len(r.target) for r in rows)])
    header = (
        f"| {'scenario':<{width}} | {'req/s':>7} | {'p50 ms':>7} | {'p99 ms':>7} | {'errors':>6} | {'SQL/req':>7} "
        f"| {'CPU ms':>6} | {'PG ms':>5} | {'anchor req/s':>12} | {'anchor CPU':>10} | {'anchor PG':>9} "
        f"| {'ratio':>5} | {'DB alone /s':>11} | {'ratio':>5} | {'target':<{goal}} | {'met':<3} |"
    )
    print(header)
    print("|" + "|".join("-" * len(cell) for cell in header.split("|")[1:-1]) + "|")
    notes: list[str] = []
    for r in rows:
        a = r.anchor
        queries = f"{r.queries:.0f}" if r.queries is not None else "-"
        print(
            f"| {r.name:<{width}} | {r.rps:>7.1f} | {r.percentile(0.5):>7.1f} | {r.percentile(0.99):>7.1f} "
            f"| {r.errors:>6} | {queries:>7} | {_ms(r.cpu_ms):>6} | {_ms(r.pg_ms):>5} "
            f"| {(f'{a.rps:.1f}' if a else '-'):>12} | {_ms(a.cpu_ms if a else None):>10} "
            f"| {_ms(a.pg_ms if a else None):>9} | {(f'{r.ratio:.2f}' if r.ratio is not None else '-'):>5} "
            f"| {(f'{r.db_ceiling:.1f}' if r.db_ceiling else '-'):>11} "
            f"| {(f'{r.db_ratio:.2f}' if r.db_ratio is not None else '-'):>5} "
            f"| {r.target:<{goal}} | {'-' if r.passed is None else ('yes' if r.passed else 'NO'):<3} |"
        )
        if r.db_ceiling_note and r.db_ceiling_note not in notes:
            notes.append(r.db_ceiling_note)
    print(LEGEND)
    for note in notes:
        print(f"DB alone: {note}")


# --------------------------------------------------------------------------- the anchor's shape


def anchor_shapes(env: dict[str, str], *, seconds: float, rounds: int) -> list[tuple[str, ApiResult]]:
    """The anchor in each candidate shape (bench/anchor/server.py, SHAPE),
    one at a time, rounds alternated: how its shape was chosen."""
    from bench.charges import charge_ids, prepare

    ids = charge_ids(prepare())
    rotation = [wrk.Request("GET", f"/anchor/{charge_id}", {}) for charge_id in ids]
    shapes: list[tuple[tuple[int, int], int]] = [((2, 0), 0), ((1, 8), 0), ((2, 4), 0), ((1, 8), 8)]
    results: dict[int, list[ApiResult]] = {n: [] for n in range(len(shapes))}
    info = cpu.conninfo()
    for r in range(rounds):
        for n in range(len(shapes)) if r % 2 == 0 else reversed(range(len(shapes))):
            shape, pool = shapes[n]
            with anchor_server.running(env, shape, pool=pool) as anchor:
                bench = Bench(anchor, anchor, ids, seconds=seconds)
                bench.meters["anchor"] = cpu.Meter(anchor.pid, ANCHOR_APP_NAME, info)
                bench.round("warm-up", rotation, target="anchor", seconds=1)
                results[n].append(bench.round("anchor", rotation, target="anchor"))
    named = []
    for n, (shape, pool) in enumerate(shapes):
        label = anchor_server.describe(shape)
        if pool:
            label = label.split(",")[0] + f", a psycopg pool of {pool} per process"
        named.append((label, combine(label, results[n])))
    return named


def main(argv: Sequence[str] | None = None) -> None:
    import argparse

    from bench.harness import bench_env, machine_lines, setup_django

    parser = argparse.ArgumentParser(description="The anchor's gunicorn shapes compared (wrk -t2 -c16).")
    parser.add_argument("--seconds", type=float, default=SECONDS)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--engines", choices=["auto", "machine", "embedded"], default="auto")
    args = parser.parse_args(argv)
    env = bench_env(engines=args.engines)
    setup_django(env)
    rows = anchor_shapes(env, seconds=args.seconds, rounds=args.rounds)
    for line in machine_lines():
        print(line)
    print("| anchor shape | req/s | p50 ms | p99 ms | errors | CPU ms/req | PG ms/req |")
    print("|---|---|---|---|---|---|---|")
    for label, r in rows:
        print(
            f"| {label} | {r.rps:.1f} | {r.percentile(0.5):.1f} | {r.percentile(0.99):.1f} | {r.errors} "
            f"| {_ms(r.cpu_ms)} | {_ms(r.pg_ms)} |"
        )


if __name__ == "__main__":
    main()
