"""Chaos soak (issue #13): the service as deployed under mixed traffic while
faults are injected, then invariants.

    .venv/bin/python -m tests.soak [--minutes 3] [--seed S] [--junit PATH]

Every Procfile process (gunicorn, each Celery worker, beat) runs on a
database of the soak's own (``<DATABASE_URL's db>_soak``, else ``pix_soak``
on the embedded PostgreSQL), emptied and bootstrapped each run, and on a
private redis-server. Several accounts make charges, pay them through the
sandbox, refund them, charge them back, withdraw, return withdrawals and
replay idempotent requests, with webhooks to a loopback receiver, while
faults hit on a seeded schedule (tests/soak/faults.py). The traffic takes
``--minutes`` less a quiet tail; then the run waits for the delayed events
(capped) and checks the invariants (tests/soak/invariants.py). Exit code 1
on any violation, each printed; ``--junit`` writes one test case per
invariant, for .ci/summary.py.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import shutil
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

from bench.harness import setup_django
from tests.realworld import Receiver, http_receiver
from tests.soak import faults, invariants
from tests.soak.service import Redis, deployed, health, soak_env
from tests.soak.traffic import AccountModel, Client, Journal

SEED = 20261125
ACCOUNTS = ("soak_a", "soak_b", "soak_c")
#: Seconds of the run left without traffic at its end (events still settle).
TAIL = 30.0
ACQUIRERS = [
    {
        "key": key,
        "name": key.replace("_", " ").title(),
        "nominal": f"{key} Pagamentos S.A.",
        "adapter": "sandbox",
        "options": {"charge": "ok", "payout": "ok"},
        "max_ticket": 300_000,
        "conversion_percent": 90,
        "default_priority": priority,
    }
    for priority, key in enumerate((faults.SLOWED_ACQUIRER, "soak_backup", "soak_payout"), start=1)
]


def account_spec(ref: str, receiver_url: str) -> dict[str, object]:
    return {
        "ref": ref,
        "name": f"Soak {ref[-1].upper()} Ltda",
        "status": "approved",
        "blocked": False,
        "payment_methods": ["pix"],
        "acquirer_selection": True,
        "available_acquirers": [faults.SLOWED_ACQUIRER, "soak_backup", "soak_payout"],
        "active_acquirers": [faults.SLOWED_ACQUIRER, "soak_backup"],
        "cashout_acquirers": ["soak_payout"],
        "withdrawals_need_approval": False,
        "cashin_fee": {"fixed": 0, "bps": 199},
        "withdrawal_fee": {"fixed": 100, "bps": 0},
        "withdrawal_limits": {"minimum": 1000, "per_request": 500_000, "per_day_total": 500_000_000},
        "credentials": [{"ref": "main", "permission": "all"}],
        "webhooks": [{"ref": "hook", "url": f"{receiver_url}/{ref}"}],
    }


def prepare(receiver: Receiver) -> tuple[dict[str, AccountModel], dict[str, str]]:
    """An empty database, three sandbox acquirers with a 3 s deadline (so a
    slowed one costs seconds, not 13) and the accounts; returns each
    account's client model and id."""
    from django.core.management import call_command
    from django.db import transaction

    from acquirers.models import Acquirer
    from provisioning.bootstrap import bootstrap_apply

    call_command("flush", interactive=False, verbosity=0)
    data = {"acquirers": ACQUIRERS, "accounts": [account_spec(ref, receiver.url) for ref in ACCOUNTS]}
    with transaction.atomic():
        created = bootstrap_apply(data=data)
    Acquirer.objects.update(connect_timeout_ms=1000, read_timeout_ms=2000)
    models, ids = {}, {}
    for ref in ACCOUNTS:
        account = created["accounts"][ref]
        keys = account["credentials"]["main"]
        headers = {"X-Public-Key": keys["public_key"], "X-Secret-Key": keys["secret_key"]}
        models[ref] = AccountModel(ref, headers, account["webhooks"]["hook"]["secret"])
        ids[ref] = account["id"]
    return models, ids


def write_junit(path: Path, results: dict[str, list[str]], seconds: float) -> None:
    suite = ET.Element("testsuite", name="soak", tests=str(len(results)), time=f"{seconds:.0f}")
    suite.set("failures", str(sum(1 for v in results.values() if v)))
    for name, violations in results.items():
        case = ET.SubElement(suite, "testcase", classname="soak", name=name)
        if violations:
            failure = ET.SubElement(case, "failure", message=violations[0][:200])
            failure.text = "\n".join(violations)
    ET.ElementTree(suite).write(path, encoding="utf-8", xml_declaration=True)


