"""Background work on batches of due-date charges (``due_charges.batches``).

A batch is split into chunks of items (``CHUNK_SIZE``), one task each, on
the default queue: each task creates its items one after the other, so a
batch has at most as many calls in flight as workers take its chunks, and
each call still takes its slot in ``acquirers.capacity`` (busy: the item
waits and is tried again, it does not fail). Every task is idempotent:
items are claimed before they are worked on (``batches.item_claim``).
"""

from __future__ import annotations

import uuid
from typing import Any

from celery import Task, shared_task

from acquirers.capacity import BUSY_RETRY_SECONDS
from core.dispatch import enqueue
from due_charges.batch_lotes import lote_poll, lote_send, lote_start
from due_charges.batches import ITEMS_TASK, RETRY, RETRY_AFTER, batch_dispatch, batches_stalled, item_process
from due_charges.models import ItemStatus


@shared_task(acks_late=True, ignore_result=True)
def due_batch_process(batch_id: str) -> int:
    """Send the batch as a lote where its acquirer takes lotes, else hand its
    claimable items to workers (or finish it). Idempotent."""
    return _process(uuid.UUID(batch_id))


def _process(batch_id: uuid.UUID) -> int:
    if lote_start(batch_id):
        return 0
    return batch_dispatch(batch_id)


@shared_task(acks_late=True, ignore_result=True)
def due_batch_lote_send(batch_id: str) -> str:
    """PUT the batch's lote again (its earlier answer was unclear). Idempotent."""
    return lote_send(uuid.UUID(batch_id))


@shared_task(acks_late=True, ignore_result=True)
def due_batch_lote_poll(batch_id: str) -> int:
    """Read the lote and settle the items the PSP decided. Idempotent."""
    return lote_poll(uuid.UUID(batch_id))


@shared_task(bind=True, acks_late=True, ignore_result=True)
def due_batch_items(self: Task[Any, Any], batch_id: str, item_ids: list[int]) -> int:
    """Create a chunk's items one by one; items that found every acquirer
    busy are handed back in a chunk of their own, shortly; items whose try
    came to no clear answer, in another, once their wait is over."""
    done = {item_id: item_process(item_id) for item_id in item_ids}
    busy = [item_id for item_id, status in done.items() if status == ItemStatus.PENDING]
    unclear = [item_id for item_id, status in done.items() if status == RETRY]
    for waiting, countdown in ((busy, BUSY_RETRY_SECONDS), (unclear, RETRY_AFTER.total_seconds())):
        if waiting:
            enqueue(ITEMS_TASK, batch_id, waiting, countdown=countdown, left_to="the batches' sweep")
    return len(item_ids) - len(busy) - len(unclear)


@shared_task(acks_late=True, ignore_result=True)
def sweep_due_batches() -> int:
    """Beat: batches whose tasks were lost (the broker dropped a publish, a
    worker died mid-chunk) are handed to workers again."""
    stalled = batches_stalled()
    for batch_id in stalled:
        _process(batch_id)
    return len(stalled)
