"""An acquirer's ``infraction.changed`` notification: only a wake-up. What
changed is read from the acquirer's listing (the evidence), by a poll of
that acquirer handed to a worker; the notification itself moves nothing."""

from __future__ import annotations

from acquirers.adapters.base import Notification
from acquirers.inbound import ApplyResult
from acquirers.models import Acquirer
from core import dispatch

POLL_SCHEDULED = "poll scheduled"


def infraction_changed(
    *, acquirer: Acquirer | None, notification: Notification, source: str, strict: bool
) -> ApplyResult:
    """Schedule a poll of ``acquirer``'s infractions (all of them when the
    caller resolved no acquirer). Changes nothing now."""
    args = () if acquirer is None else (acquirer.pk,)
    dispatch.enqueue("infractions.tasks.poll_infractions", *args, left_to="beat's poll of infractions")
    return ApplyResult(changed=False, detail=POLL_SCHEDULED)
