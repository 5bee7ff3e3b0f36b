"""The amount due on a day for a due-date charge (payments.due_amounts), by
worked example: every modality of API Pix 2.9.0's ``cobv`` with the numbers
worked out by hand beside each case, the schema's own examples, and the
edges (the due date itself, one day late, a due date on a weekend or a
holiday, rounding, the order of abatimento and discount, the floor).

Calendar used throughout, unless a case says otherwise: 2024-06-20 is a
Thursday (Corpus Christi 2024 was 30 May); 2024-06-22/23 a weekend.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pytest

from payments.business_days import business_days_between, easter, is_business_day, national_holidays
from payments.due_amounts import AmountDue, adjusted_due_date, amount_due, last_payable_day
from payments.due_terms import (
    Abatimento,
    AbatimentoModalidade,
    Desconto,
    DescontoDataFixa,
    DescontoModalidade,
    DueTerms,
    InvalidDueTerms,
    Juros,
    JurosModalidade,
    Multa,
    MultaModalidade,
)

D = dt.date.fromisoformat
DUE = D("2024-06-20")  # Thursday


def terms(original: int = 100_000, due: dt.date = DUE, validade: int = 30, **parts: Any) -> DueTerms:
    return DueTerms(original=original, data_de_vencimento=due, validade_apos_vencimento=validade, **parts)


def parts(result: AmountDue) -> tuple[int, int, int, int, int]:
    return result.abatimento, result.desconto, result.multa, result.juros, result.final


# --- The schema's own examples -------------------------------------------------------------------------------------


def test_componentes_valor_example_of_the_schema() -> None:
    """``componentesValor``: R$ 100,00, 2 days late, fine 3 %, interest 1 % a day -> R$ 105,00.

    multa 3 % x 10000 = 300; juros 1 % x 10000 x 2 days = 200; final 10000 + 300 + 200 = 10500.
    """
    charge = terms(
        original=10_000,
        multa=Multa(MultaModalidade.PERCENTUAL, percentual=Decimal("3.00")),
        juros=Juros(JurosModalidade.PERCENTUAL_DIA_DIAS_CORRIDOS, percentual=Decimal("1.00")),
    )
    result = amount_due(charge, on=D("2024-06-22"))
    assert parts(result) == (0, 0, 300, 200, 10_500)
    assert result.componentes_valor() == {
        "original": {"valor": "100.00"},
        "multa": {"valor": "3.00"},
        "juros": {"valor": "2.00"},
    }


COB_BODY_1 = {
    "calendario": {"dataDeVencimento": "2020-12-31", "validadeAposVencimento": 30},
    "valor": {
        "original": "123.45",
        "multa": {"modalidade": "2", "valorPerc": "15.00"},
        "juros": {"modalidade": "2", "valorPerc": "2.00"},
        "desconto": {"modalidade": "1", "descontoDataFixa": [{"data": "2020-11-30", "valorPerc": "30.00"}]},
    },
}


def test_cob_body_1_of_the_schema_parses_and_computes() -> None:
    """``cobBody1`` (modalities sent as strings, as the example does): R$ 123,45 due Thu 2020-12-31,
    fine 15 %, interest 2 % a day, R$ 30,00 off up to 2020-11-30 (a Monday).

    - up to 30 Nov: 12345 - 3000 = 9345;
    - 1 Dec to 31 Dec: 12345;
    - Fri 1 Jan 2021 (holiday, but the due date was a business day): 1 day late,
      multa 15 % x 12345 = 1851.75 -> 1852, juros 2 % x 12345 x 1 = 246.9 -> 247, final 14444;
    - Mon 4 Jan: 4 days, juros 987.6 -> 988, final 15185;
    - last day: 31 Dec + 30 = Sat 30 Jan -> Mon 1 Feb 2021 (32 days: juros 7900.8 -> 7901, final 22098).

    (``cobPayload2``'s ``multa "15.00"``, ``juros "2.00"``, ``final "140.45"`` are sample strings,
    not this computation: 15 % of 123.45 is not 15.00.)
    """
    charge = DueTerms.from_api(COB_BODY_1)
    assert charge.original == 12_345
    assert charge.desconto == Desconto(
        DescontoModalidade.VALOR_FIXO_ATE_DATAS, datas_fixas=(DescontoDataFixa(D("2020-11-30"), valor=3000),)
    )
    assert parts(amount_due(charge, on=D("2020-11-30"))) == (0, 3000, 0, 0, 9345)
    assert parts(amount_due(charge, on=D("2020-12-01"))) == (0, 0, 0, 0, 12_345)
    assert parts(amount_due(charge, on=D("2020-12-31"))) == (0, 0, 0, 0, 12_345)
    assert parts(amount_due(charge, on=D("2021-01-01"))) == (0, 0, 1852, 247, 14_444)
    assert parts(amount_due(charge, on=D("2021-01-04"))) == (0, 0, 1852, 988, 15_185)
    last = amount_due(charge, on=D("2021-02-01"))
    assert (last.juros, last.final, last.payable, last.last_payable_day) == (7901, 22_098, True, D("2021-02-01"))
    assert not amount_due(charge, on=D("2021-02-02")).payable
    assert amount_due(charge, on=D("2021-01-01")).payload_valor() == {
        "original": "123.45",
        "multa": "18.52",
        "juros": "2.47",
        "final": "144.44",
    }


@pytest.mark.parametrize(
    ("due", "validade", "last"),
    [
        ("2020-10-20", 4, "2020-10-26"),  # A: Tue + 4 = Sat 24 -> Mon 26
        ("2020-12-25", 0, "2020-12-28"),  # B: Christmas (Fri) -> Mon 28
        ("2020-12-25", 1, "2020-12-29"),  # C
        ("2020-12-25", 3, "2020-12-31"),  # D
        ("2020-12-25", 4, "2021-01-04"),  # E: 28 + 4 = Fri 1 Jan (holiday) -> Mon 4
        ("2021-08-27", 5, "2021-09-01"),  # F: Fri + 5 = Wed
        ("2021-08-28", 5, "2021-09-06"),  # G: Sat -> Mon 30 + 5 = Sat 4 Sep -> Mon 6
    ],
)
def test_validade_apos_vencimento_examples_of_the_schema(due: str, validade: int, last: str) -> None:
    charge = terms(original=1000, due=D(due), validade=validade)
    assert last_payable_day(charge) == D(last)
    assert amount_due(charge, on=D(last)).payable
    assert not amount_due(charge, on=D(last) + dt.timedelta(days=1)).payable


# --- Multa ---------------------------------------------------------------------------------------------------------


def test_fixed_fine_from_the_first_day_late_and_never_on_the_due_date() -> None:
    """Modality 1: R$ 2,50 flat. Due date: 10000. One day late: 10000 + 250. Ten days late: still 250."""
    charge = terms(original=10_000, multa=Multa(MultaModalidade.VALOR_FIXO, valor=250))
    assert parts(amount_due(charge, on=DUE)) == (0, 0, 0, 0, 10_000)
    assert parts(amount_due(charge, on=DUE + dt.timedelta(days=1))) == (0, 0, 250, 0, 10_250)
    assert parts(amount_due(charge, on=DUE + dt.timedelta(days=10))) == (0, 0, 250, 0, 10_250)


def test_percentage_fine_rounds_half_up() -> None:
    """Modality 2: 2 % of 12345 = 246.9 -> 247; 2.5 % of 1010 = 25.25 -> 25; 0.5 % of 1010 = 5.05 -> 5;
    1.5 % of 1010 = 15.15 -> 15; 0.05 % of 1000 = 0.5 -> 1 (a tie goes up)."""
    for original, percent, fine in [(12_345, "2.00", 247), (1010, "2.50", 25), (1010, "1.50", 15), (1000, "0.05", 1)]:
        charge = terms(original=original, multa=Multa(MultaModalidade.PERCENTUAL, percentual=Decimal(percent)))
        assert amount_due(charge, on=D("2024-06-21")).multa == fine, (original, percent)


# --- Juros ---------------------------------------------------------------------------------------------------------

# Paid Mon 2024-07-01 on R$ 1.000,00 due Thu 2024-06-20: 11 calendar days late; business days
# after the 20th up to the 1st: 21, 24, 25, 26, 27, 28 June and 1 July = 7.
JUROS_CASES = [
    (JurosModalidade.VALOR_DIAS_CORRIDOS, "0.50", 550),  # 50 x 11
    (JurosModalidade.PERCENTUAL_DIA_DIAS_CORRIDOS, "1.00", 11_000),  # 100000 x 1 % x 11
    (JurosModalidade.PERCENTUAL_MES_DIAS_CORRIDOS, "1.00", 367),  # 100000 x 1 % x 11 / 30 = 366.67
    (JurosModalidade.PERCENTUAL_ANO_DIAS_CORRIDOS, "12.00", 362),  # 100000 x 12 % x 11 / 365 = 361.64
    (JurosModalidade.VALOR_DIAS_UTEIS, "0.50", 350),  # 50 x 7
    (JurosModalidade.PERCENTUAL_DIA_DIAS_UTEIS, "1.00", 7000),  # 100000 x 1 % x 7
    (JurosModalidade.PERCENTUAL_MES_DIAS_UTEIS, "1.00", 333),  # 100000 x 1 % x 7 / 21 = 333.33
    (JurosModalidade.PERCENTUAL_ANO_DIAS_UTEIS, "12.00", 333),  # 100000 x 12 % x 7 / 252 = 333.33
]


@pytest.mark.parametrize(("modalidade", "valor_perc", "expected"), JUROS_CASES)
def test_each_interest_modality(modalidade: JurosModalidade, valor_perc: str, expected: int) -> None:
    charge = DueTerms.from_api(
        {
            "calendario": {"dataDeVencimento": "2024-06-20"},
            "valor": {"original": "1000.00", "juros": {"modalidade": int(modalidade), "valorPerc": valor_perc}},
        }
    )
    result = amount_due(charge, on=D("2024-07-01"))
    assert parts(result) == (0, 0, 0, expected, 100_000 + expected)
    assert amount_due(charge, on=DUE).juros == 0


def test_monthly_rate_factor_is_not_truncated() -> None:
    """bacen/pix-api#607: R$ 30.000,00, 1 % a month (calendar days), paid one day late.
    3000000 x 1 % / 30 x 1 = 1000 exactly (R$ 10,00); a factor cut to 0.00033 would give 990."""
    charge = terms(
        original=3_000_000,
        due=D("2024-09-04"),
        juros=Juros(JurosModalidade.PERCENTUAL_MES_DIAS_CORRIDOS, percentual=Decimal("1.00")),
    )
    assert amount_due(charge, on=D("2024-09-05")).juros == 1000


def test_interest_is_simple_and_ignores_the_fine() -> None:
    """10000, fine 10 %, 1 % a day, 30 days late: juros 1 % x 10000 x 30 = 3000 (not on 11000, not compounded)."""
    charge = terms(
        original=10_000,
        multa=Multa(MultaModalidade.PERCENTUAL, percentual=Decimal("10.00")),
        juros=Juros(JurosModalidade.PERCENTUAL_DIA_DIAS_CORRIDOS, percentual=Decimal("1.00")),
    )
    assert parts(amount_due(charge, on=D("2024-07-20"))) == (0, 0, 1000, 3000, 14_000)


# --- Weekend and holiday due dates ---------------------------------------------------------------------------------


def test_weekend_due_date_grace_then_interest_from_the_original_date() -> None:
    """bacen/pix-api#347: R$ 10,00 due Sat 2021-02-27, R$ 0,10 a calendar day, fine R$ 1,00.

    Sun 28 and Mon 1 Mar (the adjusted due date): 1000, nothing added.
    Tue 2 Mar: late; 3 calendar days since Sat 27 -> juros 30, multa 100, final 1130.
    """
    charge = terms(
        original=1000,
        due=D("2021-02-27"),
        multa=Multa(MultaModalidade.VALOR_FIXO, valor=100),
        juros=Juros(JurosModalidade.VALOR_DIAS_CORRIDOS, valor=10),
    )
    assert adjusted_due_date(charge) == D("2021-03-01")
    assert parts(amount_due(charge, on=D("2021-02-28"))) == (0, 0, 0, 0, 1000)
    assert parts(amount_due(charge, on=D("2021-03-01"))) == (0, 0, 0, 0, 1000)
    assert parts(amount_due(charge, on=D("2021-03-02"))) == (0, 0, 100, 30, 1130)


def test_holiday_due_date_business_day_interest() -> None:
    """Due Fri 2020-12-25 (Christmas), 1 % a business day on 10000. Mon 28: adjusted due date, 10000.
    Tue 29: business days after the 25th up to the 29th are 28 and 29 -> 2 % -> 200."""
    charge = terms(
        original=10_000,
        due=D("2020-12-25"),
        juros=Juros(JurosModalidade.PERCENTUAL_DIA_DIAS_UTEIS, percentual=Decimal("1.00")),
    )
    assert amount_due(charge, on=D("2020-12-28")).final == 10_000
    assert amount_due(charge, on=D("2020-12-29")).juros == 200


def test_a_caller_calendar_replaces_the_national_one() -> None:
    """With a calendar where every day is a business day, Sat 2021-02-27 is not moved: Sun is 1 day late."""

    def every_day(start: dt.date, end: dt.date) -> int:
        return max(0, (end - start).days)

    charge = terms(original=1000, due=D("2021-02-27"), juros=Juros(JurosModalidade.VALOR_DIAS_CORRIDOS, valor=10))
    assert amount_due(charge, on=D("2021-02-28"), business_days=every_day).juros == 10
    assert amount_due(charge, on=D("2021-02-28")).juros == 0


# --- Abatimento ----------------------------------------------------------------------------------------------------


def test_fixed_abatimento_on_every_day_and_the_base_of_the_rest() -> None:
    """10000 - 1000 = 9000 on any day; late, a 2 % fine is on 9000 -> 180."""
    charge = terms(
        original=10_000,
        abatimento=Abatimento(AbatimentoModalidade.VALOR_FIXO, valor=1000),
        multa=Multa(MultaModalidade.PERCENTUAL, percentual=Decimal("2.00")),
    )
    assert parts(amount_due(charge, on=D("2024-06-01"))) == (1000, 0, 0, 0, 9000)
    assert parts(amount_due(charge, on=DUE)) == (1000, 0, 0, 0, 9000)
    assert parts(amount_due(charge, on=D("2024-06-21"))) == (1000, 0, 180, 0, 9180)


def test_percentage_abatimento_half_a_centavo_rounds_up() -> None:
    """bacen/pix-api#404: R$ 10,00 with a 0.05 % abatimento = 0.5 centavo -> 1; final R$ 9,99."""
    charge = terms(original=1000, abatimento=Abatimento(AbatimentoModalidade.PERCENTUAL, percentual=Decimal("0.05")))
    assert parts(amount_due(charge, on=DUE)) == (1, 0, 0, 0, 999)


