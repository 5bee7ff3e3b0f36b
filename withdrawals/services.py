"""Writes for withdrawals: the request (balance check and debit under the
balance lock), the one transition service, which returns money only once no
acquirer may still pay the withdrawal, and staff's settling of a payout left
undetermined. The payout engine that sends to acquirers is
:mod:`withdrawals.payouts`."""

from __future__ import annotations

import datetime as dt
import functools
import logging
import uuid
from collections.abc import Callable

from django.conf import settings
from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from accounts.models import Account, LedgerEntry
from accounts.services import balance_lock
from acquirers.adapters.base import PayoutStatus
from acquirers.calls import DeadlineExceeded, Outcome
from acquirers.models import Acquirer
from core import dispatch, metrics
from core.exceptions import BusinessRuleError, ValidationFailed
from core.sql import Insert
from webhooks.models import EventType
from webhooks.services import event_emit
from withdrawals import exceptions as err
from withdrawals import limits, payee_rules
from withdrawals.batch_progress import OPEN as BATCH_OPEN
from withdrawals.batch_progress import batch_end_if_done
from withdrawals.limits import schedule_error, total_after_request, total_after_reversal, withdrawn_before
from withdrawals.models import (
    NOT_COUNTED,
    PayoutAttempt,
    Withdrawal,
    WithdrawalStatus,
    WithdrawalTransition,
)
from withdrawals.payloads import withdrawal_payload
from withdrawals.quotes import withdrawal_quote
from withdrawals.sql import debit_new_withdrawal, post_with_day_total

logger = logging.getLogger(__name__)


# --------------------------------------------------------------------------- request


def withdrawal_request(
    *,
    account: Account,
    amount: int,
    key_type: str,
    key_value: str,
    discount_fee: bool = True,
    payee_document: str = "",
    scheduled_for: dt.date | None = None,
    external_id: str = "",
    in_transaction: Callable[[Withdrawal], None] | None = None,
) -> Withdrawal:
    """Accept a withdrawal: per-request limit, daily limit, balance (400s, in
    that order), then the row and its debit, all in one transaction under the
    account's balance lock, so no concurrency can overdraw or exceed a limit.
    ``key_value`` is already normalised for ``key_type``. ``in_transaction``
    runs with the new withdrawal before that transaction commits (the
    idempotency key's answer commits with the debit, or neither does)."""
    if scheduled_for is not None and (problem := schedule_error(scheduled_for)) is not None:
        raise ValidationFailed({"scheduled_for": [problem]})
    quote = withdrawal_quote(account=account, amount=amount, discount_fee=discount_fee)
    if amount > account.withdrawal_per_request_limit:
        raise BusinessRuleError(err.PER_REQUEST_LIMIT)
    payee_rules.refuse_at_request(
        account=account, key_type=key_type, key_value=key_value, payee_document=payee_document
    )

    withdrawal_id = uuid.uuid4()
    # Inserted by the statement of its debit (withdrawals.sql); its INSERT
    # compiled here, before the balance lock, not while holding it.
    withdrawal = Withdrawal(
        id=withdrawal_id,
        account=account,
        amount=amount,
        fee=quote.fee,
        discount_fee=discount_fee,
        total_debit=quote.total_debit,
        liquid_amount=quote.liquid_amount,
        pix_key_type=key_type,
        pix_key=key_value,
        idempotency_id=withdrawal_id.hex,
        payee_document=payee_document,
        scheduled_for=scheduled_for,
        external_id=external_id,
    )
    insert = Insert.of(withdrawal)
    with transaction.atomic():
        balance = balance_lock(account_id=account.pk)
        day_total = withdrawn_before(balance, account, withdrawal.created_at, scheduled_for) + amount
        if day_total > account.withdrawal_daily_limit:
            raise BusinessRuleError(err.DAILY_LIMIT)
        # A MED block the balance could not cover keeps its part back (docs/api/infractions.md).
        if quote.total_debit > balance.available - balance.hold_uncovered:
            raise BusinessRuleError(err.INSUFFICIENT_BALANCE)
        debit_new_withdrawal(
            withdrawal=insert,
            balance=balance,
            amount=-quote.total_debit,
            withdrawn=total_after_request(balance, withdrawal.created_at, day_total, scheduled_for),
        )
        if in_transaction is not None:
            in_transaction(withdrawal)
        if not account.withdrawals_need_approval:
            transaction.on_commit(functools.partial(_enqueue_processing, withdrawal.pk))
        elif payee_rules.expected_document(account=account, payee_document=payee_document):
            # Pending for staff: its key is looked up meanwhile, for the approval screen (withdrawals.payees).
            transaction.on_commit(functools.partial(_enqueue_payee_look_up, withdrawal.pk))
    return withdrawal


