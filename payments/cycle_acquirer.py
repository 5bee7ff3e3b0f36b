"""What a Pix Automático cycle's acquirer says about its ``cobr`` (read back
or withdrawn), as the news :mod:`payments.events` applies: shared by the
cancel's pursuit (:mod:`payments.cancel_pursuit`) and the recurrences app's
sync, so that each Pix is credited the same way.

A cycle's amount is fixed once its cobr is created (``valor.original``): a
Pix of another amount is refused for staff as an immediate charge's is.
"""

from __future__ import annotations

from acquirers import calls
from acquirers.adapters.base import CancelResult, CycleChargeState, Notification
from payments.choices import ChargeKind
from payments.due_acquirer import pix_news
from payments.models import Charge

#: API Pix's cobr statuses (``CobRStatus``).
ACTIVE = ("CRIADA", "ATIVA")
PAID = "CONCLUIDA"
ENDED_UNPAID = ("CANCELADA", "REJEITADA", "EXPIRADA")


def is_recurring(charge: Charge) -> bool:
    return bool(charge.kind == ChargeKind.RECURRING)


def cycle_paid_news(state: CycleChargeState) -> list[Notification]:
    """Each Pix the cobr received, as its payment's notification (then, once
    returned in full there, as a refund)."""
    return pix_news(state.txid, state.pix)


def cycle_cancel_answer(state: CycleChargeState | None) -> CancelResult | None:
    """A cobr's status after asking to cancel it, as a cancel's answer: ended
    unpaid, paid first, or None (still active, or no answer): asked again."""
    if state is None:
        return None
    if state.status in ENDED_UNPAID:
        return CancelResult.REMOVED
    if state.status == PAID:
        return CancelResult.PAID
    return None


def cycle_withdraw(charge: Charge) -> calls.Call[CancelResult | None]:
    """Ask the acquirer to cancel the cobr (the one guarded call)."""
    return calls.call(
        charge.acquirer,
        "cancel_cycle_charge",
        lambda adapter: cycle_cancel_answer(adapter.cancel_cycle_charge(charge.txid)),
    )


def cycle_read(charge: Charge) -> calls.Call[CycleChargeState]:
    """Read the cobr back (the one guarded call)."""
    return calls.call(charge.acquirer, "cycle_charge_status", lambda adapter: adapter.cycle_charge_status(charge.txid))
