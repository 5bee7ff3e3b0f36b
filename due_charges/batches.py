"""Batches of due-date charges: accepting one, settling its items, finishing it.

The request is validated item by item before anything is stored: a bad item
is stored ``failed`` with its reasons (as Efí's lotecobv answers NEGADA per
cobv) and the others go on. Items are created after the request answered,
by workers (``due_charges.tasks``), one guarded call each through the
account's due-date chain (:func:`payments.due_charges.due_charge_create`).

One worker at a time holds an item: a claim bumps ``attempts`` and stamps
``updated_at``, and only an unclaimed item or one whose claim is older than
:data:`CLAIM_LEASE` can be claimed again. Two workers creating the same
item would both reach the acquirer (harmless: the txid is the same) but the
loser's insert would fail and ask the acquirer to cancel the winner's cobv.
The lease outlives any chain (each call has its deadline), so it expires
only when the worker that held it is gone.

A try that came to no clear answer (a timeout, an answer we could not use,
an acquirer down) is not a failure: the acquirer may hold the cobv. The
item waits :data:`RETRY_AFTER` and is tried again with the same txid (an
acquirer answers the cobv it holds), and nothing is withdrawn meanwhile.
Only refusals fail it at once; after :data:`MAX_ATTEMPTS` tries it is given
up and every acquirer that may hold its cobv is asked to withdraw it, as
they are when another acquirer takes it.
"""

from __future__ import annotations

import datetime as dt
import functools
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from django.db import transaction
from django.db.models import Count, F, Q
from django.db.models.functions import Greatest
from django.utils import timezone

from accounts.models import Account
from acquirers.models import Acquirer
from api.errors import flatten_errors
from core.dispatch import enqueue
from core.exceptions import NON_FIELD_ERRORS, PixServiceError, ValidationFailed
from due_charges.batch_serializers import BatchSerializer, item_as_json
from due_charges.models import BatchStatus, DueChargeBatch, DueChargeBatchItem, ItemStatus
from due_charges.serializers import DueChargeCreateSerializer
from payments.due_charges import due_charge_check, due_charge_create, due_terms_build
from payments.due_terms import DueTerms
from payments.exceptions import AllAcquirersFailed
from payments.models import Charge, ChargeAttempt
from payments.services import CANCEL_DUE_CHARGE, Buyer, override_items, resolve_override
from webhooks.models import EventType
from webhooks.services import event_emit

ITEM_NOT_AN_OBJECT = "Cada cobrança do lote deve ser um objeto JSON."
#: How long a claim on an item holds off other workers (see the module's doc).
CLAIM_LEASE = dt.timedelta(minutes=5)
#: Items per task: each task creates its items one after the other, so the
#: calls in flight for a batch are at most the workers taking its tasks.
CHUNK_SIZE = 25
#: Outcomes that mean no acquirer was asked: the item waits and is tried again.
NOT_CALLED = (ChargeAttempt.Outcome.BUSY, ChargeAttempt.Outcome.CIRCUIT_OPEN)
#: Outcomes that settle nothing: the acquirer said no, the cobv is not there.
REFUSED = (ChargeAttempt.Outcome.DECLINED,)
#: Outcomes after which the acquirer may hold the cobv (it acted, then the
#: answer was lost or unusable): the chain's ``to_cancel``.
MAY_HOLD = (ChargeAttempt.Outcome.TIMEOUT, ChargeAttempt.Outcome.INVALID_RESPONSE)
#: Tries of an item (claims that called an acquirer) before it is given up.
MAX_ATTEMPTS = 5
#: How long an item whose try came to no clear answer waits for the next.
RETRY_AFTER = dt.timedelta(minutes=1)
#: ``item_process``'s answer for an item waiting RETRY_AFTER.
RETRY = "retry"
GAVE_UP = (
    "Nenhuma adquirente confirmou a criação da cobrança após {tries} tentativas; "
    "pedimos a retirada da cobrança onde ela pode ter sido criada."
)
WITHDRAW_TASK = f"acquirers.tasks.{CANCEL_DUE_CHARGE}"
PROCESS_TASK = "due_charges.tasks.due_batch_process"
ITEMS_TASK = "due_charges.tasks.due_batch_items"


# --------------------------------------------------------------------------- the request


