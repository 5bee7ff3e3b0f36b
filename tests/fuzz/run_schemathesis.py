"""Schemathesis against the service as deployed (issue #6).

    .venv/bin/python -m tests.fuzz.run_schemathesis [--max-examples N] [--seed S] [--workers W] [-- ST_ARGS...]

Runs ``schemathesis run <base>/api/schema/ --checks all`` with a fixed seed
against gunicorn, on a database of its own (``pix_fuzz`` on the embedded
PostgreSQL, ``<DATABASE_URL's db>_fuzz`` on a real server), emptied and
bootstrapped on every run so that a seed always meets the same data. Exits
with schemathesis's exit code. Everything that is configuration rather than
plumbing (phases, per-operation check settings and why) is in
``schemathesis.toml`` next to this file.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import requests

from bench.harness import ROOT, _create_database_on, bench_env, drop_queue, gunicorn, setup_django

CONFIG = Path(__file__).resolve().parent / "schemathesis.toml"
SEED = 20240606
MAX_EXAMPLES = 50
# Celery tasks the fuzzed requests enqueue go to a queue no worker of the
# project listens on (a `make run` worker on the same Redis would otherwise
# run them against its own database); the queue is dropped afterwards.
QUEUE = "pix-fuzz"

ACCOUNT = {
    "ref": "fuzz",
    "name": "Fuzz Ltda",
    "status": "approved",
    "blocked": False,
    "payment_methods": ["pix"],
    "acquirer_selection": True,
    "available_acquirers": ["fuzz_alpha", "fuzz_beta", "fuzz_gamma"],
    "active_acquirers": ["fuzz_alpha", "fuzz_beta"],
    "cashout_acquirers": ["fuzz_alpha"],
    "withdrawals_need_approval": False,
    "cashin_fee": {"fixed": 0, "bps": 199},
    "withdrawal_fee": {"fixed": 100, "bps": 0},
    "withdrawal_limits": {"minimum": 1000, "per_request": 500_000, "per_day_total": 50_000_000},
    "credentials": [{"ref": "main", "permission": "all"}],
    "webhooks": [{"ref": "hook", "url": "https://example.com/pix-fuzz"}],
}
BOOTSTRAP = {
    "acquirers": [
        {
            "key": f"fuzz_{name}",
            "name": f"Fuzz {name.title()}",
            "nominal": f"Fuzz {name.title()} Pagamentos S.A.",
            "adapter": "sandbox",
            "options": {"charge": "ok", "payout": "ok"},
            "max_ticket": 300_000,
            "conversion_percent": 90,
            "is_new": priority == 3,
            "default_priority": priority,
        }
        for priority, name in enumerate(("alpha", "beta", "gamma"), start=1)
    ],
    "accounts": [ACCOUNT],
}
CHARGE = {
    "payment_method": "pix",
    "amount": 300_000,
    "buyer": {"buyer_name": "Fulano de Tal", "buyer_document": "52998224725", "buyer_phone": "11999998888"},
}


def fuzz_env() -> dict[str, str]:
    """bench_env()'s environment (DEBUG off, quiet logs, the engines of
    os.environ) on a database of the fuzzer's own, so that benchmarks and
    fuzzing never share rows, and on the service's own settings and routes."""
    # Hidden from bench_env(), which would create its own <db>_bench for nothing.
    database_url = os.environ.pop("DATABASE_URL", "")
    try:
        env = bench_env()
    finally:
        if database_url:
            os.environ["DATABASE_URL"] = database_url
    env["DJANGO_SETTINGS_MODULE"] = "config.settings.local"
    if database_url:
        base, _, name = database_url.rpartition("/")
        name = name.split("?")[0] + "_fuzz"
        _create_database_on(base + "/postgres", name)
        env["DATABASE_URL"] = f"{base}/{name}"
        env.pop("PIX_EMBEDDED_DB_NAME", None)
    else:
        env["PIX_EMBEDDED_DB_NAME"] = "pix_fuzz"
    # Far above what the run sends: a 429 would only hide the answers under test.
    env["API_RATE_LIMIT_PER_MINUTE"] = str(10**9)
    env["CELERY_TASK_DEFAULT_QUEUE"] = env["WEBHOOK_QUEUE"] = QUEUE
    # The sandbox acquirer and the /api/sandbox/* drivers are part of the run.
    env["PIX_SANDBOX"] = "true"
    # Local settings' default, stated: with it off every fuzzed webhook or
    # postback host would cost a DNS lookup, whose answer (and time) depends
    # on the network CI runs on.
    env["WEBHOOKS_ALLOW_PRIVATE_NETWORKS"] = "true"
    return env


