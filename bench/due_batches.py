"""Benchmark: one batch of 1,000 due-date charges (``POST
/api/due-charges/batches``'s service) from the request to the batch done,
created by ONE Celery worker process against an instant sandbox acquirer;
beside its ceiling measured in the same run: the same 1,000 cobv created at
the sandbox adapter directly by as many threads of one process (no
validation, no Celery, no database), before and after the batch.

    .venv/bin/python -m bench.due_batches [--items 1000] [--concurrency 4] [--engines auto]
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Sequence
from typing import Any

from bench.harness import LoadResult, batch_main, timed_batch, timed_calls

LEGEND = (
    "due-date batch: req/s = charges per second from the request to the batch done (validation, the "
    "worker's chunks, one guarded call and one insert per charge, the webhook); p50/p99 = the request → "
    "each charge stored"
)
CEILING_NOTE = (
    "the same cobv PUT to the sandbox adapter directly, as many threads in one process (no validation, "
    "Celery, database or chain)"
)
ACQUIRER_KEY = "bench_due_sandbox"


def _items(count: int) -> list[dict[str, Any]]:
    due = (dt.date.today() + dt.timedelta(days=30)).isoformat()
    return [
        {
            "amount": 15000 + n,
            "due_date": due,
            "days_after_due": 30,
            "debtor": {"name": f"Devedor {n}", "document": "52998224725"},
            "fine": {"modalidade": 2, "valorPerc": "2.00"},
            "interest": {"modalidade": 2, "valorPerc": "0.03"},
            "description": f"Mensalidade {n}",
        }
        for n in range(count)
    ]


def _anchor(acquirer: Any, items: list[dict[str, Any]], concurrency: int) -> float:
    """Seconds for the sandbox adapter alone to create these cobv (fresh txids)."""
    from acquirers import adapters
    from acquirers.adapters.base import DueChargeRequest
    from due_charges.batches import item_terms

    adapter = adapters.build(acquirer)
    requests = []
    for item in items:
        terms, charge_id = item_terms(item), uuid.uuid4()
        requests.append(
            DueChargeRequest(
                charge_id=charge_id,
                txid=charge_id.hex,
                due_date=terms.data_de_vencimento,
                validity_after_due=terms.validade_apos_vencimento,
                debtor_name=item["debtor"]["name"],
                debtor_document=item["debtor"]["document"],
                valor=terms.to_api()["valor"],
                description=item["description"],
            )
        )
    return timed_calls(adapter.create_due_charge, requests, concurrency)


def run(env: dict[str, str], *, items: int = 1000, concurrency: int = 4) -> list[LoadResult]:
    """One row: charges per second of one batch of ``items``, request to done;
    the sandbox adapter's own rate beside it (ceiling), and their ratio."""
    from accounts.models import Account
    from accounts.services import account_create
    from acquirers.models import Acquirer, AcquirerSlot
    from acquirers.services import acquirer_grants_set, acquirer_slots_set
    from due_charges.batches import batch_create
    from due_charges.models import DueChargeBatch, ItemStatus
    from payments.models import Charge

    account = Account.objects.filter(ref="bench-due-batches").first() or account_create(
        name="Bench Due Batches", ref="bench-due-batches", status=Account.Status.APPROVED
    )
    acquirer, _ = Acquirer.objects.get_or_create(
        key=ACQUIRER_KEY,
        defaults={
            "name": "Bench Due Sandbox",
            "nominal": "Bench Due Sandbox S.A.",
            "adapter": "sandbox",
            "options": {"charge": "ok", "payout": "ok"},
        },
    )
    acquirer_grants_set(account=account, acquirers=[acquirer])
    acquirer_slots_set(account=account, purpose=AcquirerSlot.Purpose.CASHIN, acquirers=[acquirer])
    body = _items(items)

    def create(count: int | None) -> Any:
        return batch_create(account=account, items=body[:count])

    def done(batch: Any) -> bool:
        return bool(DueChargeBatch.objects.get(pk=batch.pk).status == "done")

    batch, elapsed, anchor_seconds = timed_batch(
        concurrency=concurrency, create=create, done=done, anchor=lambda: _anchor(acquirer, body, concurrency)
    )

    rows = batch.items.values_list("charge_id", "status", "created_at")
    created = {charge_id: at for charge_id, status, at in rows if status == ItemStatus.CREATED}
    stored = Charge.objects.filter(pk__in=list(created)).values_list("pk", "created_at")
    latencies = [(at - created[pk]).total_seconds() for pk, at in stored]
    row = LoadResult(
        f"due-date batch of {items:,}, 1 worker process x {concurrency} threads",
        items,
        items - len(created),
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
