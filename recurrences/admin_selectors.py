"""What the back office reads of Pix Automático: the outcomes per payer bank
(ISPB) and journey, and the overview card's counts.

PSPs' users report payer banks that fail some journeys (a push request
that never reaches the payer, a cycle their bank refuses at every attempt):
the report shows those outcomes per bank, not folded into one total. Each
figure is one aggregate over its table, grouped, never one query per bank.
(The API's own selectors are ``recurrences.selectors``.)
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from django.db.models import Count, F, Q, QuerySet, TextField, Value
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Coalesce, NullIf
from django.utils import timezone

from payments.choices import ChargeStatus
from payments.due_payments import BRT
from recurrences.models import CancelledBy, Cycle, CycleStatus, Recurrence, RecurrenceStatus

#: The charge's statuses once the cycle's Pix was credited (``recurrences.payloads.cycle_status``'s money ones).
MONEY_MOVED = (ChargeStatus.PAID, ChargeStatus.REFUNDED, ChargeStatus.CHARGEBACK)
#: Who ends a recurrence on the payer's side, and on the receiver's (the account, its PSP, our staff).
BY_PAYER = (CancelledBy.PAYER, CancelledBy.PAYER_PSP)
BY_RECEIVER = (CancelledBy.MERCHANT, CancelledBy.RECEIVER_PSP, CancelledBy.STAFF)
#: The overview counts the failed and missed cycles due in this many days up to today.
RECENT_DAYS = 7


def payer_ispb(prefix: str = "") -> Coalesce:
    """The payer's bank of a recurrence (``prefix`` reaches it from a cycle:
    ``"recurrence__"``): the ISPB the acquirer reported, else the one the
    push request was addressed to. A push the payer's bank never answered
    has only the latter, and that is the bank the report must show."""
    return Coalesce(
        NullIf(F(f"{prefix}payer_ispb"), Value("")),
        KeyTextTransform("ispb", f"{prefix}payer_bank"),
        Value(""),
        output_field=TextField(),
    )


def payer_ispbs() -> list[str]:
    """Every payer ISPB known, for the lists' filters (a few hundred banks at most)."""
    found = Recurrence.objects.annotate(bank=payer_ispb()).values_list("bank", flat=True).distinct()
    return sorted(bank for bank in found if bank)


def with_payer_ispb(queryset: QuerySet[Recurrence], ispb: str) -> QuerySet[Recurrence]:
    return queryset.annotate(bank=payer_ispb()).filter(bank=ispb)


def cycles_with_payer_ispb(queryset: QuerySet[Cycle], ispb: str) -> QuerySet[Cycle]:
    return queryset.annotate(bank=payer_ispb("recurrence__")).filter(bank=ispb)


# --------------------------------------------------------------------------- outcomes per bank and journey


@dataclass
class Outcomes:
    """One payer bank's (ISPB) and journey's figures; ``ispb`` "" is "not known yet"."""

    ispb: str
    journey: str
    #: Recurrences created in the period, and where each stands now.
    created: int = 0
    #: Authorised at some point (some were cancelled since).
    approved: int = 0
    rejected: int = 0
    expired: int = 0
    cancelled_by_payer: int = 0
    cancelled_by_receiver: int = 0
    waiting: int = 0
    #: Cycles due in the period.
    paid_first: int = 0
    paid_after_retry: int = 0
    failed: int = 0
    missed: int = 0

    @property
    def approval_rate(self) -> float | None:
        """Of the recurrences the payer decided (authorised, rejected or let
        expire): those still waiting, or cancelled by the receiver before an
        answer, say nothing about the bank."""
        decided = self.approved + self.rejected + self.expired
        return self.approved / decided if decided else None

    @property
    def paid_rate(self) -> float | None:
        """Of the cycles that ended one way or the other (paid, failed, missed)."""
        ended = self.paid_first + self.paid_after_retry + self.failed + self.missed
        return (self.paid_first + self.paid_after_retry) / ended if ended else None

    def add(self, other: Outcomes) -> None:
        for name in (
            "created",
            "approved",
            "rejected",
            "expired",
            "cancelled_by_payer",
            "cancelled_by_receiver",
            "waiting",
            "paid_first",
            "paid_after_retry",
            "failed",
            "missed",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))


