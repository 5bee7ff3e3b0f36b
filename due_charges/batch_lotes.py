"""A batch sent as one API Pix ``lotecobv`` where the acquirer its account's
due-date chain starts with takes lotes (``supports_due_charge_batch``):
one PUT of every item instead of one call each. The PSP answers 202 and
processes the lote later; each cobv of it is read back as CRIADA (created:
its charge is stored here) or NEGADA (the item fails with the PSP's reason).

The lote holds every item that passed validation, always the same ones, so
a PUT repeated after a lost answer is the same lote (idempotent on our lote
id, as each cobv is on its txid). A lote the PSP refuses as a whole sends
the items one by one instead (``due_charges.batches``); a CRIADA cobv is
stored through a guarded PUT of the same cobv at the same acquirer, which
answers the cobv it holds (and its code) and never creates a second one.

A lote whose PUT gets no clear answer (a timeout, a 5xx) or finds its
acquirer open or busy is sent again shortly, up to :data:`LOTE_SENDS` times;
then the lote is given up and the items go one by one through the chain
(its fallback applies). The lote may have created cobv at its acquirer
before its answer was lost, so that acquirer is recorded on the batch
(``lote_abandoned_at``): an item stored elsewhere asks it to withdraw its
cobv, and one stored there takes the lote's own (the same txid).
"""

from __future__ import annotations

import datetime as dt
import secrets
import uuid
from typing import Any

from django.db.models import F
from django.utils import timezone

from accounts.fees import cashin_fee
from acquirers import adapters, calls
from acquirers.adapters.base import DueBatchRequest, DueChargeRequest
from acquirers.calls import Outcome
from acquirers.chain import run_due_charge_chain
from acquirers.models import Acquirer
from acquirers.selectors import due_chain
from core.dispatch import enqueue
from core.exceptions import NON_FIELD_ERRORS
from due_charges.batches import (
    PROCESS_TASK,
    batch_touch,
    item_claim,
    item_debtor,
    item_release,
    item_settle,
    item_settle_in,
    item_terms,
)
from due_charges.models import BatchStatus, DueChargeBatch, DueChargeBatchItem, ItemStatus
from payments.due_charges import due_charge_request, due_charge_rows
from payments.models import Charge
from payments.services import CANCEL_DUE_CHARGE, charge_store

SEND_TASK = "due_charges.tasks.due_batch_lote_send"
POLL_TASK = "due_charges.tasks.due_batch_lote_poll"
#: Seconds between reads of a lote the PSP is still processing, and before a
#: PUT whose answer was unclear is sent again.
POLL_SECONDS = 2.0
#: How long after it was sent a lote is read every POLL_SECONDS; a lote still
#: processing after that is read by the batches' sweep, once per CLAIM_LEASE.
POLL_WINDOW = dt.timedelta(minutes=2)
REFUSED = "Recusada pela adquirente"
#: Sends of a lote without a clear answer (or not called) before the batch
#: goes one by one instead.
LOTE_SENDS = 3


def lote_acquirer(batch: DueChargeBatch) -> Acquirer | None:
    """The acquirer to send the batch to as a lote, or None (one by one): the
    head of the account's due-date chain for every pending item, when its
    adapter takes lotes and no item chose its own acquirers."""
    requests = list(batch.items.filter(status=ItemStatus.PENDING).values_list("request", flat=True))
    if not requests or any(request.get("acquirers") or request.get("acquirer_key") for request in requests):
        return None
    amounts = {request["amount"] for request in requests}
    heads = {tuple(due_chain(batch.account, amount)[:1]) for amount in (min(amounts), max(amounts))}
    if len(heads) != 1:
        return None
    (head,) = heads
    if not head or head[0].adapter not in adapters.adapter_names(supporting="due_charge_batch"):
        return None
    return head[0]


def lote_start(batch_id: uuid.UUID) -> bool:
    """Send the batch as a lote when it goes as one (True); False: one by one."""
    batch = DueChargeBatch.objects.select_related("account").get(pk=batch_id)
    if batch.status == BatchStatus.DONE:
        return True
    if batch.lote_id is None:
        acquirer = lote_acquirer(batch)
        if acquirer is None:
            return False
        # 52 random bits: the PSP names lotes by an integer we choose; unique here by constraint.
        DueChargeBatch.objects.filter(pk=batch.pk, lote_id__isnull=True).update(
            lote_id=secrets.randbits(52), lote_acquirer=acquirer
        )
        batch.refresh_from_db()
    if batch.lote_acquirer_id is None:  # refused as a lote: one by one
        return False
    if batch.lote_sent_at is not None:  # at the PSP (processing, maybe): read, never sent again
        lote_poll(batch.pk)
    else:
        lote_send(batch.pk)
    return True


def item_due_request(item: DueChargeBatchItem) -> DueChargeRequest:
    """The cobv of an item, as ``payments.due_charges.due_charge_create`` asks for it."""
    data = item.request
    return due_charge_request(
        charge_id=item.charge_id,
        terms=item_terms(data),
        debtor=item_debtor(data),
        email=data["debtor"].get("email", ""),
        description=data.get("description", ""),
    )


