"""What reconciliation with an acquirer finds, and how a matcher judges.

The listings come from the adapters (``list_received``, ``list_sent``); the
matchers (:mod:`reconciliation.charges`, :mod:`reconciliation.payouts`)
judge them against our records, and the daily run
(:mod:`reconciliation.run`) stores what they found.

A matcher judges each record through :meth:`Matching.judge`: one record at
a time, in its own savepoint, its findings stored with it. A record that
cannot be judged (a bug, a constraint it breaks) rolls back alone and
becomes a :attr:`FindingKind.RECORD_FAILED` finding; the rest of the day is
still judged.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import hashlib
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from celery.exceptions import SoftTimeLimitExceeded
from django.db import transaction

from acquirers.adapters.base import ProviderPixRecord
from acquirers.models import Acquirer

logger = logging.getLogger(__name__)

Direction = Literal["received", "sent"]
DIRECTIONS: tuple[Direction, ...] = ("received", "sent")
#: What the acquirer "says" of one of our records its listing does not have.
NOT_LISTED = "not_listed"


class FindingKind(enum.StrEnum):
    """A mismatch between the acquirer's listing and our records."""

    #: The acquirer received (or sent) it; here it is pending or failed.
    #: Healed at once when pending here (the confirmed event is applied).
    PAID_THERE_NOT_HERE = "paid_there_not_here"
    #: Paid here; the acquirer's listing does not have it. An alarm: never debited automatically.
    PAID_HERE_UNKNOWN_THERE = "paid_here_unknown_there"
    AMOUNT_DIFFERS = "amount_differs"
    #: The acquirer sent the payout; here the withdrawal failed (its debit was given back).
    PAYOUT_SENT_THERE_FAILED_HERE = "payout_sent_there_failed_here"
    #: The acquirer did not make the payout; here the withdrawal is paid.
    PAYOUT_FAILED_THERE_PAID_HERE = "payout_failed_there_paid_here"
    #: Returned to the payer on one side only (devolução there, refund here).
    REFUND_DIFFERS = "refund_differs"
    #: A record of the acquirer's with no charge or withdrawal of ours.
    UNKNOWN_HERE = "unknown_here"
    #: A record whose e2e id (or, sent, whose reference) was already seen: on
    #: another record of the listing, or on another charge here. Never applied.
    DUPLICATE_E2E = "duplicate_e2e"
    #: A received Pix partly returned to the payer there (a devolução of part of
    #: it, or one still in progress) that we credit or credited in full.
    PARTIAL_RETURN = "partial_return"
    #: Returned to the payer there (a devolução) and charged back here (MED):
    #: the payer may have been repaid twice.
    REFUNDED_THERE_CHARGEBACK_HERE = "refunded_there_chargeback_here"
    #: The record could not be judged (an error), or not even read (an
    #: unreadable entry of the listing): nothing of it was applied.
    RECORD_FAILED = "record_failed"


@dataclass(frozen=True)
class Ours:
    """Our side of a finding: the charge's or withdrawal's, as its app reads it."""

    target_type: str  # "payments.charge", "withdrawals.withdrawal"
    target_id: str
    status: str
    amount: int
    reference: str  # the txid, or the payout's idempotency id
    e2e_id: str | None


@dataclass(frozen=True)
class Finding:
    """One mismatch, with what each side says. ``key`` identifies it across
    runs (the e2e id, else our reference): a rerun finds the same key."""

    kind: FindingKind
    key: str
    reference: str = ""
    e2e_id: str | None = None
    target_type: str = ""  # "payments.charge", "withdrawals.withdrawal"
    target_id: str = ""
    ours_status: str = ""
    ours_amount: int | None = None
    theirs_status: str = ""
    theirs_amount: int | None = None
    raw: Mapping[str, Any] = field(default_factory=dict)
    #: The confirmed event was applied: the mismatch is already fixed.
    healed: bool = False
    detail: str = ""
    #: What went back to the payer there, by MED and by refunds (centavos;
    #: None: not known): the evidence a refund's redébito is measured on.
    returned_by_med: int | None = None
    returned_by_refund: int | None = None

    @classmethod
    def of(
        cls,
        kind: FindingKind,
        record: ProviderPixRecord | None,
        ours: Ours | None,
        *,
        key_by_e2e: bool,
        healed: bool = False,
        detail: str = "",
    ) -> Finding:
        """The finding of ``record`` (None: not listed there) against our
        record (None: none of ours). Keyed by the e2e id first
        (``key_by_e2e``: received Pix, one charge may see several) or by our
        reference first (payouts: one send per idempotency id)."""
        reference = (record.reference if record is not None else "") or (ours.reference if ours else "")
        e2e_id = (record.e2e_id if record is not None else None) or (ours.e2e_id if ours else None)
        if key_by_e2e:
            # The acquirer's record names it (its Pix), else our reference.
            key = ((record.e2e_id or record.reference) if record is not None else "") or reference
        else:
            key = reference or e2e_id or ""
        return cls(
            kind=kind,
            key=key,
            reference=reference,
            e2e_id=e2e_id,
            target_type=ours.target_type if ours else "",
            target_id=ours.target_id if ours else "",
            ours_status=ours.status if ours else "",
            ours_amount=ours.amount if ours else None,
            theirs_status=record.status.value if record is not None else NOT_LISTED,
            theirs_amount=record.amount if record is not None else None,
            raw=dict(record.raw) if record is not None else {},
            healed=healed,
            detail=detail,
        )

    @property
    def amount(self) -> int:
        """What the mismatch is worth in the report: the acquirer's amount, else ours."""
        return self.theirs_amount if self.theirs_amount is not None else (self.ours_amount or 0)


