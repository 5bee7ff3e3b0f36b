"""Staff send a cycle again: one that was missed (or whose cobr the acquirer
refused when it was sent) while its creation window is still open, so it
can still be charged on its due date. Nothing is credited here: the cycle
goes back to the schedule (scheduled) and its cobr is sent as the beat
would send it (:func:`recurrences.cycles.cycle_send`), the same txid, so a
send repeated after an unclear answer is the same idempotent ``PUT``."""

from __future__ import annotations

import datetime as dt
import uuid

from django.db import transaction

from core.exceptions import ConflictError
from payments.recurrence_schedule import creation_window
from recurrences.cycle_base import cycle_changed, cycles_locked
from recurrences.cycles import cycle_send
from recurrences.models import Cycle, CycleStatus, RecurrenceStatus

#: The statuses a cycle may be sent again from: nothing reached the payer.
SENDABLE_AGAIN = (CycleStatus.MISSED, CycleStatus.FAILED)


class SendAgainRefused(ConflictError):
    default_message = "Este ciclo não pode ser enviado de novo."
    default_code = "cycle_not_sendable"


def send_again_refusal(cycle: Cycle, today: dt.date) -> str | None:
    """Why ``cycle`` cannot be sent again on ``today``; None when it can."""
    if cycle.status not in SENDABLE_AGAIN:
        return f"o ciclo está {CycleStatus(cycle.status).label.lower()}: só um ciclo perdido ou falho é reenviado."
    if cycle.charge_id is not None:
        # Its cobr reached the payer's bank: the retries are the policy's (recurrences.outcomes).
        return "a cobrança deste ciclo já foi apresentada ao pagador; as retentativas seguem a política da recorrência."
    if cycle.amount is None:
        return "o ciclo não tem valor: a conta não o informou a tempo."
    if cycle.recurrence.status != RecurrenceStatus.APPROVED:
        return "a recorrência não está autorizada."
    window = creation_window(cycle.due_date)
    if not window.contains(today):
        return (
            f"fora do prazo de envio ({window.opens:%d/%m/%Y} a {window.closes:%d/%m/%Y}): "
            "o pagador não seria cobrado no vencimento."
        )
    return None


def cycle_send_again(*, cycle_id: uuid.UUID | str, today: dt.date) -> str:
    """Put the cycle back in the schedule and send its cobr now. Returns its
    status afterwards (``scheduled`` when the acquirer's answer was unclear:
    the beat sends it again). Raises :class:`SendAgainRefused` with the
    reason when it cannot be sent again."""
    with transaction.atomic():
        cycle = cycles_locked().select_related("recurrence").get(pk=cycle_id)
        refusal = send_again_refusal(cycle, today)
        if refusal is not None:
            raise SendAgainRefused(refusal[0].upper() + refusal[1:])
        cycle.status = CycleStatus.SCHEDULED
        cycle.failure_reason = ""
        cycle.save(update_fields=["status", "failure_reason", "updated_at"])
        cycle_changed(cycle, cycle.recurrence)
    return cycle_send(cycle_id=cycle.pk, today=today)
