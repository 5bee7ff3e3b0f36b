"""The terms of a Pix Automático recurrence (API Pix 2.9.0 ``/rec``), typed.

``vinculo`` (``objeto``, ``contrato``, ``devedor`` with ``cpf`` or ``cnpj``
and ``nome``), ``calendario`` (``dataInicial``, optional ``dataFinal``,
``periodicidade``), ``valor`` (``valorRec`` for a fixed amount, or
``valorMinimoRecebedor``, the floor under the maximum a payer may set on a
variable amount, or neither) and ``politicaRetentativa``, parsed from and
serialised to the API Pix JSON shapes (schemas ``RecBase``,
``RecConfiguracao``). Amounts are ``int`` centavos. Pure Python: no Django.

Validation is the schema's and the ``RecOperacaoInvalida`` violations of
``POST /rec`` that need no database:

- "O objeto ``rec.vinculo`` não respeita o _schema_": ``contrato`` required,
  ``objeto`` and ``contrato`` at most 35 characters, ``devedor`` one of
  ``PessoaFisicaRecorrencia`` (``cpf`` ``^\\d{11}$``) or
  ``PessoaJuridicaRecorrencia`` (``cnpj`` ``^[0-9A-Z]{14}$``), ``nome``
  required, at most 140. We also check the document's check digits
  (:mod:`core.documents`): the payer's bank finds the payer by it, and a
  wrong digit would only surface as a rejected authorisation days later.
- "``rec.calendario.dataFinal`` é anterior ao campo ``rec.calendario.dataInicial``".
- "``rec.calendario.periodicidade`` não respeita o _schema_": one of
  ``SEMANAL``, ``MENSAL``, ``TRIMESTRAL``, ``SEMESTRAL``, ``ANUAL``.
- "``rec.valor.valorRec`` / ``valorMinimoRecebedor`` não respeita o
  _schema_" (``\\d{1,10}\\.\\d{2}``) and "Ambos os campos ... estão
  preenchidos". Ours: neither may be zero (there is no zero-value Pix;
  bacen/pix-api#408).
- "``rec.politicaRetentativa`` não respeita o _schema_": required (by
  ``RecConfiguracao``), ``NAO_PERMITE`` or ``PERMITE_3R_7D``.

"``rec.calendario.dataInicial`` é anterior à data de criação da
recorrência" needs the day of creation: :meth:`RecurrenceTerms.check_creation`
takes it. An ``idRec`` must agree with the policy (``RecId``: "RR" when the
recurrence allows retries, "RN" when not): :meth:`RecurrenceTerms.check_id_rec`.
When cycles fall due, and when their charges and retries may be sent, is in
:mod:`payments.recurrence_schedule`.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from core.documents import normalize_cnpj, normalize_cpf
from payments.due_terms import centavos_to_api

__all__ = [
    "Calendario",
    "Devedor",
    "InvalidRecurrenceTerms",
    "Periodicidade",
    "PoliticaRetentativa",
    "RecurrenceTerms",
    "ValorRecorrencia",
    "Vinculo",
]

#: ``\d{1,10}\.\d{2}``, the schema's pattern for ``valorRec`` and ``valorMinimoRecebedor``.
_VALOR = re.compile(r"\d{1,10}\.\d{2}")
_CPF = re.compile(r"\d{11}")
_CNPJ = re.compile(r"[0-9A-Z]{14}")
#: ``RecId``: ``R``, ``R``/``N``, 8 ISPB, ``yyyyMMdd``, 11 sequential: 29 alphanumerics.
_ID_REC = re.compile(r"R[RN][0-9A-Z]{8}\d{8}[a-zA-Z0-9]{11}")
VINCULO_MAX = 35
NOME_MAX = 140


class InvalidRecurrenceTerms(ValueError):
    """Terms API Pix refuses (``RecOperacaoInvalida``); ``field`` is the JSON path at fault.

    A ``ValueError``, like :class:`payments.due_terms.InvalidDueTerms`, so
    that this module stays free of Django; the service that stores a
    recurrence turns it into its validation envelope.
    """

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class Periodicidade(StrEnum):
    """``calendario.periodicidade``: one charge per cycle of this length."""

    SEMANAL = "SEMANAL"
    MENSAL = "MENSAL"
    TRIMESTRAL = "TRIMESTRAL"
    SEMESTRAL = "SEMESTRAL"
    ANUAL = "ANUAL"

    @property
    def months(self) -> int:
        """Calendar months per cycle; 0 for the weekly one, which counts days."""
        return {"SEMANAL": 0, "MENSAL": 1, "TRIMESTRAL": 3, "SEMESTRAL": 6, "ANUAL": 12}[self.value]


class PoliticaRetentativa(StrEnum):
    """``politicaRetentativa``: whether a failed cycle may be retried after its due date."""

    NAO_PERMITE = "NAO_PERMITE"
    PERMITE_3R_7D = "PERMITE_3R_7D"

    @property
    def allows_retries(self) -> bool:
        return self is PoliticaRetentativa.PERMITE_3R_7D

    @property
    def id_rec_letter(self) -> str:
        """The second character of an ``idRec`` under this policy (``RecId``)."""
        return "R" if self.allows_retries else "N"


@dataclass(frozen=True)
class Devedor:
    """The payer: exactly one of ``cpf`` (11 digits) or ``cnpj`` (14, alphanumeric), and a ``nome``."""

    nome: str
    cpf: str | None = None
    cnpj: str | None = None

    def __post_init__(self) -> None:
        field = "vinculo.devedor"
        if (self.cpf is None) == (self.cnpj is None):
            raise InvalidRecurrenceTerms(field, "informe cpf ou cnpj, um dos dois")
        if self.cpf is not None and (not _CPF.fullmatch(self.cpf) or normalize_cpf(self.cpf) != self.cpf):
            raise InvalidRecurrenceTerms(f"{field}.cpf", "CPF inválido")
        if self.cnpj is not None and (not _CNPJ.fullmatch(self.cnpj) or normalize_cnpj(self.cnpj) != self.cnpj):
            raise InvalidRecurrenceTerms(f"{field}.cnpj", "CNPJ inválido")
        if not self.nome.strip():
            raise InvalidRecurrenceTerms(f"{field}.nome", "obrigatório")
        if len(self.nome) > NOME_MAX:
            raise InvalidRecurrenceTerms(f"{field}.nome", f"no máximo {NOME_MAX} caracteres")

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> Devedor:
        nome = _text(data.get("nome"), "vinculo.devedor.nome")
        cpf, cnpj = data.get("cpf"), data.get("cnpj")
        return cls(
            nome=nome,
            cpf=None if cpf is None else _text(cpf, "vinculo.devedor.cpf"),
            cnpj=None if cnpj is None else _text(cnpj, "vinculo.devedor.cnpj"),
        )

    def to_api(self) -> dict[str, Any]:
        if self.cpf is not None:
            return {"cpf": self.cpf, "nome": self.nome}
        return {"cnpj": self.cnpj, "nome": self.nome}


@dataclass(frozen=True)
class Vinculo:
    """What the payer authorises: ``contrato`` (the merchant's reference), ``devedor``, an optional ``objeto``."""

    contrato: str
    devedor: Devedor
    objeto: str | None = None

    def __post_init__(self) -> None:
        if not self.contrato.strip():
            raise InvalidRecurrenceTerms("vinculo.contrato", "obrigatório")
        for name, value in (("contrato", self.contrato), ("objeto", self.objeto)):
            if value is not None and len(value) > VINCULO_MAX:
                raise InvalidRecurrenceTerms(f"vinculo.{name}", f"no máximo {VINCULO_MAX} caracteres")

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> Vinculo:
        devedor = data.get("devedor")
        if not isinstance(devedor, Mapping):
            raise InvalidRecurrenceTerms("vinculo.devedor", "obrigatório")
        objeto = data.get("objeto")
        return cls(
            contrato=_text(data.get("contrato"), "vinculo.contrato"),
            devedor=Devedor.from_api(devedor),
            objeto=None if objeto is None else _text(objeto, "vinculo.objeto"),
        )

    def to_api(self) -> dict[str, Any]:
        body: dict[str, Any] = {"contrato": self.contrato, "devedor": self.devedor.to_api()}
        if self.objeto is not None:
            body["objeto"] = self.objeto
        return body


@dataclass(frozen=True)
class Calendario:
    """``dataInicial`` (the first cycle's due date), ``periodicidade``, and ``dataFinal`` when the term is fixed."""

    data_inicial: dt.date
    periodicidade: Periodicidade
    data_final: dt.date | None = None

    def __post_init__(self) -> None:
        if self.data_final is not None and self.data_final < self.data_inicial:
            raise InvalidRecurrenceTerms("calendario.dataFinal", "anterior à data inicial")

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> Calendario:
        raw = data.get("periodicidade")
        try:
            periodicidade = Periodicidade(str(raw))
        except ValueError:
            raise InvalidRecurrenceTerms("calendario.periodicidade", "periodicidade desconhecida") from None
        final = data.get("dataFinal")
        return cls(
            data_inicial=_date(data.get("dataInicial"), "calendario.dataInicial"),
            periodicidade=periodicidade,
            data_final=None if final is None else _date(final, "calendario.dataFinal"),
        )

    def to_api(self) -> dict[str, Any]:
        body: dict[str, Any] = {"dataInicial": self.data_inicial.isoformat(), "periodicidade": str(self.periodicidade)}
        if self.data_final is not None:
            body["dataFinal"] = self.data_final.isoformat()
        return body


@dataclass(frozen=True)
class ValorRecorrencia:
    """``valorRec`` (fixed, centavos) or ``valorMinimoRecebedor`` (a floor), never both; neither: variable."""

    valor_rec: int | None = None
    valor_minimo_recebedor: int | None = None

    def __post_init__(self) -> None:
        if self.valor_rec is not None and self.valor_minimo_recebedor is not None:
            raise InvalidRecurrenceTerms("valor", "valorRec e valorMinimoRecebedor não podem vir juntos")
        for name, value in (("valorRec", self.valor_rec), ("valorMinimoRecebedor", self.valor_minimo_recebedor)):
            if value is not None and value <= 0:
                raise InvalidRecurrenceTerms(f"valor.{name}", "deve ser maior que zero")

    @property
    def fixed(self) -> bool:
        """A fixed amount: every cycle charges ``valor_rec``; otherwise the merchant sets each cycle's."""
        return self.valor_rec is not None

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> ValorRecorrencia:
        rec, minimo = data.get("valorRec"), data.get("valorMinimoRecebedor")
        return cls(
            valor_rec=None if rec is None else _centavos(rec, "valor.valorRec"),
            valor_minimo_recebedor=None if minimo is None else _centavos(minimo, "valor.valorMinimoRecebedor"),
        )

    def to_api(self) -> dict[str, Any]:
        if self.valor_rec is not None:
            return {"valorRec": centavos_to_api(self.valor_rec)}
        if self.valor_minimo_recebedor is not None:
            return {"valorMinimoRecebedor": centavos_to_api(self.valor_minimo_recebedor)}
        return {}


@dataclass(frozen=True)
class RecurrenceTerms:
    """What ``POST /rec`` carries of the merchant's terms: ``vinculo``, ``calendario``, ``valor``, retry policy."""

    vinculo: Vinculo
    calendario: Calendario
    politica_retentativa: PoliticaRetentativa
    valor: ValorRecorrencia = ValorRecorrencia()

    @classmethod
    def from_api(cls, body: Mapping[str, Any]) -> RecurrenceTerms:
        """From a ``/rec`` request or answer; other fields (``loc``, ``ativacao``, ``recebedor``) are left alone."""
        vinculo, calendario = body.get("vinculo"), body.get("calendario")
        if not isinstance(vinculo, Mapping):
            raise InvalidRecurrenceTerms("vinculo", "obrigatório")
        if not isinstance(calendario, Mapping):
            raise InvalidRecurrenceTerms("calendario", "obrigatório")
        valor = body.get("valor", {})
        if not isinstance(valor, Mapping):
            raise InvalidRecurrenceTerms("valor", "deve ser um objeto")
        try:
            politica = PoliticaRetentativa(str(body.get("politicaRetentativa")))
        except ValueError:
            raise InvalidRecurrenceTerms("politicaRetentativa", "deve ser NAO_PERMITE ou PERMITE_3R_7D") from None
        return cls(
            vinculo=Vinculo.from_api(vinculo),
            calendario=Calendario.from_api(calendario),
            politica_retentativa=politica,
            valor=ValorRecorrencia.from_api(valor),
        )

    def to_api(self) -> dict[str, Any]:
        """The terms as ``POST /rec`` takes them (``valor`` left out when the amount is variable with no floor)."""
        body: dict[str, Any] = {
            "vinculo": self.vinculo.to_api(),
            "calendario": self.calendario.to_api(),
            "politicaRetentativa": str(self.politica_retentativa),
        }
        valor = self.valor.to_api()
        if valor:
            body["valor"] = valor
        return body

    def check_creation(self, today: dt.date) -> None:
        """ "``rec.calendario.dataInicial`` é anterior à data de criação da recorrência": refuse it on ``today``."""
        if self.calendario.data_inicial < today:
            raise InvalidRecurrenceTerms("calendario.dataInicial", "anterior à data de criação da recorrência")

    def check_id_rec(self, id_rec: str) -> None:
        """An ``idRec`` of the ``RecId`` shape whose second letter matches the retry policy."""
        if not _ID_REC.fullmatch(id_rec):
            raise InvalidRecurrenceTerms("idRec", "não segue o formato RecId")
        if id_rec[1] != self.politica_retentativa.id_rec_letter:
            raise InvalidRecurrenceTerms("idRec", "não corresponde à política de retentativa")


def _text(raw: object, field: str) -> str:
    if not isinstance(raw, str):
        raise InvalidRecurrenceTerms(field, "deve ser um texto")
    return raw


def _centavos(raw: object, field: str) -> int:
    if not isinstance(raw, str) or not _VALOR.fullmatch(raw):
        raise InvalidRecurrenceTerms(field, r"deve seguir o padrão \d{1,10}\.\d{2}")
    reais, centavos = raw.split(".")
    return int(reais) * 100 + int(centavos)


def _date(raw: object, field: str) -> dt.date:
    if isinstance(raw, str) and len(raw) == 10:
        try:
            return dt.date.fromisoformat(raw)
        except ValueError:
            pass
    raise InvalidRecurrenceTerms(field, "deve ser uma data YYYY-MM-DD")
