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
from due_charges.batches import ITEMS_TASK, batch_dispatch, batches_stalled, item_process
from due_charges.models import ItemStatus


@shared_task(acks_late=True, ignore_result=True)
def due_batch_process(batch_id: str) -> int:
    """Hand a batch's claimable items to workers (or finish it). Idempotent."""
    return batch_dispatch(uuid.UUID(batch_id))


@shared_task(bind=True, acks_late=True, ignore_result=True)
def due_batch_items(self: Task[Any, Any], batch_id: str, item_ids: list[int]) -> int:
    """Create a chunk's items one by one; items that found every acquirer
    busy are handed back in a chunk of their own, shortly."""
    waiting = [item_id for item_id in item_ids if item_process(item_id) == ItemStatus.PENDING]
    if waiting:
        enqueue(ITEMS_TASK, batch_id, waiting, countdown=BUSY_RETRY_SECONDS, left_to="the batches' sweep")
    return len(item_ids) - len(waiting)


@shared_task(acks_late=True, ignore_result=True)
def sweep_due_batches() -> int:
    """Beat: batches whose tasks were lost (the broker dropped a publish, a
    worker died mid-chunk) are handed to workers again."""
    stalled = batches_stalled()
    for batch_id in stalled:
        batch_dispatch(batch_id)
    return len(stalled)
