"""Isolation benchmarks (issue 13, "Figures"): a slow acquirer must not stall
anyone else, and waiting on it must cost no scarce resource. Load from wrk
(bench/wrk.py), a native client, so it does not steal the CPU it measures;
the acquirers are ``bacen_pix`` ones at a PSP in a process of its own
(bench/psp.py) answering at once or after 300 ms / 2 s.

    .venv/bin/python -m bench.isolation [--seconds 8] [--workers N] [--threads N] [--quick] [--engines auto]

1. ``POST /api/transactions`` at concurrency 64 on an acquirer answering in
   300 ms vs one answering at once, rounds alternated (instant, slow,
   instant, slow): target ≥ 0.9 of the instant throughput, no failed request.
   When the instant throughput is above what 64 connections can send through
   a 300 ms wait (64 / 0.3 s = 213 req/s), the anchor is that bound instead
   (:func:`slow_anchor`): past it the ratio measures wrk's closed loop.
2. An acquirer answering in 2 s, concurrency 64: no failed request, p99 ≤ its
   deadline + 1 s; meanwhile another account on an instant acquirer, with a
   paced load (``OTHER_CONNECTIONS`` connections, each pausing
   ``OTHER_THINK_MS`` between requests: an ordinary merchant, not one
   saturating the CPU, whose share two accounts would split whatever the
   isolation) keeps ≥ 0.9 of the throughput it has alone (alone, both at
   once with two wrk processes, alone again).
3. PostgreSQL connections of the service (``pg_stat_activity`` of the bench
   database, sampled every 0.2 s) at most, per row, beside the bound:
   DB_POOL_MAX_SIZE x web processes.

The server is gunicorn with ``config/gunicorn.conf.py``; WEB_WORKERS /
WEB_THREADS (or ``--workers`` / ``--threads``) change its shape to compare
serving models; the shape is printed with the table.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import requests

from bench import hanging, psp, wrk
from bench.charges import BODY
from bench.harness import bench_env, drop_queue, gunicorn, gunicorn_shape, machine_lines, setup_django

CONNECTIONS = 64
#: Every acquirer of these scenarios: 1 s to connect + 3 s to read = a 4 s deadline.
CONNECT_TIMEOUT_MS = 1000
READ_TIMEOUT_MS = 3000
DEADLINE = (CONNECT_TIMEOUT_MS + READ_TIMEOUT_MS) / 1000
#: The slow acquirer of the first scenario answers after this many ms.
SLOW_MS = 300
OTHER_CONNECTIONS = 8
OTHER_THINK_MS = 250
#: libpq's application_name of each benchmarked process: how the sampler tells them apart.
WEB_APP_NAME = "pix-bench-web"
SECRET_ENV = "BENCH_ISOLATION_PSP_SECRET"  # noqa: S105 - a variable's name
TARGET_RATIO = 0.9
LEGEND = (
    "isolation: wrk (native) as the load, acquirers bacen_pix at a PSP in its own process (bench/psp.py); "
    "anchor = the same account or endpoint on an instant acquirer in the same run; rows of several rounds: "
    "req/s over all rounds, p50 request-weighted, p99 the worst round; "
    f"PG = the service's PostgreSQL connections at most (sampled every 0.2 s); acquirer deadline {DEADLINE:.0f} s"
)


# --------------------------------------------------------------------------- setup


def prepare(server: psp.Psp) -> dict[str, dict[str, str]]:
    """One account per acquirer (instant, 300 ms, 2 s), each with only that
    acquirer in its chain; returns each account's API key headers."""
    from accounts.models import Account
    from accounts.services import account_create, credential_issue
    from acquirers.models import AcquirerSlot
    from acquirers.services import acquirer_grants_set, acquirer_slots_set, acquirer_upsert

    headers: dict[str, dict[str, str]] = {}
    for delay in (0, SLOW_MS, 2000):
        acquirer, _ = acquirer_upsert(
            key=f"bench_iso_{delay}ms",
            name=f"Bench PSP {delay} ms",
            adapter="bacen_pix",
            options=server.options(delay),
            default_priority=None,
            connect_timeout_ms=CONNECT_TIMEOUT_MS,
            read_timeout_ms=READ_TIMEOUT_MS,
            enabled=True,
        )
        ref = f"bench-iso-{delay}ms"
        account = Account.objects.filter(ref=ref).first() or account_create(
            name=f"Bench Isolation {delay} ms", ref=ref, status=Account.Status.APPROVED, cashin_fee_bps=199
        )
        acquirer_grants_set(account=account, acquirers=[acquirer])
        acquirer_slots_set(account=account, purpose=AcquirerSlot.Purpose.CASHIN, acquirers=[acquirer])
        issued = credential_issue(account=account, label="bench-isolation")
        headers[f"{delay}ms"] = {"X-Public-Key": issued.credential.public_key, "X-Secret-Key": issued.secret_key}
    return headers


