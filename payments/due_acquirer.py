"""What a due-date charge's acquirer says about it (a cobv read back or
withdrawn), as the news :mod:`payments.events` applies: shared by the
cancel's pursuit (:mod:`payments.cancel_pursuit`), status polling
(:mod:`payments.status_polling`) and the sandbox's payer (``due_charges.sandbox``),
so that each Pix is credited the same way, with what was paid and its parts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from acquirers import adapters, calls
from acquirers.adapters.base import (
    CancelResult,
    DueChargeStatus,
    InvalidOptions,
    Notification,
    NotificationEvent,
)
from acquirers.adapters.due import DuePix
from acquirers.models import Acquirer
from payments.choices import ChargeKind
from payments.due_terms import centavos_to_api
from payments.models import Charge

#: API Pix's cobv statuses (``StatusCobV``).
PAID = "CONCLUIDA"
REMOVED_PREFIX = "REMOVIDA"  # REMOVIDA_PELO_USUARIO_RECEBEDOR, REMOVIDA_PELO_PSP


def is_due(charge: Charge) -> bool:
    return bool(charge.kind == ChargeKind.DUE)


def can_withdraw(charge: Charge) -> bool:
    """Whether the charge's adapter can be asked to withdraw it: ``cancel_charge``
    for an immediate charge, ``cancel_due_charge`` (the due_charge capability)
    for a due-date one, ``cancel_cycle_charge`` for a Pix Automático cycle.
    Raises InvalidOptions for an adapter this process lacks."""
    cls = adapters.adapter_class(charge.acquirer.adapter)
    if charge.kind == ChargeKind.RECURRING:
        return cls.supports("recurrence")
    return cls.supports("due_charge") if is_due(charge) else cls.supports_cancel


def can_read(acquirer: Acquirer, *, due: bool) -> bool:
    """Whether the acquirer's charges of that kind can be read back (False for an adapter this process lacks)."""
    try:
        cls = adapters.adapter_class(acquirer.adapter)
    except InvalidOptions:
        return False
    return cls.supports("due_charge") if due else cls.supports_charge_status


def due_pix_raw(pix: DuePix) -> dict[str, Any]:
    """The API Pix ``Pix`` fields :func:`payments.due_payments.components_from_raw` reads:
    ``valor`` and ``componentesValor`` (reais as strings)."""
    parts = {name: {"valor": centavos_to_api(value)} for name, value in pix.components.items()}
    return {"valor": centavos_to_api(pix.amount), "componentesValor": parts}


def due_paid_news(status: DueChargeStatus) -> list[Notification]:
    """Each Pix a cobv received, as the notification of its payment: the amount
    paid and its components, so the ledger credits what was paid; then, once
    its devoluções returned all of it there, as a refund (as an immediate
    charge's Pix is read: acquirers.adapters.apipix.bacen), so a Pix gone
    back to its payer is never credited alone. Partial returns are not a
    state of a charge: reconciliation shows them to staff."""
    return pix_news(status.txid, status.pix)


def pix_news(txid: str, received: Sequence[DuePix]) -> list[Notification]:
    """The Pix a charge read back received (a cobv's, a cobr's), as
    :func:`due_paid_news` says."""
    news: list[Notification] = []
    for pix in received:
        raw = due_pix_raw(pix)
        news.append(
            Notification(
                event=NotificationEvent.CHARGE_PAID,
                reference=txid,
                e2e_id=pix.e2e_id,
                amount=pix.amount,
                occurred_at=pix.paid_at,
                raw=raw,
            )
        )
        if pix.returned and pix.returned >= pix.amount:
            news.append(
                Notification(
                    event=NotificationEvent.CHARGE_REFUNDED,
                    reference=txid,
                    e2e_id=pix.e2e_id,
                    amount=pix.returned,
                    occurred_at=pix.returned_at,
                    raw=raw,
                )
            )
    return news


def due_cancel_answer(status: DueChargeStatus | None) -> CancelResult | None:
    """A cobv's status after asking to withdraw it, as a cancel's answer:
    removed (by us or by its PSP), paid there first, or None (unclear: still
    ATIVA, or no answer), to be asked again."""
    if status is None:
        return None
    if status.status.startswith(REMOVED_PREFIX):
        return CancelResult.REMOVED
    if status.status == PAID:
        return CancelResult.PAID
    return None


def due_withdraw(charge: Charge) -> calls.Call[CancelResult | None]:
    """Ask the acquirer to withdraw the cobv (the one guarded call); its result
    is the cancel's answer (:func:`due_cancel_answer`)."""
    return calls.call(
        charge.acquirer,
        "cancel_due_charge",
        lambda adapter: due_cancel_answer(adapter.cancel_due_charge(charge.txid)),
    )


def due_read(charge: Charge) -> calls.Call[DueChargeStatus]:
    """Read the cobv back (the one guarded call)."""
    return calls.call(charge.acquirer, "due_charge_status", lambda adapter: adapter.due_charge_status(charge.txid))
