"""A payout batch's progress and its end: the items counted by status, and
the one ``payout_batch`` webhook when no item is open any more.

Imported by :mod:`withdrawals.services` (an item's transition ends its
batch), so it imports no other writes of the app.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.db import transaction
from django.db.models import Count, Sum
from django.utils import timezone

from webhooks.models import EventType
from webhooks.services import event_emit
from withdrawals.batch_serializers import PayoutBatchSerializer
from withdrawals.models import PayoutBatch, Withdrawal, WithdrawalStatus

#: Items still on their way; any other status is final for the batch (a paid
#: item later returned by its destination, refunded, does not reopen it).
OPEN = (WithdrawalStatus.PENDING, WithdrawalStatus.APPROVED)
#: Batches whose items may still move (a canceled one until its items are all canceled).
ENDING = (PayoutBatch.Status.PROCESSING, PayoutBatch.Status.CANCELED)


def batches_progress(batch_ids: list[uuid.UUID]) -> dict[uuid.UUID, dict[str, dict[str, int]]]:
    """Each batch's items and amounts by status, with their totals: one grouped read for them all."""
    empty = dict.fromkeys(WithdrawalStatus.values, 0)
    progress = {batch_id: {"counts": dict(empty), "amounts": dict(empty)} for batch_id in batch_ids}
    rows = (
        Withdrawal.objects.filter(batch_id__in=batch_ids)
        .order_by()
        .values("batch_id", "status")
        .annotate(n=Count("pk"), amount=Sum("amount"))
    )
    for row in rows:
        progress[row["batch_id"]]["counts"][row["status"]] = row["n"]
        progress[row["batch_id"]]["amounts"][row["status"]] = int(row["amount"] or 0)
    for shape in progress.values():
        for part in shape.values():
            part["total"] = sum(part.values())
    return progress


def batch_answer(batch: PayoutBatch) -> dict[str, Any]:
    """The batch as the API reads it, and as its webhook carries it."""
    return dict(PayoutBatchSerializer(batch, context={"progress": batches_progress([batch.pk])[batch.pk]}).data)


def batch_end_if_done(batch_id: uuid.UUID) -> bool:
    """End the batch once no item is open: a processing batch becomes
    ``completed``, a refused (canceled) one keeps its status; either gets
    ``completed_at`` and ONE ``payout_batch`` webhook. Runs in the
    transaction that moved an item: the batch row's lock orders those
    transactions, so the last one sees every other item final and exactly
    one ends the batch (tests/withdrawals/test_batches_race.py)."""
    if not transaction.get_connection().in_atomic_block:
        raise transaction.TransactionManagementError("batch_end_if_done must run in the item's transaction")
    batch = PayoutBatch.objects.select_for_update().get(pk=batch_id)
    if batch.status not in ENDING or batch.completed_at is not None:
        return False
    if Withdrawal.objects.filter(batch_id=batch_id, status__in=OPEN).exists():
        return False
    if batch.status == PayoutBatch.Status.PROCESSING:
        batch.status = PayoutBatch.Status.COMPLETED
    batch.completed_at = timezone.now()
    batch.save(update_fields=["status", "completed_at", "updated_at"])
    event_emit(
        account_id=batch.account_id,
        event_type=EventType.PAYOUT_BATCH,
        record_id=batch.pk,
        status=batch.status,
        data=batch_answer(batch),
    )
    return True
