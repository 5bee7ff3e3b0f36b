"""When a Pix Automático recurrence's cycles fall due, when each cycle's
charge (``/cobr``) may be sent, and when a failed cycle may be retried.
Pure Python, over :class:`payments.recurrence_terms.Calendario`.

API Pix 2.9.0 says little of the calendar; the rest is the arrangement's
(the Regulamento Pix for Pix Automático), as the PSPs that sell it restate it.
Each rule, and why:

1. **Cycles.** Cycle ``k`` falls due ``k`` periods after ``dataInicial``
   ("Data estimada de primeiro pagamento"): 7 days for ``SEMANAL``, 1, 3, 6
   or 12 months for the others. Months are counted **from the anchor, not
   chained**: 31 January gives 29 February (leap year), 31 March, 30 April,
   31 May; a day the month lacks clamps to its last day. Chaining would
   drift (31 → 29 → 29 ...) and move the payer's date for good. Cycle ``k``
   spans ``[due(k), due(k+1))``: the schema's "Existe uma CobR com status
   diferente de REJEITADA e CANCELADA referente ao mesmo ``cobr.idRec`` com
   ``calendario.dataDeVencimento`` no mesmo ciclo" is then
   :func:`cycle_index` equality.
2. **End.** ``dataFinal`` is "Data final da vigência": a cycle due on it is
   still inside the authorisation, so cycles run while ``due <= dataFinal``.
   Without ``dataFinal`` the recurrence is open-ended and callers bound it.
3. **When to send a cycle's cobr.** The schema's only word is "O campo
   ``cobr.calendario.dataDeVencimento`` é anterior à data de criação da
   cobrança". The arrangement asks the receiver to send the payment
   instruction **between 10 and 2 days before the due date**: "payment
   requests be made between 2 and 10 days before the expected billing date
   ... if a payment is due on January 12th, the payment request must be sent
   no earlier than January 2nd and no later than January 10th" (EBANX's Pix
   Automático guide; Pluggy: "O recebedor agenda a cobrança entre 2 e 10
   dias antes do vencimento"). So the window is ``[due - 10, due - 2]``,
   calendar days, both ends inclusive (the example's 2nd and 10th). It is
   counted from ``dataDeVencimento`` itself, not from the business-day
   adjusted settlement date: the adjustment only ever moves settlement later,
   so the payer gets at least the same notice. (Banco do Brasil announced a
   90-day lead for a later phase; until the Regulamento says so, 10 holds.)
4. **Settlement date.** ``ajusteDiaUtil`` (default true): "ajuste da data
   prevista para liquidação para próximo dia útil caso o vencimento corrente
   seja um dia não útil. O PSP Recebedor deverá considerar os feriados locais
   com base no código município do usuário pagador." The national calendar of
   :mod:`payments.business_days` is the floor; a caller with the payer's
   ``codMun`` passes its own ``is_business_day``.
5. **Retries** (``PERMITE_3R_7D`` only: "A política configurada na
   recorrência não permite retentativa de cobrança"). At most **3** further
   attempts, on distinct days, **within 7 calendar days after the due date**
   and **before the next cycle's due date** (Celcoin: "3 retentativas nos 7
   dias corridos seguintes a data de vencimento ... entre D+1 e D+7"; Asaas:
   "up to 3 attempts on different dates, within 7 calendar days after the
   original due date and before the recurrence's next cycle"). The schema
   adds, for ``POST /cobr/{txid}/retentativa/{data}``: ``data`` must be "uma
   data futura"; one attempt at a time ("Existe uma tentativa com status
   ``SOLICITADA`` ou ``AGENDADA``", "... não finalizada"); one per day
   ("Existe uma tentativa vigente para a ``data`` informada"). A retry must
   also come after the first attempt's settlement date. The payer's bank's
   same-day second attempt (18h-21h) is its own and counts for nothing here.
   Pix settles every day, so the spec asks no business day of a retry.
   Which days is the receiver's choice; ours is D+1, D+3, D+7
   (:data:`DEFAULT_RETRY_OFFSETS`), spread so a payer paid mid-week has the
   money by one of them, clipped to the last allowed day.
"""

from __future__ import annotations

import calendar
import datetime as dt
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from payments.business_days import is_business_day, next_business_day
from payments.recurrence_terms import Calendario, Periodicidade

__all__ = [
    "DEFAULT_RETRY_OFFSETS",
    "MAX_LEAD_DAYS",
    "MAX_RETRIES",
    "MIN_LEAD_DAYS",
    "RETRY_SPAN_DAYS",
    "CreationWindow",
    "InvalidRetry",
    "check_retry",
    "creation_window",
    "cycle_index",
    "due_date",
    "due_dates",
    "next_retry_date",
    "retry_bounds",
    "settlement_date",
]

#: The cobr is sent no earlier than 10 and no later than 2 calendar days before its due date (rule 3).
MAX_LEAD_DAYS = 10
MIN_LEAD_DAYS = 2
#: ``PERMITE_3R_7D``: three retries within seven calendar days after the due date (rule 5).
MAX_RETRIES = 3
RETRY_SPAN_DAYS = 7
DEFAULT_RETRY_OFFSETS = (1, 3, 7)


class InvalidRetry(ValueError):
    """A retry ``POST /cobr/{txid}/retentativa/{data}`` would refuse (``CobROperacaoInvalida``)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _add_months(day: dt.date, months: int) -> dt.date:
    year, month = divmod(day.month - 1 + months, 12)
    year += day.year
    last = calendar.monthrange(year, month + 1)[1]
    return dt.date(year, month + 1, min(day.day, last))


def due_date(cal: Calendario, k: int) -> dt.date:
    """Cycle ``k``'s due date (``k = 0`` is ``dataInicial``), from the anchor (rule 1); ignores ``dataFinal``."""
    if k < 0:
        raise ValueError("k must be >= 0")
    if cal.periodicidade is Periodicidade.SEMANAL:
        return cal.data_inicial + dt.timedelta(weeks=k)
    return _add_months(cal.data_inicial, k * cal.periodicidade.months)