def item_check(*, account: Account, raw: Any) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """(the item as stored, {}) or ({}, its errors by field): every check a
    single ``POST /api/due-charges`` makes before an acquirer is called."""
    if not isinstance(raw, dict):
        return {}, {NON_FIELD_ERRORS: [ITEM_NOT_AN_OBJECT]}
    body = DueChargeCreateSerializer(data=raw)
    if not body.is_valid():
        return {}, flatten_errors(body.errors)
    data = item_as_json(dict(body.validated_data))
    try:
        due_charge_check(account=account, terms=item_terms(data))
        override = override_items(data)
        if override:
            resolve_override(account=account, items=override)
    except ValidationFailed as exc:
        return {}, exc.errors
    except PixServiceError as exc:  # a business rule (400 for a single charge)
        return {}, {NON_FIELD_ERRORS: [exc.message]}
    return data, {}


def item_terms(data: Mapping[str, Any]) -> DueTerms:
    return due_terms_build(
        amount=data["amount"],
        due_date=dt.date.fromisoformat(data["due_date"]),
        days_after_due=data["days_after_due"],
        terms={name: data.get(name) for name in ("fine", "interest", "rebate", "discount")},
    )


def item_debtor(data: Mapping[str, Any]) -> Buyer:
    """The payer of an item as stored (its ``debtor``), as a charge's buyer."""
    debtor = data["debtor"]
    return Buyer(
        name=debtor["name"],
        document=debtor["document"],
        phone="",
        address={k: debtor[k] for k in ("street", "city", "state", "zip_code") if debtor.get(k)},
    )


def batch_create(
    *,
    account: Account,
    items: Sequence[Any],
    description: str = "",
    postback_url: str = "",
    in_transaction: Callable[[DueChargeBatch], None] | None = None,
) -> DueChargeBatch:
    """Store the batch and its items (bad ones ``failed`` with their errors)
    and hand it to a worker once committed. ``in_transaction`` runs in the
    transaction that stores it (the idempotency key's answer)."""
    checked = [item_check(account=account, raw=raw) for raw in items]
    with transaction.atomic():
        batch = DueChargeBatch.objects.create(
            account=account, total=len(checked), description=description, postback_url=postback_url
        )
        DueChargeBatchItem.objects.bulk_create(
            DueChargeBatchItem(
                batch=batch,
                position=position,
                status=ItemStatus.FAILED if errors else ItemStatus.PENDING,
                errors=errors,
                request=data,
            )
            for position, (data, errors) in enumerate(checked)
        )
        batch_finish_if_done(batch.pk)  # every item refused: done at once
        batch.refresh_from_db()
        if in_transaction is not None:
            in_transaction(batch)
        transaction.on_commit(lambda: enqueue(PROCESS_TASK, str(batch.pk), left_to="the batches' sweep"))
    return batch


# --------------------------------------------------------------------------- progress


def batch_counts(batch_id: uuid.UUID) -> dict[str, int]:
    """Items by status, and the total."""
    rows = DueChargeBatchItem.objects.filter(batch_id=batch_id).values("status").annotate(n=Count("pk"))
    found = {row["status"]: row["n"] for row in rows}
    counts = {status: found.get(status, 0) for status in ItemStatus.values}
    return {"total": sum(counts.values()), **counts}


def batch_finish_if_done(batch_id: uuid.UUID) -> bool:
    """Mark the batch done, with its webhook, once no item is pending. In the
    transaction that settled an item: the batch row's lock orders the items'
    commits, so the last one sees every other settled and exactly one
    transaction finishes the batch."""
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("batch_finish_if_done must run in the transaction that settled an item")
    batch = DueChargeBatch.objects.select_for_update().get(pk=batch_id)
    if batch.status == BatchStatus.DONE:
        return False
    if DueChargeBatchItem.objects.filter(batch_id=batch_id, status=ItemStatus.PENDING).exists():
        return False
    batch.status, batch.finished_at = BatchStatus.DONE, timezone.now()
    batch.save(update_fields=["status", "finished_at", "updated_at"])
    event_emit(
        account_id=batch.account_id,
        event_type=EventType.DUE_CHARGE_BATCH,
        record_id=batch.pk,
        status=batch.status,
        data=batch_payload(batch, batch_counts(batch.pk)),
        postback_url=batch.postback_url,
    )
    return True


