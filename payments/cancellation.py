"""Cancelled here means cancelled at the acquirer.

A charge that staff cancel, or that expires, moves to ``canceled`` here at
once (``payments.services.charge_transition``, which opens a
:class:`~payments.models.ChargeCancellation` in the same transaction); the
acquirer is then asked, after the commit and holding no connection, to
withdraw it (``cancel_charge``, the one guarded call,
:mod:`payments.cancel_pursuit`), until it answers for certain:

- removed (now or already): done, no payer can pay it any more;
- paid there first: the Pix is recorded as a late payment (its status is read
  with ``charge_status`` where the adapter can; otherwise the notification or
  the daily reconciliation brings it) for staff to credit or return;
- anything unclear (timeout, 5xx, a charge it does not know yet, busy, open
  circuit, a Pix paid there that could not be read or recorded): asked again
  with growing backoff (:func:`retry_delay`) until :data:`GIVE_UP_AFTER`,
  then left for staff (the overview counts it; the admin can ask again).
  Beat's sweep applies the same horizon: nothing is asked forever.

An adapter that cannot cancel (``supports_cancel`` off) is not asked: the
charge's own expiry at the acquirer (``calendario.expiracao``, the account's
``charge_expiry_seconds``) is what stops a payer, and a Pix that still comes
is a late payment like any other.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
import uuid

from django.core.cache import cache
from django.db import transaction
from django.utils import timezone

from acquirers.adapters.base import InvalidOptions
from core.dispatch import enqueue
from payments.due_acquirer import can_withdraw
from payments.models import Charge, ChargeCancellation

logger = logging.getLogger(__name__)

State = ChargeCancellation.State

#: Backoff between asks: doubled from the first up to the last.
RETRY_FIRST_SECONDS = 2
RETRY_MAX_SECONDS = 600
#: Past this without a definitive answer, staff decide. By then a charge at a
#: PSP that honours ``calendario.expiracao`` has expired there for hours (the
#: longest expiry accounts use is a day); one that does not is staff's to check.
GIVE_UP_AFTER = dt.timedelta(hours=24)
#: A scheduled ask this late is taken as lost (a broker restart) and handed out again by beat.
SWEEP_GRACE = dt.timedelta(minutes=2)
SWEEP_EVERY = dt.timedelta(minutes=5)


def retry_delay(attempts: int) -> float:
    """Seconds until the next ask after ``attempts`` unclear ones."""
    return float(min(RETRY_MAX_SECONDS, RETRY_FIRST_SECONDS * 2 ** max(0, attempts - 1)))


def charge_cancellation_open(*, charge: Charge) -> ChargeCancellation | None:
    """In the transaction that cancels ``charge`` (its row locked): record
    that its acquirer must be asked, and ask after the commit. None when it
    was opened already (a charge is cancelled once)."""
    now = timezone.now()
    try:
        can_cancel = can_withdraw(charge)  # a due-date charge's withdrawal is its own (cancel_due_charge)
        error = ""
    except InvalidOptions as exc:  # an adapter this process lacks (the sandbox, switched off)
        can_cancel, error = False, str(exc)[:500]
    cancellation, created = ChargeCancellation.objects.get_or_create(
        charge=charge,
        defaults={
            "acquirer_id": charge.acquirer_id,
            "state": State.PENDING if can_cancel else State.UNSUPPORTED,
            "requested_at": now,
            "next_attempt_at": now if can_cancel else None,
            "give_up_at": now + GIVE_UP_AFTER,
            "finished_at": None if can_cancel else now,
            "last_error": error,
        },
    )
    if not created:
        return None
    if can_cancel:
        transaction.on_commit(functools.partial(cancel_pursue_later, charge_id=charge.pk))
    return cancellation


def cancel_pursue_later(*, charge_id: uuid.UUID | str, countdown: float = 0) -> None:
    """Hand the ask to a worker (:func:`payments.tasks.pursue_charge_cancel`,
    which runs :func:`payments.cancel_pursuit.charge_cancel_pursue`); a lost
    hand-off is picked up by beat's sweep (:func:`cancellations_sweep`)."""
    enqueue("payments.tasks.pursue_charge_cancel", str(charge_id), countdown=countdown, left_to="the cancels' sweep")


def cancel_next_ask_in(*, charge_id: uuid.UUID | str) -> float:
    """Seconds until the cancellation's next ask is due (0: now)."""
    due = ChargeCancellation.objects.values_list("next_attempt_at", flat=True).get(charge_id=charge_id)
    return max(0.0, (due - timezone.now()).total_seconds()) if due is not None else 0.0


def charge_cancel_retry(*, charge_id: uuid.UUID | str) -> bool:
    """Staff ask again after the acquirer gave no definitive answer in time:
    the cancellation waits for it again, for another :data:`GIVE_UP_AFTER`.
    False, changing nothing, unless it had given up."""
    now = timezone.now()
    with transaction.atomic():
        cancellation = ChargeCancellation.objects.select_for_update().get(charge_id=charge_id)
        if cancellation.state != State.GAVE_UP:
            return False
        cancellation.state = State.PENDING
        cancellation.next_attempt_at = now
        cancellation.give_up_at = now + GIVE_UP_AFTER
        cancellation.save()
        transaction.on_commit(functools.partial(cancel_pursue_later, charge_id=charge_id))
    return True


def cancellations_sweep(*, limit: int = 200) -> int:
    """Beat's net under the ask tasks: a cancellation whose next ask is
    overdue by :data:`SWEEP_GRACE` (its task lost with the broker, or one
    that died on an error) is handed to a worker again, at most once per
    :data:`SWEEP_EVERY`; one past its ``give_up_at`` is left for staff
    instead, so nothing is asked forever. Returns how many were handed."""
    now = timezone.now()
    gave_up = ChargeCancellation.objects.filter(state=State.PENDING, give_up_at__lte=now).update(
        state=State.GAVE_UP, next_attempt_at=None
    )
    if gave_up:
        logger.error("%s cancellations without a definitive answer past their horizon: left for staff", gave_up)
    due = (
        ChargeCancellation.objects.filter(state=State.PENDING, next_attempt_at__lte=now - SWEEP_GRACE)
        .order_by("next_attempt_at")
        .values_list("pk", flat=True)[:limit]
    )
    handed = 0
    for charge_id in due:
        if cache.add(f"cancel-sweep:{charge_id}", "1", int(SWEEP_EVERY.total_seconds())):
            cancel_pursue_later(charge_id=charge_id)
            handed += 1
    return handed