def machine() -> str:
    from django.db import connection

    where = "embedded PostgreSQL" if not connection.settings_dict.get("PORT") else "PostgreSQL server"
    return f"{os.cpu_count()} CPUs, Python {platform.python_version()}, {where}"


def soak(args: argparse.Namespace, logs: Path) -> dict[str, list[str]]:
    redis = Redis(logs)
    redis.start()
    env = soak_env(redis.url)
    # This process's connections are terminated by the faults too: without a
    # pool, each phase closes its connection and the next query opens one.
    setup_django({**env, "DB_POOL_MAX_SIZE": "0", "DB_CONN_MAX_AGE": "0"})
    journal = Journal()
    try:
        with http_receiver() as receiver:
            models, ids = prepare(receiver)
            with deployed(env, logs) as service:
                injector = faults.Injector(service, redis, receiver, args.seed)
                traffic_seconds = max(60.0, args.minutes * 60 - TAIL)
                plan = faults.schedule(args.seed, traffic_seconds)
                print(f"soak: {traffic_seconds:.0f}s of traffic, {len(plan)} faults, seed {args.seed}", flush=True)
                origin = time.monotonic()
                stop = threading.Event()
                threads = [
                    threading.Thread(
                        target=Client(service.base, model, journal, args.seed + i).run,
                        args=(origin + traffic_seconds, stop),
                        name=f"client-{name}",
                    )
                    for i, (name, model) in enumerate(models.items())
                ]
                threads.append(threading.Thread(target=injector.run, args=(plan, origin, stop), name="faults"))
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join()
                faults.ensure_redis(redis)
                receiver.respond(200)
                print(f"soak: traffic done, {len(journal.calls)} requests; waiting for events", flush=True)
                cap = origin + faults.settle_by(plan, traffic_seconds) - time.monotonic()
                settled, left = invariants.converge(list(ids.values()), cap)
                print(f"soak: {'settled' if settled else 'NOT settled'} after {time.monotonic() - origin:.0f}s: {left}")
                healthy, seen = health(service.base)
                checks: dict[str, invariants.Check] = {
                    "faults injected": lambda: injector.errors,
                    "converged": lambda: [] if settled else [f"not settled within {cap:.0f}s of the traffic: {left}"],
                    "client saw what it expected": lambda: journal.findings,
                    "balances equal ledger and client model, no overdraw": lambda: invariants.balances(
                        service.base, models, ids
                    ),
                    "every acknowledged record exists once": lambda: invariants.records(service.base, models, ids),
                    "no payout sent twice": lambda: invariants.payouts_once(ids),
                    "interrupted payouts resumed within a minute": lambda: invariants.interrupted_payouts_resumed(ids),
                    "every status change delivered, signed": lambda: invariants.webhooks(
                        models, ids, list(receiver.requests)
                    ),
                    "no 5xx outside a fault window": lambda: invariants.no_5xx_outside_faults(
                        journal, injector.excused, origin
                    ),
                    "healthy at the end": lambda: [] if healthy else [f"not ready: {seen}"],
                    # Compose's restart policy would hide it; `make run` (honcho) stops everything.
                    "no process exited": lambda: [f"at {at - origin:.0f}s {what}" for at, what in service.restarts],
                }
                results = invariants.run_checks(checks)
                print(f"soak: {dict(sorted(journal.counts.items()))}")
                print(f"soak: {len(receiver.requests)} webhook requests received, {len(injector.windows)} faults")
                return results
    finally:
        redis.stop()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=float(os.environ.get("MINUTES") or 3))
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--junit", type=Path, help="write a JUnit report here")
    args = parser.parse_args(argv)

    started = time.monotonic()
    logs = Path(tempfile.mkdtemp(prefix="pix-soak-"))
    results = soak(args, logs)
    seconds = time.monotonic() - started
    print(invariants.describe(results))
    if args.junit:
        write_junit(args.junit, results, seconds)
    failed = any(results.values())
    when = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    print(
        f"soak {'FAILED' if failed else 'passed'}: {args.minutes:g} min, seed {args.seed}, "
        f"{sum(1 for v in results.values() if not v)}/{len(results)} invariants held, "
        f"{seconds:.0f}s in all, {when}, {machine()}"
    )
    if failed:
        print(f"soak: process logs kept in {logs}")
    else:
        shutil.rmtree(logs, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
