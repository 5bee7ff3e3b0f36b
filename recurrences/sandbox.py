"""The sandbox's payer's bank for Pix Automático (decisions §8): ``POST
/api/sandbox/recurrences/{id}/approve``, ``/reject``, ``/expire``,
``/payer-cancel`` and ``POST /api/sandbox/recurrences/{id}/cycles/{index}/pay``
and ``/fail``, for recurrences held by a sandbox acquirer.

As a real payer's bank would: the sandbox acquirer changes first (its
drivers, :class:`~acquirers.adapters.sandbox_rec_payer.SandboxRecurrencePayer`,
one atomic step each), and what it then says is applied as the service's
own read of it would be (:func:`recurrences.services.recurrence_apply`,
:func:`recurrences.outcomes.cycle_apply`): the same statuses, webhooks,
ledger. A driver the sandbox refuses in the record's state (approving a
rejected recurrence, paying a cycle on a day with no attempt) is a 409 that
still applies whatever the sandbox says.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from acquirers import adapters
from acquirers.adapters.base import AcquirerUnavailable, CycleChargeState
from acquirers.adapters.sandbox import SandboxAdapter, new_e2e_id
from acquirers.adapters.sandbox_rec_records import DEFAULT_REJECTION
from acquirers.models import Acquirer
from core.exceptions import ConflictError, PixServiceError
from core.redis import UNAVAILABLE as REDIS_UNAVAILABLE
from core.selectors import get_by_uuid
from payments.due_payments import BRT, now_in_brazil
from recurrences.exceptions import RecurrenceNotFound
from recurrences.models import Cycle, Recurrence
from recurrences.outcomes import cycle_apply
from recurrences.selectors import cycle_get, recurrences_of
from recurrences.services import recurrence_apply

#: A cobr paid (API Pix ``StatusCobr``).
SETTLED = "CONCLUIDA"
#: The payer's bank when the approval names none (the push journey's own when it has one).
DEFAULT_PAYER_ISPB = "00000000"
#: The simulated payment's time of day: noon in Brasília, well inside the day whatever the clock's zone.
PAID_AT = dt.time(12, 0)

#: Each decision, the status the sandbox must show after it, and the answer's message.
DECISIONS = {
    "approve": ("APROVADA", "Recorrência autorizada pelo pagador."),
    "reject": ("REJEITADA", "Recorrência rejeitada pelo pagador."),
    "expire": ("EXPIRADA", "Recorrência expirada sem resposta do pagador."),
    "payer_cancel": ("CANCELADA", "Recorrência cancelada pelo pagador."),
}
NOT_NOW = "A recorrência está {status} na adquirente sandbox: esta ação não se aplica."
NOT_AT_SANDBOX = "A adquirente sandbox não tem esta recorrência ou cobrança (expirada do seu estado)."
NOT_SENT = "A cobrança deste ciclo ainda não foi enviada à adquirente."
NO_ATTEMPT = "Nenhuma tentativa de liquidação do ciclo está agendada{on}."
PAID = "Ciclo pago."
FAILED = "Tentativa de liquidação do ciclo recusada."
SANDBOX_DOWN = "A adquirente sandbox não respondeu (Redis indisponível): tente de novo."
_STATUS_WORDS = {
    "CRIADA": "aguardando autorização",
    "APROVADA": "autorizada",
    "REJEITADA": "rejeitada",
    "EXPIRADA": "expirada",
    "CANCELADA": "cancelada",
}


class SandboxUnavailable(PixServiceError):
    """The sandbox acquirer's state could not be reached (503): nothing changed."""

    status_code = 503
    default_message = SANDBOX_DOWN
    default_code = "sandbox_unavailable"


def sandbox_recurrence_get(*, account: Any, recurrence_id: Any) -> Recurrence:
    """The account's recurrence at a sandbox acquirer; any other (a real
    acquirer's included) is a 404, like an unknown id: the drivers never
    invent a payer's answer a real PSP did not give."""
    held = recurrences_of(account).filter(acquirer__adapter=SandboxAdapter.name)
    return get_by_uuid(held, recurrence_id, RecurrenceNotFound)


