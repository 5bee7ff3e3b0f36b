"""The terms of a Pix Automático recurrence (payments.recurrence_terms): the
schema's own ``/rec`` examples round-trip, and each ``RecOperacaoInvalida``
violation of ``POST /rec`` that needs no database is refused with its field.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from payments.recurrence_terms import (
    Calendario,
    Devedor,
    InvalidRecurrenceTerms,
    Periodicidade,
    PoliticaRetentativa,
    RecurrenceTerms,
    ValorRecorrencia,
)

CPF = "52998224725"  # valid check digits (the schema's example, 45164632481, has none)
CNPJ = "11222333000181"


def body(**overrides: Any) -> dict[str, Any]:
    """The schema's recBody: Fulano de Tal, R$ 35,00 a month from 2024-04-01 to 2025-04-01."""
    data: dict[str, Any] = {
        "vinculo": {
            "objeto": "Serviço de Streamming de Música.",
            "contrato": "63100862",
            "devedor": {"cpf": CPF, "nome": "Fulano de Tal"},
        },
        "calendario": {"dataInicial": "2024-04-01", "dataFinal": "2025-04-01", "periodicidade": "MENSAL"},
        "valor": {"valorRec": "35.00"},
        "politicaRetentativa": "NAO_PERMITE",
    }
    data.update(overrides)
    return data


def test_the_schemas_example_parses_and_round_trips() -> None:
    terms = RecurrenceTerms.from_api(body())
    assert terms.vinculo.devedor == Devedor("Fulano de Tal", cpf=CPF)
    assert terms.calendario == Calendario(dt.date(2024, 4, 1), Periodicidade.MENSAL, dt.date(2025, 4, 1))
    assert terms.valor == ValorRecorrencia(valor_rec=3500)
    assert terms.valor.fixed
    assert terms.politica_retentativa is PoliticaRetentativa.NAO_PERMITE
    assert terms.to_api() == body()
    assert RecurrenceTerms.from_api(terms.to_api()) == terms


def test_variable_amount_with_a_floor_and_no_end_and_a_company_payer() -> None:
    raw = body(
        vinculo={"contrato": "X1", "devedor": {"cnpj": CNPJ, "nome": "Empresa"}},
        calendario={"dataInicial": "2024-10-10", "periodicidade": "ANUAL"},
        valor={"valorMinimoRecebedor": "5000.00"},
        politicaRetentativa="PERMITE_3R_7D",
    )
    terms = RecurrenceTerms.from_api(raw)
    assert terms.valor == ValorRecorrencia(valor_minimo_recebedor=500000)
    assert not terms.valor.fixed
    assert terms.calendario.data_final is None
    assert terms.politica_retentativa.allows_retries
    assert terms.to_api() == raw


def test_variable_amount_without_a_floor_leaves_valor_out() -> None:
    raw = body()
    del raw["valor"]
    terms = RecurrenceTerms.from_api(raw)
    assert terms.valor == ValorRecorrencia()
    assert "valor" not in terms.to_api()


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"vinculo": None}, "vinculo"),
        ({"calendario": "2024-04-01"}, "calendario"),
        ({"vinculo": {"devedor": {"cpf": CPF, "nome": "F"}}}, "vinculo.contrato"),
        ({"vinculo": {"contrato": "", "devedor": {"cpf": CPF, "nome": "F"}}}, "vinculo.contrato"),
        ({"vinculo": {"contrato": "x" * 36, "devedor": {"cpf": CPF, "nome": "F"}}}, "vinculo.contrato"),
        ({"vinculo": {"contrato": "c", "objeto": "o" * 36, "devedor": {"cpf": CPF, "nome": "F"}}}, "vinculo.objeto"),
        ({"vinculo": {"contrato": "c"}}, "vinculo.devedor"),
        ({"vinculo": {"contrato": "c", "devedor": {"nome": "F"}}}, "vinculo.devedor"),
        ({"vinculo": {"contrato": "c", "devedor": {"cpf": CPF, "cnpj": CNPJ, "nome": "F"}}}, "vinculo.devedor"),
        ({"vinculo": {"contrato": "c", "devedor": {"cpf": "52998224724", "nome": "F"}}}, "vinculo.devedor.cpf"),
        ({"vinculo": {"contrato": "c", "devedor": {"cpf": "529.982.247-25", "nome": "F"}}}, "vinculo.devedor.cpf"),
        ({"vinculo": {"contrato": "c", "devedor": {"cnpj": "11222333000182", "nome": "F"}}}, "vinculo.devedor.cnpj"),
        ({"vinculo": {"contrato": "c", "devedor": {"cpf": CPF}}}, "vinculo.devedor.nome"),
        ({"vinculo": {"contrato": "c", "devedor": {"cpf": CPF, "nome": "n" * 141}}}, "vinculo.devedor.nome"),
        ({"calendario": {"dataInicial": "2024-04-01", "periodicidade": "DIARIA"}}, "calendario.periodicidade"),
        ({"calendario": {"dataInicial": "01/04/2024", "periodicidade": "MENSAL"}}, "calendario.dataInicial"),
        (
            {"calendario": {"dataInicial": "2024-04-01", "dataFinal": "2024-03-31", "periodicidade": "MENSAL"}},
            "calendario.dataFinal",
        ),
        ({"valor": {"valorRec": "35.00", "valorMinimoRecebedor": "10.00"}}, "valor"),
        ({"valor": {"valorRec": "35"}}, "valor.valorRec"),
        ({"valor": {"valorRec": 35.0}}, "valor.valorRec"),
        ({"valor": {"valorRec": "0.00"}}, "valor.valorRec"),
        ({"valor": {"valorMinimoRecebedor": "1.5"}}, "valor.valorMinimoRecebedor"),
        ({"valor": "35.00"}, "valor"),
        ({"politicaRetentativa": "PERMITE"}, "politicaRetentativa"),
        ({"politicaRetentativa": None}, "politicaRetentativa"),
    ],
)
def test_violations_are_refused_with_their_field(overrides: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidRecurrenceTerms) as caught:
        RecurrenceTerms.from_api(body(**overrides))
    assert caught.value.field == field
    assert isinstance(caught.value, ValueError)


def test_data_inicial_before_the_day_of_creation_is_refused() -> None:
    terms = RecurrenceTerms.from_api(body())
    terms.check_creation(dt.date(2024, 4, 1))
    terms.check_creation(dt.date(2024, 3, 20))
    with pytest.raises(InvalidRecurrenceTerms) as caught:
        terms.check_creation(dt.date(2024, 4, 2))
    assert caught.value.field == "calendario.dataInicial"


def test_id_rec_must_match_the_retry_policy() -> None:
    nao_permite = RecurrenceTerms.from_api(body())
    permite = RecurrenceTerms.from_api(body(politicaRetentativa="PERMITE_3R_7D"))
    nao_permite.check_id_rec("RN123456782024011577825445612")
    permite.check_id_rec("RR1234567820240115abcdefghijk")
    with pytest.raises(InvalidRecurrenceTerms, match="política"):
        nao_permite.check_id_rec("RR1234567820240115abcdefghijk")
    with pytest.raises(InvalidRecurrenceTerms, match="RecId"):
        permite.check_id_rec("RR12345678")