def reset_breakers() -> None:
    """A round starts with every circuit closed: one round's failures must not fail the next."""
    from acquirers import breaker
    from acquirers.models import Acquirer

    for acquirer in Acquirer.objects.filter(key__startswith="bench_iso_"):
        breaker.reset(acquirer)


class PgSampler:
    """Connections to the bench database opened by the benchmarked processes
    (told apart by their libpq application_name), every 0.2 s from a thread."""

    def __init__(self, names: Sequence[str]) -> None:
        from django.db import connection

        db = connection.settings_dict
        self.params = {
            "host": db.get("HOST") or None,
            "port": db.get("PORT") or None,
            "user": db.get("USER") or None,
            "password": db.get("PASSWORD") or None,
            "dbname": db["NAME"],
        }
        self.names = list(names)
        self.peak = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _sample(self) -> None:
        import psycopg

        with psycopg.connect(**{k: v for k, v in self.params.items() if v}, autocommit=True) as conn:
            while not self._stop.is_set():
                row = conn.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND application_name = ANY(%s)",
                    (self.params["dbname"], self.names),
                ).fetchone()
                self.peak = max(self.peak, int(row[0]) if row else 0)
                self._stop.wait(0.2)

    @contextlib.contextmanager
    def sampling(self) -> Iterator[PgSampler]:
        self.peak = 0
        self._stop.clear()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            self._thread.join(timeout=5)


def drain(base: str, *, timeout: float = 120.0) -> None:
    """Wait until the server has finished what the last wrk left in flight
    (wrk hangs up at its end; the server still runs those requests): the
    health check answers quickly twice in a row."""
    deadline = time.monotonic() + timeout
    quick = 0
    while quick < 2 and time.monotonic() < deadline:
        began = time.monotonic()
        try:
            ok = requests.get(f"{base}/api/health", timeout=30).status_code == 200
        except requests.RequestException:
            ok = False
        quick = quick + 1 if ok and time.monotonic() - began < 0.25 else 0
        time.sleep(0.3)


# --------------------------------------------------------------------------- rounds


combine = wrk.combine


class Bench:
    def __init__(self, base: str, headers: dict[str, dict[str, str]], sampler: PgSampler, seconds: float) -> None:
        self.base, self.headers, self.sampler, self.seconds = base, headers, sampler, seconds

    def load(self, name: str, account: str, **overrides: float) -> wrk.Load:
        load = wrk.Load(
            name,
            self.base,
            "/api/transactions",
            {**self.headers[account], "Content-Type": "application/json", "Accept": "application/json"},
            wrk.json_body(BODY),
            connections=CONNECTIONS,
            seconds=self.seconds,
            # A failed row says how: refused as busy, timed out at the acquirer, ...
            count_failures=True,
        )
        for key, value in overrides.items():
            setattr(load, key, int(value) if key in ("connections", "threads", "think_ms") else value)
        return load

    def measure(self, *loads: wrk.Load, lead: float = 0.0) -> list[wrk.WrkResult]:
        """Run ``loads`` at once (each after ``lead`` seconds more than the one
        before), sampling PostgreSQL meanwhile; then let the server drain."""
        reset_breakers()
        started: list[tuple[subprocess.Popen[str], Path]] = []
        try:
            with self.sampler.sampling() as sampler:
                for n, load in enumerate(loads):
                    if n:
                        time.sleep(lead)
                    started.append(wrk.start(load))
                results = [wrk.finish(load, handle) for load, handle in zip(loads, started, strict=True)]
        finally:
            for process, _ in started:  # a wrk left running by a failure above
                if process.poll() is None:
                    process.kill()
                    process.wait()
        for result in results:
            result.pg_connections = sampler.peak
        drain(self.base)
        return results


