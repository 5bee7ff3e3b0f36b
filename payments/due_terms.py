"""The terms of a due-date charge (API Pix 2.9.0 ``cobv``), typed.

``calendario.dataDeVencimento`` / ``validadeAposVencimento`` and ``valor``'s
``original``, ``multa``, ``juros``, ``abatimento`` and ``desconto``, parsed
from and serialised to the API Pix JSON shapes (schema ``CobVValor``).
Amounts are ``int`` centavos; percentages are :class:`~decimal.Decimal`
as the schema writes them (``"2.00"`` is 2 %). Pure Python: no Django.

Validation is the schema's and the ``CobVOperacaoInvalida`` violations that
need no database (``original`` zero, negative ``validadeAposVencimento``,
``abatimento`` or a ``desconto`` element at or over the original or 100 %,
a fixed discount date after the due date, modalities 1-2 without
``descontoDataFixa`` or 3-6 without ``valorPerc``). What amount_due does with
valid terms is in :mod:`payments.due_amounts`.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from enum import IntEnum
from typing import Any, TypeVar

__all__ = [
    "Abatimento",
    "AbatimentoModalidade",
    "Desconto",
    "DescontoDataFixa",
    "DescontoModalidade",
    "DueTerms",
    "InvalidDueTerms",
    "Juros",
    "JurosModalidade",
    "Multa",
    "MultaModalidade",
    "centavos_to_api",
]

ZERO = Decimal(0)
HUNDRED = Decimal(100)
CENT = Decimal("0.01")
#: ``\d{1,10}\.\d{2}``, the schema's pattern for every amount and percentage.
_VALOR = re.compile(r"\d{1,10}\.\d{2}")
#: The schema's default for ``validadeAposVencimento``.
DEFAULT_VALIDADE = 30


class InvalidDueTerms(ValueError):
    """Terms API Pix refuses (``CobVOperacaoInvalida``); ``field`` is the JSON path at fault.

    A ``ValueError`` rather than a ``core.exceptions`` error so that this
    module stays free of Django; the service that stores a cobv turns it into
    its validation envelope.
    """

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class MultaModalidade(IntEnum):
    VALOR_FIXO = 1
    PERCENTUAL = 2


class JurosModalidade(IntEnum):
    VALOR_DIAS_CORRIDOS = 1
    PERCENTUAL_DIA_DIAS_CORRIDOS = 2
    PERCENTUAL_MES_DIAS_CORRIDOS = 3
    PERCENTUAL_ANO_DIAS_CORRIDOS = 4
    VALOR_DIAS_UTEIS = 5
    PERCENTUAL_DIA_DIAS_UTEIS = 6
    PERCENTUAL_MES_DIAS_UTEIS = 7
    PERCENTUAL_ANO_DIAS_UTEIS = 8

    @property
    def business_days(self) -> bool:
        return self >= JurosModalidade.VALOR_DIAS_UTEIS

    @property
    def is_value(self) -> bool:
        return self in (JurosModalidade.VALOR_DIAS_CORRIDOS, JurosModalidade.VALOR_DIAS_UTEIS)


class AbatimentoModalidade(IntEnum):
    VALOR_FIXO = 1
    PERCENTUAL = 2


class DescontoModalidade(IntEnum):
    VALOR_FIXO_ATE_DATAS = 1
    PERCENTUAL_ATE_DATAS = 2
    VALOR_DIA_CORRIDO = 3
    VALOR_DIA_UTIL = 4
    PERCENTUAL_DIA_CORRIDO = 5
    PERCENTUAL_DIA_UTIL = 6

    @property
    def fixed_dates(self) -> bool:
        return self <= DescontoModalidade.PERCENTUAL_ATE_DATAS

    @property
    def is_value(self) -> bool:
        return self in (
            DescontoModalidade.VALOR_FIXO_ATE_DATAS,
            DescontoModalidade.VALOR_DIA_CORRIDO,
            DescontoModalidade.VALOR_DIA_UTIL,
        )

    @property
    def business_days(self) -> bool:
        return self in (DescontoModalidade.VALOR_DIA_UTIL, DescontoModalidade.PERCENTUAL_DIA_UTIL)


def centavos_to_api(centavos: int) -> str:
    """``12345`` -> ``"123.45"``."""
    return f"{centavos // 100}.{centavos % 100:02d}"


def _percent_to_api(percent: Decimal) -> str:
    return f"{percent:.2f}"


def _decimal(raw: object, field: str) -> Decimal:
    if not isinstance(raw, str) or not _VALOR.fullmatch(raw):
        raise InvalidDueTerms(field, r"deve seguir o padrão \d{1,10}\.\d{2}")
    return Decimal(raw)


def _centavos(raw: object, field: str) -> int:
    return int(_decimal(raw, field) * 100)


def _modalidade(raw: object, field: str) -> int:
    # The schema says integer, its own example (cobBody1) sends "2": take both.
    if isinstance(raw, bool) or not isinstance(raw, int | str) or not str(raw).isdigit():
        raise InvalidDueTerms(field, "deve ser um inteiro")
    return int(raw)


_E = TypeVar("_E", bound=IntEnum)


def _enum(kind: type[_E], raw: object, field: str) -> _E:
    try:
        return kind(_modalidade(raw, field))
    except ValueError:
        raise InvalidDueTerms(field, "modalidade desconhecida") from None


def _check_amount(valor: int, percentual: Decimal, *, is_value: bool, field: str) -> None:
    """One of ``valor`` (centavos) or ``percentual`` carries the term, the other stays zero."""
    if valor < 0 or percentual < ZERO:
        raise InvalidDueTerms(field, "não pode ser negativo")
    if percentual != percentual.quantize(CENT):
        raise InvalidDueTerms(field, "percentual com mais de duas casas decimais")
    if (is_value and percentual) or (not is_value and valor):
        raise InvalidDueTerms(field, "valor e percentual não combinam com a modalidade")


@dataclass(frozen=True)
class Multa:
    """A flat fine once the charge is late: ``valor`` centavos (1) or ``percentual`` of the original (2)."""

    modalidade: MultaModalidade
    valor: int = 0
    percentual: Decimal = ZERO

    def __post_init__(self) -> None:
        _check_amount(self.valor, self.percentual, is_value=self.modalidade == 1, field="valor.multa")

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> Multa:
        modalidade = _enum(MultaModalidade, data.get("modalidade"), "valor.multa.modalidade")
        if modalidade is MultaModalidade.VALOR_FIXO:
            return cls(modalidade, valor=_centavos(data.get("valorPerc"), "valor.multa.valorPerc"))
        return cls(modalidade, percentual=_decimal(data.get("valorPerc"), "valor.multa.valorPerc"))

    def to_api(self) -> dict[str, Any]:
        value = centavos_to_api(self.valor) if self.modalidade == 1 else _percent_to_api(self.percentual)
        return {"modalidade": int(self.modalidade), "valorPerc": value}


@dataclass(frozen=True)
class Juros:
    """Interest per day late: a value (1, 5) or a rate per day, month or year (2-4, 6-8)."""

    modalidade: JurosModalidade
    valor: int = 0
    percentual: Decimal = ZERO

    def __post_init__(self) -> None:
        _check_amount(self.valor, self.percentual, is_value=self.modalidade.is_value, field="valor.juros")

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> Juros:
        modalidade = _enum(JurosModalidade, data.get("modalidade"), "valor.juros.modalidade")
        if modalidade.is_value:
            return cls(modalidade, valor=_centavos(data.get("valorPerc"), "valor.juros.valorPerc"))
        return cls(modalidade, percentual=_decimal(data.get("valorPerc"), "valor.juros.valorPerc"))

    def to_api(self) -> dict[str, Any]:
        value = centavos_to_api(self.valor) if self.modalidade.is_value else _percent_to_api(self.percentual)
        return {"modalidade": int(self.modalidade), "valorPerc": value}


@dataclass(frozen=True)
class Abatimento:
    """A deduction that holds on any day: ``valor`` centavos (1) or ``percentual`` of the original (2)."""

    modalidade: AbatimentoModalidade
    valor: int = 0
    percentual: Decimal = ZERO

    def __post_init__(self) -> None:
        _check_amount(self.valor, self.percentual, is_value=self.modalidade == 1, field="valor.abatimento")

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> Abatimento:
        modalidade = _enum(AbatimentoModalidade, data.get("modalidade"), "valor.abatimento.modalidade")
        if modalidade is AbatimentoModalidade.VALOR_FIXO:
            return cls(modalidade, valor=_centavos(data.get("valorPerc"), "valor.abatimento.valorPerc"))
        return cls(modalidade, percentual=_decimal(data.get("valorPerc"), "valor.abatimento.valorPerc"))

    def to_api(self) -> dict[str, Any]:
        value = centavos_to_api(self.valor) if self.modalidade == 1 else _percent_to_api(self.percentual)
        return {"modalidade": int(self.modalidade), "valorPerc": value}


@dataclass(frozen=True)
class DescontoDataFixa:
    """Discount ``valor`` centavos (modality 1) or ``percentual`` (2) for a payment up to ``data``."""

    data: dt.date
    valor: int = 0
    percentual: Decimal = ZERO


@dataclass(frozen=True)
class Desconto:
    """Early-payment discount: up to three dated tiers (1, 2), or an amount per day early (3-6)."""

    modalidade: DescontoModalidade
    datas_fixas: tuple[DescontoDataFixa, ...] = ()
    valor: int = 0
    percentual: Decimal = ZERO

    def __post_init__(self) -> None:
        field = "valor.desconto"
        if self.modalidade.fixed_dates:
            if not 1 <= len(self.datas_fixas) <= 3:
                raise InvalidDueTerms(f"{field}.descontoDataFixa", "deve ter de 1 a 3 elementos")
            if len({tier.data for tier in self.datas_fixas}) != len(self.datas_fixas):
                raise InvalidDueTerms(f"{field}.descontoDataFixa", "datas repetidas")
            if self.valor or self.percentual:
                raise InvalidDueTerms(f"{field}.valorPerc", "não se usa nas modalidades 1 e 2")
            for tier in self.datas_fixas:
                _check_amount(tier.valor, tier.percentual, is_value=self.modalidade.is_value, field=field)
        else:
            if self.datas_fixas:
                raise InvalidDueTerms(f"{field}.descontoDataFixa", "não se usa nas modalidades 3 a 6")
            _check_amount(self.valor, self.percentual, is_value=self.modalidade.is_value, field=field)

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> Desconto:
        modalidade = _enum(DescontoModalidade, data.get("modalidade"), "valor.desconto.modalidade")
        if not modalidade.fixed_dates:
            if data.get("descontoDataFixa"):
                raise InvalidDueTerms("valor.desconto.descontoDataFixa", "não se usa nas modalidades 3 a 6")
            raw = data.get("valorPerc")
            if modalidade.is_value:
                return cls(modalidade, valor=_centavos(raw, "valor.desconto.valorPerc"))
            return cls(modalidade, percentual=_decimal(raw, "valor.desconto.valorPerc"))
        if "valorPerc" in data:
            raise InvalidDueTerms("valor.desconto.valorPerc", "não se usa nas modalidades 1 e 2")
        tiers = data.get("descontoDataFixa")
        if not isinstance(tiers, list) or not tiers:
            raise InvalidDueTerms("valor.desconto.descontoDataFixa", "obrigatório nas modalidades 1 e 2")
        parsed = []
        for index, tier in enumerate(tiers):
            path = f"valor.desconto.descontoDataFixa[{index}]"
            if not isinstance(tier, Mapping):
                raise InvalidDueTerms(path, "deve ser um objeto")
            day = _date(tier.get("data"), f"{path}.data")
            if modalidade.is_value:
                parsed.append(DescontoDataFixa(day, valor=_centavos(tier.get("valorPerc"), f"{path}.valorPerc")))
            else:
                parsed.append(DescontoDataFixa(day, percentual=_decimal(tier.get("valorPerc"), f"{path}.valorPerc")))
        return cls(modalidade, datas_fixas=tuple(parsed))

    def to_api(self) -> dict[str, Any]:
        if self.modalidade.fixed_dates:
            tiers = [
                {
                    "data": tier.data.isoformat(),
                    "valorPerc": centavos_to_api(tier.valor)
                    if self.modalidade.is_value
                    else _percent_to_api(tier.percentual),
                }
                for tier in self.datas_fixas
            ]
            return {"modalidade": int(self.modalidade), "descontoDataFixa": tiers}
        value = centavos_to_api(self.valor) if self.modalidade.is_value else _percent_to_api(self.percentual)
        return {"modalidade": int(self.modalidade), "valorPerc": value}


def _date(raw: object, field: str) -> dt.date:
    if isinstance(raw, str) and len(raw) == 10:
        try:
            return dt.date.fromisoformat(raw)
        except ValueError:
            pass
    raise InvalidDueTerms(field, "deve ser uma data YYYY-MM-DD")


@dataclass(frozen=True)
class DueTerms:
    """What decides a cobv's amount on a day: its ``calendario`` and ``valor`` (``original`` in centavos)."""

    original: int
    data_de_vencimento: dt.date
    validade_apos_vencimento: int = DEFAULT_VALIDADE
    multa: Multa | None = None
    juros: Juros | None = None
    abatimento: Abatimento | None = None
    desconto: Desconto | None = None

    def __post_init__(self) -> None:
        if self.original <= 0:
            raise InvalidDueTerms("valor.original", "deve ser maior que zero")
        if self.validade_apos_vencimento < 0:
            raise InvalidDueTerms("calendario.validadeAposVencimento", "não pode ser negativo")
        if self.abatimento and _at_or_over_original(self.original, self.abatimento.valor, self.abatimento.percentual):
            raise InvalidDueTerms("valor.abatimento", "deve ser menor que o valor original e que 100%")
        if self.desconto:
            elements = self.desconto.datas_fixas or (
                DescontoDataFixa(self.data_de_vencimento, self.desconto.valor, self.desconto.percentual),
            )
            for tier in elements:
                if _at_or_over_original(self.original, tier.valor, tier.percentual):
                    raise InvalidDueTerms("valor.desconto", "deve ser menor que o valor original e que 100%")
                if tier.data > self.data_de_vencimento:
                    raise InvalidDueTerms("valor.desconto.descontoDataFixa", "data posterior ao vencimento")

    @classmethod
    def from_api(cls, body: Mapping[str, Any]) -> DueTerms:
        """From a cobv request or answer: its ``calendario`` and ``valor`` objects."""
        calendario = body.get("calendario")
        valor = body.get("valor")
        if not isinstance(calendario, Mapping) or not isinstance(valor, Mapping):
            raise InvalidDueTerms("calendario" if not isinstance(calendario, Mapping) else "valor", "obrigatório")
        validade = calendario.get("validadeAposVencimento", DEFAULT_VALIDADE)
        if isinstance(validade, bool) or not isinstance(validade, int):
            raise InvalidDueTerms("calendario.validadeAposVencimento", "deve ser um inteiro")
        parts: dict[str, Any] = {}
        for name, kind in (("multa", Multa), ("juros", Juros), ("abatimento", Abatimento), ("desconto", Desconto)):
            part = valor.get(name)
            if part is not None:
                if not isinstance(part, Mapping):
                    raise InvalidDueTerms(f"valor.{name}", "deve ser um objeto")
                parts[name] = kind.from_api(part)
        return cls(
            original=_centavos(valor.get("original"), "valor.original"),
            data_de_vencimento=_date(calendario.get("dataDeVencimento"), "calendario.dataDeVencimento"),
            validade_apos_vencimento=validade,
            **parts,
        )

    def to_api(self) -> dict[str, Any]:
        """``{"calendario": ..., "valor": ...}`` as a cobv request carries them."""
        valor: dict[str, Any] = {"original": centavos_to_api(self.original)}
        for name in ("multa", "juros", "abatimento", "desconto"):
            part: Multa | Juros | Abatimento | Desconto | None = getattr(self, name)
            if part is not None:
                valor[name] = part.to_api()
        calendario = {
            "dataDeVencimento": self.data_de_vencimento.isoformat(),
            "validadeAposVencimento": self.validade_apos_vencimento,
        }
        return {"calendario": calendario, "valor": valor}


def _at_or_over_original(original: int, valor: int, percentual: Decimal) -> bool:
    return valor >= original or percentual >= HUNDRED