def _midnight(day: dt.date) -> dt.datetime:
    return dt.datetime.combine(day, dt.time(), tzinfo=BRT)


def outcomes(*, start: dt.date, end: dt.date) -> tuple[list[Outcomes], Outcomes]:
    """Per (payer ISPB, journey): the recurrences created from ``start`` to
    ``end`` (Brasília's days, both included) and where they stand, and the
    cycles due in those days and how they ended; with the totals. Two
    aggregates, grouped; rows in ISPB then journey order."""
    Status = RecurrenceStatus
    cancelled = Q(status=Status.CANCELLED)
    recurrences = (
        Recurrence.objects.filter(created_at__gte=_midnight(start), created_at__lt=_midnight(end + dt.timedelta(1)))
        .annotate(bank=payer_ispb())
        .values("bank", "journey")
        .annotate(
            created=Count("pk"),
            approved=Count("pk", filter=Q(approved_at__isnull=False)),
            rejected=Count("pk", filter=Q(status=Status.REJECTED)),
            expired=Count("pk", filter=Q(status=Status.EXPIRED)),
            cancelled_by_payer=Count("pk", filter=cancelled & Q(cancelled_by__in=BY_PAYER)),
            cancelled_by_receiver=Count("pk", filter=cancelled & Q(cancelled_by__in=BY_RECEIVER)),
            waiting=Count("pk", filter=Q(status=Status.CREATED)),
        )
    )
    paid = Q(charge__status__in=MONEY_MOVED)
    cycles = (
        Cycle.objects.filter(due_date__gte=start, due_date__lte=end)
        .annotate(bank=payer_ispb("recurrence__"), journey=F("recurrence__journey"))
        .values("bank", "journey")
        .annotate(
            paid_first=Count("pk", filter=paid & Q(retries=0)),
            paid_after_retry=Count("pk", filter=paid & Q(retries__gt=0)),
            failed=Count("pk", filter=Q(status=CycleStatus.FAILED) & ~paid),
            missed=Count("pk", filter=Q(status=CycleStatus.MISSED)),
        )
    )
    rows: dict[tuple[str, str], Outcomes] = {}
    grouped: list[dict[str, Any]] = [dict(found) for found in (*recurrences, *cycles)]
    for found in grouped:
        key = (found["bank"] or "", found["journey"])
        row = rows.setdefault(key, Outcomes(*key))
        for name, value in found.items():
            if name not in ("bank", "journey"):
                setattr(row, name, getattr(row, name) + value)
    total = Outcomes("", "")
    ordered = [rows[key] for key in sorted(rows, key=lambda k: (k[0] == "", k))]
    for row in ordered:
        total.add(row)
    return ordered, total


# --------------------------------------------------------------------------- the overview card


@dataclass(frozen=True)
class Attention:
    waiting_authorisation: int
    failed_recent: int
    missed_recent: int
    since: dt.date


def attention(*, today: dt.date | None = None) -> Attention:
    """Recurrences waiting for the payer's authorisation, and the cycles due
    in the last :data:`RECENT_DAYS` days (or ahead: a cycle misses its
    window two days before its due date) that failed or were missed."""
    day = today or timezone.localdate(timezone.now(), BRT)
    since = day - dt.timedelta(days=RECENT_DAYS)
    cycles = Cycle.objects.filter(due_date__gte=since, status__in=[CycleStatus.FAILED, CycleStatus.MISSED]).aggregate(
        failed=Count("pk", filter=Q(status=CycleStatus.FAILED)),
        missed=Count("pk", filter=Q(status=CycleStatus.MISSED)),
    )
    return Attention(
        waiting_authorisation=Recurrence.objects.filter(status=RecurrenceStatus.CREATED).count(),
        failed_recent=cycles["failed"],
        missed_recent=cycles["missed"],
        since=since,
    )
