"""Items for what payments learns outside a daily run (registered in
:mod:`payments.reports` from :class:`reconciliation.apps.ReconciliationConfig`):
a late payment its acquirer says went back to the payer, and a refund a
chargeback released that the acquirer made after all. Each is keyed as the
day's run keys the same Pix (its e2e id), so either way it is one item."""

from __future__ import annotations

import dataclasses

from acquirers.adapters.base import ProviderPixRecord, ProviderRecordStatus, RefundResult
from core.money import brl
from payments.late_evidence import ReturnedThere
from payments.models import Charge, ChargeRefund, ChargeStatus, LatePayment
from payments.refund_requests import refund_id_for
from reconciliation.findings import Finding, FindingKind, Ours
from reconciliation.items import reconciliation_item_store


def late_returned_finding(charge: Charge, record: ProviderPixRecord, noted: ReturnedThere) -> Finding | None:
    """The item of a late payment the acquirer says went back to its payer
    (:func:`payments.late_evidence.late_payment_returned_there`): healed
    when it closed the late payment as returned; None when it was our own
    return, or nothing new."""
    late = noted.late
    if late is None or not noted.news:
        return None
    returned = noted.returned
    said = f"a adquirente diz que {brl(returned)} de {brl(late.amount)} voltaram ao pagador (devolução feita lá ou MED)"
    name = f"Pagamento após cancelamento #{late.pk}"
    if noted.closed:
        kind, detail = (
            FindingKind.REFUND_DIFFERS,
            f"{name}: {said}. Encerrado como devolvido; nada foi creditado à conta.",
        )
    elif late.status == LatePayment.Status.CREDITED:
        kind = FindingKind.REFUND_DIFFERS if returned >= late.amount else FindingKind.PARTIAL_RETURN
        detail = f"{name} creditado à conta, e {said}: a conta ficou com valor que saiu. Nada debitado automaticamente."
    else:
        kind = FindingKind.PARTIAL_RETURN
        status = late.get_status_display().lower()
        detail = f"{name} {status}, e {said}: o crédito fica recusado; decida com a adquirente."
    ours = Ours("payments.charge", str(charge.pk), charge.status, charge.amount, charge.txid, late.e2e_id)
    return Finding.of(kind, record, ours, key_by_e2e=True, healed=noted.closed, detail=detail[:500])


def late_returned_store(charge: Charge, record: ProviderPixRecord, noted: ReturnedThere) -> None:
    """A notification's word that a late payment went back: its item, if any."""
    finding = late_returned_finding(charge, record, noted)
    if finding is not None:
        reconciliation_item_store(finding, acquirer_id=charge.acquirer_id, direction="received")


def refund_made_store(charge: Charge, refund: ChargeRefund, answer: RefundResult) -> None:
    """A released refund made there: the payer was repaid twice (by the MED
    and by the refund). The item for staff, keyed as the day's
    reconciliation keys a Pix "refunded there, charged back here"."""
    evidence = {
        "devolucao": {
            "id": refund_id_for(charge.pk),
            "status": answer.status.value,
            "provider_refund_id": answer.provider_refund_id,
        },
        "refund": refund.pk,
    }
    record = ProviderPixRecord(
        reference=charge.txid,
        status=ProviderRecordStatus.REFUNDED,
        amount=charge.amount,
        e2e_id=charge.e2e_id,
        returned=charge.amount,
        raw=evidence,
    )
    ours = Ours("payments.charge", str(charge.pk), charge.status, charge.amount, charge.txid, charge.e2e_id)
    detail = (
        f"O estorno #{refund.pk}, liberado pela contestação (MED) enquanto a adquirente o processava, foi feito "
        "por ela: o pagador recebeu a devolução do MED e o estorno. Nada debitado automaticamente."
    )
    if charge.status == ChargeStatus.PAID:
        # Resolved for the account meanwhile: the MED gave the money back, and
        # the charge's refund (the same devolução, answered done) debits it once.
        detail += " A contestação foi resolvida a favor da conta: estorne a cobrança para debitar a devolução."
    finding = Finding.of(FindingKind.REFUNDED_THERE_CHARGEBACK_HERE, record, ours, key_by_e2e=True, detail=detail)
    # The evidence the redébito is measured on: the devolução returned the
    # whole Pix; the MED's return, unknown here, is the chargeback's (in full).
    finding = dataclasses.replace(finding, returned_by_refund=charge.amount)
    reconciliation_item_store(finding, acquirer_id=charge.acquirer_id, direction="received")
