"""An acquirer's ``infraction.changed`` notification: only a wake-up. What
changed is read from the acquirer's listing (the evidence), by a poll of
that acquirer handed to a worker; the notification itself moves nothing."""

from __future__ import annotations

from django.core.cache import cache

from acquirers.adapters.base import Notification
from acquirers.inbound import ApplyResult
from acquirers.models import Acquirer
from core import dispatch

POLL_SCHEDULED = "poll scheduled"
#: Notifications within this many seconds share one poll, run once the window
#: closes (so it reads whatever any of them announced): a burst of them must
#: not become a burst of full listings (Efí's reaches 30 days back).
COALESCE_SECONDS = 5


def infraction_changed(
    *, acquirer: Acquirer | None, notification: Notification, source: str, strict: bool
) -> ApplyResult:
    """Schedule a poll of ``acquirer``'s infractions (all of them when the
    caller resolved no acquirer). Changes nothing now."""
    args = () if acquirer is None else (acquirer.pk,)
    key = f"infractions:poll-scheduled:{acquirer.pk if acquirer is not None else 'all'}"
    if cache.add(key, 1, timeout=COALESCE_SECONDS):
        dispatch.enqueue(
            "infractions.tasks.poll_infractions",
            *args,
            countdown=COALESCE_SECONDS,
            left_to="beat's poll of infractions",
        )
    return ApplyResult(changed=False, detail=POLL_SCHEDULED)