def due_dates(cal: Calendario, *, until: dt.date | None = None) -> Iterator[dt.date]:
    """The due dates up to ``dataFinal`` and ``until`` (inclusive); one of them must bound an open recurrence."""
    ends = [day for day in (cal.data_final, until) if day is not None]
    if not ends:
        raise ValueError("an open-ended recurrence needs until=")
    end = min(ends)
    k = 0
    while (day := due_date(cal, k)) <= end:
        yield day
        k += 1


def cycle_index(cal: Calendario, day: dt.date) -> int | None:
    """The cycle ``day`` falls in, ``due(k) <= day < due(k+1)``; None before ``dataInicial`` or after ``dataFinal``."""
    if day < cal.data_inicial or (cal.data_final is not None and day > cal.data_final):
        return None
    if cal.periodicidade is Periodicidade.SEMANAL:
        return (day - cal.data_inicial).days // 7
    months = (day.year - cal.data_inicial.year) * 12 + day.month - cal.data_inicial.month
    k = max(months // cal.periodicidade.months, 0)
    while due_date(cal, k) > day:
        k -= 1
    while due_date(cal, k + 1) <= day:
        k += 1
    return k


@dataclass(frozen=True)
class CreationWindow:
    """The days on which a cycle's cobr may be created at the acquirer, ``opens <= day <= closes`` (rule 3)."""

    opens: dt.date
    closes: dt.date

    def contains(self, day: dt.date) -> bool:
        return self.opens <= day <= self.closes

    def missed(self, day: dt.date) -> bool:
        """Too late on ``day``: the cycle can no longer be charged on its due date."""
        return day > self.closes


def creation_window(due: dt.date) -> CreationWindow:
    """``[due - 10, due - 2]``: the beat sends on ``opens`` and retries until ``closes``."""
    return CreationWindow(due - dt.timedelta(days=MAX_LEAD_DAYS), due - dt.timedelta(days=MIN_LEAD_DAYS))


def settlement_date(
    due: dt.date, *, ajuste_dia_util: bool = True, business_day: Callable[[dt.date], bool] = is_business_day
) -> dt.date:
    """The first attempt's settlement date: ``due``, or the next business day when ``ajusteDiaUtil`` (rule 4)."""
    if not ajuste_dia_util:
        return due
    if business_day is is_business_day:
        return next_business_day(due)
    while not business_day(due):
        due += dt.timedelta(days=1)
    return due


def retry_bounds(due: dt.date, settled_first: dt.date, next_due: dt.date | None) -> tuple[dt.date, dt.date] | None:
    """First and last day a retry may settle on (rule 5), or None when no day is left."""
    first = settled_first + dt.timedelta(days=1)
    last = due + dt.timedelta(days=RETRY_SPAN_DAYS)
    if next_due is not None:
        last = min(last, next_due - dt.timedelta(days=1))
    return (first, last) if first <= last else None


def check_retry(
    day: dt.date,
    *,
    due: dt.date,
    settled_first: dt.date,
    next_due: dt.date | None,
    today: dt.date,
    previous: Sequence[dt.date],
    allows_retries: bool,
    attempt_pending: bool = False,
) -> None:
    """Raise :class:`InvalidRetry` when a retry settling on ``day`` breaks the policy or the schema's violations.

    ``previous`` are the days of the retries already requested for this cycle
    (not the first attempt); ``attempt_pending`` whether one is still
    ``SOLICITADA`` or ``AGENDADA``.
    """
    if not allows_retries:
        raise InvalidRetry("A política da recorrência não permite retentativa.")
    if attempt_pending:
        raise InvalidRetry("Há uma tentativa em andamento para esta cobrança.")
    if len(previous) >= MAX_RETRIES:
        raise InvalidRetry(f"No máximo {MAX_RETRIES} retentativas por ciclo.")
    if day <= today:
        raise InvalidRetry("A data da retentativa deve ser futura.")
    if day in previous:
        raise InvalidRetry("Já existe uma tentativa para esta data.")
    if previous and day <= max(previous):
        raise InvalidRetry("A retentativa deve ser posterior à anterior.")
    bounds = retry_bounds(due, settled_first, next_due)
    if bounds is None or not bounds[0] <= day <= bounds[1]:
        raise InvalidRetry(
            f"A retentativa deve cair nos {RETRY_SPAN_DAYS} dias após o vencimento, antes do próximo ciclo."
        )


def next_retry_date(
    *,
    due: dt.date,
    settled_first: dt.date,
    next_due: dt.date | None,
    today: dt.date,
    previous: Sequence[dt.date],
    offsets: Sequence[int] = DEFAULT_RETRY_OFFSETS,
) -> dt.date | None:
    """The day the beat asks for after a failed attempt: the next of ``offsets`` (days after ``due``) still allowed.

    A target already past, or beyond the last allowed day, moves to the first
    allowed day after ``today`` and after the previous retry; None when the
    cycle has used its retries or its days. Never returns a day
    :func:`check_retry` would refuse (for a policy that allows retries).
    """
    bounds = retry_bounds(due, settled_first, next_due)
    if bounds is None or len(previous) >= MAX_RETRIES:
        return None
    floor = max([today, bounds[0] - dt.timedelta(days=1), *previous]) + dt.timedelta(days=1)
    if floor > bounds[1]:
        return None
    used = len(previous)
    target = due + dt.timedelta(days=offsets[min(used, len(offsets) - 1)])
    return min(max(target, floor), bounds[1])
