"""Isolation scenario 4: payouts of one account while 256 webhook deliveries
of other accounts go to receivers that hang (each drip-feeds one header byte
a second, so no read timeout ever fires), on the two Celery workers as
deployed (Procfile: the default queue, ``--concurrency 2``; webhooks,
``--pool threads --concurrency 8``) with the deployed webhook timeouts.

Each payout is requested through the service (``withdrawal_request``, the
API's write) and timed until the worker has it paid by a sandbox acquirer;
sequentially, first with every receiver answering nothing (none called),
then with the 256 deliveries queued and the hanging receivers holding every
connection the webhook worker gives them. Rows go to bench/isolation.py's
table; the anchor is the same payouts without the hanging receivers.
"""

from __future__ import annotations

import tempfile
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from bench.wrk import WrkResult

if TYPE_CHECKING:
    from accounts.models import Account
    from bench.isolation import PgSampler

RECEIVERS = 256
#: 16 gave ratios of 0.88-1.08 between runs of the same code (one payout ~50 ms, the
#: batch means moving by a tenth): 48 cuts that sampling noise by √3 for ~3 s more.
PAYOUTS = 48
AMOUNT = 5000
CPF = "52998224725"
WORKER_APP_NAME = "pix-bench-worker"
#: The workers as deployed (Procfile, settings' defaults), not the tests' short timeouts.
DEPLOYED = {
    "DJANGO_SETTINGS_MODULE": "bench.settings",
    "WEBHOOK_CONNECT_TIMEOUT": "3",
    "WEBHOOK_TIMEOUT": "15",
    "WEBHOOK_RETRY_SCHEDULE": "0,5,300,1800",
    "WEBHOOK_MAX_COUNTDOWN": "300",
    "PGAPPNAME": WORKER_APP_NAME,
}
MAIN_CONCURRENCY = 2
WEBHOOK_CONCURRENCY = 8


def _accounts() -> tuple[Account, list[Account]]:
    """The paying account (balance, a sandbox acquirer for its payouts) and
    one merchant per hanging receiver (an account may have few endpoints)."""
    from django.db import transaction

    from accounts.models import Account, LedgerEntry
    from accounts.services import account_create, ledger_post
    from acquirers.models import AcquirerSlot
    from acquirers.services import acquirer_slots_set, acquirer_upsert

    acquirer, _ = acquirer_upsert(
        key="bench_iso_payouts",
        name="Bench payouts",
        adapter="sandbox",
        options={"charge": "ok", "payout": "ok"},
        default_priority=None,
        connect_timeout_ms=1000,
        read_timeout_ms=3000,
    )
    payer = Account.objects.filter(ref="bench-iso-payer").first()
    if payer is None:
        payer = account_create(
            name="Bench Payer",
            ref="bench-iso-payer",
            status=Account.Status.APPROVED,
            withdrawal_per_request_limit=10**12,
            withdrawal_daily_limit=10**15,
        )
        with transaction.atomic():
            ledger_post(account_id=payer.pk, amount=10**13, kind=LedgerEntry.Kind.CHARGE_PAID, reference="bench-iso")
    acquirer_slots_set(account=payer, purpose=AcquirerSlot.Purpose.CASHOUT, acquirers=[acquirer])
    merchants = list(Account.objects.filter(ref__startswith="bench-iso-hang-").order_by("ref"))
    for index in range(len(merchants), RECEIVERS):
        merchants.append(
            account_create(
                name=f"Bench Hang {index}", ref=f"bench-iso-hang-{index:03d}", status=Account.Status.APPROVED
            )
        )
    return payer, merchants[:RECEIVERS]