def test_abatimento_comes_off_before_a_percentage_discount() -> None:
    """10000, abatimento 10 % = 1000, discount 5 % up to 10 June: 5 % of 9000 = 450 (not 500); final 8550."""
    charge = terms(
        original=10_000,
        abatimento=Abatimento(AbatimentoModalidade.PERCENTUAL, percentual=Decimal("10.00")),
        desconto=Desconto(
            DescontoModalidade.PERCENTUAL_ATE_DATAS,
            datas_fixas=(DescontoDataFixa(D("2024-06-10"), percentual=Decimal("5.00")),),
        ),
    )
    assert parts(amount_due(charge, on=D("2024-06-10"))) == (1000, 450, 0, 0, 8550)


# --- Desconto ------------------------------------------------------------------------------------------------------

TIERS = Desconto(
    DescontoModalidade.VALOR_FIXO_ATE_DATAS,
    datas_fixas=(
        DescontoDataFixa(D("2024-06-05"), valor=1500),
        DescontoDataFixa(D("2024-06-10"), valor=1000),
        DescontoDataFixa(D("2024-06-15"), valor=500),  # a Saturday: holds until Mon 17
    ),
)


@pytest.mark.parametrize(
    ("on", "discount"),
    [
        ("2024-06-01", 1500),
        ("2024-06-05", 1500),
        ("2024-06-06", 1000),
        ("2024-06-10", 1000),
        ("2024-06-11", 500),
        ("2024-06-15", 500),
        ("2024-06-17", 500),
        ("2024-06-18", 0),
        ("2024-06-20", 0),
        ("2024-06-21", 0),
    ],
)
def test_three_fixed_value_tiers(on: str, discount: int) -> None:
    charge = terms(original=10_000, desconto=TIERS)
    result = amount_due(charge, on=D(on))
    assert (result.desconto, result.final) == (discount, 10_000 - discount)


