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
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from django.db import transaction
from django.db.models import Count, F, Q
from django.utils import timezone

from accounts.models import Account
from api.errors import flatten_errors
from core.dispatch import enqueue
from core.exceptions import NON_FIELD_ERRORS, PixServiceError, ValidationFailed
from due_charges.batch_serializers import BatchSerializer, item_as_json
from due_charges.models import BatchStatus, DueChargeBatch, DueChargeBatchItem, ItemStatus
from due_charges.serializers import DueChargeCreateSerializer
from payments.due_charges import due_charge_check, due_charge_create, due_terms_build
from payments.due_terms import DueTerms
from payments.models import Charge, ChargeAttempt
from payments.services import Buyer, override_items, resolve_override
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
    item's status after, or ``"skipped"``. No transaction is open while the
    acquirer is called: the charge and the item's status commit together
    after it answered (``due_charge_create``'s ``in_transaction``)."""
    item = item_claim(item_id)
    if item is None:
        return "skipped"
    if Charge.objects.filter(pk=item.charge_id).exists():  # stored by an earlier claim
        item_settle(item, ItemStatus.CREATED, {})
        return ItemStatus.CREATED
    claimed_at = item.updated_at
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
            in_transaction=lambda _charge: item_settle_in(item, ItemStatus.CREATED, {}),
        )
    except ValidationFailed as exc:  # no longer payable, since the request
        item_settle(item, ItemStatus.FAILED, exc.errors)
        return ItemStatus.FAILED
    except PixServiceError as exc:
        if _no_acquirer_called(item, since=claimed_at):
            item_release(item.pk)
            return ItemStatus.PENDING
        item_settle(item, ItemStatus.FAILED, {NON_FIELD_ERRORS: [exc.message]})
        return ItemStatus.FAILED
    return ItemStatus.CREATED


def _no_acquirer_called(item: DueChargeBatchItem, *, since: dt.datetime) -> bool:
    """Every acquirer was busy or open: nothing was asked, so the item waits
    for a slot instead of failing for a moment's load."""
    outcomes = set(
        ChargeAttempt.objects.filter(charge_id=item.charge_id, created_at__gte=since).values_list("outcome", flat=True)
    )
    return bool(outcomes) and outcomes <= set(NOT_CALLED)


def item_release(item_id: int) -> None:
    """Give a claim back at once (nothing was called): claimable again now."""
    item = DueChargeBatchItem.objects.filter(pk=item_id, status=ItemStatus.PENDING)
    if item.update(updated_at=timezone.now() - CLAIM_LEASE - dt.timedelta(seconds=1)):
        batch_touch(item.values_list("batch_id", flat=True).get())  # its retry is on its way


def item_settle(item: DueChargeBatchItem, status: str, errors: Mapping[str, list[str]]) -> None:
    with transaction.atomic():
        item_settle_in(item, status, errors)


def item_settle_in(item: DueChargeBatchItem, status: str, errors: Mapping[str, list[str]]) -> None:
    updated = DueChargeBatchItem.objects.filter(pk=item.pk, status=ItemStatus.PENDING).update(
        status=status, errors=dict(errors), updated_at=timezone.now()
    )
    if updated:
        batch_touch(item.batch_id)
        batch_finish_if_done(item.batch_id)


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