def batch_payload(batch: DueChargeBatch, counts: Mapping[str, int]) -> dict[str, Any]:
    """The webhook's ``data``: the batch as ``GET /api/due-charges/batches/{id}``
    reads it (the same serializer, so times are the API's, in Brasília)."""
    return dict(BatchSerializer(batch, context={"counts": dict(counts)}).data)


# --------------------------------------------------------------------------- processing


def _claimable(now: dt.datetime) -> Q:
    return Q(status=ItemStatus.PENDING) & (Q(attempts=0) | Q(updated_at__lt=now - CLAIM_LEASE))


def batch_dispatch(batch_id: uuid.UUID) -> int:
    """Hand the batch's claimable items to workers in chunks; finish a batch
    with nothing pending. Safe to repeat: a chunk skips items claimed since."""
    ids = list(
        DueChargeBatchItem.objects.filter(_claimable(timezone.now()), batch_id=batch_id)
        .order_by("position")
        .values_list("pk", flat=True)
    )
    if ids:
        batch_touch(batch_id)
    for chunk in _chunks(ids, CHUNK_SIZE):
        enqueue(ITEMS_TASK, str(batch_id), chunk, left_to="the batches' sweep")
    if not ids:
        with transaction.atomic():
            batch_finish_if_done(batch_id)
    return len(ids)


def batch_touch(batch_id: uuid.UUID) -> None:
    """Record that the batch's work moved: the sweep leaves it alone for a lease."""
    DueChargeBatch.objects.filter(pk=batch_id).update(progress_at=timezone.now())


def _chunks(ids: list[int], size: int) -> Iterator[list[int]]:
    for start in range(0, len(ids), size):
        yield ids[start : start + size]


def item_claim(item_id: int) -> DueChargeBatchItem | None:
    now = timezone.now()
    claimed = DueChargeBatchItem.objects.filter(_claimable(now), pk=item_id).update(
        attempts=F("attempts") + 1, updated_at=now
    )
    if not claimed:
        return None
    return DueChargeBatchItem.objects.select_related("batch__account").get(pk=item_id)


def item_process(item_id: int) -> str:
    """Create one item's charge (if no other worker holds it); returns the
    item's status after, :data:`RETRY` (no clear answer: tried again after
    :data:`RETRY_AFTER`) or ``"skipped"``. No transaction is open while the
    acquirer is called: the charge and the item's status commit together
    after it answered (``due_charge_create``'s ``in_transaction``)."""
    item = item_claim(item_id)
    if item is None:
        return "skipped"
    if Charge.objects.filter(pk=item.charge_id).exists():  # stored by an earlier claim
        item_settle(item, ItemStatus.CREATED, {})
        return ItemStatus.CREATED
    claimed_at = item.updated_at
    held = item_may_hold(item)  # by earlier tries or the batch's lote

    def stored(charge: Charge) -> None:
        item_settle_in(item, ItemStatus.CREATED, {})
        # Taken elsewhere: a cobv an earlier try (or the lote) may have left is withdrawn.
        _withdraw_on_commit(item, [a for a in held if a.pk != charge.acquirer_id])

    data = item.request
    try:
        due_charge_create(
            account=item.batch.account,
            terms=item_terms(data),
            debtor=item_debtor(data),
            email=data["debtor"].get("email", ""),
            description=data.get("description", ""),
            override=override_items(data),
            postback_url=data.get("postback_url", ""),
            metadata=data.get("metadata"),
            charge_id=item.charge_id,
            in_transaction=stored,
            hold_unclear=True,
        )
    except ValidationFailed as exc:  # no longer payable, since the request
        item_fail(item, exc.errors)
        return ItemStatus.FAILED
    except AllAcquirersFailed as exc:
        return _unclear_or_failed(item, since=claimed_at, message=exc.message)
    except PixServiceError as exc:
        item_fail(item, {NON_FIELD_ERRORS: [exc.message]})
        return ItemStatus.FAILED
    return ItemStatus.CREATED