def scenario_slow_vs_instant(bench: Bench) -> list[wrk.WrkResult]:
    instant: list[wrk.WrkResult] = []
    slow: list[wrk.WrkResult] = []
    for _ in range(2):
        instant += bench.measure(bench.load("instant", "0ms"))
        slow += bench.measure(bench.load(f"{SLOW_MS} ms", f"{SLOW_MS}ms"))
    anchor = combine(f"POST /api/transactions, instant acquirer, c{CONNECTIONS}", instant)
    anchor.target, anchor.passed = "0 failed", anchor.failed == 0
    row = combine(f"POST /api/transactions, acquirer at {SLOW_MS} ms, c{CONNECTIONS}", slow)
    row.ceiling, row.ceiling_note = slow_anchor(anchor.rps, SLOW_MS / 1000)
    row.target = f"ratio ≥ {TARGET_RATIO}, 0 failed"
    row.passed = row.failed == 0 and (row.ratio or 0.0) >= TARGET_RATIO
    return [anchor, row]


def slow_anchor(instant_rps: float, delay_s: float) -> tuple[float, str]:
    """What the slow row is measured against: the instant throughput, unless
    the load itself cannot reach it. wrk keeps ``CONNECTIONS`` requests in
    flight and each waits at least ``delay_s`` on the acquirer, so it can send
    at most CONNECTIONS / delay_s a second (Little's law) however well the
    service isolates the wait: above that a ratio to the instant figure would
    measure the load generator, not the service."""
    bound = CONNECTIONS / delay_s
    if instant_rps <= bound:
        return instant_rps, "the same POST on an instant acquirer, rounds alternated"
    return bound, (
        f"{CONNECTIONS} connections / {delay_s * 1000:.0f} ms = {bound:.0f} req/s, what the load can send; "
        f"the instant acquirer's {instant_rps:.0f} req/s is above it"
    )


def scenario_two_seconds(bench: Bench) -> list[wrk.WrkResult]:
    paced = {"connections": OTHER_CONNECTIONS, "think_ms": OTHER_THINK_MS}
    alone = bench.measure(bench.load("alone", "0ms", **paced))
    # The 2 s load starts first and fills its 64 connections before the other account's begins.
    lead = 3.0
    slow, beside = bench.measure(
        bench.load("2 s", "2000ms", seconds=bench.seconds + lead + 1), bench.load("beside", "0ms", **paced), lead=lead
    )
    alone += bench.measure(bench.load("alone", "0ms", **paced))
    limit = DEADLINE + 1
    slow_row = combine(f"POST /api/transactions, acquirer at 2 s, c{CONNECTIONS}", [slow])
    slow_row.target = f"0 failed, p99 ≤ {limit * 1000:.0f} ms"
    slow_row.passed = slow_row.failed == 0 and 0 < slow_row.percentile(0.99) <= limit * 1000
    label = f"c{OTHER_CONNECTIONS}, {OTHER_THINK_MS} ms pause"
    anchor = combine(f"other account, instant acquirer, alone ({label})", alone)
    anchor.target, anchor.passed = "0 failed", anchor.failed == 0
    row = combine(f"other account, instant acquirer, beside the 2 s one ({label})", [beside])
    row.ceiling = anchor.rps
    row.ceiling_note = "the other account alone, before and after"
    row.target = f"ratio ≥ {TARGET_RATIO}, 0 failed"
    row.passed = row.failed == 0 and (row.ratio or 0.0) >= TARGET_RATIO
    return [slow_row, anchor, row]


def pool_bound(env: dict[str, str]) -> tuple[int, int]:
    """The documented bound on the service's PostgreSQL connections here."""
    import runpy

    from django.conf import settings

    conf = runpy.run_path(str(Path(__file__).resolve().parent.parent / "config" / "gunicorn.conf.py"))
    workers = int(env.get("WEB_WORKERS") or env.get("WEB_CONCURRENCY") or conf["workers"])
    pool = int(env.get("DB_POOL_MAX_SIZE") or settings.DB_POOL_MAX_SIZE)
    return pool * workers, workers


def _timed(name: str, scenario: Callable[[], list[wrk.WrkResult]]) -> list[wrk.WrkResult]:
    began = time.monotonic()
    rows = scenario()
    print(f"  isolation, {name}: {time.monotonic() - began:.0f} s", flush=True)
    return rows


