"""Properties of the amount due on a day for a due-date charge
(payments.due_amounts), over random valid API Pix ``cobv`` terms and days:

- the amount due never decreases as the payment day moves later, in
  particular with the days late after the due date;
- a discount never takes it to zero or below;
- with no fine, interest or discount it is ``original - abatimento``;
- on or before the due date there is no fine and no interest;
- every component is an ``int`` >= 0 and ``final`` is their sum, as
  ``componentesValor`` states;
- payable exactly up to the last payable day, itself a business day at
  least ``validadeAposVencimento`` days after the due date;
- the terms survive their API Pix JSON shape; the business-day counter adds
  up over consecutive spans.

Pure Python: no database is touched. Derandomized so CI is deterministic.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from payments.business_days import business_days_between, is_business_day
from payments.due_amounts import amount_due, last_payable_day
from payments.due_terms import (
    Abatimento,
    AbatimentoModalidade,
    Desconto,
    DescontoDataFixa,
    DescontoModalidade,
    DueTerms,
    Juros,
    JurosModalidade,
    Multa,
    MultaModalidade,
)

SETTINGS = settings(
    max_examples=300, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow]
)

DUE_DATES = st.dates(min_value=dt.date(2020, 1, 1), max_value=dt.date(2030, 12, 31))
OFFSETS = st.integers(min_value=-120, max_value=120)


def percent(max_hundredths: int) -> st.SearchStrategy[Decimal]:
    return st.integers(min_value=0, max_value=max_hundredths).map(lambda h: Decimal(h).scaleb(-2))


@st.composite
def due_terms(draw: st.DrawFn, *, charges: bool = True, discounts: bool = True) -> DueTerms:
    original = draw(st.one_of(st.integers(1, 10_000), st.integers(1, 10**12)))
    due = draw(DUE_DATES)
    multa = juros = desconto = None
    abatimento = draw(
        st.none()
        | st.builds(Abatimento, st.just(AbatimentoModalidade.VALOR_FIXO), valor=st.integers(0, original - 1))
        | st.builds(Abatimento, st.just(AbatimentoModalidade.PERCENTUAL), percentual=percent(9999))
    )
    if charges:
        multa = draw(
            st.none()
            | st.builds(Multa, st.just(MultaModalidade.VALOR_FIXO), valor=st.integers(0, 10**6))
            | st.builds(Multa, st.just(MultaModalidade.PERCENTUAL), percentual=percent(10_000))
        )
        modalidade = draw(st.none() | st.sampled_from(JurosModalidade))
        if modalidade is not None:
            juros = (
                Juros(modalidade, valor=draw(st.integers(0, 10**5)))
                if modalidade.is_value
                else Juros(modalidade, percentual=draw(percent(100_000)))
            )
    if discounts and draw(st.booleans()):
        desconto = draw(descontos(original, due))
    return DueTerms(
        original=original,
        data_de_vencimento=due,
        validade_apos_vencimento=draw(st.integers(0, 90)),
        multa=multa,
        juros=juros,
        abatimento=abatimento,
        desconto=desconto,
    )


@st.composite
def descontos(draw: st.DrawFn, original: int, due: dt.date) -> Desconto:
    modalidade = draw(st.sampled_from(DescontoModalidade))
    if modalidade.fixed_dates:
        days = draw(st.lists(st.integers(0, 60), min_size=1, max_size=3, unique=True))
        tiers = tuple(
            DescontoDataFixa(due - dt.timedelta(days=d), valor=draw(st.integers(0, original - 1)))
            if modalidade.is_value
            else DescontoDataFixa(due - dt.timedelta(days=d), percentual=draw(percent(9999)))
            for d in days
        )
        return Desconto(modalidade, datas_fixas=tiers)
    if modalidade.is_value:
        return Desconto(modalidade, valor=draw(st.integers(0, original - 1)))
    return Desconto(modalidade, percentual=draw(percent(9999)))


@SETTINGS
@given(due_terms(), OFFSETS, st.integers(1, 60))
def test_never_decreases_as_the_payment_day_moves_later(terms: DueTerms, offset: int, later: int) -> None:
    first = terms.data_de_vencimento + dt.timedelta(days=offset)
    second = first + dt.timedelta(days=later)
    assert amount_due(terms, on=first).final <= amount_due(terms, on=second).final


@SETTINGS
@given(due_terms(), st.integers(0, 120), st.integers(1, 60))
def test_monotonic_in_the_days_late(terms: DueTerms, late: int, more: int) -> None:
    first = terms.data_de_vencimento + dt.timedelta(days=late)
    earlier, later = amount_due(terms, on=first), amount_due(terms, on=first + dt.timedelta(days=more))
    assert earlier.final <= later.final
    assert earlier.juros <= later.juros


@SETTINGS
@given(due_terms(), OFFSETS)
def test_discounts_never_reach_zero(terms: DueTerms, offset: int) -> None:
    result = amount_due(terms, on=terms.data_de_vencimento + dt.timedelta(days=offset))
    assert result.final >= 1
    assert result.desconto <= result.original - result.abatimento - 1


@SETTINGS
@given(due_terms(charges=False, discounts=False), OFFSETS)
def test_without_fine_interest_or_discount_it_is_original_minus_abatimento(terms: DueTerms, offset: int) -> None:
    result = amount_due(terms, on=terms.data_de_vencimento + dt.timedelta(days=offset))
    assert result.final == terms.original - result.abatimento
    assert (result.desconto, result.multa, result.juros) == (0, 0, 0)


@SETTINGS
@given(due_terms(), st.integers(0, 120))
def test_no_fine_or_interest_on_or_before_the_due_date(terms: DueTerms, early: int) -> None:
    result = amount_due(terms, on=terms.data_de_vencimento - dt.timedelta(days=early))
    assert (result.multa, result.juros) == (0, 0)


@SETTINGS
@given(due_terms(), OFFSETS)
def test_integer_components_that_add_up(terms: DueTerms, offset: int) -> None:
    result = amount_due(terms, on=terms.data_de_vencimento + dt.timedelta(days=offset))
    components = (result.original, result.abatimento, result.desconto, result.multa, result.juros, result.final)
    assert all(type(value) is int and value >= 0 for value in components)
    assert result.final == result.original - result.abatimento - result.desconto + result.multa + result.juros
    assert not (result.desconto and (result.multa or result.juros))


@SETTINGS
@given(due_terms(), OFFSETS)
def test_payable_up_to_the_last_payable_day(terms: DueTerms, offset: int) -> None:
    last = last_payable_day(terms)
    assert is_business_day(last)
    assert last >= terms.data_de_vencimento + dt.timedelta(days=terms.validade_apos_vencimento)
    on = last + dt.timedelta(days=offset)
    assert amount_due(terms, on=on).payable == (on <= last)


@SETTINGS
@given(due_terms())
def test_terms_survive_their_api_shape(terms: DueTerms) -> None:
    assert DueTerms.from_api(terms.to_api()) == terms


@SETTINGS
@given(DUE_DATES, st.integers(0, 400), st.integers(0, 400))
def test_business_days_add_up(start: dt.date, first: int, second: int) -> None:
    middle = start + dt.timedelta(days=first)
    end = middle + dt.timedelta(days=second)
    total = business_days_between(start, end)
    assert total == business_days_between(start, middle) + business_days_between(middle, end)
    assert total == sum(is_business_day(start + dt.timedelta(days=n)) for n in range(1, first + second + 1))
