"""``python -m bench`` (``make bench``): every scenario against the service
as deployed, each figure beside its ceiling measured in the same run,
bounded in time. The API rows (charges, withdrawals, listing) are loaded by
wrk and are ratios to the anchor, a bare Django + DRF app started beside the
service (bench/anchor/, bench/measure.py), with the server CPU per request of both.

    .venv/bin/python -m bench [--engines auto|machine|embedded]
                              [--only charges,withdrawals,listing,webhooks,isolation,due_batches,payout_batches]
                              [--quick] [--budget SECONDS]

Engines: DATABASE_URL/REDIS_URL when set; else the machine's PostgreSQL and
Redis on 127.0.0.1 when both answer; else the embedded ones (see
bench/harness.py). The database is always a benchmark one (``pix_bench`` or
``<db>_bench``). Each scenario also runs alone: ``python -m bench.charges``.
The isolation scenarios (``bench/isolation.py``) print a table of their
own, each row beside its anchor and target; the webhook deliveries, whose
load is Celery's and not HTTP, stay on the Python closed loop.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from typing import Any

from bench import charges, due_batches, isolation, measure, payout_batches, webhooks, withdrawals, wrk
from bench.harness import LoadResult, bench_env, machine_lines, print_table, setup_django, use_engines

#: Of the webhook deliveries' closed loop (the API rows use wrk, bench/measure.py).
CONCURRENCY = 8
#: Seconds the whole run should stay under (make bench on 2 CPUs: about 8
#: minutes with the listing fixture already built); a scenario that would
#: start after it is skipped and named under the table.
BUDGET = 540.0


def listing_rows(env: dict[str, str], *, quick: bool) -> list[LoadResult]:
    """bench/listing.py's rows (imported late: its fixture is the only optional part)."""
    module: Any = importlib.import_module("bench.listing")
    result = module.run(env, quick=quick)
    if not isinstance(result, list) or not all(isinstance(row, LoadResult) for row in result):
        raise TypeError(f"bench.listing returned {type(result).__name__}, not a list of LoadResult")
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--engines", choices=["auto", "machine", "embedded"], default="auto")
    parser.add_argument("--only", default="", help="comma-separated scenario names")
    parser.add_argument("--quick", action="store_true", help="a third of the load: a smoke run, not figures")
    parser.add_argument("--budget", type=float, default=BUDGET, help="seconds; later scenarios are skipped past it")
    args = parser.parse_args(argv)

    started = time.monotonic()
    # Others' work on a shared machine shows here first: printed with the table.
    load_before = " ".join(f"{x:.2f}" for x in os.getloadavg())
    chosen = use_engines(args.engines)
    env = bench_env()
    print(f"engines: {chosen} (--engines {args.engines}); preparing the benchmark database ...", flush=True)
    setup_django(env)

    scale = 3 if args.quick else 1
    scenarios: list[tuple[str, Callable[[], Sequence[LoadResult]]]] = [
        ("charges", lambda: charges.run(env, seconds=measure.SECONDS / scale)),
        ("withdrawals", lambda: withdrawals.run(env, seconds=measure.SECONDS / scale)),
        ("listing", lambda: listing_rows(env, quick=args.quick)),
        ("webhooks", lambda: webhooks.run(env, events=500 // scale, concurrency=CONCURRENCY)),
        ("isolation", lambda: list(isolation.run(env, seconds=8.0 / scale))),
        ("due_batches", lambda: due_batches.run(env, items=1000 // scale)),
        ("payout_batches", lambda: payout_batches.run(env, items=1000 // scale)),
    ]
    wanted = {name.strip() for name in args.only.split(",") if name.strip()}
    rows: list[LoadResult] = []
    notes: list[str] = []
    failed = False
    for name, scenario in scenarios:
        if wanted and name not in wanted:
            continue
        if name == "listing" and importlib.util.find_spec("bench.listing") is None:
            notes.append("listing: skipped (bench/listing.py not present)")
            continue
        if time.monotonic() - started > args.budget:
            notes.append(f"{name}: skipped (past the {args.budget:.0f} s budget)")
            continue
        began = time.monotonic()
        print(f"{name} ...", flush=True)
        try:
            rows += scenario()
        except wrk.WrkMissing as missing:
            notes.append(f"{name}: skipped ({missing})")
            continue
        except Exception:  # noqa: BLE001 - one broken scenario must not hide the others' figures
            failed = True
            traceback.print_exc()
            notes.append(f"{name}: FAILED (trace above)")
        else:
            notes.append(f"{name}: {time.monotonic() - began:.0f} s")

    # The API rows (wrk beside the anchor), the isolation rows (wrk, concurrency
    # 64, anchors and targets) and the webhook deliveries each have a table.
    api = [row for row in rows if isinstance(row, measure.ApiResult)]
    isolated = [row for row in rows if isinstance(row, wrk.WrkResult) and not isinstance(row, measure.ApiResult)]
    closed_loop = [row for row in rows if not isinstance(row, wrk.WrkResult)]
    header = [*machine_lines(), f"load average before the run: {load_before}"]
    if api:
        measure.print_table(api, header_lines=header)
        header = []
    if closed_loop:
        print_table(closed_loop, CONCURRENCY, header_lines=header)
        header = []
    if any(row.name.startswith("webhook") for row in closed_loop):
        print(webhooks.LEGEND)
    if any(row.name.startswith("due-date batch") for row in closed_loop):
        print(due_batches.LEGEND)
    if any(row.name.startswith("payout batch") for row in closed_loop):
        print(payout_batches.LEGEND)
    if isolated:
        isolation.print_rows(isolated, header_lines=header)
    print("; ".join(notes))
    print(f"total {time.monotonic() - started:.0f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
