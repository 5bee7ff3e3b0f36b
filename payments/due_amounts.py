"""The amount due on a given day for a due-date charge (API Pix 2.9.0 ``cobv``).

:func:`amount_due` takes the charge's :class:`~payments.due_terms.DueTerms`
and a payment day and gives API Pix's ``componentesValor``: ``original``,
``abatimento``, ``desconto``, ``multa``, ``juros`` and ``final``, in integer
centavos, and whether the charge can still be paid that day. Pure Python.

How, and why (API Pix 2.9.0 is silent on most of it; its companion, BCB's
*Manual de Padrões para Iniciação do Pix*, and the API's maintainers'
answers on bacen/pix-api fill in):

1. **Order and bases.** The abatimento comes off first and holds on every
   day; percentage discounts, fines and interest are computed on
   ``original - abatimento``: the Manual's interest formula is
   ``Vj = (Vo - Va) x ((Ij / 100) / n) x Da``, Da the days late (bacen/pix-api#607).
   ``final = original - abatimento - desconto + multa + juros``, the sum the
   schema's ``componentesValor`` states. Interest is simple and never counts
   the fine: the schema's own example (R$ 100,00, 2 days late, fine 3 %,
   interest 1 % a day) pays R$ 105,00.
2. **Non-business due date.** A due date on a weekend or holiday moves to the
   next business day for ``validadeAposVencimento``, discounts, fines and
   interest (schema, ``validadeAposVencimento``). Paying up to that adjusted
   day is on time: no fine, no interest (Lei 7089/1983; bacen/pix-api#109).
3. **Late.** From the day after the adjusted due date the fine applies once,
   flat (the Manual's ``k = Da / max(1, Da)``; bacen/pix-api#297), and the
   days of interest are counted from the *original* due date, as for boletos:
   Lei 7089/1983 only spares a payment made on the first business day
   (bacen/pix-api#205, #347). Calendar-day modalities count calendar days;
   business-day ones count business days ``d`` with ``due < d <= payment``.
4. **Rate per day.** ``n`` is 1, 30 or 365 for a rate per day, month or year
   in calendar days, and 1, 21 or 252 in business days (bacen/pix-api#205:
   "n: 1, 21 ou 252"; #607 uses 30 for a monthly rate in calendar days). The
   factor ``Ij / 100 / n`` is never rounded (#607 shows a truncated factor
   moving R$ 30.000,00 by 9 centavos); only each component is.
5. **Rounding.** Each component is rounded once to the centavo, half up
   (commercial rounding; bacen/pix-api#404: an abatimento of R$ 0,005 is
   R$ 0,01), with exact integer arithmetic; ``final`` is the sum of the
   rounded components, so ``componentesValor`` adds up to the Pix's ``valor``.
6. **Discounts** apply only before the due date. Fixed-date tiers (1, 2): a
   tier holds up to its date, moved to the next business day like the due
   date; of the tiers still in force, the largest discount wins, so paying
   earlier never costs more. Per-day modalities (3-6) count the days early:
   calendar days ``payment < d <= due``, or business days in that range.
7. **Floor.** A discount never takes the amount below R$ 0,01: API Pix has no
   zero-value charge (bacen/pix-api#408, where a per-day discount outgrew
   the original), and the abatimento is likewise kept under the original.
8. **Validity.** The charge can be paid up to the adjusted due date plus
   ``validadeAposVencimento`` calendar days, that last day itself moved to
   the next business day (the schema's examples A to G). The older example
   under ``CobPayloadOperacaoInvalida`` (due 2020-12-25, 10 days, refused on
   2021-01-05) counts from the unadjusted date; the field's own, later and
   detailed examples win.

``business_days(start, end)`` counts the business days ``d`` with
``start < d <= end``; by default the national calendar of
:mod:`payments.business_days` (no municipal holidays: a caller that knows the
payer's ``codMun`` passes its own).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal

from payments.business_days import business_days_between
from payments.due_terms import Desconto, DueTerms, Juros, JurosModalidade, centavos_to_api

__all__ = ["AmountDue", "BusinessDays", "adjusted_due_date", "amount_due", "last_payable_day"]

#: ``(start, end) -> business days d with start < d <= end``.
BusinessDays = Callable[[dt.date, dt.date], int]

ONE_DAY = dt.timedelta(days=1)
#: ``n`` of the Manual's interest formula, per modality.
_PERIOD_DAYS = {
    JurosModalidade.PERCENTUAL_DIA_DIAS_CORRIDOS: 1,
    JurosModalidade.PERCENTUAL_MES_DIAS_CORRIDOS: 30,
    JurosModalidade.PERCENTUAL_ANO_DIAS_CORRIDOS: 365,
    JurosModalidade.PERCENTUAL_DIA_DIAS_UTEIS: 1,
    JurosModalidade.PERCENTUAL_MES_DIAS_UTEIS: 21,
    JurosModalidade.PERCENTUAL_ANO_DIAS_UTEIS: 252,
}
#: A calendar that says no day is a business day would send the due date to infinity.
_MAX_NON_BUSINESS_RUN = 31


@dataclass(frozen=True)
class AmountDue:
    """What a payer owes on one day, in centavos, named as API Pix's ``componentesValor``."""

    original: int
    abatimento: int
    desconto: int
    multa: int
    juros: int
    final: int
    #: False after ``last_payable_day``: the charge can no longer be paid.
    payable: bool
    last_payable_day: dt.date

    def componentes_valor(self) -> dict[str, dict[str, str]]:
        """The ``componentesValor`` of a Pix paying this amount: ``original`` and each non-zero part."""
        parts = {"original": {"valor": centavos_to_api(self.original)}}
        for name in ("multa", "juros", "abatimento", "desconto"):
            value: int = getattr(self, name)
            if value:
                parts[name] = {"valor": centavos_to_api(value)}
        return parts

    def payload_valor(self) -> dict[str, str]:
        """The ``valor`` of the cobv's payload for that day (``CobVPayloadValor``)."""
        valor = {"original": centavos_to_api(self.original)}
        for name in ("multa", "juros", "abatimento", "desconto"):
            value: int = getattr(self, name)
            if value:
                valor[name] = centavos_to_api(value)
        valor["final"] = centavos_to_api(self.final)
        return valor


