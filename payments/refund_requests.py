"""What names a charge's refund at its acquirer (the devolução id, the
request every ask sends) and what asking came to: shared by the refunds
(:mod:`payments.refunds`) and the check of a refund a chargeback released
(:mod:`payments.refunds_released`)."""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass

from acquirers.adapters.base import RefundRequest
from payments.models import Charge


class RefundOutcome(enum.StrEnum):
    REFUNDED = "refunded"  # the acquirer returned the money; the charge is refunded
    PROCESSING = "processing"  # asked; the acquirer's callback (or asking again) finishes it
    MARKED = "marked"  # no money to move at the acquirer: marked refunded here only
    FAILED = "failed"  # the acquirer says it did not make it; a reservation is released
    UNDETERMINED = "undetermined"  # no definitive answer: nothing released, asked again
    ENDED = "ended"  # the refund had ended already (done, failed, or released by a chargeback)


@dataclass(frozen=True)
class RefundAnswer:
    """What asking the acquirer came to, and what it said (for staff's
    messages). ``unclear``: the ask may have reached the acquirer without a
    final answer (a refund reserved only now records it as its
    ``unclear_at``: :func:`payments.refunds.charge_refund_reserve`)."""

    outcome: RefundOutcome
    detail: str = ""
    unclear: bool = False


def refund_id_for(charge_id: uuid.UUID | str) -> str:
    """The devolução id of a charge's full refund: derived from the charge, so
    asking again names the same devolução (idempotent at the acquirer)."""
    return "D" + uuid.UUID(str(charge_id)).hex


def refund_request_for(charge: Charge, *, reason: str = "") -> RefundRequest:
    """The charge's full refund, as every ask names it (the same devolução id)."""
    return RefundRequest(
        charge_id=charge.pk,
        txid=charge.txid,
        e2e_id=charge.e2e_id or "",
        refund_id=refund_id_for(charge.pk),
        amount=charge.amount,
        reason=reason,
    )
