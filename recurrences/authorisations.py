"""The acquirer's side of a recurrence's authorisation: read back (the
payer approved, rejected, let it expire or cancelled at their bank), the
push journey's request sent to the payer's bank, our cancel confirmed
there, and a recurrence we never stored (its create's answer lost) found
and cancelled. Each asks the acquirer with nothing held, then applies what
it said through :mod:`recurrences.services`.
"""

from __future__ import annotations

import datetime as dt
import logging
import uuid

from django.db import transaction
from django.utils import timezone

from acquirers.adapters.base import PushRequest
from acquirers.calls import Outcome
from acquirers.models import Acquirer
from recurrences import acquirer
from recurrences.models import Journey, Recurrence, RecurrenceStatus
from recurrences.services import PUSH_VALIDITY, recurrence_apply

logger = logging.getLogger(__name__)


def recurrence_sync(*, recurrence_id: uuid.UUID | str, now: dt.datetime | None = None) -> bool:
    """Read the recurrence at its acquirer and apply it; True when its status
    changed. Stamped as read first, so two rounds do not both ask."""
    moment = now or timezone.now()
    recurrence = Recurrence.objects.select_related("acquirer").get(pk=recurrence_id)
    Recurrence.objects.filter(pk=recurrence.pk).update(synced_at=moment)
    call = acquirer.read_recurrence(recurrence.acquirer, recurrence.id_rec)
    if call.result is None:
        return False
    return recurrence_apply(recurrence_id=recurrence.pk, state=call.result, now=moment)


def push_send(*, recurrence_id: uuid.UUID | str, now: dt.datetime | None = None) -> bool:
    """Send the push journey's request to the payer's bank (``POST
    /solicrec``) once; True when it is there. An unclear send is settled by
    reading the recurrence (its ``solicitacao``) before sending again."""
    moment = now or timezone.now()
    recurrence = Recurrence.objects.select_related("acquirer").get(pk=recurrence_id)
    if recurrence.journey != Journey.PUSH or recurrence.push_status or recurrence.status != RecurrenceStatus.CREATED:
        return bool(recurrence.push_status)
    read = acquirer.read_recurrence(recurrence.acquirer, recurrence.id_rec)
    if read.result is None:
        return False  # asked again: an earlier send may be there
    if read.result.push_status:  # an earlier, unclear send reached it: recorded, not sent twice
        recurrence_apply(recurrence_id=recurrence.pk, state=read.result, now=moment)
        return True
    bank = recurrence.payer_bank
    request = PushRequest(
        id_rec=recurrence.id_rec,
        expires_at=moment + PUSH_VALIDITY,
        payer_document=recurrence.debtor_document,
        payer_ispb=str(bank.get("ispb", "")),
        payer_branch=str(bank.get("branch", "")),
        payer_account=str(bank.get("account", "")),
    )
    call = acquirer.send_push(recurrence.acquirer, request)
    if call.result is None:
        if call.outcome is Outcome.DECLINED:
            logger.warning("recurrence %s: push request refused: %s", recurrence.pk, call.error_message)
            Recurrence.objects.filter(pk=recurrence.pk).update(
                push_status="RECUSADA", status_reason=f"Solicitação recusada: {call.error_message}"[:500]
            )
            return True  # definitive: not sent again
        return False
    with transaction.atomic():
        locked = Recurrence.objects.select_for_update().get(pk=recurrence.pk)
        locked.push_request_id = call.result.id_solic_rec[:35]
        locked.push_status = call.result.status[:10]
        locked.save(update_fields=["push_request_id", "push_status", "updated_at"])
    return True


def recurrence_cancel_there(*, recurrence_id: uuid.UUID | str) -> bool:
    """Ask the acquirer to cancel a recurrence cancelled here (``PATCH
    /rec``); True once it says CANCELADA (or ended otherwise there)."""
    recurrence = Recurrence.objects.select_related("acquirer").get(pk=recurrence_id)
    if not recurrence.cancel_pending:
        return True
    call = acquirer.cancel_recurrence(recurrence.acquirer, recurrence.id_rec)
    if call.result is None:
        return False
    if call.result.status in ("CANCELADA", "REJEITADA", "EXPIRADA"):
        Recurrence.objects.filter(pk=recurrence.pk).update(cancel_pending=False)
        return True
    return False


def orphan_cancel(
    *, acquirer_id: int, debtor_document: str, contract: str, since: dt.datetime, id_rec: str = ""
) -> bool:
    """A recurrence an acquirer may hold though we stored none (its create
    timed out, or a twin request won): find it there and cancel it, unless
    it is the one we stored. True when nothing is left to do."""
    holder = Acquirer.objects.get(pk=acquirer_id)
    if not id_rec:
        found = acquirer.find_recurrence(holder, debtor_document=debtor_document, contract=contract, since=since)
        if found.result is None:
            return found.outcome is Outcome.OK  # none there; unclear: asked again
        id_rec = found.result.id_rec
    if Recurrence.objects.filter(id_rec=id_rec).exists():
        return True
    cancelled = acquirer.cancel_recurrence(holder, id_rec)
    return cancelled.result is not None
