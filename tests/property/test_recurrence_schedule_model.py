"""Properties of a Pix Automático recurrence's calendar
(payments.recurrence_schedule), over random periodicities, start and end days:

- due dates strictly increase, start at ``dataInicial``, never pass
  ``dataFinal``; each falls in its own cycle, and a day belongs to exactly the
  cycle between two due dates;
- monthly days keep the anchor's day, clamped to the month's last;
- a year of monthly cycles is 12, of weekly 52 or 53;
- a cobr's creation window is ``[due - 10, due - 2]``, always before the due date;
- retries the beat asks for: at most 3, strictly increasing, each after the
  first attempt, within 7 days after the due date, before the next cycle,
  in the future, and each one :func:`check_retry` accepts.

Pure Python. Derandomized so CI is deterministic.
"""

from __future__ import annotations

import calendar
import datetime as dt
import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from payments.recurrence_schedule import (
    MAX_RETRIES,
    RETRY_SPAN_DAYS,
    InvalidRetry,
    check_retry,
    creation_window,
    cycle_index,
    due_date,
    due_dates,
    next_retry_date,
    settlement_date,
)
from payments.recurrence_terms import Calendario, Periodicidade

SETTINGS = settings(
    max_examples=300, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow]
)
days = st.dates(min_value=dt.date(2024, 1, 1), max_value=dt.date(2035, 12, 31))
calendars = st.builds(
    lambda start, kind, span: Calendario(start, kind, None if span is None else start + dt.timedelta(days=span)),
    days,
    st.sampled_from(Periodicidade),
    st.none() | st.integers(min_value=0, max_value=3 * 366),
)


def bounded(cal: Calendario) -> list[dt.date]:
    return list(due_dates(cal, until=cal.data_inicial + dt.timedelta(days=4 * 366)))


@SETTINGS
@given(calendars)
def test_cycles_increase_and_stay_within_the_term(cal: Calendario) -> None:
    dues = bounded(cal)
    assert dues[0] == cal.data_inicial
    assert all(a < b for a, b in itertools.pairwise(dues))
    if cal.data_final is not None:
        assert all(day <= cal.data_final for day in dues)
        assert due_date(cal, len(dues)) > cal.data_final
    for k, day in enumerate(dues):
        assert cycle_index(cal, day) == k
        assert cycle_index(cal, day - dt.timedelta(days=1)) == (k - 1 if k else None)


@SETTINGS
@given(calendars, st.integers(min_value=0, max_value=60))
def test_monthly_days_keep_the_anchor_clamped(cal: Calendario, k: int) -> None:
    if cal.periodicidade is Periodicidade.SEMANAL:
        assert (due_date(cal, k) - cal.data_inicial).days == 7 * k
        return
    day = due_date(cal, k)
    last = calendar.monthrange(day.year, day.month)[1]
    assert day.day == min(cal.data_inicial.day, last)
    months = (day.year - cal.data_inicial.year) * 12 + day.month - cal.data_inicial.month
    assert months == k * cal.periodicidade.months


@SETTINGS
@given(days)
def test_a_year_of_monthly_cycles_is_twelve(start: dt.date) -> None:
    year_later = (
        start.replace(year=start.year + 1) if (start.month, start.day) != (2, 29) else dt.date(start.year + 1, 3, 1)
    )
    end = year_later - dt.timedelta(days=1)
    assert len(list(due_dates(Calendario(start, Periodicidade.MENSAL, end)))) == 12
    assert len(list(due_dates(Calendario(start, Periodicidade.SEMANAL, end)))) in (52, 53)
    assert len(list(due_dates(Calendario(start, Periodicidade.TRIMESTRAL, end)))) == 4
    assert len(list(due_dates(Calendario(start, Periodicidade.ANUAL, end)))) == 1


@SETTINGS
@given(days)
def test_the_creation_window_is_ten_to_two_days_before(due: dt.date) -> None:
    window = creation_window(due)
    assert window.opens < window.closes < due
    assert (due - window.opens).days == 10
    assert (due - window.closes).days == 2
    assert window.contains(window.opens)
    assert window.contains(window.closes)
    assert not window.contains(window.opens - dt.timedelta(days=1))
    assert not window.contains(due - dt.timedelta(days=1))
    assert window.missed(due - dt.timedelta(days=1))