def _unclear_or_failed(item: DueChargeBatchItem, *, since: dt.datetime, message: str) -> str:
    """No acquirer took the item. Nothing called: it waits for a slot. Every
    acquirer ever called refused: failed. Else some answer was unclear (an
    acquirer may hold the cobv): tried again with the same txid, up to
    :data:`MAX_ATTEMPTS`, then given up with its cobv withdrawn."""
    tries = ChargeAttempt.objects.filter(charge_id=item.charge_id)
    if set(tries.filter(created_at__gte=since).values_list("outcome", flat=True)) <= set(NOT_CALLED):
        item_release(item.pk)
        return ItemStatus.PENDING
    called = set(tries.values_list("outcome", flat=True)) - set(NOT_CALLED)
    if called <= set(REFUSED):
        item_fail(item, {NON_FIELD_ERRORS: [message]})
        return ItemStatus.FAILED
    if item.attempts < MAX_ATTEMPTS:
        item_release(item.pk, after=RETRY_AFTER)
        return RETRY
    item_fail(item, {NON_FIELD_ERRORS: [GAVE_UP.format(tries=item.attempts)]})
    return ItemStatus.FAILED


def item_may_hold(item: DueChargeBatchItem) -> list[Acquirer]:
    """The acquirers that may hold the item's cobv though none of its tries
    heard so: one whose answer to a try was lost or unusable, and the one
    its batch's lote went to when that lote was given up unanswered."""
    ids = set(
        ChargeAttempt.objects.filter(charge_id=item.charge_id, outcome__in=MAY_HOLD).values_list(
            "acquirer_id", flat=True
        )
    )
    lote_at = DueChargeBatch.objects.values_list("lote_abandoned_at_id", flat=True).get(pk=item.batch_id)
    if lote_at is not None:
        ids.add(lote_at)
    return list(Acquirer.objects.filter(pk__in=ids).order_by("pk"))


def _withdraw_on_commit(item: DueChargeBatchItem, acquirers: Sequence[Acquirer]) -> None:
    txid = item.charge_id.hex
    for acquirer in acquirers:
        transaction.on_commit(
            functools.partial(enqueue, WITHDRAW_TASK, acquirer.pk, txid, left_to="reconciliation of charges")
        )


def item_fail(item: DueChargeBatchItem, errors: Mapping[str, list[str]]) -> None:
    """Settle the item ``failed`` for good; any acquirer that may hold its
    cobv is asked to withdraw it once that commits."""
    with transaction.atomic():
        if item_settled_in(item, ItemStatus.FAILED, errors):
            _withdraw_on_commit(item, item_may_hold(item))


def item_release(item_id: int, *, after: dt.timedelta = dt.timedelta(0)) -> None:
    """Give a claim back: claimable again ``after`` from now. A release
    with nothing called does not count as a try."""
    item = DueChargeBatchItem.objects.filter(pk=item_id, status=ItemStatus.PENDING)
    claimable_at = timezone.now() - CLAIM_LEASE - dt.timedelta(seconds=1) + after
    changes: dict[str, Any] = {"updated_at": claimable_at}
    if not after:
        changes["attempts"] = Greatest(F("attempts") - 1, 0)
    if item.update(**changes):
        batch_touch(item.values_list("batch_id", flat=True).get())  # its retry is on its way


def item_settle(item: DueChargeBatchItem, status: str, errors: Mapping[str, list[str]]) -> None:
    with transaction.atomic():
        item_settle_in(item, status, errors)


def item_settle_in(item: DueChargeBatchItem, status: str, errors: Mapping[str, list[str]]) -> None:
    item_settled_in(item, status, errors)


def item_settled_in(item: DueChargeBatchItem, status: str, errors: Mapping[str, list[str]]) -> bool:
    """:func:`item_settle_in`; True when this settled it (it was pending)."""
    updated = DueChargeBatchItem.objects.filter(pk=item.pk, status=ItemStatus.PENDING).update(
        status=status, errors=dict(errors), updated_at=timezone.now()
    )
    if updated:
        batch_touch(item.batch_id)
        batch_finish_if_done(item.batch_id)
    return bool(updated)


def batches_stalled(*, older_than: dt.timedelta = CLAIM_LEASE) -> list[uuid.UUID]:
    """Batches still processing whose work was lost (a publish the broker
    dropped, a worker killed mid-chunk, a lote's reads that ended): nothing
    moved for ``older_than`` (``progress_at``) and an item is claimable (or
    none pending, and never finished). A batch whose workers are busy with
    it is left alone however old it is."""
    now = timezone.now()
    stalled = DueChargeBatch.objects.filter(status=BatchStatus.PROCESSING, progress_at__lt=now - older_than).filter(
        ~Q(items__status=ItemStatus.PENDING) | Q(items__in=DueChargeBatchItem.objects.filter(_claimable(now)))
    )
    return list(stalled.values_list("pk", flat=True).distinct())