def amount_due(terms: DueTerms, *, on: dt.date, business_days: BusinessDays | None = None) -> AmountDue:
    """The amount due for a payment on ``on`` (decisions in the module's docstring)."""
    count = business_days or business_days_between
    due = terms.data_de_vencimento
    adjusted = adjusted_due_date(terms, business_days=count)
    last = last_payable_day(terms, business_days=count)
    abatimento = _abatimento(terms)
    base = terms.original - abatimento
    desconto = multa = juros = 0
    if on > adjusted:
        multa = _multa(terms, base)
        if terms.juros is not None:
            juros = _juros(terms.juros, base, due=due, on=on, count=count)
    elif terms.desconto is not None:
        # Never below R$ 0,01: a Pix has a positive value.
        desconto = min(_desconto(terms.desconto, base, due=due, on=on, count=count), base - 1)
    return AmountDue(
        original=terms.original,
        abatimento=abatimento,
        desconto=desconto,
        multa=multa,
        juros=juros,
        final=base - desconto + multa + juros,
        payable=on <= last,
        last_payable_day=last,
    )


def adjusted_due_date(terms: DueTerms, *, business_days: BusinessDays | None = None) -> dt.date:
    """``dataDeVencimento``, or the first business day after it when it is not one."""
    return _next_business_day(terms.data_de_vencimento, business_days or business_days_between)


def last_payable_day(terms: DueTerms, *, business_days: BusinessDays | None = None) -> dt.date:
    """The last day the charge can be paid: the adjusted due date plus ``validadeAposVencimento``
    calendar days, moved to the next business day when it falls on a weekend or holiday."""
    count = business_days or business_days_between
    adjusted = _next_business_day(terms.data_de_vencimento, count)
    return _next_business_day(adjusted + dt.timedelta(days=terms.validade_apos_vencimento), count)


def _next_business_day(day: dt.date, count: BusinessDays) -> dt.date:
    for _ in range(_MAX_NON_BUSINESS_RUN):
        if count(day - ONE_DAY, day) == 1:
            return day
        day += ONE_DAY
    raise ValueError(
        f"no business day in the {_MAX_NON_BUSINESS_RUN} days from {day - _MAX_NON_BUSINESS_RUN * ONE_DAY}"
    )


def _hundredths(percent: Decimal) -> int:
    """``Decimal("2.05")`` -> 205 (the terms hold at most two decimals)."""
    return int(percent * 100)


def _round_half_up(numerator: int, denominator: int) -> int:
    """``numerator / denominator`` to the nearest integer, ties up (both non-negative)."""
    return (2 * numerator + denominator) // (2 * denominator)


def _percent_of(base: int, percent: Decimal) -> int:
    """``percent`` % of ``base`` centavos, rounded half up."""
    return _round_half_up(base * _hundredths(percent), 100 * 100)


def _abatimento(terms: DueTerms) -> int:
    if terms.abatimento is None:
        return 0
    if terms.abatimento.modalidade == 1:
        value = terms.abatimento.valor
    else:
        value = _percent_of(terms.original, terms.abatimento.percentual)
    # Under 100 % it can still round up to the whole of a tiny original: keep a centavo.
    return min(value, terms.original - 1)


def _multa(terms: DueTerms, base: int) -> int:
    if terms.multa is None:
        return 0
    if terms.multa.modalidade == 1:
        return terms.multa.valor
    return _percent_of(base, terms.multa.percentual)


def _juros(juros: Juros, base: int, *, due: dt.date, on: dt.date, count: BusinessDays) -> int:
    # Counted from the original due date: the grace of a non-business due date ends with its adjusted day.
    days = count(due, on) if juros.modalidade.business_days else (on - due).days
    if juros.modalidade.is_value:
        return juros.valor * days
    period = _PERIOD_DAYS[juros.modalidade]
    return _round_half_up(base * _hundredths(juros.percentual) * days, 100 * 100 * period)


def _desconto(desconto: Desconto, base: int, *, due: dt.date, on: dt.date, count: BusinessDays) -> int:
    if desconto.modalidade.fixed_dates:
        # Each tier holds up to its date (moved past a weekend or holiday like the due date); the best one wins.
        in_force = [tier for tier in desconto.datas_fixas if on <= _next_business_day(tier.data, count)]
        if desconto.modalidade.is_value:
            return max((tier.valor for tier in in_force), default=0)
        return max((_percent_of(base, tier.percentual) for tier in in_force), default=0)
    if on >= due:
        return 0
    days = count(on, due) if desconto.modalidade.business_days else (due - on).days
    if desconto.modalidade.is_value:
        return desconto.valor * days
    return _round_half_up(base * _hundredths(desconto.percentual) * days, 100 * 100)
