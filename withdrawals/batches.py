"""Payout batches (docs/api/payout-batches.md): up to 1,000
withdrawals posted at once, accepted or refused as a whole, approved or
refused by staff at once, each item then a withdrawal of its own (its debit,
webhooks and payout through the payout engine), and the batch's end.

All or nothing: an invalid item (422, errors keyed ``items.<index>.<field>``)
or a business rule (400: an item above the per-request limit or refused
by the payee check at request, the total above the day's limit or the
balance) refuses the whole batch and nothing
is stored. An accepted batch is stored in one transaction under the
account's balance lock: the batch row, every item, one ledger debit per item
(``withdrawal:<id>``, as a single withdrawal's) and the balance and the day's
withdrawn total moved once, in a few statements whatever the size
(withdrawals.batch_sql).
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from accounts.exceptions import SegregationOfDuties
from accounts.models import Account
from accounts.segregation import withdrawal_approval_conflict
from accounts.services import balance_lock
from api.errors import flatten_errors
from core.exceptions import AccessDenied, BusinessRuleError, ConflictError, ValidationFailed
from withdrawals import exceptions as err
from withdrawals import payee_rules, services
from withdrawals.batch_progress import OPEN, batch_end_if_done
from withdrawals.batch_serializers import ITEM_NOT_AN_OBJECT, ITEM_NOT_SCHEDULED
from withdrawals.batch_sql import debit_new_batch
from withdrawals.limits import total_after_request, withdrawn_before
from withdrawals.models import PayoutBatch, Withdrawal, WithdrawalStatus, WithdrawalTransition
from withdrawals.quotes import withdrawal_quote
from withdrawals.serializers import WithdrawalCreateSerializer
from withdrawals.services import withdrawal_transition

APPROVE_PERMISSION = "withdrawals.approve_payout_batch"
BATCH_NOT_AWAITING = "O lote não está aguardando aprovação."
NO_PERMISSION = "Sem permissão para aprovar ou recusar lotes de saques."
#: A per-item business rule names its item (from 0, as ``batch_index``).
ITEM_RULE = "Item {index}: {message}"


# --------------------------------------------------------------------------- the request


def _item_check(account: Account, index: int, raw: Any) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """(the item's validated data, {}) or ({}, its errors keyed ``items.<index>.<field>``)."""
    prefix = f"items.{index}"
    if not isinstance(raw, dict):
        return {}, {prefix: [ITEM_NOT_AN_OBJECT]}
    body = WithdrawalCreateSerializer(data=raw)
    if not body.is_valid():
        return {}, flatten_errors(body.errors, prefix)
    data = dict(body.validated_data)
    if data.get("scheduled_for") is not None:
        return {}, {f"{prefix}.scheduled_for": [ITEM_NOT_SCHEDULED]}
    try:
        quote = withdrawal_quote(account=account, amount=data["amount"], discount_fee=data["discount_fee"])
    except ValidationFailed as exc:
        return {}, {f"{prefix}.{field}": messages for field, messages in exc.errors.items()}
    data["quote"] = quote
    return data, {}


def payout_batch_create(
    *,
    account: Account,
    items: Sequence[Any],
    description: str = "",
    in_transaction: Callable[[PayoutBatch], None] | None = None,
) -> PayoutBatch:
    """Accept a batch as a whole or refuse it, nothing stored (module doc).
    Checks, in order: every item's fields (422, all items' errors at once),
    each item's per-request limit and the payee check's request-time
    refusals (400 naming the first item refused), then the day's limit and
    the balance for the total (400s). ``in_transaction`` runs with the new batch before
    its transaction commits (the idempotency key's answer)."""
    checked = [_item_check(account, index, raw) for index, raw in enumerate(items)]
    errors = {field: messages for _, item_errors in checked for field, messages in item_errors.items()}
    if errors:
        raise ValidationFailed(errors)
    data = [item for item, _ in checked]
    for index, item in enumerate(data):
        _item_rules(account, index, item)
    batch = PayoutBatch(
        id=uuid.uuid4(),
        account=account,
        status=(
            PayoutBatch.Status.AWAITING_APPROVAL if account.withdrawals_need_approval else PayoutBatch.Status.PROCESSING
        ),
        description=description,
        item_count=len(data),
        total_amount=sum(item["amount"] for item in data),
        total_debit=sum(item["quote"].total_debit for item in data),
    )
    withdrawals = [_withdrawal(account, batch, index, item) for index, item in enumerate(data)]
    with transaction.atomic():
        balance = balance_lock(account_id=account.pk)
        at = timezone.now()
        day_total = withdrawn_before(balance, account, at) + batch.total_amount
        if day_total > account.withdrawal_daily_limit:
            raise BusinessRuleError(err.DAILY_LIMIT)
        if batch.total_debit > balance.available - balance.hold_uncovered:
            raise BusinessRuleError(err.INSUFFICIENT_BALANCE)
        debit_new_batch(
            batch=batch,
            withdrawals=withdrawals,
            balance=balance,
            at=at,
            withdrawn=total_after_request(balance, at, day_total),
        )
        if in_transaction is not None:
            in_transaction(batch)
        if batch.status == PayoutBatch.Status.PROCESSING:
            ids = [w.pk for w in withdrawals]
            transaction.on_commit(lambda: _enqueue_items(ids))
        else:
            # Pending for staff: keys expecting a document are looked up
            # meanwhile, for the approval screen, as a single withdrawal's.
            checked_ids = [
                w.pk
                for w in withdrawals
                if payee_rules.expected_document(account=account, payee_document=w.payee_document)
            ]
            if checked_ids:
                transaction.on_commit(lambda: _enqueue_look_ups(checked_ids))
    return batch


def _item_rules(account: Account, index: int, item: dict[str, Any]) -> None:
    """A single withdrawal's business rules checked before the balance
    lock, as a 400 naming the item: the per-request limit, then the payee
    check's request-time refusals (decisions §13, the payee check)."""
    if item["amount"] > account.withdrawal_per_request_limit:
        raise BusinessRuleError(ITEM_RULE.format(index=index, message=err.PER_REQUEST_LIMIT))
    try:
        payee_rules.refuse_at_request(
            account=account,
            key_type=item["key_type"],
            key_value=item["key_value"],
            payee_document=item["payee_document"],
        )
    except BusinessRuleError as refused:
        raise BusinessRuleError(ITEM_RULE.format(index=index, message=refused.message)) from refused


def _withdrawal(account: Account, batch: PayoutBatch, index: int, item: dict[str, Any]) -> Withdrawal:
    withdrawal_id = uuid.uuid4()
    quote = item["quote"]
    return Withdrawal(
        id=withdrawal_id,
        account=account,
        amount=item["amount"],
        fee=quote.fee,
        discount_fee=item["discount_fee"],
        total_debit=quote.total_debit,
        liquid_amount=quote.liquid_amount,
        pix_key_type=item["key_type"],
        pix_key=item["key_value"],
        idempotency_id=withdrawal_id.hex,
        payee_document=item["payee_document"],
        external_id=item["external_id"],
        batch=batch,
        batch_index=index,
    )


def _enqueue_items(ids: Sequence[uuid.UUID]) -> None:
    # The payout engine's hand-off, as for a single withdrawal; its queue and
    # worker bound the concurrency.
    for withdrawal_id in ids:
        services._enqueue_processing(withdrawal_id)


def _enqueue_look_ups(ids: Sequence[uuid.UUID]) -> None:
    for withdrawal_id in ids:
        services._enqueue_payee_look_up(withdrawal_id)


# --------------------------------------------------------------------------- staff's decision


def _check_staff(batch_id: uuid.UUID | str, staff: User) -> PayoutBatch:
    """The batch, if ``staff`` may decide on it: the permission, and the
    segregation of duties of a single withdrawal of its account."""
    if not staff.is_active or not staff.has_perm(APPROVE_PERMISSION):
        raise AccessDenied(NO_PERMISSION)
    batch = PayoutBatch.objects.get(pk=batch_id)
    conflict = withdrawal_approval_conflict(user_id=staff.pk, account_id=batch.account_id)
    if conflict is not None:
        raise SegregationOfDuties(conflict)
    return batch


def _decide(batch_id: uuid.UUID | str, to_status: str, staff: User) -> None:
    """Record the decision once; the same decision repeated changes nothing,
    another one is a conflict."""
    updated = PayoutBatch.objects.filter(pk=batch_id, status=PayoutBatch.Status.AWAITING_APPROVAL).update(
        status=to_status, decided_by=staff.get_username()[:150], decided_at=timezone.now(), updated_at=timezone.now()
    )
    same = (to_status,) if to_status == PayoutBatch.Status.CANCELED else (to_status, PayoutBatch.Status.COMPLETED)
    if not updated and not PayoutBatch.objects.filter(pk=batch_id, status__in=same, decided_at__isnull=False).exists():
        raise ConflictError(BATCH_NOT_AWAITING)


def payout_batch_approve(*, batch_id: uuid.UUID | str, staff: User) -> int:
    """Staff approve a batch: it becomes ``processing`` and every pending
    item is approved (each through ``withdrawal_transition``, its payout sent
    after its commit). Refused, nothing changed, as a single withdrawal's
    approval is (:class:`AccessDenied`, :class:`SegregationOfDuties`).
    Repeating it approves what is left; a crash midway is finished by
    :func:`payout_batches_sweep`. Returns how many items it approved."""
    _check_staff(batch_id, staff)
    _decide(batch_id, PayoutBatch.Status.PROCESSING, staff)
    return _move_pending(batch_id, WithdrawalStatus.APPROVED, WithdrawalTransition.Source.STAFF, staff.get_username())


def payout_batch_refuse(*, batch_id: uuid.UUID | str, staff: User) -> int:
    """Staff refuse a batch: it becomes ``canceled`` and every pending item
    is canceled, its debit given back (per item, as a single withdrawal's
    cancel). Same checks as :func:`payout_batch_approve`."""
    _check_staff(batch_id, staff)
    _decide(batch_id, PayoutBatch.Status.CANCELED, staff)
    return _move_pending(batch_id, WithdrawalStatus.CANCELED, WithdrawalTransition.Source.STAFF, staff.get_username())


def _move_pending(batch_ref: uuid.UUID | str, to_status: str, source: str, actor: str) -> int:
    """Each pending item to ``to_status``, one transaction each (the batch
    row is not held meanwhile: the last item's transaction ends the batch).
    An item moved meanwhile on its own (staff canceled it) is skipped: that
    change stands, and the rest of the batch still moves."""
    batch_id = uuid.UUID(str(batch_ref))
    ids = list(
        Withdrawal.objects.filter(batch_id=batch_id, status=WithdrawalStatus.PENDING)
        .order_by("batch_index")
        .values_list("pk", flat=True)
    )
    moved = 0
    for pk in ids:
        try:
            moved += withdrawal_transition(withdrawal_id=pk, to_status=to_status, source=source, actor=actor)
        except err.WithdrawalTransitionNotAllowed:
            continue  # no longer pending: its own change stands
    with transaction.atomic():
        batch_end_if_done(batch_id)  # nothing was left open (items canceled one by one)
    return moved


def payout_batches_sweep(*, older_than: dt.timedelta = dt.timedelta(minutes=2)) -> int:
    """Beat's safety net: a decided batch whose decision was cut midway has
    its pending items moved, and a batch with nothing open ends (once). Items
    of batches that needed no approval are beat's payout poller's."""
    cutoff = timezone.now() - older_than
    items = Withdrawal.objects.filter(batch=OuterRef("pk"))
    open_batches = (
        PayoutBatch.objects.filter(
            Q(status=PayoutBatch.Status.PROCESSING) | Q(status=PayoutBatch.Status.CANCELED, completed_at__isnull=True),
            updated_at__lt=cutoff,
        )
        .annotate(
            has_pending=Exists(items.filter(status=WithdrawalStatus.PENDING)),
            has_open=Exists(items.filter(status__in=OPEN)),
        )
        # Only those with something to do: a decision's pending items to move, or
        # nothing open (to end). Items being paid out are the payout engine's.
        .filter(
            Q(decided_at__isnull=False, has_pending=True) | Q(has_open=False),
        )
        .order_by("created_at")
        .values_list("pk", "status", "decided_by", "decided_at")
    )
    swept = 0
    for batch_id, status, decided_by, decided_at in open_batches:
        if decided_at is not None:
            approved = status == PayoutBatch.Status.PROCESSING
            to_status = WithdrawalStatus.APPROVED if approved else WithdrawalStatus.CANCELED
            _move_pending(batch_id, to_status, WithdrawalTransition.Source.SYSTEM, decided_by)
        else:
            with transaction.atomic():
                batch_end_if_done(batch_id)
        swept += 1
    return swept
