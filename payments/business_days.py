"""Brazilian business days for due-date charges (API Pix ``cobv``).

A business day is a weekday that is not a **national** banking holiday:

- the fixed national holidays (Lei 662/1949 and later laws): 1 January,
  21 April (Tiradentes), 1 May, 7 September, 12 October, 2 November,
  15 November, 25 December, and 20 November (Consciência Negra, national
  from 2024 by Lei 14.759/2023);
- the movable ones, from Easter: Carnaval Monday and Tuesday (no banking,
  though not a holiday by federal law), Good Friday and Corpus Christi.

It **ignores state and municipal holidays** (and the banks' 31 December
without public service). API Pix wants them too: the paying PSP sends the
payer's ``codMun`` so that the receiving PSP counts the holidays of the
payer's town (bacen/pix-api issues #167, #330, after Lei 7089/1983). A caller
that knows the payer's town passes its own counter to
:func:`payments.due_amounts.amount_due`; this one is the national floor.
"""

from __future__ import annotations

import datetime as dt
from functools import lru_cache

__all__ = ["business_days_between", "easter", "is_business_day", "national_holidays", "next_business_day"]

_FIXED = ((1, 1), (4, 21), (5, 1), (9, 7), (10, 12), (11, 2), (11, 15), (12, 25))
#: Consciência Negra became a national holiday with Lei 14.759 of 21 December 2023.
_CONSCIENCIA_NEGRA_SINCE = 2024


def easter(year: int) -> dt.date:
    """Easter Sunday of ``year`` in the Gregorian calendar (the anonymous, Meeus/Jones/Butcher, algorithm)."""
    a = year % 19
    b, c = divmod(year, 100)
    d, e = divmod(b, 4)
    f = (b + 8) // 25
    g = (b - f + 1) // 3
    h = (19 * a + b - d - g + 15) % 30
    i, k = divmod(c, 4)
    weekday_offset = (32 + 2 * e + 2 * i - h - k) % 7
    m = (a + 11 * h + 22 * weekday_offset) // 451
    month, day = divmod(h + weekday_offset - 7 * m + 114, 31)
    return dt.date(year, month, day + 1)


@lru_cache(maxsize=256)
def national_holidays(year: int) -> frozenset[dt.date]:
    """The national banking holidays of ``year`` (see the module's docstring for what is left out)."""
    days = {dt.date(year, month, day) for month, day in _FIXED}
    if year >= _CONSCIENCIA_NEGRA_SINCE:
        days.add(dt.date(year, 11, 20))
    sunday = easter(year)
    for offset in (-48, -47, -2, 60):  # Carnaval Monday, Tuesday; Good Friday; Corpus Christi
        days.add(sunday + dt.timedelta(days=offset))
    return frozenset(days)


def is_business_day(day: dt.date) -> bool:
    """A weekday that is not a national holiday."""
    return day.weekday() < 5 and day not in national_holidays(day.year)


def next_business_day(day: dt.date) -> dt.date:
    """``day`` itself when it is a business day, else the first business day after it."""
    while not is_business_day(day):
        day += dt.timedelta(days=1)
    return day


def business_days_between(start: dt.date, end: dt.date) -> int:
    """How many business days ``d`` have ``start < d <= end`` (0 when ``end <= start``).

    The shape :func:`payments.due_amounts.amount_due` takes: the days late
    from a due date to a payment, or early from a payment to a due date.
    """
    count = 0
    day = start + dt.timedelta(days=1)
    while day <= end:
        count += is_business_day(day)
        day += dt.timedelta(days=1)
    return count
