"""Matching an acquirer's sent Pix against our withdrawals (the ``sent``
listing's matcher of :mod:`reconciliation.run`), by the payout's idempotency id.

A payout sent and settled there whose withdrawal is still approved here is
healed: the confirmed payment is applied through
:func:`withdrawals.events.payout_event_apply` (no money moves: the debit
was taken when the withdrawal was accepted). Everything else is a finding
for staff and moves no money: a payout sent there for a withdrawal that
failed here (its debit given back) is never debited again automatically,
nor is a payout that failed there credited back.

Each record is judged through ``Matching.judge`` (its own savepoint; an
error is an item for that record, the day goes on). A record that repeats a
payout's idempotency id with another e2e id (two Pix sent for one payout),
or an e2e id another record already named, is reported, never applied.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import logging
from collections.abc import Sequence

from acquirers.adapters.base import Notification, NotificationEvent, ProviderPixRecord, ProviderRecordStatus
from acquirers.models import Acquirer
from core.exceptions import PixServiceError
from reconciliation.findings import Finding, FindingKind, Matching, Ours
from withdrawals.events import payout_event_apply
from withdrawals.models import Withdrawal, WithdrawalStatus, WithdrawalTransition

logger = logging.getLogger(__name__)

TARGET = "withdrawals.withdrawal"
_SETTLED_HERE = frozenset({WithdrawalStatus.PAID, WithdrawalStatus.REFUNDED})
_NOT_PAID_HERE = frozenset({WithdrawalStatus.FAILED, WithdrawalStatus.CANCELED, WithdrawalStatus.PENDING})


def _finding(
    kind: FindingKind,
    record: ProviderPixRecord | None,
    withdrawal: Withdrawal | None,
    *,
    healed: bool = False,
    detail: str = "",
) -> Finding:
    ours = None
    if withdrawal is not None:
        ours = Ours(
            TARGET,
            str(withdrawal.pk),
            withdrawal.status,
            withdrawal.liquid_amount,
            withdrawal.idempotency_id,
            withdrawal.e2e_id,
        )
    finding = Finding.of(kind, record, ours, key_by_e2e=False, healed=healed, detail=detail)
    if kind is FindingKind.DUPLICATE_E2E and record is not None:
        # One payout may be named by several records: each is an item of its own.
        finding = dataclasses.replace(finding, key=f"{record.reference}:{record.e2e_id or ''}")
    return finding


def _heal(acquirer: Acquirer, record: ProviderPixRecord, withdrawal: Withdrawal) -> Finding:
    notification = Notification(
        event=NotificationEvent.PAYOUT_PAID,
        reference=withdrawal.idempotency_id,
        e2e_id=record.e2e_id,
        occurred_at=record.occurred_at,
        amount=record.amount,
        raw=record.raw,
    )
    try:
        result = payout_event_apply(
            acquirer=acquirer, notification=notification, source=WithdrawalTransition.Source.ACQUIRER
        )
    except PixServiceError as exc:
        return _finding(
            FindingKind.PAID_THERE_NOT_HERE, record, withdrawal, detail=f"Não aplicado: {exc.message}"[:500]
        )
    logger.warning(
        "reconciliation: payout %s was made by %s but approved here: %s",
        withdrawal.pk,
        acquirer.key,
        "payment applied" if result.changed else f"nothing applied ({result.detail or 'already paid'})",
    )
    return _finding(
        FindingKind.PAID_THERE_NOT_HERE, record, withdrawal, healed=True, detail="Pagamento confirmado aplicado."
    )


def _judge(acquirer: Acquirer, record: ProviderPixRecord, withdrawal: Withdrawal, matching: Matching) -> None:
    status = withdrawal.status
    if record.amount != withdrawal.liquid_amount:
        matching.findings.append(_finding(FindingKind.AMOUNT_DIFFERS, record, withdrawal))
        return
    if record.status is ProviderRecordStatus.PAID:
        if status in _SETTLED_HERE:
            matching.match(record.amount)
        elif status == WithdrawalStatus.APPROVED:
            finding = _heal(acquirer, record, withdrawal)
            matching.findings.append(finding)
            if finding.healed:
                matching.match(record.amount)
        else:
            logger.error("reconciliation: payout %s was made by %s but is %s here", withdrawal.pk, acquirer.key, status)
            matching.findings.append(_finding(FindingKind.PAYOUT_SENT_THERE_FAILED_HERE, record, withdrawal))
        return
    if record.status is ProviderRecordStatus.PROCESSING:
        if status in _NOT_PAID_HERE:
            # Still in flight there although we gave the debit back: it may yet land.
            matching.findings.append(_finding(FindingKind.PAYOUT_SENT_THERE_FAILED_HERE, record, withdrawal))
        else:
            matching.match(record.amount)
        return
    # Failed there.
    if status in _SETTLED_HERE:
        matching.findings.append(_finding(FindingKind.PAYOUT_FAILED_THERE_PAID_HERE, record, withdrawal))
    else:
        # Failed on both sides, or still approved here (the payout engine settles it with the acquirer).
        matching.match(record.amount)


def _sent(
    records: Sequence[ProviderPixRecord],
) -> tuple[dict[str, ProviderPixRecord], list[tuple[ProviderPixRecord, str]], list[ProviderPixRecord]]:
    """The latest record of each payout (by idempotency id); the records
    that repeat a payout with another e2e id, or an e2e id another payout's
    record named, each with why; and the records that name no payout."""
    latest: dict[str, ProviderPixRecord] = {}
    repeats: list[tuple[ProviderPixRecord, str]] = []
    named: dict[str, str] = {}  # e2e id -> the idempotency id whose record named it first
    unnamed: list[ProviderPixRecord] = []
    for record in records:
        if not record.reference:
            unnamed.append(record)
            continue
        owner = named.setdefault(record.e2e_id, record.reference) if record.e2e_id else record.reference
        earlier = latest.get(record.reference)
        if owner != record.reference:
            repeats.append((record, f"Mesmo e2e id do envio {owner}; este registro não foi aplicado."))
            continue
        if earlier is not None and earlier.e2e_id and record.e2e_id and earlier.e2e_id != record.e2e_id:
            # Two Pix sent under one idempotency id: the payout may have been paid twice.
            repeats.append((earlier, f"Outro Pix ({record.e2e_id}) enviado com o mesmo id de envio."))
        latest[record.reference] = record
    return latest, repeats, unnamed


def _repeated(record: ProviderPixRecord, detail: str, withdrawal: Withdrawal | None, matching: Matching) -> None:
    matching.findings.append(_finding(FindingKind.DUPLICATE_E2E, record, withdrawal, detail=detail))


def _unknown(record: ProviderPixRecord, matching: Matching) -> None:
    matching.findings.append(_finding(FindingKind.UNKNOWN_HERE, record, None))


def _failed(record: ProviderPixRecord | None, withdrawal: Withdrawal | None, detail: str) -> Finding:
    return _finding(FindingKind.RECORD_FAILED, record, withdrawal, detail=detail)


def payouts_match(
    acquirer: Acquirer,
    records: Sequence[ProviderPixRecord],
    start: dt.datetime,
    end: dt.datetime,
    matching: Matching,
) -> None:
    """The acquirer's sent listing for ``[start, end)`` against the payouts sent to it."""
    latest, repeats, unnamed = _sent(records)
    withdrawals = {
        w.idempotency_id: w
        for w in Withdrawal.objects.filter(idempotency_id__in=latest).only(
            "pk", "idempotency_id", "status", "liquid_amount", "e2e_id", "acquirer_id", "payout_owner_id"
        )
    }
    sent_here = set(
        Withdrawal.objects.filter(idempotency_id__in=latest, payout_attempts__acquirer=acquirer).values_list(
            "idempotency_id", flat=True
        )
    )
    seen: set[str] = set()
    for reference, record in latest.items():
        withdrawal = withdrawals.get(reference)
        if withdrawal is None or reference not in sent_here:
            matching.judge(
                record, functools.partial(_unknown, record, matching), failed=functools.partial(_failed, record, None)
            )
            continue
        seen.add(reference)
        matching.judge(
            record,
            functools.partial(_judge, acquirer, record, withdrawal, matching),
            failed=functools.partial(_failed, record, withdrawal),
        )
    for record, detail in repeats:
        withdrawal = withdrawals.get(record.reference) if record.reference in sent_here else None
        matching.judge(
            record,
            functools.partial(_repeated, record, detail, withdrawal, matching),
            failed=functools.partial(_failed, record, withdrawal),
        )
    for record in unnamed:
        # Sent without our idempotency id (from the acquirer's app, say): not a payout of ours.
        matching.judge(
            record, functools.partial(_unknown, record, matching), failed=functools.partial(_failed, record, None)
        )
    paid_here = (
        Withdrawal.objects.filter(acquirer=acquirer, paid_at__gte=start, paid_at__lt=end, status__in=_SETTLED_HERE)
        .exclude(idempotency_id__in=seen)
        .only("pk", "idempotency_id", "status", "liquid_amount", "e2e_id")
    )
    for withdrawal in paid_here.iterator():
        logger.error("reconciliation: payout %s is paid here but %s does not list it", withdrawal.pk, acquirer.key)
        matching.findings.append(_finding(FindingKind.PAID_HERE_UNKNOWN_THERE, None, withdrawal))
        matching.flush()
