"""What the API and the webhooks say of a recurrence and of a cycle: one
shape each, read by the serializers (``GET``) and the outbox (events), so a
client sees the same fields both ways.

A cycle's status is its own while the schedule works on it, and its
charge's once the money moved (paid, refunded, charged back): a charge
changed elsewhere (a refund, a MED, reconciliation) is seen without the
cycle being written.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from rest_framework import serializers

from payments import kinds
from payments.choices import ChargeKind, ChargeStatus
from payments.kinds import KindEvent
from payments.models import Charge
from payments.recurrence_terms import RecurrenceTerms
from recurrences.models import Cycle, CycleStatus, Recurrence
from webhooks.models import EventType

#: Times as the API writes every time (REST_FRAMEWORK's DATETIME_FORMAT, America/Sao_Paulo).
_TIME = serializers.DateTimeField()


def _time(moment: dt.datetime | None) -> str | None:
    return None if moment is None else str(_TIME.to_representation(moment))


#: The charge's status that says more than the cycle's own.
_MONEY_STATUS = {
    ChargeStatus.PAID: "paid",
    ChargeStatus.REFUNDED: "refunded",
    ChargeStatus.CHARGEBACK: "chargeback",
}


#: The cycle's own statuses while its charge is pending: a charge cancelled
#: elsewhere (the expiry sweep, staff) ends such a cycle before the schedule
#: writes it (its next read of the cobr does).
_STILL_OPEN = (CycleStatus.SCHEDULED, CycleStatus.ACTIVE, CycleStatus.RETRYING)


def cycle_status(cycle: Cycle, charge: Charge | None = None) -> str:
    """The cycle's status as the API names it (see the module's docstring)."""
    held = charge if charge is not None else (cycle.charge if cycle.charge_id is not None else None)
    if held is not None and held.status in _MONEY_STATUS:
        return _MONEY_STATUS[ChargeStatus(held.status)]
    if held is not None and held.status == ChargeStatus.CANCELED and cycle.status in _STILL_OPEN:
        return str(CycleStatus.FAILED if cycle.status == CycleStatus.RETRYING else CycleStatus.CANCELLED)
    return str(cycle.status)


def recurrence_data(recurrence: Recurrence) -> dict[str, Any]:
    """The recurrence as ``GET /api/recurrences/{id}`` and its webhook show it."""
    terms = RecurrenceTerms.from_api(recurrence.terms)
    devedor = terms.vinculo.devedor
    return {
        "id": str(recurrence.pk),
        "id_rec": recurrence.id_rec,
        "status": recurrence.status,
        "journey": recurrence.journey,
        "contract": terms.vinculo.contrato,
        "description": terms.vinculo.objeto or "",
        "debtor": {"name": devedor.nome, "document": devedor.cpf or devedor.cnpj or ""},
        "amount": terms.valor.valor_rec,
        "max_amount": terms.valor.valor_minimo_recebedor,
        "periodicity": _PERIODICITY[str(terms.calendario.periodicidade)],
        "first_due_date": terms.calendario.data_inicial.isoformat(),
        "end_date": terms.calendario.data_final.isoformat() if terms.calendario.data_final else None,
        "retry_policy": "3_in_7_days" if terms.politica_retentativa.allows_retries else "none",
        "qr_code": {"emv": recurrence.emv, "location": recurrence.location} if recurrence.emv else None,
        "payer_bank": recurrence.payer_bank or None,
        "push_status": recurrence.push_status or None,
        "payer_ispb": recurrence.payer_ispb or None,
        "cancelled_by": recurrence.cancelled_by or None,
        "status_reason": recurrence.status_reason or None,
        "acquirer": recurrence.acquirer.key,
        "metadata": recurrence.metadata,
        "approved_at": _time(recurrence.approved_at),
        "ended_at": _time(recurrence.ended_at),
        "created_at": _time(recurrence.created_at),
        "updated_at": _time(recurrence.updated_at),
    }


_PERIODICITY = {
    "SEMANAL": "weekly",
    "MENSAL": "monthly",
    "TRIMESTRAL": "quarterly",
    "SEMESTRAL": "semiannual",
    "ANUAL": "yearly",
}


def cycle_data(cycle: Cycle, charge: Charge | None = None) -> dict[str, Any]:
    """A cycle as ``GET /api/recurrences/{id}/cycles`` and its webhook show it."""
    held = charge if charge is not None else (cycle.charge if cycle.charge_id is not None else None)
    return {
        "id": str(cycle.pk),
        "recurrence_id": str(cycle.recurrence_id),
        "index": cycle.index,
        "due_date": cycle.due_date.isoformat(),
        "amount": cycle.amount,
        "status": cycle_status(cycle, held),
        "txid": cycle.txid,
        "transaction_id": str(held.pk) if held is not None else None,
        "platform_tax": held.platform_tax if held is not None else None,
        "liquid_amount": held.liquid_amount if held is not None else None,
        "e2e_id": held.e2e_id if held is not None else None,
        "paid_at": _time(held.paid_at) if held is not None else None,
        "retries": cycle.retries,
        "next_retry_on": cycle.next_retry_on.isoformat() if cycle.next_retry_on else None,
        "failure_reason": cycle.failure_reason or None,
        "created_at": _time(cycle.created_at),
        "updated_at": _time(cycle.updated_at),
    }


def recurrence_event(recurrence: Recurrence) -> KindEvent:
    return KindEvent(
        event_type=EventType.RECURRENCE,
        record_id=recurrence.pk,
        status=str(recurrence.status),
        data=recurrence_data(recurrence),
    )


def cycle_event(cycle: Cycle, recurrence: Recurrence, charge: Charge | None = None) -> KindEvent:
    data = cycle_data(cycle, charge)
    return KindEvent(event_type=EventType.RECURRENCE_CYCLE, record_id=cycle.pk, status=data["status"], data=data)


def _charge_event(charge: Charge) -> KindEvent:
    """A cycle's charge changed (paid, refunded, cancelled...): the cycle's
    event, its status derived from the charge. Read only: this runs under the
    charge's lock, and the cycle's row is locked before the charge's on every
    other path (recurrence, cycle, charge, balance), so writing it here could
    deadlock with a cancel."""
    cycle = Cycle.objects.select_related("recurrence").get(charge_id=charge.pk)
    return cycle_event(cycle, cycle.recurrence, charge)


def register() -> None:
    kinds.register(ChargeKind.RECURRING, _charge_event)