def test_percentage_until_date_rounds_half_up() -> None:
    """Modality 2: 2.50 % of 12345 = 308.625 -> 309, up to 10 June."""
    charge = terms(
        original=12_345,
        desconto=Desconto(
            DescontoModalidade.PERCENTUAL_ATE_DATAS,
            datas_fixas=(DescontoDataFixa(D("2024-06-10"), percentual=Decimal("2.50")),),
        ),
    )
    assert amount_due(charge, on=D("2024-06-10")).desconto == 309
    assert amount_due(charge, on=D("2024-06-11")).desconto == 0


# Paid Mon 2024-06-10 on 12345 due Thu 2024-06-20: 10 calendar days early; business days after the
# 10th up to the 20th: 11, 12, 13, 14, 17, 18, 19, 20 = 8.
@pytest.mark.parametrize(
    ("modalidade", "valor_perc", "expected"),
    [
        (DescontoModalidade.VALOR_DIA_CORRIDO, "0.10", 100),  # 10 x 10
        (DescontoModalidade.VALOR_DIA_UTIL, "0.10", 80),  # 10 x 8
        (DescontoModalidade.PERCENTUAL_DIA_CORRIDO, "0.10", 123),  # 12345 x 0.1 % x 10 = 123.45
        (DescontoModalidade.PERCENTUAL_DIA_UTIL, "0.10", 99),  # 12345 x 0.1 % x 8 = 98.76
    ],
)
def test_each_per_day_discount_modality(modalidade: DescontoModalidade, valor_perc: str, expected: int) -> None:
    charge = DueTerms.from_api(
        {
            "calendario": {"dataDeVencimento": "2024-06-20"},
            "valor": {"original": "123.45", "desconto": {"modalidade": int(modalidade), "valorPerc": valor_perc}},
        }
    )
    assert amount_due(charge, on=D("2024-06-10")).desconto == expected
    assert amount_due(charge, on=DUE).desconto == 0


