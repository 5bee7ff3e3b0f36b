"""A late payment (a Pix received for a charge cancelled here) that its
acquirer says went back to the payer: by our own return
(:func:`payments.late_payments.late_payment_return`), or by other means, a
devolução made at the PSP or a MED. Seen in the daily reconciliation (a
listed Pix returned, or partly returned), in the acquirer's notifications (a
refund or a chargeback of the cancelled charge) and in the cancel's read of
a charge paid there.

Returned by us: nothing to report. Otherwise the amount is recorded on the
late payment, with the acquirer's record as evidence, and:

- waiting for a decision and returned in full: the money is the payer's
  again and never was the account's, so it is closed as returned (no
  balance moves); staff see it, healed, among the reconciliation items
  (reconciliation, above payments, makes the item: :mod:`payments.reports`);
- waiting for a decision and partly returned: left open for staff (an
  item), and a credit is refused (``ActionNotExecutable``), by the request
  and by its approval: crediting would credit money that left;
- credited already: the account kept money that left. An item for staff,
  nothing debited automatically (as for every return found after a credit:
  staff settle it with the merchant).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils import timezone

from acquirers.adapters.base import ProviderPixRecord, ProviderRecordStatus
from core.money import brl
from payments.models import Charge, LatePayment

#: Being returned, or returned, by us: what the acquirer reports is our devolução.
OURS = frozenset({LatePayment.Status.RETURNING, LatePayment.Status.RETURNED})


@dataclass(frozen=True)
class ReturnedThere:
    """What the acquirer's word came to: ``late`` None when no late payment
    has that e2e id; ``returned`` 0 when it was ours (or nothing new), else
    the centavos it says went back, for staff; ``closed``: the late payment
    is closed as returned on its word (now, or by an earlier word)."""

    late: LatePayment | None
    returned: int = 0
    closed: bool = False

    @property
    def news(self) -> bool:
        """Whether staff must hear of it (an item: :mod:`payments.reports`)."""
        return self.late is not None and self.returned > 0


def late_payment_returned_there(*, record: ProviderPixRecord, source: str) -> ReturnedThere:
    """The acquirer says ``record.returned`` centavos of the Pix
    ``record.e2e_id`` (a late payment) went back to its payer
    (``record.status`` refunded: all of it). Under the late payment's lock;
    idempotent (the amount recorded is the largest said). Returns what staff
    must hear of; the caller reports it (the daily run, or
    :func:`payments.reports.late_returned_report`)."""
    returned = record.returned or (record.amount if record.status is ProviderRecordStatus.REFUNDED else 0)
    with transaction.atomic():
        late = LatePayment.objects.select_for_update().filter(e2e_id=record.e2e_id).first()
        if late is None or returned <= 0:
            return ReturnedThere(late)
        if late.status in OURS and late.returned_there == 0:
            return ReturnedThere(late)  # our devolução, as recorded here
        now = timezone.now()
        fields = ["returned_there", "returned_there_at", "returned_there_evidence"]
        late.returned_there = max(late.returned_there, min(returned, late.amount))
        late.returned_there_at = late.returned_there_at or now
        late.returned_there_evidence = {"source": source, "returned": returned, "record": dict(record.raw)}
        if late.status == LatePayment.Status.OPEN and late.returned_there >= late.amount:
            late.status, late.resolved_at = LatePayment.Status.RETURNED, now
            fields += ["status", "resolved_at"]
        late.save(update_fields=fields)
    # Returned here with an amount returned there: closed on the acquirer's word (now, or by an earlier run).
    return ReturnedThere(late, returned, closed=late.status == LatePayment.Status.RETURNED)


def returned_record(
    *, charge: Charge, e2e_id: str, amount: int, returned: int | None, raw: Mapping[str, Any]
) -> ProviderPixRecord:
    """A notification's word (a refund, a chargeback of the cancelled
    charge) as the record :func:`late_payment_returned_there` reads:
    ``returned`` None is all of it."""
    full = returned is None or returned >= amount
    return ProviderPixRecord(
        reference=charge.txid,
        status=ProviderRecordStatus.REFUNDED if full else ProviderRecordStatus.PAID,
        amount=amount,
        e2e_id=e2e_id,
        returned=amount if returned is None else returned,
        raw=raw,
    )


def late_credit_refusal(late: LatePayment) -> str:
    """Why a credit of ``late`` is refused because the acquirer says its
    money went back to the payer ("": it does not say so)."""
    if late.returned_there <= 0:
        return ""
    return (
        f"A adquirente diz que {brl(late.returned_there)} deste Pix voltaram ao pagador (devolução ou MED): "
        "não há como creditá-lo; veja o item de conciliação."
    )