def _sandbox(acquirer: Acquirer) -> SandboxAdapter:
    sandbox = adapters.build(acquirer)
    assert isinstance(sandbox, SandboxAdapter)  # sandbox_recurrence_get hands out sandbox acquirers' only
    return sandbox


def sandbox_recurrence_decide(*, recurrence: Recurrence, decision: str, payer_ispb: str = "") -> tuple[Recurrence, str]:
    """The payer (or their bank) decides at the sandbox: ``decision`` a key
    of :data:`DECISIONS`; then the sandbox's word is applied here. Returns
    the recurrence as it is now and the answer's message."""
    wanted, message = DECISIONS[decision]
    sandbox = _sandbox(recurrence.acquirer)
    try:
        if decision == "approve":
            ispb = payer_ispb or str(recurrence.payer_bank.get("ispb") or DEFAULT_PAYER_ISPB)
            sandbox.recurrence_approve(recurrence.id_rec, payer_ispb=ispb)
        elif decision == "reject":
            sandbox.recurrence_reject(recurrence.id_rec)
        elif decision == "expire":
            sandbox.recurrence_expire(recurrence.id_rec)
        else:
            sandbox.recurrence_payer_cancel(recurrence.id_rec)
        state = sandbox.recurrence_status(recurrence.id_rec)
    except AcquirerUnavailable as exc:
        raise ConflictError(NOT_AT_SANDBOX) from exc
    except REDIS_UNAVAILABLE as exc:
        raise SandboxUnavailable() from exc
    recurrence_apply(recurrence_id=recurrence.pk, state=state)
    if state.status != wanted:
        raise ConflictError(NOT_NOW.format(status=_STATUS_WORDS.get(state.status, state.status)))
    return Recurrence.objects.select_related("acquirer").get(pk=recurrence.pk), message


def _scheduled_on(state: CycleChargeState) -> dt.date | None:
    """The day of the cobr's attempt waiting to settle (the latest scheduled)."""
    waiting = [a.settles_on for a in state.attempts if a.status == "AGENDADA"]
    return max(waiting) if waiting else None


def sandbox_cycle_attempt(
    *, recurrence: Recurrence, index: Any, outcome: str, on: dt.date | None = None, reason: str = ""
) -> tuple[Cycle, str]:
    """The payer's bank settles (``outcome`` ``pay``) or rejects (``fail``,
    ``reason`` a tentativa rejection code) the cycle's attempt scheduled on
    ``on`` (default: the one waiting), then the cobr as the sandbox has it
    is applied: the charge paid (fee, ledger, webhooks) or the refusal
    retried under the recurrence's policy, on the simulated day."""
    cycle = cycle_get(recurrence=recurrence, index=index)
    if cycle.charge_id is None:
        raise ConflictError(NOT_SENT)
    sandbox = _sandbox(recurrence.acquirer)
    try:
        current = sandbox.cycle_charge_status(cycle.txid)
        day = on or _scheduled_on(current) or now_in_brazil()
        if outcome == "pay" and current.status == SETTLED:
            done: CycleChargeState | None = current  # paid already: the first Pix stands, applied again as a no-op
        elif on is None and _scheduled_on(current) is None:
            raise ConflictError(NO_ATTEMPT.format(on=""))
        elif outcome == "pay":
            at = dt.datetime.combine(day, PAID_AT, tzinfo=BRT)
            done = sandbox.cycle_settle(cycle.txid, on=day, e2e_id=new_e2e_id(at=at), at=at)
        else:
            done = sandbox.cycle_fail(cycle.txid, on=day, reason_code=reason or DEFAULT_REJECTION)
        state = sandbox.cycle_charge_status(cycle.txid)
    except AcquirerUnavailable as exc:
        raise ConflictError(NOT_AT_SANDBOX) from exc
    except REDIS_UNAVAILABLE as exc:
        raise SandboxUnavailable() from exc
    cycle_apply(cycle_id=cycle.pk, state=state, today=max(day, now_in_brazil()))
    if done is None:
        raise ConflictError(NO_ATTEMPT.format(on=f" para {day:%d/%m/%Y}"))
    return cycle_get(recurrence=recurrence, index=cycle.index), PAID if outcome == "pay" else FAILED