def test_a_discount_never_takes_the_amount_below_one_centavo() -> None:
    """R$ 1,00 a calendar day on R$ 10,00, paid 30 days early: 3000 off would be negative; capped at 999."""
    charge = terms(original=1000, desconto=Desconto(DescontoModalidade.VALOR_DIA_CORRIDO, valor=100))
    assert parts(amount_due(charge, on=D("2024-05-21"))) == (0, 999, 0, 0, 1)


# --- Parsing and serialising ---------------------------------------------------------------------------------------

ROUND_TRIPS: list[dict[str, Any]] = [
    {"multa": {"modalidade": 1, "valorPerc": "2.50"}},
    {"multa": {"modalidade": 2, "valorPerc": "2.00"}},
    *({"juros": {"modalidade": int(m), "valorPerc": "1.25"}} for m in JurosModalidade),
    {"abatimento": {"modalidade": 1, "valorPerc": "5.00"}, "desconto": {"modalidade": 3, "valorPerc": "0.05"}},
    {"abatimento": {"modalidade": 2, "valorPerc": "5.00"}},
    {"desconto": {"modalidade": 2, "descontoDataFixa": [{"data": "2024-06-01", "valorPerc": "3.00"}]}},
    *({"desconto": {"modalidade": m, "valorPerc": "0.07"}} for m in (4, 5, 6)),
]