def _enqueue_processing(withdrawal_id: uuid.UUID, countdown: float = 0) -> None:
    # The app's one hand-off to the payout worker, by the task's name (tasks
    # import services, not the reverse). A broker that is down is no error:
    # the withdrawal is committed, and beat's poll of stuck payouts takes it.
    dispatch.enqueue(
        "withdrawals.tasks.process_withdrawal", str(withdrawal_id), countdown=countdown, left_to="beat's payout poller"
    )


def _enqueue_payee_look_up(withdrawal_id: uuid.UUID) -> None:
    dispatch.enqueue("withdrawals.tasks.look_up_payee", str(withdrawal_id), left_to="the payout run's own check")


def withdrawal_process_later(*, withdrawal_id: uuid.UUID, retry_in: float) -> None:
    """A payout run that could neither pay nor fail now (acquirers of its
    chain cooling down, or busy): processed again in ``retry_in`` seconds (at
    least one). Nobody waits on a payout; beat's poll is the safety net."""
    _enqueue_processing(withdrawal_id, countdown=max(1.0, retry_in))
    metrics.PAYOUTS.labels("none", "deferred").inc()


# --------------------------------------------------------------------------- lifecycle

#: (from, to) → (ledger kind, which amount is credited back) or None (decisions §5).
TRANSITIONS: dict[tuple[str, str], tuple[str, str] | None] = {
    (WithdrawalStatus.PENDING, WithdrawalStatus.APPROVED): None,
    (WithdrawalStatus.PENDING, WithdrawalStatus.CANCELED): (LedgerEntry.Kind.WITHDRAWAL_REVERSAL, "total_debit"),
    (WithdrawalStatus.APPROVED, WithdrawalStatus.PAID): None,
    # Only a scheduled withdrawal approved before its day, never sent (_refuse_unless_waiting).
    (WithdrawalStatus.APPROVED, WithdrawalStatus.CANCELED): (LedgerEntry.Kind.WITHDRAWAL_REVERSAL, "total_debit"),
    (WithdrawalStatus.PENDING, WithdrawalStatus.FAILED): (LedgerEntry.Kind.WITHDRAWAL_REVERSAL, "total_debit"),
    (WithdrawalStatus.APPROVED, WithdrawalStatus.FAILED): (LedgerEntry.Kind.WITHDRAWAL_REVERSAL, "total_debit"),
    (WithdrawalStatus.PAID, WithdrawalStatus.REFUNDED): (LedgerEntry.Kind.WITHDRAWAL_RETURN, "liquid_amount"),
}


def withdrawal_transition(
    *,
    withdrawal_id: uuid.UUID | str,
    to_status: str,
    source: str,
    actor: str = "",
    e2e_id: str | None = None,
    paid_at: dt.datetime | None = None,
    reason: str = "",
    lease_token: str = "",
) -> bool:
    """Apply one status change with its ledger effect, audit row and webhook
    event, atomically, under the withdrawal's row lock (then the balance's).
    False when already in ``to_status``; refuses any change not in the table.

    Failing an approved withdrawal (money back) is refused with
    :class:`~withdrawals.exceptions.PayoutUnsettled` while a send is in
    flight (the payout's lease is held by a run other than ``lease_token``'s)
    or the acquirer that may hold the payout has not settled it."""
    with transaction.atomic():
        withdrawal = Withdrawal.objects.select_for_update().get(pk=withdrawal_id)
        if withdrawal.status == to_status:
            return False
        key = (withdrawal.status, to_status)
        if key not in TRANSITIONS:
            raise err.WithdrawalTransitionNotAllowed(
                f"O saque não pode passar de {WithdrawalStatus(withdrawal.status).label} "
                f"para {WithdrawalStatus(to_status).label}."
            )
        if key == (WithdrawalStatus.APPROVED, WithdrawalStatus.FAILED):
            _refuse_if_unsettled(withdrawal, lease_token)
        if key == (WithdrawalStatus.APPROVED, WithdrawalStatus.CANCELED):
            _refuse_cancel_unless_waiting(withdrawal)
        from_status = withdrawal.status
        withdrawal.status = to_status
        withdrawal.version += 1
        now = timezone.now()
        if to_status == WithdrawalStatus.APPROVED:
            withdrawal.approved_at = now
        if to_status == WithdrawalStatus.PAID:
            withdrawal.paid_at = paid_at or now
            withdrawal.e2e_id = e2e_id or withdrawal.e2e_id
        if to_status == WithdrawalStatus.FAILED:
            withdrawal.failure_reason = reason[:500]
        if to_status != WithdrawalStatus.APPROVED:
            # Settled, failed or canceled: nothing is held or waited for any more.
            withdrawal.payout_unclear_since = None
            withdrawal.hold_reason, withdrawal.held_since = "", None
            # The lease goes with the status it guarded, in the same commit:
            # a reader that sees "paid" never sees a payout still leased.
            withdrawal.payout_leased_until, withdrawal.payout_lease_token = None, ""
        withdrawal.save()
        WithdrawalTransition.objects.create(
            withdrawal=withdrawal, from_status=from_status, to_status=to_status, source=source, actor=actor[:150]
        )
        effect = TRANSITIONS[key]
        if effect is not None:
            kind, field = effect
            balance = balance_lock(account_id=withdrawal.account_id)
            post_with_day_total(
                balance=balance,
                amount=getattr(withdrawal, field),
                kind=kind,
                reference=f"withdrawal:{withdrawal.pk}:{withdrawal.version}",
                # Failed or canceled: its amount no longer counts for its day.
                withdrawn=total_after_reversal(balance, withdrawal) if to_status in NOT_COUNTED else None,
            )
        metrics.on_commit(lambda: metrics.WITHDRAWAL_STATUS_CHANGES.labels(to_status).inc())
        event_emit(
            account_id=withdrawal.account_id,
            event_type=EventType.WITHDRAWAL,
            record_id=withdrawal.pk,
            status=to_status,
            data=withdrawal_payload(withdrawal),
        )
        if withdrawal.batch_id is not None and from_status in BATCH_OPEN and to_status not in BATCH_OPEN:
            batch_end_if_done(withdrawal.batch_id)  # the last item's transaction ends its batch
        if to_status == WithdrawalStatus.APPROVED:
            transaction.on_commit(functools.partial(_enqueue_processing, withdrawal.pk))
    return True