def unreadable_finding(record: ProviderPixRecord) -> Finding:
    """The item of a listing's entry its adapter could not read
    (:attr:`~acquirers.adapters.base.ProviderRecordStatus.UNREADABLE`): it
    names no Pix we can trust, so it is never matched, only reported with
    the entry as it came. Keyed by the entry's content: a rerun that lists
    it again finds the same item, and two different bad entries are two."""
    content = json.dumps(dict(record.raw), sort_keys=True, default=str, ensure_ascii=False)
    digest = hashlib.sha256(content.encode()).hexdigest()[:32]
    detail = f"Registro ilegível na listagem da adquirente; nada aplicado. {record.problem}"[:500]
    finding = Finding.of(FindingKind.RECORD_FAILED, record, None, key_by_e2e=True, detail=detail)
    return dataclasses.replace(finding, key=f"ilegivel:{digest}", theirs_amount=None)


#: Stores one finding as it comes (the run's; None: kept in memory only).
Store = Callable[[Finding], object]
#: The finding of a record that could not be judged, given the error's text.
FailedFinding = Callable[[str], Finding]


@dataclass
class Matching:
    """What one matcher made of one listing. Findings go to ``store`` as they
    come (per record, with what the record changed), not at the end: a run
    that dies midway keeps everything judged before."""

    findings: list[Finding] = field(default_factory=list)
    matched_count: int = 0
    matched_amount: int = 0
    store: Store | None = None
    _stored: int = field(default=0, init=False, repr=False)  # how many findings went to ``store``

    def match(self, amount: int) -> None:
        self.matched_count += 1
        self.matched_amount += amount

    def judge(self, record: ProviderPixRecord | None, judge: Callable[[], None], *, failed: FailedFinding) -> None:
        """Judge one record (``judge()`` appends its findings, heals, counts
        matches) in a savepoint of its own, storing its findings inside it:
        what it healed and what it reported commit together. Any error rolls
        back this record alone (heal, findings, counts) and becomes the
        finding ``failed(detail)``; the caller goes on with the next record.
        A task's time limit is not the record's fault: it ends the run."""
        self.flush()
        mark, counts = len(self.findings), (self.matched_count, self.matched_amount)
        try:
            with transaction.atomic():
                judge()
                self.flush()
        except SoftTimeLimitExceeded:
            raise
        except Exception as exc:  # whatever it is, one bad record must never stop the day
            del self.findings[mark:]
            self._stored = min(self._stored, mark)
            self.matched_count, self.matched_amount = counts
            reference = (record.e2e_id or record.reference) if record is not None else ""
            logger.exception("reconciliation: record %s could not be judged", reference)
            self.findings.append(failed(f"Erro ao conferir o registro: {type(exc).__name__}: {exc}"[:500]))
            self.flush()  # its own transaction: if the database is gone this fails the run

    def flush(self) -> None:
        """Store the findings appended since the last flush."""
        while self._stored < len(self.findings):
            if self.store is not None:
                self.store(self.findings[self._stored])
            self._stored += 1


#: ``matcher(acquirer, records, start, end, matching)``: the listing of the
#: window ``[start, end)`` against our records of that acquirer, each record
#: through ``matching.judge``. It may heal (apply a confirmed event through
#: the owner's transition service); it never debits or credits anything else.
Matcher = Callable[[Acquirer, Sequence[ProviderPixRecord], dt.datetime, dt.datetime, Matching], None]
