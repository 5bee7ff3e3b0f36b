"""What a Pix paying a due-date charge credits: the amount the acquirer
reports paid, not the original (decisions: docs/api/due-charges.md, "What
is credited"). Called by ``payments.services.charge_transition`` under the
charge's lock, before the ledger entry, in the same transaction."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any
from zoneinfo import ZoneInfo

from django.utils import timezone

from accounts.fees import cashin_fee
from core.exceptions import PixServiceError
from payments.due_amounts import amount_due
from payments.due_models import DueCharge
from payments.due_terms import DueTerms
from payments.models import Charge

logger = logging.getLogger(__name__)

#: Where a cobv's days are counted (API Pix: the receiving PSP's calendar, Brasília time).
BRT = ZoneInfo("America/Sao_Paulo")
#: ``componentesValor``'s parts we keep, by their API Pix names.
COMPONENTS = ("original", "multa", "juros", "abatimento", "desconto")


def day_in_brazil(moment: dt.datetime) -> dt.date:
    return moment.astimezone(BRT).date()


def components_from_raw(raw: Mapping[str, Any] | None) -> dict[str, int]:
    """The ``componentesValor`` of an API Pix ``Pix`` object, in centavos
    (``{"juros": {"valor": "1.20"}}`` → ``{"juros": 120}``); unknown or
    unreadable parts are left out (the amount paid is what is credited)."""
    found = (raw or {}).get("componentesValor")
    if not isinstance(found, Mapping):
        return {}
    parts: dict[str, int] = {}
    for name in COMPONENTS:
        part = found.get(name)
        value = part.get("valor") if isinstance(part, Mapping) else None
        try:
            parts[name] = int(Decimal(str(value)) * 100) if value is not None else 0
        except (InvalidOperation, ValueError):
            continue
    return {name: value for name, value in parts.items() if value}


def due_payment_apply(
    charge: Charge, *, paid_amount: int | None, components: Mapping[str, int] | None, paid_at: dt.datetime
) -> list[str]:
    """Set the locked charge's amount, fee and liquid amount from what was
    paid, and record the payment's parts on its ``DueCharge``; returns the
    charge's fields to save. A payment without an amount is refused (for
    staff): a cobv's amount depends on the day, and only the acquirer's word
    is evidence of what the payer paid."""
    if paid_amount is None or paid_amount <= 0:
        raise PixServiceError("Pagamento de cobrança com vencimento sem valor pago: registre com a adquirente.")
    # Written only under the charge's lock (held by the caller): no lock of its own.
    due = DueCharge.objects.get(pk=charge.pk)
    expected = amount_due(DueTerms.from_api(due.terms), on=day_in_brazil(paid_at)).final
    if expected != paid_amount:
        # The acquirer's calculation is the one the payer saw: credited as is.
        logger.warning("due charge %s paid %s where %s was due that day", charge.pk, paid_amount, expected)
    charge.amount = paid_amount
    # The fee on what was paid, never all of it: creation refuses a charge
    # whose lowest amount would not cover its fee, but the acquirer's word
    # may still differ from ours, and every entry moves at least a centavo.
    charge.platform_tax = min(cashin_fee(charge.account, paid_amount), paid_amount - 1)
    charge.liquid_amount = paid_amount - charge.platform_tax
    due.paid_amount = paid_amount
    due.paid_components = dict(components or {}) or {"original": paid_amount}
    due.expected_amount = expected
    due.save(update_fields=["paid_amount", "paid_components", "expected_amount"])
    charge.due = due  # the webhook's payload reads it next, in this transaction: not read again
    return ["amount", "platform_tax", "liquid_amount"]


def now_in_brazil() -> dt.date:
    return day_in_brazil(timezone.now())