def run(env: dict[str, str], *, seconds: float = 8.0, payouts: bool = True) -> list[wrk.WrkResult]:
    """Every isolation row (see the module docstring), one gunicorn as
    deployed; then (``payouts``) bench/hanging.py's rows, on two Celery workers."""
    wrk.binary()  # fail now, not after the set-up, when wrk is missing
    env = {**env, "PGAPPNAME": WEB_APP_NAME}
    bound, workers = pool_bound(env)
    with (
        tempfile.TemporaryDirectory(prefix="bench-isolation-") as folder,
        psp.running(Path(folder), env, SECRET_ENV) as server,
    ):
        headers = prepare(server)
        sampler = PgSampler([WEB_APP_NAME])
        with gunicorn(env) as base:
            bench = Bench(base, headers, sampler, seconds)
            # Warm-up: threads started, the PSP's token fetched, TLS sessions up.
            for account in ("0ms", f"{SLOW_MS}ms", "2000ms"):
                bench.measure(bench.load("warm-up", account, seconds=1, connections=8))
            rows = _timed(f"{SLOW_MS} ms vs instant", lambda: scenario_slow_vs_instant(bench))
            rows += _timed("2 s beside another account", lambda: scenario_two_seconds(bench))
    drop_queue()
    for row in rows:
        row.pg_bound = bound
    if payouts:
        pool = bound // max(1, workers)
        rows += _timed(
            "payouts beside hanging receivers", lambda: hanging.run(PgSampler([hanging.WORKER_APP_NAME]), pool)
        )
    return rows


# --------------------------------------------------------------------------- table


def print_rows(rows: Sequence[wrk.WrkResult], *, header_lines: Sequence[str] = ()) -> None:
    """The isolation table, in the harness's style, each row beside its anchor and target."""
    print()
    for line in header_lines:
        print(line)
    print(f"gunicorn {gunicorn_shape()} (config/gunicorn.conf.py; WEB_WORKERS/WEB_THREADS change it)")
    bound, workers = pool_bound(dict(os.environ))
    print(
        f"PG bound: DB_POOL_MAX_SIZE {bound // workers} x {workers} web process(es) for the POST rows, "
        f"x 2 Celery worker processes for the payout rows"
    )
    width = max([44, *(len(r.name) for r in rows)])
    header = (
        f"| {'scenario':<{width}} | {'req/s':>7} | {'p50 ms':>7} | {'p99 ms':>7} | {'non-2xx':>7} | {'sock err':>8} "
        f"| {'PG max':>6} | {'PG bound':>8} | {'anchor req/s':>12} | {'ratio':>5} | {'target':<26} | {'met':<3} |"
    )
    print(header)
    print("|" + "|".join("-" * len(cell) for cell in header.split("|")[1:-1]) + "|")
    for r in rows:
        anchor = f"{r.ceiling:.1f}" if r.ceiling else "-"
        ratio = f"{r.ratio:.2f}" if r.ratio is not None else "-"
        sock = sum(r.socket_errors.values())
        pg = str(r.pg_connections) if r.pg_connections is not None else "-"
        pg_bound = str(r.pg_bound) if r.pg_bound is not None else "-"
        met = "-" if r.passed is None else ("yes" if r.passed else "NO")
        print(
            f"| {r.name:<{width}} | {r.rps:>7.1f} | {r.percentile(0.5):>7.1f} | {r.percentile(0.99):>7.1f} "
            f"| {r.non_2xx:>7} | {sock:>8} | {pg:>6} | {pg_bound:>8} | {anchor:>12} | {ratio:>5} "
            f"| {r.target:<26} | {met:<3} |"
        )
    print(LEGEND)
    for note in dict.fromkeys(r.ceiling_note for r in rows if r.ceiling_note):
        print(f"anchor: {note}")
    for r in rows:
        for failure, count in sorted(r.failures.items(), key=lambda item: -item[1]):
            print(f"non-2xx of {r.name}: {count} x {failure}")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=8.0, help="length of each wrk round")
    parser.add_argument("--quick", action="store_true", help="4 s rounds: a smoke run, not figures")
    parser.add_argument("--workers", type=int, help="gunicorn processes (WEB_WORKERS)")
    parser.add_argument("--threads", type=int, help="threads per process (WEB_THREADS)")
    parser.add_argument("--no-payouts", action="store_true", help="skip the hanging-receivers scenario")
    parser.add_argument("--engines", choices=["auto", "machine", "embedded"], default="auto")
    args = parser.parse_args(argv)
    if args.workers:
        os.environ["WEB_WORKERS"] = str(args.workers)
    if args.threads:
        os.environ["WEB_THREADS"] = str(args.threads)

    started = time.monotonic()
    env = bench_env(engines=args.engines)
    setup_django(env)
    rows = run(env, seconds=4.0 if args.quick else args.seconds, payouts=not args.no_payouts)
    print_rows(rows, header_lines=machine_lines())
    print(f"total {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