def lote_send(batch_id: uuid.UUID) -> Outcome:
    """PUT the lote (again: idempotent); then read it shortly. Refused as a
    whole: the items go one by one. Unclear or not called: sent again
    shortly, and after :data:`LOTE_SENDS` such sends given up (one by one,
    its acquirer recorded as one that may hold the items' cobv)."""
    batch = DueChargeBatch.objects.select_related("lote_acquirer").get(pk=batch_id)
    acquirer, lote_id = batch.lote_acquirer, batch.lote_id
    if batch.status == BatchStatus.DONE or acquirer is None or lote_id is None:
        return Outcome.OK
    items = batch.items.exclude(request={}).order_by("position")
    request = DueBatchRequest(
        batch_id=lote_id, description=batch.description, charges=tuple(item_due_request(i) for i in items)
    )
    done = calls.call(acquirer, "create_due_charge_batch", lambda adapter: adapter.create_due_charge_batch(request))
    now = timezone.now()
    if done.outcome is Outcome.OK:
        DueChargeBatch.objects.filter(pk=batch.pk).update(lote_sent_at=now, progress_at=now)
        enqueue(POLL_TASK, str(batch.pk), countdown=POLL_SECONDS, left_to="the batches' sweep")
    elif done.outcome is Outcome.DECLINED:
        # Refused now; an earlier send left unclear may still have created cobv there.
        _one_by_one(batch, acquirer, may_hold=batch.lote_sends > 0)
    elif _count_unclear_send(batch) >= LOTE_SENDS:
        _one_by_one(batch, acquirer, may_hold=True)
    else:
        batch_touch(batch.pk)
        enqueue(SEND_TASK, str(batch.pk), countdown=POLL_SECONDS, left_to="the batches' sweep")
    return done.outcome


def _count_unclear_send(batch: DueChargeBatch) -> int:
    """Count one more send without a clear answer; the count after it."""
    DueChargeBatch.objects.filter(pk=batch.pk).update(lote_sends=F("lote_sends") + 1)
    return DueChargeBatch.objects.values_list("lote_sends", flat=True).get(pk=batch.pk)


def _one_by_one(batch: DueChargeBatch, acquirer: Acquirer, *, may_hold: bool) -> None:
    """Leave the lote path: the items go one by one through the chain. When
    the lote may have created cobv at ``acquirer``, it is recorded so each
    item stored elsewhere has that cobv withdrawn (survives a restart)."""
    changes: dict[str, Any] = {"lote_acquirer": None, "progress_at": timezone.now()}
    if may_hold:
        changes["lote_abandoned_at"] = acquirer
    if DueChargeBatch.objects.filter(pk=batch.pk, lote_acquirer=acquirer, lote_sent_at__isnull=True).update(**changes):
        enqueue(PROCESS_TASK, str(batch.pk), left_to="the batches' sweep")


def lote_poll(batch_id: uuid.UUID) -> int:
    """Settle the items the PSP has decided; returns how many still wait.
    While any does it is read again every :data:`POLL_SECONDS` until
    :data:`POLL_WINDOW` after the lote was sent; after that this task ends
    and the batches' sweep reads it once per lease. One read per task: no
    worker waits on the PSP, and no transaction is open during the read."""
    batch = DueChargeBatch.objects.select_related("lote_acquirer", "account").get(pk=batch_id)
    acquirer, lote_id = batch.lote_acquirer, batch.lote_id
    if batch.status == BatchStatus.DONE or acquirer is None or lote_id is None:
        return 0
    batch_touch(batch.pk)
    done = calls.call(acquirer, "due_charge_batch_status", lambda adapter: adapter.due_charge_batch_status(lote_id))
    pending = {item.charge_id.hex: item for item in batch.items.filter(status=ItemStatus.PENDING)}
    waiting = len(pending)
    if done.result is not None:
        waiting = len(pending) - sum(
            _settle_from_lote(pending[entry.txid], acquirer, entry.status, entry.problem)
            for entry in done.result.items
            if entry.txid in pending
        )
    sent_at = batch.lote_sent_at or batch.created_at
    if waiting and timezone.now() + dt.timedelta(seconds=POLL_SECONDS) < sent_at + POLL_WINDOW:
        enqueue(POLL_TASK, str(batch.pk), countdown=POLL_SECONDS, left_to="the batches' sweep")
    return waiting


def _settle_from_lote(item: DueChargeBatchItem, acquirer: Acquirer, status: str, problem: str) -> bool:
    """True when the item left pending."""
    if status == "NEGADA":
        item_settle(item, ItemStatus.FAILED, {NON_FIELD_ERRORS: [f"{REFUSED}: {problem}" if problem else REFUSED]})
        return True
    if status == "CRIADA":
        return lote_item_store(item.pk, acquirer) == ItemStatus.CREATED
    return False  # EM_PROCESSAMENTO


def lote_item_store(item_id: int, acquirer: Acquirer) -> str:
    """Store the charge of an item its lote created: its cobv (and code) read
    through a guarded, idempotent PUT of the same cobv at the lote's acquirer
    only. The rows are the ones ``due_charge_create`` writes."""
    item = item_claim(item_id)
    if item is None:
        return "skipped"
    if Charge.objects.filter(pk=item.charge_id).exists():
        item_settle(item, ItemStatus.CREATED, {})
        return ItemStatus.CREATED
    request = item_due_request(item)
    outcome = run_due_charge_chain([acquirer], request)
    account, terms, data = item.batch.account, item_terms(item.request), item.request
    rows = due_charge_rows(
        account=account,
        request=request,
        outcome=outcome,
        terms=terms,
        debtor=item_debtor(data),
        platform_tax=cashin_fee(account, terms.original),
        email=data["debtor"].get("email", ""),
        description=data.get("description", ""),
        postback_url=data.get("postback_url", ""),
        metadata=data.get("metadata"),
    )
    if rows is None:  # no answer: the item waits for its next read
        item_release(item.pk)
        return ItemStatus.PENDING
    charge_store(
        charge=rows[0],
        account=account,
        outcome=outcome,
        txid=request.txid,
        in_transaction=lambda _charge: item_settle_in(item, ItemStatus.CREATED, {}),
        also=rows[1:],
        cancel=CANCEL_DUE_CHARGE,
    )
    return ItemStatus.CREATED