def _refuse_cancel_unless_waiting(withdrawal: Withdrawal) -> None:
    """An approved withdrawal (its row locked) is canceled only while it
    waits for a later day and nothing of it was ever sent
    (docs/api/scheduled-withdrawals.md): no send on record, no run holding it."""
    leased = withdrawal.payout_leased_until is not None and withdrawal.payout_leased_until > timezone.now()
    if not limits.waits_for_its_day(withdrawal) or leased or withdrawal.payout_attempts.exists():
        raise err.WithdrawalTransitionNotAllowed(err.SCHEDULED_CANCEL_REFUSED)


def _refuse_if_unsettled(withdrawal: Withdrawal, lease_token: str) -> None:
    """Money goes back only once no acquirer may still pay the withdrawal."""
    now = timezone.now()
    leased = withdrawal.payout_leased_until is not None and withdrawal.payout_leased_until > now
    if leased and withdrawal.payout_lease_token != lease_token:
        raise err.PayoutUnsettled(err.PAYOUT_IN_FLIGHT)
    if withdrawal.payout_unclear_since is not None:
        owner = withdrawal.payout_owner.key if withdrawal.payout_owner is not None else "?"
        raise err.PayoutUnsettled(err.PAYOUT_UNDETERMINED.format(acquirer=owner))
    if payout_sends_in_flight(withdrawal).exists():
        raise err.PayoutUnsettled(err.PAYOUT_IN_FLIGHT)


def withdrawal_approve(*, withdrawal_id: uuid.UUID | str, source: str, actor: str = "") -> bool:
    """Approve a pending withdrawal; the payout is sent after commit."""
    return withdrawal_transition(
        withdrawal_id=withdrawal_id, to_status=WithdrawalStatus.APPROVED, source=source, actor=actor
    )


# --------------------------------------------------------------------------- may a payout still land?

#: How long a payout run holds its lease; longer than a task may run (CELERY_TASK_TIME_LIMIT).
LEASE = dt.timedelta(minutes=5)
#: ``error_class`` of a send cut at our deadline (acquirers.calls), and of a
#: send whose run died before recording its answer (withdrawals.runs).
ABANDONED = DeadlineExceeded.__name__
INTERRUPTED = "RunInterrupted"


def payout_settle_window() -> dt.timedelta:
    return dt.timedelta(minutes=settings.PAYOUT_SETTLE_WINDOW_MINUTES)