@SETTINGS
@given(
    calendars,
    st.integers(min_value=0, max_value=20),
    st.lists(st.booleans(), min_size=4, max_size=4),
    st.lists(st.integers(min_value=1, max_value=7), min_size=1, max_size=5),
)
def test_retries_are_at_most_three_within_seven_days(
    cal: Calendario, k: int, late: list[bool], offsets: list[int]
) -> None:
    due, next_due = due_date(cal, k), due_date(cal, k + 1)
    settled = settlement_date(due)
    today = settled
    taken: list[dt.date] = []
    while day := next_retry_date(
        due=due, settled_first=settled, next_due=next_due, today=today, previous=taken, offsets=offsets
    ):
        check_retry(
            day, due=due, settled_first=settled, next_due=next_due, today=today, previous=taken, allows_retries=True
        )
        taken.append(day)
        # the attempt fails on its day; the beat notices then, or a day late
        today = day + dt.timedelta(days=late[len(taken) - 1])
    assert len(taken) <= MAX_RETRIES
    assert all(a < b for a, b in itertools.pairwise(taken))
    assert all(settled < day <= due + dt.timedelta(days=RETRY_SPAN_DAYS) for day in taken)
    assert all(day < next_due for day in taken)
    if settled == due and (next_due - due).days > RETRY_SPAN_DAYS and not any(late) and offsets == [1, 3, 7]:
        assert len(taken) == MAX_RETRIES


def test_retry_refusals() -> None:
    due = dt.date(2024, 6, 20)  # cobRResponse3's due date, a Thursday
    common: dict[str, object] = {"due": due, "settled_first": due, "next_due": dt.date(2024, 7, 20), "today": due}
    check_retry(dt.date(2024, 6, 27), previous=[], allows_retries=True, **common)  # type: ignore[arg-type]
    refused: list[tuple[dt.date, dict[str, object]]] = [
        (dt.date(2024, 6, 22), {"allows_retries": False}),
        (dt.date(2024, 6, 22), {"attempt_pending": True}),
        (dt.date(2024, 6, 20), {}),
        (dt.date(2024, 6, 23), {"settled_first": dt.date(2024, 6, 23), "today": dt.date(2024, 6, 21)}),
        (dt.date(2024, 6, 28), {}),
        (dt.date(2024, 6, 22), {"previous": [dt.date(2024, 6, 22)]}),
        (dt.date(2024, 6, 22), {"previous": [dt.date(2024, 6, 24)]}),
        (dt.date(2024, 6, 27), {"previous": [dt.date(2024, 6, 21), dt.date(2024, 6, 22), dt.date(2024, 6, 23)]}),
    ]
    for day, overrides in refused:
        kwargs = {"previous": [], "allows_retries": True, **common, **overrides}
        with pytest.raises(InvalidRetry):
            check_retry(day, **kwargs)  # type: ignore[arg-type]


def test_weekly_retries_stop_before_the_next_cycle() -> None:
    cal = Calendario(dt.date(2024, 6, 3), Periodicidade.SEMANAL)
    due, next_due = due_date(cal, 0), due_date(cal, 1)
    day = next_retry_date(due=due, settled_first=due, next_due=next_due, today=dt.date(2024, 6, 9), previous=[])
    assert day is None or day < next_due
    assert (
        next_retry_date(due=due, settled_first=due, next_due=next_due, today=dt.date(2024, 6, 9), previous=[]) is None
    )


def test_settlement_moves_to_the_next_business_day_when_asked() -> None:
    saturday = dt.date(2024, 6, 22)
    assert settlement_date(saturday) == dt.date(2024, 6, 24)
    assert settlement_date(saturday, ajuste_dia_util=False) == saturday
    assert settlement_date(saturday, business_day=lambda day: day.weekday() == 1) == dt.date(2024, 6, 25)