@pytest.mark.parametrize("extra", ROUND_TRIPS)
def test_api_shapes_round_trip(extra: dict[str, Any]) -> None:
    body = {
        "calendario": {"dataDeVencimento": "2024-06-20", "validadeAposVencimento": 5},
        "valor": {"original": "100.00", **extra},
    }
    assert DueTerms.from_api(body).to_api() == body


def test_validade_defaults_to_the_schemas_30_days() -> None:
    charge = DueTerms.from_api({"calendario": {"dataDeVencimento": "2024-06-20"}, "valor": {"original": "1.00"}})
    assert charge.validade_apos_vencimento == 30


def _body(**valor: Any) -> dict[str, Any]:
    return {"calendario": {"dataDeVencimento": "2024-06-20"}, "valor": {"original": "100.00", **valor}}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (_body(original="0.00"), "valor.original"),
        (_body(original="10"), "valor.original"),
        (
            {
                "calendario": {"dataDeVencimento": "2024-06-20", "validadeAposVencimento": -1},
                "valor": {"original": "1.00"},
            },
            "calendario.validadeAposVencimento",
        ),
        (
            {"calendario": {"dataDeVencimento": "20/06/2024"}, "valor": {"original": "1.00"}},
            "calendario.dataDeVencimento",
        ),
        (_body(multa={"modalidade": 3, "valorPerc": "1.00"}), "valor.multa.modalidade"),
        (_body(juros={"modalidade": 9, "valorPerc": "1.00"}), "valor.juros.modalidade"),
        (_body(abatimento={"modalidade": 1, "valorPerc": "100.00"}), "valor.abatimento"),
        (_body(abatimento={"modalidade": 2, "valorPerc": "100.00"}), "valor.abatimento"),
        (_body(desconto={"modalidade": 1, "valorPerc": "1.00"}), "valor.desconto.valorPerc"),
        (_body(desconto={"modalidade": 1, "descontoDataFixa": []}), "valor.desconto.descontoDataFixa"),
        (
            _body(desconto={"modalidade": 3, "valorPerc": "1.00", "descontoDataFixa": [{"data": "2024-06-01"}]}),
            "valor.desconto.descontoDataFixa",
        ),
        (_body(desconto={"modalidade": 5}), "valor.desconto.valorPerc"),
        (
            _body(desconto={"modalidade": 1, "descontoDataFixa": [{"data": "2024-06-21", "valorPerc": "1.00"}]}),
            "valor.desconto.descontoDataFixa",
        ),
        (
            _body(desconto={"modalidade": 1, "descontoDataFixa": [{"data": "2024-06-01", "valorPerc": "100.00"}]}),
            "valor.desconto",
        ),
        (
            _body(
                desconto={
                    "modalidade": 1,
                    "descontoDataFixa": [{"data": f"2024-06-0{day}", "valorPerc": "1.00"} for day in (1, 2, 3, 4)],
                }
            ),
            "valor.desconto.descontoDataFixa",
        ),
    ],
)
def test_terms_api_pix_refuses(body: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidDueTerms) as caught:
        DueTerms.from_api(body)
    assert caught.value.field == field


