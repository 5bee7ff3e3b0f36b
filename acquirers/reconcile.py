"""What reconciliation with an acquirer finds, and who matches what.

The listings come from the adapters (``list_received``, ``list_sent``);
matching them against our records belongs to the apps that own the records
(charges: ``payments``; payouts: ``withdrawals``), which register a matcher
per listing here from ``AppConfig.ready``. The run that fetches the
listings, calls the matchers and stores what they found lives in
``payments.reconcile_acquirer``; this module is below both apps, so neither
imports the other.
"""

from __future__ import annotations

import datetime as dt
import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from acquirers.adapters.base import ProviderPixRecord
from acquirers.models import Acquirer

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


@dataclass
class Matching:
    """What one matcher made of one listing."""

    findings: list[Finding] = field(default_factory=list)
    matched_count: int = 0
    matched_amount: int = 0

    def match(self, amount: int) -> None:
        self.matched_count += 1
        self.matched_amount += amount


#: ``matcher(acquirer, records, start, end)``: the listing of the window
#: ``[start, end)`` against our records of that acquirer. It may heal (apply
#: a confirmed event through the owner's transition service, in its own
#: short transactions); it never debits or credits anything else.
Matcher = Callable[[Acquirer, Sequence[ProviderPixRecord], dt.datetime, dt.datetime], Matching]
_MATCHERS: dict[Direction, Matcher] = {}


def register(direction: Direction, matcher: Matcher) -> None:
    _MATCHERS[direction] = matcher


def matcher(direction: Direction) -> Matcher | None:
    return _MATCHERS.get(direction)
