"""Charge kinds whose product lives above payments (a Pix Automático cycle:
``recurrences``): how a change of such a charge reads in its webhook.

Filled in ``AppConfig.ready`` by the owning app (a lower layer never imports
an upper one); a kind not registered here is a charge of this app's own
(immediate, due-date) and reads as it always did.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from payments.models import Charge


@dataclass(frozen=True)
class KindEvent:
    """The webhook event of a change of such a charge: the product's own
    record, its status as the product names it, and its payload."""

    event_type: str  # webhooks.models.EventType
    record_id: uuid.UUID
    status: str
    data: dict[str, Any]


#: Read in the transition's transaction (the charge locked, already changed).
EventOf = Callable[["Charge"], KindEvent]
_KINDS: dict[str, EventOf] = {}


def register(kind: str, event_of: EventOf) -> None:
    _KINDS[kind] = event_of


def event_of(charge: Charge) -> KindEvent | None:
    """The product's event for this change, or None for a charge of payments' own."""
    reader = _KINDS.get(charge.kind)
    return reader(charge) if reader is not None else None