def test_percentages_keep_two_decimals() -> None:
    with pytest.raises(InvalidDueTerms):
        Multa(MultaModalidade.PERCENTUAL, percentual=Decimal("2.005"))
    with pytest.raises(InvalidDueTerms):
        Multa(MultaModalidade.VALOR_FIXO, percentual=Decimal("2.00"))


# --- The national business-day calendar ----------------------------------------------------------------------------


def test_easter_and_the_movable_holidays() -> None:
    assert [easter(year) for year in (2020, 2024, 2025)] == [D("2020-04-12"), D("2024-03-31"), D("2025-04-20")]
    holidays_2025 = national_holidays(2025)
    # Carnaval Mon/Tue, Good Friday, Corpus Christi
    assert {D("2025-03-03"), D("2025-03-04"), D("2025-04-18"), D("2025-06-19")} <= holidays_2025
    assert D("2025-03-05") not in holidays_2025  # Ash Wednesday is worked
    assert len(holidays_2025) == 13


def test_consciencia_negra_is_national_from_2024() -> None:
    assert D("2023-11-20") not in national_holidays(2023)
    assert D("2024-11-20") in national_holidays(2024)


def test_business_days_between_counts_after_start_up_to_end() -> None:
    assert not is_business_day(D("2024-06-22"))  # Saturday
    assert business_days_between(D("2024-06-20"), D("2024-07-01")) == 7
    assert business_days_between(D("2024-06-20"), D("2024-06-20")) == 0
    assert business_days_between(D("2024-06-21"), D("2024-06-20")) == 0
    assert business_days_between(D("2020-12-24"), D("2020-12-28")) == 1  # Christmas and a weekend skipped
