"""Matching an acquirer's received Pix (and charges) against our charges
(the ``received`` listing's matcher of :mod:`reconciliation.run`).

A Pix there whose charge is pending here is healed: the confirmed payment
is applied through :func:`payments.events.charge_event_apply` (the one way a
charge is paid, idempotent: a rerun credits nothing twice). Everything else
is a finding for staff; nothing here debits or credits otherwise. The
contract refuses failed or canceled → paid, so a Pix received for such a
charge is recorded as a late payment (:mod:`payments.late_payments`), which
staff credit or return by maker-checker; never credited here.

Each record is judged by :func:`_judge` through ``Matching.judge`` (its own
savepoint; an error is an item for that record, the day goes on). Never
dropped: a record repeating an e2e id already seen (in the listing, or held
by another charge here: applying it would credit one Pix twice), a Pix
partly returned to the payer there that is credited here in full, and a Pix
returned there by a refund while charged back here (or refunded here after
its chargeback) whose MED and refund together returned more than the Pix
(the payer repaid twice: the item keeps both amounts, what a redébito is
measured on) or less than it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import logging
import uuid
from collections.abc import Sequence

from acquirers.adapters.base import Notification, NotificationEvent, ProviderPixRecord, ProviderRecordStatus
from acquirers.models import Acquirer
from core.exceptions import PixServiceError
from core.money import brl
from payments.choices import ChargeKind
from payments.events import PAID_ONCE, charge_event_apply
from payments.late_evidence import late_payment_returned_there
from payments.late_payments import LATE_FROM
from payments.models import Charge, ChargeStatus, ChargeTransition, LatePayment
from reconciliation.findings import Finding, FindingKind, Matching, Ours
from reconciliation.items import repaid_excess
from reconciliation.reports import late_returned_finding

logger = logging.getLogger(__name__)

TARGET = "payments.charge"
_RECEIVED = frozenset({ProviderRecordStatus.PAID, ProviderRecordStatus.REFUNDED})


#: A repeated record and the one first listed with its e2e id.
Repeat = tuple[ProviderPixRecord, ProviderPixRecord]


def _what_it_says(record: ProviderPixRecord) -> tuple[object, ...]:
    """A listed Pix's content: ``GET /pix`` and a cob's ``pix[]`` list the
    same Pix twice with the same content, one record, not a repeat."""
    return (record.reference, record.amount, record.status, record.returned, record.returns)


def _received(
    records: Sequence[ProviderPixRecord],
) -> tuple[list[ProviderPixRecord], list[Repeat], dict[str, ProviderPixRecord]]:
    """The Pix received, once each; the records that repeat an e2e id with
    something else (another txid, amount or state: reported, never applied);
    and what the acquirer says of charges with no Pix."""
    pix: list[ProviderPixRecord] = []
    repeats: list[Repeat] = []
    first: dict[str, ProviderPixRecord] = {}
    for record in records:
        if not record.e2e_id or record.status not in _RECEIVED:
            continue
        seen = first.get(record.e2e_id)
        if seen is None:
            first[record.e2e_id] = record
            pix.append(record)
        elif _what_it_says(record) != _what_it_says(seen):
            repeats.append((record, seen))
    with_pix = {r.reference for r in pix}
    states: dict[str, ProviderPixRecord] = {}
    for record in records:
        if record.e2e_id or not record.reference:
            continue
        if record.status in _RECEIVED and record.reference not in with_pix:
            pix.append(record)  # paid there, with no Pix listed: still a payment to match
            with_pix.add(record.reference)
        else:
            states[record.reference] = record
    return pix, repeats, states


def _finding(
    kind: FindingKind,
    record: ProviderPixRecord | None,
    charge: Charge | None,
    *,
    healed: bool = False,
    detail: str = "",
) -> Finding:
    ours = None
    if charge is not None:
        ours = Ours(TARGET, str(charge.pk), charge.status, charge.amount, charge.txid, charge.e2e_id)
    finding = Finding.of(kind, record, ours, key_by_e2e=True, healed=healed, detail=detail)
    if kind is FindingKind.DUPLICATE_E2E and record is not None:
        # Several records may repeat one e2e id, even under one txid with
        # another amount or state: each is an item of its own.
        key = f"{record.e2e_id}:{record.reference}:{record.amount}:{record.status.value}"
        finding = dataclasses.replace(finding, key=key)
    return finding


def _paid(record: ProviderPixRecord, charge: Charge) -> Notification:
    """The listed Pix as the confirmed payment of our charge a notification would carry."""
    return Notification(
        event=NotificationEvent.CHARGE_PAID,
        reference=charge.txid,
        e2e_id=record.e2e_id,
        occurred_at=record.occurred_at,
        amount=record.amount,
        raw=record.raw,
    )


def _heal(acquirer: Acquirer, record: ProviderPixRecord, charge: Charge) -> Finding:
    """Apply the confirmed payment. Its own transaction (charge_transition's),
    under the charge's lock: a notification arriving meanwhile makes this a no-op."""
    notification = _paid(record, charge)
    try:
        result = charge_event_apply(
            acquirer=acquirer, notification=notification, source=ChargeTransition.Source.RECONCILIATION
        )
    except PixServiceError as exc:
        return _finding(FindingKind.PAID_THERE_NOT_HERE, record, charge, detail=f"Não aplicado: {exc.message}"[:500])
    logger.warning(
        "reconciliation: charge %s was paid at %s but pending here: %s",
        charge.pk,
        acquirer.key,
        "payment applied" if result.changed else f"nothing applied ({result.detail or 'already paid'})",
    )
    return _finding(
        FindingKind.PAID_THERE_NOT_HERE, record, charge, healed=True, detail="Pagamento confirmado aplicado."
    )


def _another_pix(record: ProviderPixRecord, charge: Charge) -> Finding:
    """A Pix for a charge another Pix paid: received twice, credited once."""
    detail = f"Outro Pix para a cobrança já paga (e2e aqui: {charge.e2e_id}); nada creditado."
    return _finding(FindingKind.UNKNOWN_HERE, record, charge, detail=detail)


def _late(acquirer: Acquirer, record: ProviderPixRecord, charge: Charge, matching: Matching) -> None:
    """A Pix for a charge cancelled or failed here: recorded as a late payment
    (payments.late_payments, once per e2e id), where staff credit or return it.
    Returned there (all or part) other than by a return of ours: recorded on
    the late payment, never credited, an item for staff (payments.late_evidence,
    reconciliation.reports)."""
    if not record.e2e_id:
        detail = "Recebido para cobrança cancelada ou falha e sem e2e id na adquirente; confira."
        matching.findings.append(_finding(FindingKind.PAID_THERE_NOT_HERE, record, charge, detail=detail))
        return
    if record.status is ProviderRecordStatus.PAID:
        notification = _paid(record, charge)
        try:
            charge_event_apply(
                acquirer=acquirer, notification=notification, source=ChargeTransition.Source.RECONCILIATION
            )
        except PixServiceError as exc:
            detail = f"Pagamento após o cancelamento não registrado: {exc.message}"[:500]
            matching.findings.append(_finding(FindingKind.PAID_THERE_NOT_HERE, record, charge, detail=detail))
            return
        detail = "Recebido após o cancelamento: registrado em Pagamentos após cancelamento para a equipe decidir."
        matching.findings.append(_finding(FindingKind.PAID_THERE_NOT_HERE, record, charge, healed=True, detail=detail))
    noted = late_payment_returned_there(record=record, source=ChargeTransition.Source.RECONCILIATION)
    if noted.late is None:
        # Returned there before anything of it was recorded here: nothing to credit.
        detail = "Recebido para cobrança cancelada ou falha e já devolvido ao pagador na adquirente; nada creditado."
        matching.findings.append(_finding(FindingKind.PAID_THERE_NOT_HERE, record, charge, detail=detail))
        return
    finding = late_returned_finding(charge, record, noted)
    if finding is not None:
        matching.findings.append(finding)
    # Returned there counts as matched only as recorded here: by our return, or closed as returned.
    if record.status is ProviderRecordStatus.PAID or finding is None or finding.healed:
        matching.match(record.amount)


def _partial_return(record: ProviderPixRecord, charge: Charge) -> Finding:
    """Credited here in full, partly returned to the payer there: for staff
    (the contract has no partial refund; nothing is debited automatically)."""
    if record.returned:
        returned = f"{brl(record.returned)} de {brl(record.amount)} já devolvidos ao pagador na adquirente"
    else:
        returned = f"devolução em andamento na adquirente ({record.returns} listada)"
    detail = f"Pix creditado pelo valor integral aqui; {returned}. Nada debitado: decida com o lojista."
    return _finding(FindingKind.PARTIAL_RETURN, record, charge, detail=detail)


def _returned_by_refund(record: ProviderPixRecord) -> int:
    """What went back to the payer there other than by MED (a refund). An
    adapter that lists no amounts returned: all of it, if the Pix is returned."""
    if record.returned:
        return record.returned - record.returned_by_med
    return record.amount if record.status is ProviderRecordStatus.REFUNDED else 0


@dataclasses.dataclass(frozen=True)
class _Holder:
    """What holds an e2e id here: a charge it paid, or a late payment (a Pix
    received for a cancelled charge, which staff may have credited)."""

    charge_id: uuid.UUID
    detail: str


def _holders(e2e_ids: set[str]) -> dict[str, _Holder]:
    """The charges and late payments here (of any acquirer: an e2e id names
    one Pix across them) holding the listed e2e ids."""
    holders: dict[str, _Holder] = {}
    for late in (
        LatePayment.objects.filter(e2e_id__in=e2e_ids)
        .select_related("charge")
        .only("pk", "e2e_id", "charge__id", "charge__txid")
    ):
        detail = f"pagamento após cancelamento #{late.pk} da cobrança {late.charge.pk} (txid {late.charge.txid})"
        holders[late.e2e_id] = _Holder(late.charge.pk, detail)
    for charge in Charge.objects.filter(e2e_id__in=e2e_ids).only("pk", "txid", "e2e_id"):
        if charge.e2e_id:
            holders[charge.e2e_id] = _Holder(charge.pk, f"cobrança {charge.pk} (txid {charge.txid})")
    return holders


def _refunded_after_chargeback(record: ProviderPixRecord, charge: Charge) -> bool:
    """Refunded here from ``chargeback`` (the MED completing, the acquirer's
    notice of the refund: no refund debit taken), with a refund listed there."""
    if charge.status != ChargeStatus.REFUNDED or _returned_by_refund(record) <= 0:
        return False
    came_from = (
        ChargeTransition.objects.filter(charge_id=charge.pk, to_status=ChargeStatus.REFUNDED)
        .order_by("-id")
        .values_list("from_status", flat=True)
        .first()
    )
    return came_from == ChargeStatus.CHARGEBACK


def _refunded_and_charged_back(record: ProviderPixRecord, charge: Charge, by_refund: int, matching: Matching) -> None:
    """A refund there on a Pix charged back here. The payer was repaid twice
    only if the MED's return and the refund together exceed the Pix (the
    MED's return: what the acquirer lists as MED, else the chargeback's, in
    full): then an item, its evidence kept for the redébito. Returned once in
    all, part by MED and part by refund: both sides agree (the chargeback
    took the money once). Less than the Pix in all: an item, nothing to redebit."""
    by_med = record.returned_by_med or None
    excess = repaid_excess(amount=record.amount, by_med=by_med, by_refund=by_refund)
    if not excess and (by_med or 0) + by_refund == record.amount:
        matching.match(record.amount)
        return
    med = f"{brl(by_med)} pelo MED" if by_med else "o MED (a contestação aqui)"
    if excess:
        detail = (
            f"Devolvido ao pagador na adquirente ({brl(by_refund)} por estorno) e contestado aqui: com {med}, o "
            f"pagador recebeu {brl(excess)} a mais que o Pix. Nada debitado automaticamente."
        )
    else:
        detail = (
            f"Devolvido em parte na adquirente ({brl(by_refund)} por estorno, {med}) e contestado aqui pelo valor "
            "integral: o pagador não recebeu mais que o Pix; nada a debitar. Confira com a adquirente."
        )
    finding = _finding(FindingKind.REFUNDED_THERE_CHARGEBACK_HERE, record, charge, detail=detail)
    matching.findings.append(dataclasses.replace(finding, returned_by_med=by_med, returned_by_refund=by_refund))


def _judge(
    acquirer: Acquirer,
    record: ProviderPixRecord,
    charge: Charge | None,
    holders: dict[str, _Holder],
    matching: Matching,
) -> None:
    """One Pix received (or a charge said paid with none listed): the one
    place a record of the received listing is judged."""
    if charge is None:
        matching.findings.append(_finding(FindingKind.UNKNOWN_HERE, record, None))
        return
    holder = holders.get(record.e2e_id) if record.e2e_id else None
    if holder is not None and holder.charge_id != charge.pk:
        # Applying it would credit one Pix twice (and break the e2e id's unique constraint).
        detail = f"e2e id já usado aqui: {holder.detail}; nada aplicado."
        matching.findings.append(_finding(FindingKind.DUPLICATE_E2E, record, charge, detail=detail))
        return
    if charge.status in LATE_FROM:
        _late(acquirer, record, charge, matching)
        return
    # A pending due-date charge's amount depends on the day it is paid: the
    # Pix listed is what is credited (payments.due_payments), as its notification's would be.
    amount_fixed = not (charge.kind == ChargeKind.DUE and charge.status == ChargeStatus.PENDING)
    if amount_fixed and record.amount != charge.amount:
        matching.findings.append(_finding(FindingKind.AMOUNT_DIFFERS, record, charge))
        return
    if charge.status == ChargeStatus.PENDING:
        if record.status is ProviderRecordStatus.REFUNDED:
            # Returned there already: crediting it now would credit money no longer held.
            detail = "Recebido e devolvido na adquirente; nada creditado."
            matching.findings.append(_finding(FindingKind.PAID_THERE_NOT_HERE, record, charge, detail=detail))
            return
        if not record.e2e_id:
            # A charge said concluded with no Pix listed: no received amount or
            # end-to-end id to credit on (the status poll credits nothing then either).
            detail = "Concluída na adquirente sem Pix listado; nada creditado."
            matching.findings.append(_finding(FindingKind.PAID_THERE_NOT_HERE, record, charge, detail=detail))
            return
        finding = _heal(acquirer, record, charge)
        # As the charge now stands: a notification may have paid it meanwhile,
        # and the next record of this txid is judged against what happened.
        charge.refresh_from_db(fields=["status", "e2e_id"])
        if charge.e2e_id and charge.e2e_id != record.e2e_id:
            matching.findings.append(_another_pix(record, charge))
            return
        matching.findings.append(finding)
        if finding.healed:
            matching.match(record.amount)
            if record.returns or record.returned:
                # Paid, so healed (the status poll would credit it too), but part went back.
                matching.findings.append(_partial_return(record, charge))
        return
    if record.e2e_id and charge.e2e_id and record.e2e_id != charge.e2e_id:
        matching.findings.append(_another_pix(record, charge))
        return
    if charge.status == ChargeStatus.CHARGEBACK or _refunded_after_chargeback(record, charge):
        by_refund = _returned_by_refund(record)
        if by_refund > 0:
            _refunded_and_charged_back(record, charge, by_refund, matching)
            return
        if charge.status == ChargeStatus.CHARGEBACK:
            matching.match(record.amount)
            return
    if (record.status is ProviderRecordStatus.REFUNDED) != (charge.status == ChargeStatus.REFUNDED):
        matching.findings.append(_finding(FindingKind.REFUND_DIFFERS, record, charge))
        return
    if charge.status == ChargeStatus.PAID and record.returned:
        matching.findings.append(_partial_return(record, charge))
        return
    matching.match(record.amount)


def _repeated(record: ProviderPixRecord, first: ProviderPixRecord, charge: Charge | None, matching: Matching) -> None:
    """A second record with an e2e id the listing already gave another record."""
    detail = (
        f"Mesmo e2e id de outro registro da listagem (txid {first.reference or '—'}, {brl(first.amount)}, "
        f"{first.status.value}); este registro não foi aplicado."
    )
    matching.findings.append(_finding(FindingKind.DUPLICATE_E2E, record, charge, detail=detail))


def _failed(record: ProviderPixRecord | None, charge: Charge | None, detail: str) -> Finding:
    return _finding(FindingKind.RECORD_FAILED, record, charge, detail=detail)


def charges_match(
    acquirer: Acquirer,
    records: Sequence[ProviderPixRecord],
    start: dt.datetime,
    end: dt.datetime,
    matching: Matching,
) -> None:
    """The acquirer's received listing for ``[start, end)`` against its charges."""
    pix, repeats, states = _received(records)
    txids = {r.reference for r in pix + [r for r, _ in repeats] if r.reference}
    fields = ("pk", "txid", "status", "amount", "e2e_id", "acquirer_id", "kind")
    charges = {c.txid: c for c in Charge.objects.filter(acquirer=acquirer, txid__in=txids).only(*fields)}
    holders = _holders({r.e2e_id for r in pix if r.e2e_id})
    seen: set[str] = set()
    for record in pix:
        charge = charges.get(record.reference)
        if charge is not None:
            seen.add(charge.txid)
        matching.judge(
            record,
            functools.partial(_judge, acquirer, record, charge, holders, matching),
            failed=functools.partial(_failed, record, charge),
        )
    for record, first in repeats:
        charge = charges.get(record.reference)
        matching.judge(
            record,
            functools.partial(_repeated, record, first, charge, matching),
            failed=functools.partial(_failed, record, charge),
        )
    paid_here = (
        Charge.objects.filter(acquirer=acquirer, paid_at__gte=start, paid_at__lt=end, status__in=PAID_ONCE)
        .exclude(txid__in=seen)
        .only("pk", "txid", "status", "amount", "e2e_id")
    )
    for charge in paid_here.iterator():
        # Credited here, not received there: an alarm for staff, never debited automatically.
        logger.error("reconciliation: charge %s is paid here but %s does not list it", charge.pk, acquirer.key)
        matching.findings.append(_finding(FindingKind.PAID_HERE_UNKNOWN_THERE, states.get(charge.txid), charge))
        matching.flush()
