"""Bulkheads for outbound acquirer calls: a bounded pool per purpose and a
cap on the calls in flight to each acquirer, both per process.

Waiting on acquirers is most of this service's work, and a slow acquirer
holds a thread for every call it has not answered. Without bounds one slow
acquirer, or one flood of lookups, takes every thread of a process and
everything else waits behind it. So:

- **purposes** (:class:`Purpose`) have separate pools: charge creation
  (``OUTBOUND_POOL_CHARGE``), payout sends and lookups
  (``OUTBOUND_POOL_PAYOUT``), and the calls about an existing charge —
  reconciliation, refunds, cancels, MED infractions — (``OUTBOUND_POOL_RECONCILE``). A flood
  of one never takes the others' slots. :data:`OPERATIONS` is the one place
  an operation's purpose is decided.
- **each acquirer** gets at most ``ACQUIRER_MAX_IN_FLIGHT`` calls in flight,
  all purposes together: past it, calls go to the next acquirer of a chain
  (recorded as ``busy``, as an open circuit is) or come back shortly.

A full bulkhead never queues a call (see :mod:`core.bulkhead`). The bound
per deployment is processes x cap: gunicorn workers for charges, Celery
worker processes for payouts and reconciliation.
"""

from __future__ import annotations

import contextlib
import enum
import threading
from collections.abc import Iterator

from django.conf import settings

from acquirers.adapters.base import AcquirerUnavailable
from acquirers.models import Acquirer
from core.bulkhead import Bulkhead, all_of

#: How soon work that found its acquirer busy comes back (a payout whose
#: owner is busy, a new payout with nowhere else to go): slots free up as
#: fast as calls end, so soon, but not in a tight loop.
BUSY_RETRY_SECONDS = 5.0


class Purpose(enum.StrEnum):
    CHARGE = "charge"
    PAYOUT = "payout"
    RECONCILE = "reconcile"


#: Every operation's purpose (the ``operation`` given to ``calls.admit`` and
#: ``calls.call``). An operation missing here is a bug, refused loudly.
OPERATIONS: dict[str, Purpose] = {
    "create_charge": Purpose.CHARGE,
    "payout": Purpose.PAYOUT,  # admission of a new send
    "payout_send": Purpose.PAYOUT,
    "payout_status": Purpose.PAYOUT,
    "key_lookup": Purpose.PAYOUT,  # the payee check before a payout's first send (withdrawals.payees)
    "refund": Purpose.RECONCILE,
    "refund_status": Purpose.RECONCILE,
    "charge_status": Purpose.RECONCILE,
    "cancel_charge": Purpose.RECONCILE,
    # The daily listings of reconciliation (reconciliation.run), one call per page.
    "list_received": Purpose.RECONCILE,
    "list_sent": Purpose.RECONCILE,
    # MED infractions (infractions.polling): the listing, one call per page, and a defence's delivery.
    "list_infractions": Purpose.RECONCILE,
    "defend_infraction": Purpose.RECONCILE,
    # Due-date charges (cobv): created as a charge is (a lote of them too), read and withdrawn as one is.
    "create_due_charge": Purpose.CHARGE,
    "create_due_charge_batch": Purpose.CHARGE,
    "due_charge_status": Purpose.RECONCILE,
    "cancel_due_charge": Purpose.RECONCILE,
    "due_charge_batch_status": Purpose.RECONCILE,
    # Pix Automático: a recurrence is created as a charge is (the merchant's
    # request waits on it); the push request, the cycles' cobr and every read
    # or cancel are the beat's and workers' background work.
    "create_recurrence": Purpose.CHARGE,
    "find_recurrence": Purpose.RECONCILE,
    "recurrence_status": Purpose.RECONCILE,
    "request_authorisation": Purpose.RECONCILE,
    "cancel_recurrence": Purpose.RECONCILE,
    "create_cycle_charge": Purpose.RECONCILE,
    "cycle_charge_status": Purpose.RECONCILE,
    "cancel_cycle_charge": Purpose.RECONCILE,
    "retry_cycle_charge": Purpose.RECONCILE,
}

_POOLS: dict[Purpose, Bulkhead] = {
    Purpose.CHARGE: Bulkhead("charge", lambda: int(settings.OUTBOUND_POOL_CHARGE)),
    Purpose.PAYOUT: Bulkhead("payout", lambda: int(settings.OUTBOUND_POOL_PAYOUT)),
    Purpose.RECONCILE: Bulkhead("reconcile", lambda: int(settings.OUTBOUND_POOL_RECONCILE)),
}
_caps: dict[int, Bulkhead] = {}
_caps_lock = threading.Lock()


class AcquirerBusy(AcquirerUnavailable):
    """Not called: the acquirer's cap, or the purpose's pool, of calls in
    flight in this process was full. Nothing was sent."""

    error_class = "busy"


def purpose_of(operation: str) -> Purpose:
    try:
        return OPERATIONS[operation]
    except KeyError:
        raise ValueError(f"acquirer operation {operation!r} has no purpose in acquirers.capacity.OPERATIONS") from None


def pool(purpose: Purpose) -> Bulkhead:
    return _POOLS[purpose]


def cap(acquirer: Acquirer) -> Bulkhead:
    """The acquirer's cap in this process (made on first use)."""
    with _caps_lock:
        found = _caps.get(acquirer.pk)
        if found is None:
            found = _caps[acquirer.pk] = Bulkhead(
                f"acquirer:{acquirer.key}", lambda: int(settings.ACQUIRER_MAX_IN_FLIGHT)
            )
        return found


def busy(acquirer: Acquirer, operation: str) -> str:
    """Why a call would be refused now ("" when it would not): for admission,
    so that a chain passes the acquirer over before it asks anything else.
    A hint: the slot is taken by :func:`slot`, which may still find it full."""
    if pool(purpose_of(operation)).full():
        return f"{purpose_of(operation)} pool full"
    if cap(acquirer).full():
        return f"{settings.ACQUIRER_MAX_IN_FLIGHT} calls in flight"
    return ""


@contextlib.contextmanager
def slot(acquirer: Acquirer, operation: str) -> Iterator[bool]:
    """``with slot(acquirer, operation) as taken:`` — a slot of the purpose's
    pool and of the acquirer's cap, or (``taken`` False) of neither; given
    back however the block ends. Never waits."""
    with all_of(pool(purpose_of(operation)), cap(acquirer)) as taken:
        yield taken
