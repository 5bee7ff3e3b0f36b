"""The one way a service hands work to a Celery worker: by the task's name.

Services decide and write; tasks run services later. If services imported
their tasks, each app's ``services`` and ``tasks`` would import each other
(tied by function-local imports). Here a service names the task instead,
``"withdrawals.tasks.process_withdrawal"``, and Celery publishes it with the
task's own options and ``CELERY_TASK_ROUTES`` (``send_task`` resolves the
registered task by name), so tasks import services and never the reverse.

Callers publish from ``transaction.on_commit`` (a worker must find the rows
it is told about, and a rolled-back change asks for nothing). Publishing
never raises: while the broker is away the committed
rows are the work, and each kind of work has a poller or relay that finds
them (``left_to`` names it in the log)."""

from __future__ import annotations

import logging
from typing import Any

from celery import current_app

logger = logging.getLogger(__name__)


def enqueue(task: str, *args: Any, countdown: float = 0.0, left_to: str) -> None:
    """Publish ``task`` (its dotted name) now, with positional ``args``.

    ``left_to``: what picks the work up if the broker does not take it (for
    the log). No publish retries: a request must not wait out back-offs."""
    try:
        current_app.send_task(task, args=args, countdown=max(0.0, countdown), retry=False)
    except Exception:
        logger.warning("broker unavailable; %s%r left to %s", task, args, left_to, exc_info=True)