def payout_sends_in_flight(withdrawal: Withdrawal) -> QuerySet[PayoutAttempt]:
    """Sends that timed out and may still land: any for the lease after it
    was made; one cut at our deadline (the acquirer was still answering when
    we closed the connection, so it had the send, and nothing says when it
    records it), or one whose run was killed mid-send (nothing says how far
    it got), for as long as the settle window. A late answer on a row
    written before calls were cut (they ran on in a thread) ends that. A
    worker that died took its calls with it: such a send waits out the
    window, then staff's queue."""
    now = timezone.now()
    return PayoutAttempt.objects.filter(
        withdrawal_id=withdrawal.pk,
        action=PayoutAttempt.Action.SEND,
        outcome=Outcome.TIMEOUT,
        late_at__isnull=True,
    ).filter(
        Q(created_at__gt=now - LEASE)
        | Q(error_class__in=(ABANDONED, INTERRUPTED), created_at__gt=now - max(LEASE, payout_settle_window()))
    )


# --------------------------------------------------------------------------- word on an unsettled payout


def withdrawal_payout_failure_report(
    *, withdrawal_id: uuid.UUID | str, acquirer: Acquirer | None, source: str, reason: str
) -> bool:
    """An acquirer says the payout failed. Applied (failed, money back) when
    nothing may still pay it; otherwise (a send in flight, an owner that has
    not settled it) kept as evidence on the payout's attempts, and the payout
    engine settles with the owner. True when the withdrawal changed."""
    try:
        return withdrawal_transition(
            withdrawal_id=withdrawal_id, to_status=WithdrawalStatus.FAILED, source=source, reason=reason
        )
    except err.PayoutUnsettled as refused:
        withdrawal = Withdrawal.objects.get(pk=withdrawal_id)
        reporter_id = acquirer.pk if acquirer is not None else withdrawal.payout_owner_id or withdrawal.acquirer_id
        if reporter_id is not None:
            PayoutAttempt.objects.create(
                withdrawal=withdrawal,
                acquirer_id=reporter_id,
                action=PayoutAttempt.Action.NOTICE,
                outcome=PayoutStatus.FAILED.value,
                error_message=f"{reason}; not applied: {refused.message}"[:500],
                latency_ms=0,
            )
        logger.warning("payout of withdrawal %s reported failed while unsettled: kept as evidence", withdrawal_id)
        transaction.on_commit(functools.partial(_enqueue_processing, withdrawal.pk))
        return False


#: The definitive answer staff obtained must say something (a ticket, a statement).
RESOLVE_REASON_MIN_LENGTH = 10


def withdrawal_payout_resolve(
    *, withdrawal_id: uuid.UUID | str, to_status: str, reason: str, actor: str, e2e_id: str | None = None
) -> bool:
    """Staff settle an undetermined payout after checking with its acquirer
    outside the service (a ticket, a statement): ``paid`` with the e2e id, or
    ``failed`` (money back). ``reason`` must say what definitive answer was
    obtained; refused while a send may still be on its way."""
    reason = reason.strip()
    if len(reason) < RESOLVE_REASON_MIN_LENGTH:
        raise ValidationFailed({"reason": [err.RESOLVE_REASON_REQUIRED]})
    if to_status not in (WithdrawalStatus.PAID, WithdrawalStatus.FAILED) or (
        to_status == WithdrawalStatus.PAID and not e2e_id
    ):
        raise ValidationFailed({"to_status": [err.RESOLVE_OUTCOME]})
    with transaction.atomic():
        withdrawal = Withdrawal.objects.select_for_update().get(pk=withdrawal_id)
        if withdrawal.status != WithdrawalStatus.APPROVED or withdrawal.payout_unclear_since is None:
            raise err.WithdrawalTransitionNotAllowed(err.RESOLVE_NOT_UNDETERMINED)
        now = timezone.now()
        leased = withdrawal.payout_leased_until is not None and withdrawal.payout_leased_until > now
        if leased or payout_sends_in_flight(withdrawal).exists():
            raise err.PayoutUnsettled(err.PAYOUT_IN_FLIGHT)
        owner = withdrawal.payout_owner_id or withdrawal.acquirer_id
        if owner is not None:
            PayoutAttempt.objects.create(
                withdrawal=withdrawal,
                acquirer_id=owner,
                action=PayoutAttempt.Action.NOTICE,
                outcome=to_status,
                error_message=f"resolved by {actor}: {reason}"[:500],
                latency_ms=0,
                released=to_status == WithdrawalStatus.FAILED,
            )
        Withdrawal.objects.filter(pk=withdrawal.pk).update(payout_unclear_since=None)
        return withdrawal_transition(
            withdrawal_id=withdrawal.pk,
            to_status=to_status,
            source=WithdrawalTransition.Source.STAFF,
            actor=actor,
            e2e_id=e2e_id,
            reason=f"resolved by staff: {reason}",
        )
