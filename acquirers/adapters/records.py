"""What an acquirer's listings for a window say (reconciliation): the
records its adapter returns from ``list_received`` / ``list_sent``, page by
page. Part of the adapter interface (``acquirers.adapters.base``)."""

from __future__ import annotations

import datetime as dt
import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


class ProviderRecordStatus(enum.StrEnum):
    """Where one Pix (or charge) stands in an acquirer's listing."""

    PAID = "paid"  # received (a charge paid) or sent and settled (a payout paid)
    REFUNDED = "refunded"  # received, then all of it returned to the payer (devoluções)
    PROCESSING = "processing"  # a send not settled yet
    FAILED = "failed"  # a send the acquirer did not make
    ACTIVE = "active"  # a charge that can still be paid (nothing received)
    REMOVED = "removed"  # a charge withdrawn there (nothing received)
    #: An entry of the listing its adapter could not read (a malformed value,
    #: an unknown status): kept whole in ``raw``, with why in ``problem``. It
    #: says nothing of any Pix: reconciliation reports it and applies nothing.
    UNREADABLE = "unreadable"


@dataclass(frozen=True)
class ProviderPixRecord:
    """One record of an acquirer's listing for a window (reconciliation).

    ``reference`` is our txid (received Pix, charges) or our idempotency id
    (sent Pix); empty when the acquirer's record carries none (a Pix to the
    key without a charge). ``amount`` is the Pix's value, or for a charge
    with no Pix its original value. ``raw`` is the acquirer's record as it
    came, kept as evidence."""

    reference: str
    status: ProviderRecordStatus
    amount: int  # centavos
    e2e_id: str | None = None
    occurred_at: dt.datetime | None = None
    returned: int = 0  # centavos returned to the payer (devoluções DEVOLVIDO)
    #: Devoluções listed with the Pix, whatever their status: one still in
    #: progress is money on its way back to the payer.
    returns: int = 0
    #: Of ``returned``, the centavos returned by MED (natureza ``MED_*``): the
    #: return a chargeback makes, not a refund.
    returned_by_med: int = 0
    raw: Mapping[str, Any] = field(default_factory=dict)
    #: Why an :attr:`~ProviderRecordStatus.UNREADABLE` entry could not be read.
    problem: str = ""


@dataclass(frozen=True)
class ProviderListing:
    """One page of a listing. ``next_page`` is the adapter's opaque cursor
    for the next call (None: the listing is complete). One call per page, so
    each page is one guarded call under the acquirer's deadline."""

    records: tuple[ProviderPixRecord, ...]
    next_page: str | None = None
