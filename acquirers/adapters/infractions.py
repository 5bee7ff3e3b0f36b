"""What an adapter reports of MED infractions (:meth:`AcquirerAdapter.list_infractions`)
and sends as a defence (:meth:`AcquirerAdapter.defend_infraction`): part of the
adapter interface, re-exported by :mod:`acquirers.adapters.base`."""

from __future__ import annotations

import datetime as dt
import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


class InfractionStatus(enum.StrEnum):
    """Where a MED infraction stands at the acquirer (Efí's ABERTA, EM_DEFESA,
    ACEITA, REJEITADA; a claim the payer's PSP withdrew is CANCELED)."""

    OPEN = "open"
    IN_DEFENSE = "in_defense"
    #: Fraud confirmed: the money (``returned_amount`` of it) goes back to the payer.
    ACCEPTED = "accepted"
    #: Closed in the receiver's favour: the blocked funds are released.
    REJECTED = "rejected"
    CANCELED = "canceled"


@dataclass(frozen=True)
class InfractionRecord:
    """One MED infraction as the acquirer reports it: the evidence every hold,
    release and return of the service rests on. Amounts are centavos;
    ``returned_amount`` is what went back to the payer so far (MED 2.0 may
    return in parts), never less than an earlier report of it."""

    external_id: str
    e2e_id: str  # the Pix disputed
    status: InfractionStatus
    amount: int  # disputed
    blocked_amount: int = 0  # cautionarily blocked at the acquirer
    returned_amount: int = 0
    reason: str = ""
    opened_at: dt.datetime | None = None
    defense_deadline: dt.datetime | None = None
    closed_at: dt.datetime | None = None
    raw: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class InfractionPage:
    records: tuple[InfractionRecord, ...]
    next_page: str | None = None


@dataclass(frozen=True)
class DefenseAttachment:
    name: str
    content_type: str
    content: bytes


@dataclass(frozen=True)
class InfractionDefense:
    external_id: str
    text: str
    attachments: tuple[DefenseAttachment, ...] = ()
