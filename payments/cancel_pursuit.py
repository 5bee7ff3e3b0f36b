"""Asking the acquirer to withdraw a charge cancelled here, and what its
answer does (see :mod:`payments.cancellation`, which opens the ask in the
cancel's transaction and hands it to a worker). A Pix it says was paid
first is applied as the acquirer's news (:mod:`payments.events`): a late
payment for staff."""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from dataclasses import replace
from typing import Any

from django.db import transaction
from django.utils import timezone

from acquirers import calls
from acquirers.adapters.base import AcquirerUnavailable, CancelResult, NotificationEvent
from acquirers.calls import Outcome
from payments.cancellation import State, retry_delay
from payments.cycle_acquirer import cycle_paid_news, cycle_read, cycle_withdraw, is_recurring
from payments.due_acquirer import can_read, due_paid_news, due_read, due_withdraw, is_due
from payments.events import charge_event_apply
from payments.models import Charge, ChargeCancellation

logger = logging.getLogger(__name__)

STILL_ACTIVE = "A cobrança com vencimento segue ativa na adquirente após o pedido de remoção."
CYCLE_STILL_ACTIVE = "A cobrança do Pix Automático segue ativa na adquirente após o pedido de cancelamento."


def charge_cancel_pursue(*, charge_id: uuid.UUID | str, now: dt.datetime | None = None) -> str:
    """Ask the acquirer once to withdraw the charge and record what that
    came to; returns the cancellation's state (``pending``: ask again at
    ``next_attempt_at``). Idempotent: a cancellation already answered is
    left alone. Holds no transaction while the acquirer is asked."""
    cancellation = ChargeCancellation.objects.select_related("charge__acquirer").get(charge_id=charge_id)
    if cancellation.state != State.PENDING:
        return cancellation.state
    charge = cancellation.charge
    if is_due(charge):  # a cobv: its own withdrawal, answered with its status
        call = due_withdraw(charge)
        if call.outcome is Outcome.OK and call.result is None:
            call = replace(call, error=AcquirerUnavailable(STILL_ACTIVE))
    elif is_recurring(charge):  # a cobr (Pix Automático): cancelled, answered with its status
        call = cycle_withdraw(charge)
        if call.outcome is Outcome.OK and call.result is None:
            call = replace(call, error=AcquirerUnavailable(CYCLE_STILL_ACTIVE))
    else:
        call = calls.call(charge.acquirer, "cancel_charge", lambda adapter: adapter.cancel_charge(charge.txid))
    error = call.error_message or call.outcome
    if call.result is CancelResult.PAID:
        # The payer paid before the withdrawal: the Pix is recorded as a late
        # payment before this is answered (an unclear read is asked again).
        try:
            recorded = _record_paid_there(charge)
        except Exception as exc:  # unclear like any other answer: asked again, then given up for staff
            logger.warning("charge %s: the Pix paid there could not be recorded", charge_id, exc_info=True)
            recorded = f"Paga na adquirente; registro do Pix falhou: {type(exc).__name__}: {exc}"[:500]
        if recorded is True:
            return _finish(charge_id, State.PAID_THERE, "")
        if recorded is None:
            # No way to read the Pix from here: the notification or the daily
            # reconciliation records it. Staff see the state meanwhile.
            return _finish(charge_id, State.PAID_THERE, "Pix a registrar pela notificação ou pela conciliação.")
        error = str(recorded)
    elif call.result is CancelResult.REMOVED:
        return _finish(charge_id, State.DONE, "")
    elif call.outcome is Outcome.NOT_SUPPORTED:
        return _finish(charge_id, State.UNSUPPORTED, error)
    return _unclear(charge_id, error, now or timezone.now())


def _record_paid_there(charge: Charge) -> bool | str | None:
    """Read the Pix the charge received at its acquirer and apply them (each a
    late payment: the charge is cancelled here). True when done, an error
    text when the acquirer could not say, None when it cannot be asked."""
    due = is_due(charge)
    call: calls.Call[Any]
    if is_recurring(charge):  # a cobr: read back with the capability that created it
        call = cycle_read(charge)
        events = cycle_paid_news(call.result) if call.result is not None else []
    elif not can_read(charge.acquirer, due=due):
        return None
    elif due:  # a cobv's Pix carry what was paid and its parts (componentesValor)
        call = due_read(charge)
        events = due_paid_news(call.result) if call.result is not None else []
    else:
        call = calls.call(charge.acquirer, "charge_status", lambda adapter: adapter.charge_status(charge.txid))
        events = list(call.result.events) if call.result is not None else []
    if call.result is None:
        return f"Paga na adquirente; leitura do Pix falhou: {call.error_message or call.outcome}"[:500]
    if not any(e.event is NotificationEvent.CHARGE_PAID for e in events):
        return "Paga na adquirente, mas nenhum Pix listado: a consultar de novo."
    # Each Pix, then what went back to its payer there (a devolução, a MED):
    # recorded on its late payment, which is then never credited.
    for event in events:
        charge_event_apply(acquirer=charge.acquirer, notification=event, source="acquirer")
    return True


def _finish(charge_id: uuid.UUID | str, state: str, note: str) -> str:
    with transaction.atomic():
        cancellation = ChargeCancellation.objects.select_for_update().get(charge_id=charge_id)
        if cancellation.state not in (State.PENDING, State.GAVE_UP):
            return cancellation.state  # answered meanwhile by another worker
        cancellation.state = state
        cancellation.attempts += 1
        cancellation.last_error = note[:500]
        cancellation.next_attempt_at = None
        cancellation.finished_at = timezone.now()
        cancellation.save()
    if state == State.PAID_THERE:
        logger.warning("charge %s was paid at its acquirer before it could be withdrawn", charge_id)
    return state


def _unclear(charge_id: uuid.UUID | str, error: str, now: dt.datetime) -> str:
    with transaction.atomic():
        cancellation = ChargeCancellation.objects.select_for_update().get(charge_id=charge_id)
        if cancellation.state != State.PENDING:
            return cancellation.state
        cancellation.attempts += 1
        cancellation.last_error = error[:500]
        if now >= cancellation.give_up_at:
            cancellation.state = State.GAVE_UP
            cancellation.next_attempt_at = None
            logger.error(
                "charge %s: no definitive answer to its cancel after %s asks", charge_id, cancellation.attempts
            )
        else:
            cancellation.next_attempt_at = now + dt.timedelta(seconds=retry_delay(cancellation.attempts))
        cancellation.save()
        return cancellation.state
