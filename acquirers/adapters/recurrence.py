"""Pix Automático (API Pix ``/rec``, ``/solicrec``, ``/locrec``, ``/cobr``):
part of the adapter interface, re-exported by :mod:`acquirers.adapters.base`.

A recurrence is the payer's standing authorisation, held by the receiver's
PSP under an ``idRec`` it assigns; each cycle is a ``cobr`` (a charge the
payer's PSP settles on its due date without the payer acting), named by a
txid we derive, so a retried ``PUT /cobr/{txid}`` is idempotent.

``terms`` is the API Pix ``/rec`` body as :mod:`payments.recurrence_terms`
writes it (``vinculo``, ``calendario``, ``valor``, ``politicaRetentativa``):
the standard's own shape, passed through, since acquirers sit below
payments and cannot import it.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, NoReturn

from acquirers.adapters.due import DuePix

#: The capability below (part of ``acquirers.adapters.base.Capability``).
RecurrenceCapability = Literal["recurrence"]

#: ``ativacao.tipoJornada``: how the payer authorises. We offer the push
#: journey (a ``solicrec`` to the payer's bank) and the QR journey (a
#: ``locrec`` whose code the payer scans).
JOURNEY_PUSH = "JORNADA_1"
JOURNEY_QR = "JORNADA_2"


@dataclass(frozen=True)
class RecurrenceRequest:
    recurrence_id: uuid.UUID
    terms: Mapping[str, Any]  # vinculo, calendario, valor, politicaRetentativa (API Pix JSON)
    journey: str  # JOURNEY_PUSH or JOURNEY_QR


@dataclass(frozen=True)
class RecurrenceCreated:
    """``POST /rec`` answered (and for the QR journey its ``locrec`` linked
    and the code read back: ``dadosQR.pixCopiaECola``)."""

    id_rec: str
    status: str  # CRIADA
    location: str = ""
    emv: str = ""


@dataclass(frozen=True)
class PushRequest:
    """``POST /solicrec``: ask the payer's bank to show the recurrence to the
    payer (``destinatario``) until ``expires_at``
    (``calendario.dataExpiracaoSolicitacao``)."""

    id_rec: str
    expires_at: dt.datetime
    payer_document: str  # CPF (11) or CNPJ (14)
    payer_ispb: str  # 8 characters
    payer_branch: str  # agencia, may be ""
    payer_account: str  # conta


@dataclass(frozen=True)
class PushSent:
    id_solic_rec: str
    status: str  # CRIADA, ENVIADA, RECEBIDA, ACEITA, REJEITADA, EXPIRADA, CANCELADA


@dataclass(frozen=True)
class RecurrenceState:
    """A recurrence read back (``GET /rec/{idRec}``)."""

    id_rec: str
    status: str  # CRIADA, APROVADA, REJEITADA, EXPIRADA, CANCELADA
    journey: str = ""  # ativacao.tipoJornada
    payer_ispb: str = ""  # pagador.ispbPagador once approved
    #: encerramento.cancelamento.solicitante (USUARIO_PAGADOR, PSP_PAGADOR,
    #: USUARIO_RECEBEDOR, PSP_RECEBEDOR) when cancelled; "" otherwise.
    cancelled_by: str = ""
    #: encerramento's code and description (cancelamento or rejeicao), "code: text".
    reason: str = ""
    #: The push journey's request (``solicitacao``), when one was sent.
    push_status: str = ""
    raw: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CycleChargeRequest:
    """``PUT /cobr/{txid}``: one cycle of an approved recurrence."""

    txid: str  # 26-35 [a-zA-Z0-9], ours: a retried PUT is idempotent
    id_rec: str
    due_date: dt.date  # calendario.dataDeVencimento
    amount: int  # centavos (valor.original)
    adjust_to_business_day: bool = True  # ajusteDiaUtil
    description: str = ""  # infoAdicional


@dataclass(frozen=True)
class CycleAttempt:
    """One settlement attempt of a cobr (``tentativas``)."""

    settles_on: dt.date  # dataLiquidacao
    kind: str  # AGND (scheduled), NTAG (same day), RIFL (retry)
    status: str  # SOLICITADA, AGENDADA, PAGA, CANCELADA, REJEITADA, EXPIRADA
    e2e_id: str = ""
    reason: str = ""  # rejeicao.codigo (and descricao), "" unless REJEITADA


@dataclass(frozen=True)
class CycleChargeState:
    """A cobr read back (``GET /cobr/{txid}``): CRIADA, ATIVA, CONCLUIDA,
    EXPIRADA, REJEITADA or CANCELADA, its attempts and the Pix it received."""

    txid: str
    status: str
    amount: int  # centavos (valor.original)
    attempts: tuple[CycleAttempt, ...] = ()
    pix: tuple[DuePix, ...] = ()
    reason: str = ""  # encerramento (rejeicao or cancelamento), "code: text"
    raw: Mapping[str, Any] = field(default_factory=dict)


class RecurrenceMethods:
    """The Pix Automático methods of :class:`~acquirers.adapters.base.AcquirerAdapter`;
    the defaults refuse, as the other optional capabilities' do."""

    name: ClassVar[str]
    supports_recurrence: ClassVar[bool] = False
    unsupported_error: ClassVar[type[Exception]]

    def _no_recurrence(self) -> NoReturn:
        raise self.unsupported_error(f"{self.name}: Pix Automático is not supported")

    def create_recurrence(self, request: RecurrenceRequest) -> RecurrenceCreated:
        """``POST /rec`` (QR journey: its ``POST /locrec`` first, given in the
        ``POST /rec`` as ``loc``, then the code read back). Not idempotent at
        the PSP: a timeout is settled by :meth:`find_recurrence`."""
        self._no_recurrence()

    def find_recurrence(self, *, debtor_document: str, contract: str, since: dt.datetime) -> RecurrenceState | None:
        """The recurrence created since ``since`` for this debtor and
        ``vinculo.contrato`` (``GET /rec`` filtered), or None: what settles a
        create whose answer was lost (one live recurrence per contract)."""
        self._no_recurrence()

    def recurrence_status(self, id_rec: str) -> RecurrenceState:
        """``GET /rec/{idRec}``."""
        self._no_recurrence()

    def request_authorisation(self, request: PushRequest) -> PushSent:
        """``POST /solicrec`` (the push journey)."""
        self._no_recurrence()

    def cancel_recurrence(self, id_rec: str) -> RecurrenceState:
        """``PATCH /rec/{idRec}`` to CANCELADA; idempotent (cancelled already: its state)."""
        self._no_recurrence()

    def create_cycle_charge(self, request: CycleChargeRequest) -> CycleChargeState:
        """``PUT /cobr/{txid}``; idempotent on the txid. A timeout leaves it
        unknown: :meth:`cycle_charge_status` settles it."""
        self._no_recurrence()

    def cycle_charge_status(self, txid: str) -> CycleChargeState:
        """``GET /cobr/{txid}``; raises the acquirer's not-found (unavailable) when it has none."""
        self._no_recurrence()

    def cancel_cycle_charge(self, txid: str) -> CycleChargeState:
        """``PATCH /cobr/{txid}`` to CANCELADA; paid first, it stays CONCLUIDA."""
        self._no_recurrence()

    def retry_cycle_charge(self, txid: str, on: dt.date) -> CycleChargeState:
        """``POST /cobr/{txid}/retentativa/{data}``: one more settlement attempt on ``on``."""
        self._no_recurrence()
