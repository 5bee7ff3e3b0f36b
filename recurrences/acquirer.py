"""The recurrence's acquirer, asked through the one guarded call
(:mod:`acquirers.calls`: deadline, outcome, breaker, metrics). No
transaction or lock is held while it answers: callers read what they need,
call, then write what the answer says under their locks."""

from __future__ import annotations

import datetime as dt

from acquirers import calls
from acquirers.adapters.base import (
    CycleChargeRequest,
    CycleChargeState,
    PushRequest,
    PushSent,
    RecurrenceState,
)
from acquirers.models import Acquirer


def read_recurrence(acquirer: Acquirer, id_rec: str) -> calls.Call[RecurrenceState]:
    return calls.call(acquirer, "recurrence_status", lambda adapter: adapter.recurrence_status(id_rec))


def find_recurrence(
    acquirer: Acquirer, *, debtor_document: str, contract: str, since: dt.datetime
) -> calls.Call[RecurrenceState | None]:
    return calls.call(
        acquirer,
        "find_recurrence",
        lambda adapter: adapter.find_recurrence(debtor_document=debtor_document, contract=contract, since=since),
    )


def cancel_recurrence(acquirer: Acquirer, id_rec: str) -> calls.Call[RecurrenceState]:
    return calls.call(acquirer, "cancel_recurrence", lambda adapter: adapter.cancel_recurrence(id_rec))


def send_push(acquirer: Acquirer, request: PushRequest) -> calls.Call[PushSent]:
    return calls.call(acquirer, "request_authorisation", lambda adapter: adapter.request_authorisation(request))


def create_cycle(acquirer: Acquirer, request: CycleChargeRequest) -> calls.Call[CycleChargeState]:
    return calls.call(acquirer, "create_cycle_charge", lambda adapter: adapter.create_cycle_charge(request))


def read_cycle(acquirer: Acquirer, txid: str) -> calls.Call[CycleChargeState]:
    return calls.call(acquirer, "cycle_charge_status", lambda adapter: adapter.cycle_charge_status(txid))


def retry_cycle(acquirer: Acquirer, txid: str, on: dt.date) -> calls.Call[CycleChargeState]:
    return calls.call(acquirer, "retry_cycle_charge", lambda adapter: adapter.retry_cycle_charge(txid, on))