def prepare() -> dict[str, str]:
    """An empty database with one approved account, its ``all`` credential and
    three sandbox acquirers; returns the credential's headers."""
    from django.core.management import call_command
    from django.db import transaction

    from provisioning.bootstrap import bootstrap_apply

    # A seed reproduces a run only against the same data.
    call_command("flush", interactive=False, verbosity=0)
    with transaction.atomic():
        created = bootstrap_apply(data=BOOTSTRAP)
    keys = created["accounts"]["fuzz"]["credentials"]["main"]
    return {"X-Public-Key": keys["public_key"], "X-Secret-Key": keys["secret_key"]}


def seed_records(base: str, headers: dict[str, str]) -> dict[str, str]:
    """Charges in several states and withdrawals (one pending, one paid),
    through the API, so that listings, reads and the sandbox drivers have
    something to find. Returns the environment naming the ids the fuzzed
    paths use: a webhook event they emitted, the paid withdrawal."""
    session = requests.Session()
    session.headers.update(headers)

    def post(path: str, body: Any = None) -> dict[str, Any]:
        response = session.post(f"{base}{path}", json=body, timeout=30)
        response.raise_for_status()
        data: dict[str, Any] = response.json()["data"]
        return data

    charges = [post("/api/transactions", CHARGE)["id"] for _ in range(12)]
    for charge_id in charges[:10]:
        post(f"/api/sandbox/transactions/{charge_id}/pay")
    post(f"/api/sandbox/transactions/{charges[0]}/refund")
    post(f"/api/sandbox/transactions/{charges[1]}/chargeback")
    post(f"/api/sandbox/transactions/{charges[10]}/fail")
    post("/api/withdrawals", {"amount": 5000, "key_type": "email", "key_value": "fuzz@example.com"})
    paid = post("/api/withdrawals", {"amount": 2000, "key_type": "email", "key_value": "fuzz@example.com"})

    from webhooks.models import WebhookEvent
    from withdrawals.payouts import withdrawal_process

    # No worker takes the fuzz queue: paid here, as the worker would (approve, then send
    # to fuzz_alpha's sandbox), so that its receipt (JSON and PDF) is fuzzed past the 404.
    withdrawal_process(withdrawal_id=paid["id"])
    assert withdrawal_process(withdrawal_id=paid["id"]) == "paid", "the seeded withdrawal was not paid"
    event = WebhookEvent.objects.order_by("created_at").first()
    assert event is not None, "the seeded transitions emitted no webhook event"
    return {"PIX_FUZZ_EVENT_ID": str(event.pk), "PIX_FUZZ_WITHDRAWAL_ID": paid["id"]}


def schemathesis_command(base: str, headers: dict[str, str], args: argparse.Namespace) -> list[str]:
    command = [
        str(Path(sys.executable).parent / "schemathesis"),
        "--config-file", str(CONFIG),
        "run", f"{base}/api/schema/",
        "--checks", "all",
        "--seed", str(args.seed),
        "--max-examples", str(args.max_examples),
        "--workers", str(args.workers),
    ]  # fmt: skip
    # The credentials go in through [auth.openapi.*] (schemathesis.toml, from
    # the environment: see main), not -H: as headers given on the command line
    # they would be put back on a request that drops one to check the 401.
    return command + list(args.extra)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--max-examples", type=int, default=MAX_EXAMPLES, help="per operation and phase")
    # One: with several, Hypothesis's ast.parse() calls from two threads fail
    # on CPython 3.11.7 ("SystemError: AST constructor recursion depth
    # mismatch"); the client's work is GIL-bound anyway.
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("extra", nargs="*", help="more schemathesis options, after --")
    args = parser.parse_args(argv)

    started = time.monotonic()
    env = fuzz_env()
    setup_django(env)
    headers = prepare()
    try:
        with gunicorn(env) as base:
            seeded = seed_records(base, headers)
            command = schemathesis_command(base, headers, args)
            credentials = {
                "PIX_FUZZ_PUBLIC_KEY": headers["X-Public-Key"],
                "PIX_FUZZ_SECRET_KEY": headers["X-Secret-Key"],
            }
            code = subprocess.call(command, cwd=ROOT, env={**env, **seeded, **credentials})
    finally:
        drop_queue(QUEUE)
    print(f"schemathesis exited {code} after {time.monotonic() - started:.0f}s", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
