"""Due-date charges (the API Pix ``cobv``) and their batches (``lotecobv``):
part of the adapter interface, re-exported by :mod:`acquirers.adapters.base`.

``valor`` is the API Pix ``valor`` object as :mod:`payments.due_terms` writes
it (original, multa, juros, abatimento, desconto): the standard's own shape,
passed through, since acquirers sit below payments and cannot import it.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, NoReturn

#: The capabilities below (part of ``acquirers.adapters.base.Capability``).
DueCapability = Literal["due_charge", "due_charge_batch"]


@dataclass(frozen=True)
class DueChargeRequest:
    charge_id: uuid.UUID
    txid: str  # 26-35 [a-zA-Z0-9], derived from the charge id: a retried PUT is idempotent
    due_date: dt.date
    validity_after_due: int  # days the charge can still be paid after due_date
    debtor_name: str
    debtor_document: str  # CPF or CNPJ (the API Pix requires a debtor on a cobv)
    valor: Mapping[str, Any]
    description: str = ""  # solicitacaoPagador
    logradouro: str = ""
    cidade: str = ""
    uf: str = ""
    cep: str = ""
    email: str = ""


@dataclass(frozen=True)
class DueChargeResult:
    provider_charge_id: str
    emv: str  # pixCopiaECola
    location: str
    status: str  # ATIVA after a create


@dataclass(frozen=True)
class DuePix:
    """A Pix received for a due-date charge; ``components`` is its
    ``componentesValor`` in centavos (``original``, ``juros``, ``multa``,
    ``abatimento``, ``desconto``...) when the PSP gives them; ``returned``
    what went back to the payer there (a devolução, a MED)."""

    e2e_id: str
    amount: int  # centavos
    paid_at: dt.datetime | None = None
    components: Mapping[str, int] = field(default_factory=dict)
    #: Centavos its devoluções returned to the payer there (``DEVOLVIDO``), and when the last settled.
    returned: int = 0
    returned_at: dt.datetime | None = None


@dataclass(frozen=True)
class DueChargeStatus:
    """A cobv read back: ATIVA, CONCLUIDA, REMOVIDA_PELO_USUARIO_RECEBEDOR or
    REMOVIDA_PELO_PSP, with the Pix it received."""

    txid: str
    status: str
    original: int  # centavos
    pix: tuple[DuePix, ...] = ()
    raw: Mapping[str, Any] = field(default_factory=dict)

    @property
    def e2e_ids(self) -> tuple[str, ...]:
        return tuple(p.e2e_id for p in self.pix)


@dataclass(frozen=True)
class DueBatchRequest:
    batch_id: int  # the lote's numeric id (ours: a retried PUT is idempotent)
    description: str
    charges: tuple[DueChargeRequest, ...]


@dataclass(frozen=True)
class DueBatchItem:
    """One charge of a lote: EM_PROCESSAMENTO, CRIADA or NEGADA (``problem``: why)."""

    txid: str
    status: str
    problem: str = ""


@dataclass(frozen=True)
class DueBatchStatus:
    batch_id: int
    items: tuple[DueBatchItem, ...]


class DueChargeMethods:
    """The due-date methods of :class:`~acquirers.adapters.base.AcquirerAdapter`;
    the defaults refuse, as the other optional capabilities' do."""

    name: ClassVar[str]
    #: ``cobv`` created, read and withdrawn; ``lotecobv`` batches.
    supports_due_charge: ClassVar[bool] = False
    supports_due_charge_batch: ClassVar[bool] = False
    #: Set by the base class to its CapabilityNotSupported (defined there, after this import).
    unsupported_error: ClassVar[type[Exception]]

    def _unsupported(self, what: str) -> NoReturn:
        raise self.unsupported_error(f"{self.name}: {what} are not supported")

    def create_due_charge(self, request: DueChargeRequest) -> DueChargeResult:
        """Create (PUT) a due-date charge; idempotent on ``request.txid``. A
        timeout leaves it unknown: :meth:`due_charge_status` settles it."""
        self._unsupported("due-date charges")

    def due_charge_status(self, txid: str) -> DueChargeStatus:
        """Read a due-date charge; raises the acquirer's not-found when it has none."""
        self._unsupported("due-date charges")

    def cancel_due_charge(self, txid: str) -> DueChargeStatus:
        """Withdraw a due-date charge (REMOVIDA_PELO_USUARIO_RECEBEDOR); idempotent."""
        self._unsupported("due-date charges")

    def create_due_charge_batch(self, request: DueBatchRequest) -> None:
        """Hand a lote of due-date charges over (PUT); the PSP processes it later."""
        self._unsupported("due-date charge batches")

    def due_charge_batch_status(self, batch_id: int) -> DueBatchStatus:
        """Where each charge of a lote stands."""
        self._unsupported("due-date charge batches")