def _payout_seconds(payer: Account) -> tuple[float, bool]:
    from tests.realworld import wait_for
    from withdrawals.models import Withdrawal, WithdrawalStatus
    from withdrawals.services import withdrawal_request

    started = time.monotonic()
    withdrawal = withdrawal_request(account=payer, amount=AMOUNT, key_type="cpf", key_value=CPF)
    query = Withdrawal.objects.filter(pk=withdrawal.pk, status=WithdrawalStatus.PAID)
    try:
        wait_for(query.exists, timeout=60, interval=0.01)
    except AssertionError:
        return time.monotonic() - started, False
    return time.monotonic() - started, True


def _row(name: str, samples: list[tuple[float, bool]]) -> WrkResult:
    latencies = sorted(seconds for seconds, _ in samples)
    pick = {q: latencies[min(len(latencies) - 1, int(q * len(latencies)))] for q in (0.5, 0.75, 0.9, 0.99)}
    return WrkResult(
        name,
        requests=len(samples),
        errors=sum(1 for _, ok in samples if not ok),
        seconds=sum(latencies),
        latencies=latencies,
        percentiles=pick,
        non_2xx=sum(1 for _, ok in samples if not ok),
    )


def run(sampler: PgSampler, pool: int) -> list[WrkResult]:
    """Two rows: the payer's payouts alone (anchor), then beside the hanging
    deliveries. ``sampler`` counts the workers' PostgreSQL connections
    (application_name :data:`WORKER_APP_NAME`); ``pool`` is DB_POOL_MAX_SIZE."""
    from django.db import connection, transaction

    from tests.realworld import celery_workers_apart, drip_feeders, wait_for
    from webhooks.models import WebhookEndpoint
    from webhooks.services import endpoint_create, event_emit

    payer, merchants = _accounts()
    WebhookEndpoint.objects.filter(account__ref__startswith="bench-iso-hang-").update(is_active=False)
    with (
        drip_feeders(RECEIVERS, lifetime=600) as drip,
        celery_workers_apart(
            connection.settings_dict["NAME"],
            Path(tempfile.mkdtemp(prefix="bench-iso-workers-")),
            concurrency=MAIN_CONCURRENCY,
            webhook_concurrency=WEBHOOK_CONCURRENCY,
            env=DEPLOYED,
        ),
    ):
        _payout_seconds(payer)  # the worker's first task imports and connects
        with sampler.sampling():
            alone = [_payout_seconds(payer) for _ in range(PAYOUTS)]
        alone_pg = sampler.peak
        for merchant, url in zip(merchants, drip.urls, strict=True):
            endpoint_create(account=merchant, url=url)
        with transaction.atomic():
            for merchant in merchants:
                event_emit(
                    account_id=merchant.pk,
                    event_type="transaction",
                    record_id=uuid.uuid4(),
                    status="paid",
                    data={"status": "paid"},
                )
        wait_for(lambda: drip.open >= WEBHOOK_CONCURRENCY, timeout=60)
        with sampler.sampling():
            beside = [_payout_seconds(payer) for _ in range(PAYOUTS)]
            held = drip.open
        beside_pg = sampler.peak
        WebhookEndpoint.objects.filter(account__ref__startswith="bench-iso-hang-").update(is_active=False)

    anchor = _row(f"payouts of one account, sequential, no hanging receiver (n={PAYOUTS})", alone)
    anchor.pg_connections = alone_pg
    row = _row(f"payouts beside {RECEIVERS} deliveries to hanging receivers ({held} held open)", beside)
    row.pg_connections = beside_pg
    # Sequential payouts: req/s is 1 / mean latency, so the ratio compares latencies.
    row.ceiling = anchor.rps
    limit = anchor.percentile(0.99) * 1.5 + 100
    row.target = f"ratio ≥ 0.9, p99 ≤ {limit:.0f} ms"
    row.passed = row.errors == 0 and (row.ratio or 0.0) >= 0.9 and row.percentile(0.99) <= limit
    anchor.target, anchor.passed = "0 failed", anchor.errors == 0
    for r in (anchor, row):
        r.pg_bound = pool * 2
    return [anchor, row]
