"""What payments learns that staff see among reconciliation's items: a late
payment its acquirer says went back to the payer
(:mod:`payments.late_evidence`, from a notification), and a refund a
chargeback released that the acquirer made after all
(:mod:`payments.refunds_released`).

Reconciliation sits above payments and owns the items; it fills this slot
from its ``AppConfig.ready`` (payments never imports it). Each report is
made where the news is recorded (inside the transaction that records it,
when there is one), so the item commits with it. Without reconciliation
installed a report fails loudly: news for staff is never dropped."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from acquirers.adapters.base import ProviderPixRecord, RefundResult
from payments.late_evidence import ReturnedThere
from payments.models import Charge, ChargeRefund

#: ``(charge, record, noted)``: the acquirer's word ``record`` that a late
#: payment of ``charge`` went back to its payer, as recorded (``noted.news``).
LateReturnedReport = Callable[[Charge, ProviderPixRecord, ReturnedThere], None]
#: ``(charge, refund, answer)``: the released ``refund`` was made there.
RefundMadeReport = Callable[[Charge, ChargeRefund, RefundResult], None]


@dataclass
class _Reporters:
    late_returned: LateReturnedReport | None = None
    refund_made: RefundMadeReport | None = None


_reporters = _Reporters()


def reports_register(*, late_returned: LateReturnedReport, refund_made: RefundMadeReport) -> None:
    """Called once, by the app that turns these reports into items for staff."""
    _reporters.late_returned = late_returned
    _reporters.refund_made = refund_made


def late_returned_report(*, charge: Charge, record: ProviderPixRecord, noted: ReturnedThere) -> None:
    if _reporters.late_returned is None:
        raise RuntimeError("no reporter of late payments returned there: is reconciliation installed?")
    _reporters.late_returned(charge, record, noted)


def refund_made_report(*, charge: Charge, refund: ChargeRefund, answer: RefundResult) -> None:
    if _reporters.refund_made is None:
        raise RuntimeError("no reporter of released refunds made there: is reconciliation installed?")
    _reporters.refund_made(charge, refund, answer)
