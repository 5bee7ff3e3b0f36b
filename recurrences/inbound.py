"""An acquirer's Pix Automático notifications (``recurrence.changed``,
``recurrence.cycle_changed``): only wake-ups. The event names a record; the
record is read at the acquirer that holds it (``GET /rec/{idRec}``, ``GET
/cobr/{txid}``, through the guarded call) and what the acquirer answers is
applied, exactly as the beat's sync would. Whatever else the callback said
(a status, a Pix) is never read: a forged or replayed body cannot approve a
recurrence or credit a cycle.

Runs with no transaction held (:func:`acquirers.inbound.notification_process`
opens none): the reads wait on the acquirer with nothing locked. An unclear
read changes nothing now; the beat's sync reads the record again.
"""

from __future__ import annotations

from acquirers.adapters.base import Notification, NotificationEvent
from acquirers.exceptions import UnknownNotificationRecord
from acquirers.inbound import ApplyResult
from acquirers.models import Acquirer
from payments.due_payments import now_in_brazil
from recurrences.authorisations import recurrence_sync
from recurrences.models import Cycle, Recurrence
from recurrences.outcomes import cycle_sync

UNCHANGED = "read at the acquirer: nothing changed"


def recurrence_changed(
    *, acquirer: Acquirer | None, notification: Notification, source: str, strict: bool
) -> ApplyResult:
    """Read the recurrence or the cycle the event names at its acquirer and
    apply it. A record we do not hold, or that ``acquirer`` does not (another
    acquirer's idRec or txid), is refused as unknown: an acquirer's news only
    ever wakes up its own records. ``acquirer`` None: the caller resolved it."""
    if notification.event is NotificationEvent.RECURRENCE_CHANGED:
        recurrences = Recurrence.objects.filter(id_rec=notification.reference)
        if acquirer is not None:
            recurrences = recurrences.filter(acquirer=acquirer)
        recurrence_id = recurrences.values_list("pk", flat=True).first()
        if recurrence_id is None:
            raise UnknownNotificationRecord()
        changed = recurrence_sync(recurrence_id=recurrence_id)
        return ApplyResult(changed=changed, detail="" if changed else UNCHANGED)
    if notification.event is NotificationEvent.CYCLE_CHANGED:
        cycles = Cycle.objects.filter(txid=notification.reference)
        if acquirer is not None:
            cycles = cycles.filter(recurrence__acquirer=acquirer)
        found = cycles.values_list("pk", "status").first()
        if found is None:
            raise UnknownNotificationRecord()
        cycle_id, before = found
        after = cycle_sync(cycle_id=cycle_id, today=now_in_brazil())
        changed = after != before
        return ApplyResult(changed=changed, detail="" if changed else UNCHANGED)
    raise UnknownNotificationRecord()
