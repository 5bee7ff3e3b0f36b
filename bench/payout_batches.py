"""Benchmark: one batch of 1,000 payouts (``POST /api/withdrawals/batches``'s
service) from the request to the batch completed (every item paid), sent by
ONE Celery worker process against an instant sandbox acquirer; beside its
ceiling measured in the same run: the same 1,000 payouts sent to the sandbox
adapter directly by as many threads of one process (no validation, no
Celery, no database), before and after the batch.

    .venv/bin/python -m bench.payout_batches [--items 1000] [--concurrency 4] [--engines auto]
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from bench.harness import LoadResult, batch_main, timed_batch, timed_calls

LEGEND = (
    "payout batch: req/s = payouts per second from the request to the batch completed (the debit of every "
    "item under the balance lock, one payout run per item: lease, guarded send, paid with its webhook, the "
    "batch's end); p50/p99 = the request -> each item paid"
)
CEILING_NOTE = (
    "the same payouts sent to the sandbox adapter directly, as many threads in one process (no validation, "
    "Celery, database or chain)"
)
ACQUIRER_KEY = "bench_payout_sandbox"
CPF = "52998224725"


def _items(count: int) -> list[dict[str, Any]]:
    return [
        {"amount": 1000 + n, "key_type": "cpf", "key_value": CPF, "external_id": f"bench-{n}"} for n in range(count)
    ]


def _anchor(acquirer: Any, items: list[dict[str, Any]], concurrency: int) -> float:
    """Seconds for the sandbox adapter alone to pay these payouts (fresh ids)."""
    from acquirers import adapters
    from acquirers.adapters.base import PayoutRequest

    adapter = adapters.build(acquirer)
    requests = []
    for item in items:
        withdrawal_id = uuid.uuid4()
        requests.append(
            PayoutRequest(
                withdrawal_id=withdrawal_id,
                idempotency_id=withdrawal_id.hex,
                amount=item["amount"],
                key_type=item["key_type"],
                key_value=item["key_value"],
            )
        )
    return timed_calls(adapter.create_payout, requests, concurrency)


def run(env: dict[str, str], *, items: int = 1000, concurrency: int = 4) -> list[LoadResult]:
    """One row: payouts per second of one batch of ``items``, request to
    completed; the sandbox adapter's own rate beside it (ceiling), and their ratio."""
    from django.db import transaction

    from accounts.models import Account, LedgerEntry
    from accounts.services import account_create, ledger_post
    from acquirers.models import Acquirer, AcquirerSlot
    from acquirers.services import acquirer_grants_set, acquirer_slots_set
    from withdrawals.batches import payout_batch_create
    from withdrawals.models import PayoutBatch, Withdrawal, WithdrawalStatus

    account = Account.objects.filter(ref="bench-payout-batches").first() or account_create(
        name="Bench Payout Batches", ref="bench-payout-batches", status=Account.Status.APPROVED
    )
    Account.objects.filter(pk=account.pk).update(
        withdrawals_need_approval=False, withdrawal_daily_limit=10**12, withdrawal_per_request_limit=10**9
    )
    account.refresh_from_db()
    acquirer, _ = Acquirer.objects.get_or_create(
        key=ACQUIRER_KEY,
        defaults={
            "name": "Bench Payout Sandbox",
            "nominal": "Bench Payout Sandbox S.A.",
            "adapter": "sandbox",
            "options": {"charge": "ok", "payout": "ok"},
        },
    )
    acquirer_grants_set(account=account, acquirers=[acquirer])
    acquirer_slots_set(account=account, purpose=AcquirerSlot.Purpose.CASHOUT, acquirers=[acquirer])
    body = _items(items)
    with transaction.atomic():
        ledger_post(
            account_id=account.pk,
            amount=2 * sum(item["amount"] for item in body) + 10_000,
            kind=LedgerEntry.Kind.CHARGE_PAID,
            reference=f"bench:{uuid.uuid4().hex}",
        )

    def create(count: int | None) -> Any:
        return payout_batch_create(account=account, items=body[:count])

    def done(batch: Any) -> bool:
        return bool(PayoutBatch.objects.get(pk=batch.pk).status == PayoutBatch.Status.COMPLETED)

    batch, elapsed, anchor_seconds = timed_batch(
        concurrency=concurrency, create=create, done=done, anchor=lambda: _anchor(acquirer, body, concurrency)
    )

    rows = Withdrawal.objects.filter(batch=batch).values_list("status", "created_at", "paid_at")
    latencies = [(paid - created).total_seconds() for status, created, paid in rows if status == "paid" and paid]
    paid = sum(1 for status, _, _ in rows if status == WithdrawalStatus.PAID)
    row = LoadResult(
        f"payout batch of {items:,}, 1 worker process x {concurrency} threads",
        items,
        items - paid,
        elapsed,
        latencies,
    )
    row.ceiling = 2 * items / anchor_seconds
    row.ceiling_note = CEILING_NOTE
    return [row]


def main(argv: Sequence[str] | None = None) -> None:
    batch_main(run, __doc__ or "", LEGEND, argv)


if __name__ == "__main__":
    main()
