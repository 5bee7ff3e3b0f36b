"""Settlement per day (issue 16): for one account and each America/Sao_Paulo
day of a period, what came in, what went out, the platform's fees and the
balance at the end of the day, all from the ledger.

- ``credits``: the sum of the day's positive ledger entries, ``debits``: the
  sum of its negative ones (as a positive number), exactly as the ledger
  moved the balance. So ``closing(previous day) + credits - debits ==
  closing(day)``, to the centavo, by construction.
- ``fees``: the platform's fees behind the day's entries, for reading only:
  they are already inside ``credits`` and ``debits``, never to be taken off
  again. A charge credits its ``liquid_amount`` (its ``platform_tax`` netted
  out); a withdrawal debits its ``total_debit`` (its ``fee`` included); a
  failed or canceled withdrawal gives its ``total_debit`` back, fee included
  (a negative fee). Refunds, chargebacks and returns move the liquid amount
  and neither charge nor return a fee. The records that know each fee
  belong to apps above this one: they register a :class:`SettlementFee`.
- ``med_blocked``, ``med_released``, ``med_returned``: the MED entries
  (``med_hold``, ``med_hold_release``, ``med_return``) of the day, as
  positive numbers: also already inside ``credits`` and ``debits``, shown
  apart because a block is not money gone (it comes back when the infraction
  is rejected) while a return is.
- ``closing_balance``: the balance after the day's entries: the opening
  balance (``balance_after`` of the last entry before the period) plus every
  day's net so far. It equals the ``balance_after`` of the day's last entry:
  an account's entries are posted one at a time under its balance lock, each
  timed inside it, so their times follow their ids.

One SQL statement groups the period's entries by local day (the index
``(account, created_at, id)`` reads the period), one reads the opening
balance; days without entries are filled in (at most 31).
"""

from __future__ import annotations

import datetime as dt
import zoneinfo
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db.models import BigIntegerField, Case, Count, Q, Sum, Value, When
from django.db.models.functions import TruncDate
from django.utils import timezone

from accounts.models import Account, LedgerEntry, LedgerKind

SAO_PAULO = zoneinfo.ZoneInfo("America/Sao_Paulo")
#: The longest period (days, both ends included).
MAX_DAYS = 31
PERIOD_REVERSED = "A data final não pode ser anterior à inicial."
PERIOD_TOO_LONG = f"O período do fechamento é de no máximo {MAX_DAYS} dias."


def settlement_period_error(date_start: dt.date, date_end: dt.date) -> str | None:
    """Why the period may not be settled (a message about its end), or None."""
    if date_end < date_start:
        return PERIOD_REVERSED
    if (date_end - date_start).days + 1 > MAX_DAYS:
        return PERIOD_TOO_LONG
    return None


@dataclass(frozen=True)
class SettlementFee:
    """The fee behind the ledger entries of one ``kind`` whose reference
    matches ``pattern`` (a PostgreSQL regex the whole reference matches):
    ``fee()`` is an expression of the entry's ``OuterRef("reference")``,
    evaluated only where ``pattern`` matches; positive for a fee charged,
    negative for a fee given back."""

    kind: str
    pattern: str
    fee: Callable[[], Any]


_FEES: list[SettlementFee] = []


def settlement_fee_register(fee: SettlementFee) -> None:
    if fee not in _FEES:
        _FEES.append(fee)


@dataclass(frozen=True)
class SettlementDay:
    date: dt.date
    credits: int
    debits: int
    fees: int
    entries: int
    closing_balance: int
    med_blocked: int = 0
    med_released: int = 0
    med_returned: int = 0


_TOTALS = ("credits", "debits", "fees", "entries", "med_blocked", "med_released", "med_returned")


@dataclass(frozen=True)
class Settlement:
    date_start: dt.date
    #: The last day listed: the period's end, or today when it ends later.
    date_end: dt.date
    opening_balance: int
    days: list[SettlementDay]

    @property
    def closing_balance(self) -> int:
        return self.days[-1].closing_balance if self.days else self.opening_balance

    @property
    def totals(self) -> dict[str, int]:
        return {name: sum(getattr(day, name) for day in self.days) for name in _TOTALS}


def local_midnight(day: dt.date) -> dt.datetime:
    return dt.datetime.combine(day, dt.time(), tzinfo=SAO_PAULO)


def _fee_of_entry() -> Case:
    whens = [When(kind=f.kind, reference__regex=f.pattern, then=f.fee()) for f in _FEES]
    return Case(*whens, default=Value(0), output_field=BigIntegerField())


def account_settlement(*, account: Account, date_start: dt.date, date_end: dt.date) -> Settlement:
    """The account's settlement from ``date_start`` to ``date_end`` (local
    days, both included; the caller checks :func:`settlement_period_error`).
    Days after today are not listed: they have no entries yet."""
    today = timezone.localdate(timezone.now(), SAO_PAULO)
    last = min(date_end, today)
    entries = LedgerEntry.objects.filter(account=account)
    start = local_midnight(date_start)
    opening = (
        entries.filter(created_at__lt=start)
        .order_by("-created_at", "-id")
        .values_list("balance_after", flat=True)
        .first()
    ) or 0
    if last < date_start:
        return Settlement(date_start=date_start, date_end=last, opening_balance=opening, days=[])
    rows = (
        entries.filter(created_at__gte=start, created_at__lt=local_midnight(last + dt.timedelta(days=1)))
        .annotate(day=TruncDate("created_at", tzinfo=SAO_PAULO))
        .values("day")
        .annotate(
            credits=Sum("amount", filter=Q(amount__gt=0), default=0),
            debits=Sum("amount", filter=Q(amount__lt=0), default=0),
            fees=Sum(_fee_of_entry(), default=0),
            entries=Count("id"),
            med_blocked=Sum("amount", filter=Q(kind=LedgerKind.MED_HOLD), default=0),
            med_released=Sum("amount", filter=Q(kind=LedgerKind.MED_HOLD_RELEASE), default=0),
            med_returned=Sum("amount", filter=Q(kind=LedgerKind.MED_RETURN), default=0),
        )
        .order_by("day")
    )
    by_day = {row["day"]: row for row in rows}
    days: list[SettlementDay] = []
    balance = opening
    for n in range((last - date_start).days + 1):
        day = date_start + dt.timedelta(days=n)
        row = by_day.get(day) or dict.fromkeys(_TOTALS, 0)
        balance += row["credits"] + row["debits"]
        days.append(
            SettlementDay(
                date=day,
                credits=row["credits"],
                debits=-row["debits"],
                fees=row["fees"],
                entries=row["entries"],
                closing_balance=balance,
                # Debits shown as positive numbers, as ``debits`` is.
                med_blocked=-row["med_blocked"],
                med_released=row["med_released"],
                med_returned=-row["med_returned"],
            )
        )
    return Settlement(date_start=date_start, date_end=last, opening_balance=opening, days=days)
