"""Writes for withdrawals: the request (balance check and debit under the
balance lock), the one transition service, and the payout to acquirers."""

from __future__ import annotations

import datetime as dt
import functools
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from accounts.fees import withdrawal_fee
from accounts.models import Account, LedgerEntry
from accounts.selectors import effective_minimum_withdrawal
from accounts.services import balance_lock, ledger_post
from acquirers import adapters, health
from acquirers.adapters.base import (
    AcquirerAdapter,
    AcquirerDeclined,
    AcquirerTimeout,
    AdapterError,
    PayoutRequest,
    PayoutResult,
    PayoutStatus,
)
from acquirers.chain import call_with_deadline
from acquirers.models import Acquirer
from acquirers.selectors import payout_chain
from pix_service import metrics
from pix_service.exceptions import BusinessRuleError, ValidationFailed
from webhooks.models import EventType
from webhooks.services import event_emit
from withdrawals import exceptions as err
from withdrawals.models import PayoutAttempt, Withdrawal, WithdrawalStatus, WithdrawalTransition
from withdrawals.selectors import withdrawn_today
from withdrawals.serializers import WithdrawalSerializer

logger = logging.getLogger(__name__)

S = WithdrawalStatus
K = LedgerEntry.Kind
T = TypeVar("T")


def _brl(centavos: int) -> str:
    return f"{centavos // 100:,}".replace(",", ".") + f",{centavos % 100:02d}"


# --------------------------------------------------------------------------- request


@dataclass(frozen=True)
class Quote:
    fee: int
    total_debit: int
    liquid_amount: int


def withdrawal_quote(*, account: Account, amount: int, discount_fee: bool) -> Quote:
    """Field rules of the amount (422 under ``amount``): the effective minimum
    and, with ``discount_fee``, something left after the fee."""
    minimum = effective_minimum_withdrawal(account)
    if amount < minimum:
        raise ValidationFailed({"amount": [err.BELOW_MINIMUM.format(amount=_brl(minimum))]})
    fee = withdrawal_fee(account, amount)
    if discount_fee:
        if amount - fee < 1:
            raise ValidationFailed({"amount": [err.NOTHING_LEFT_AFTER_FEE]})
        return Quote(fee=fee, total_debit=amount, liquid_amount=amount - fee)
    return Quote(fee=fee, total_debit=amount + fee, liquid_amount=amount)


def withdrawal_request(
    *, account: Account, amount: int, key_type: str, key_value: str, discount_fee: bool = True
) -> Withdrawal:
    """Accept a withdrawal: per-request limit, daily limit, balance (400s, in
    that order), then the row and its debit, all in one transaction under the
    account's balance lock, so no concurrency can overdraw or exceed a limit.
    ``key_value`` is already normalised for ``key_type``."""
    quote = withdrawal_quote(account=account, amount=amount, discount_fee=discount_fee)
    if amount > account.withdrawal_per_request_limit:
        raise BusinessRuleError(err.PER_REQUEST_LIMIT)

    with transaction.atomic():
        balance = balance_lock(account_id=account.pk)
        if withdrawn_today(account) + amount > account.withdrawal_daily_limit:
            raise BusinessRuleError(err.DAILY_LIMIT)
        if quote.total_debit > balance.available:
            raise BusinessRuleError(err.INSUFFICIENT_BALANCE)
        withdrawal_id = uuid.uuid4()
        withdrawal = Withdrawal.objects.create(
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
        )
        ledger_post(
            account_id=account.pk,
            amount=-quote.total_debit,
            kind=K.WITHDRAWAL,
            reference=f"withdrawal:{withdrawal.pk}",
            locked=balance,
        )
        if not account.withdrawals_need_approval:
            transaction.on_commit(functools.partial(_enqueue_processing, withdrawal.pk))
    return withdrawal


def _enqueue_processing(withdrawal_id: uuid.UUID, countdown: float = 0) -> None:
    from withdrawals.tasks import process_withdrawal

    try:
        process_withdrawal.apply_async((str(withdrawal_id),), countdown=countdown, retry=False)
    except Exception:
        # Committed and pending/approved: beat's poll of stuck payouts picks it up.
        logger.warning("broker unavailable; withdrawal %s left to the poller", withdrawal_id, exc_info=True)


# --------------------------------------------------------------------------- lifecycle

#: (from, to) → (ledger kind, which amount is credited back) or None (decisions §5).
TRANSITIONS: dict[tuple[str, str], tuple[str, str] | None] = {
    (S.PENDING, S.APPROVED): None,
    (S.PENDING, S.CANCELED): (K.WITHDRAWAL_REVERSAL, "total_debit"),
    (S.APPROVED, S.PAID): None,
    (S.PENDING, S.FAILED): (K.WITHDRAWAL_REVERSAL, "total_debit"),
    (S.APPROVED, S.FAILED): (K.WITHDRAWAL_REVERSAL, "total_debit"),
    (S.PAID, S.REFUNDED): (K.WITHDRAWAL_RETURN, "liquid_amount"),
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
) -> bool:
    """Apply one status change with its ledger effect, audit row and webhook
    event, atomically, under the withdrawal's row lock (then the balance's).
    False when already in ``to_status``; refuses any change not in the table."""
    with transaction.atomic():
        withdrawal = Withdrawal.objects.select_for_update().get(pk=withdrawal_id)
        if withdrawal.status == to_status:
            return False
        key = (withdrawal.status, to_status)
        if key not in TRANSITIONS:
            raise err.WithdrawalTransitionNotAllowed(
                f"O saque não pode passar de {S(withdrawal.status).label} para {S(to_status).label}."
            )
        from_status = withdrawal.status
        withdrawal.status = to_status
        withdrawal.version += 1
        now = timezone.now()
        if to_status == S.APPROVED:
            withdrawal.approved_at = now
        if to_status == S.PAID:
            withdrawal.paid_at = paid_at or now
            withdrawal.e2e_id = e2e_id or withdrawal.e2e_id
        if to_status == S.FAILED:
            withdrawal.failure_reason = reason[:500]
        withdrawal.payout_leased_until = None
        withdrawal.save()
        WithdrawalTransition.objects.create(
            withdrawal=withdrawal, from_status=from_status, to_status=to_status, source=source, actor=actor[:150]
        )
        effect = TRANSITIONS[key]
        if effect is not None:
            kind, field = effect
            ledger_post(
                account_id=withdrawal.account_id,
                amount=getattr(withdrawal, field),
                kind=kind,
                reference=f"withdrawal:{withdrawal.pk}:{withdrawal.version}",
            )
        metrics.on_commit(lambda: metrics.WITHDRAWAL_STATUS_CHANGES.labels(to_status).inc())
        event_emit(
            account_id=withdrawal.account_id,
            event_type=EventType.WITHDRAWAL,
            record_id=withdrawal.pk,
            status=to_status,
            data=WithdrawalSerializer(withdrawal).data,
        )
        if to_status == S.APPROVED:
            transaction.on_commit(functools.partial(_enqueue_processing, withdrawal.pk))
    return True


def withdrawal_approve(*, withdrawal_id: uuid.UUID | str, source: str, actor: str = "") -> bool:
    """Approve a pending withdrawal; the payout is sent after commit."""
    return withdrawal_transition(withdrawal_id=withdrawal_id, to_status=S.APPROVED, source=source, actor=actor)


# --------------------------------------------------------------------------- payout

#: Outcomes that close an acquirer for this payout: it refused, failed it,
#: or (asked after an unclear send) never received it.
FINISHED_ELSEWHERE = ("declined", PayoutStatus.FAILED.value, PayoutStatus.NOT_FOUND.value)
LEASE = dt.timedelta(minutes=5)


class PayoutUndetermined(Exception):
    """An acquirer may have the payout and cannot tell us now: try again
    later, never elsewhere (a payout is never sent twice)."""


def withdrawal_process(*, withdrawal_id: uuid.UUID | str) -> str:
    """Move a withdrawal forward: auto-approve when the account allows it,
    then pay out through the chain. Idempotent and safe to run twice."""
    withdrawal = Withdrawal.objects.select_related("account").get(pk=withdrawal_id)
    if withdrawal.status == S.PENDING:
        if withdrawal.account.withdrawals_need_approval:
            return "awaiting_approval"
        # Approval enqueues processing again on commit; that run pays out.
        try:
            withdrawal_approve(withdrawal_id=withdrawal.pk, source=WithdrawalTransition.Source.SYSTEM)
        except err.WithdrawalTransitionNotAllowed:
            # "pending" was read without the lock: staff canceled it, or another
            # run approved and paid it, meanwhile. Their change stands.
            return Withdrawal.objects.values_list("status", flat=True).get(pk=withdrawal.pk)
        return "approved"
    if withdrawal.status != S.APPROVED:
        return withdrawal.status

    now = timezone.now()
    claimed = (
        Withdrawal.objects.filter(pk=withdrawal.pk, status=S.APPROVED)
        .filter(Q(payout_leased_until__isnull=True) | Q(payout_leased_until__lt=now))
        .update(payout_leased_until=now + LEASE, updated_at=now)
    )
    if not claimed:
        return "held"
    try:
        return _pay_out(withdrawal)
    except err.WithdrawalTransitionNotAllowed:
        # Staff or a notification moved it meanwhile; their change stands.
        return Withdrawal.objects.values_list("status", flat=True).get(pk=withdrawal.pk)
    finally:
        Withdrawal.objects.filter(pk=withdrawal.pk).update(payout_leased_until=None)


def _attempt(
    withdrawal: Withdrawal, acquirer: Acquirer, action: str, call: Callable[[], T], *, probe: bool = False
) -> tuple[T | None, str]:
    """One call, recorded before and after, its outcome fed to the acquirer's
    circuit breaker (``probe``: this call is the half-open probe)."""
    deadline = acquirer.deadline_seconds
    # Written before the call: if this worker dies mid-send, the next run sees
    # that this acquirer may hold the payout and asks it first.
    attempt = PayoutAttempt.objects.create(
        withdrawal=withdrawal, acquirer=acquirer, action=action, outcome="in_progress", latency_ms=0
    )
    started = time.monotonic()
    result: T | None = None
    error: BaseException | None = None
    try:
        result = call_with_deadline(call, deadline)
    except Exception as exc:  # noqa: BLE001 - every failure is classified and recorded
        error = exc
    if error is None:
        assert isinstance(result, PayoutResult)
        outcome = result.status.value
    elif isinstance(error, AcquirerDeclined):
        outcome = "declined"
    elif isinstance(error, AcquirerTimeout):
        outcome = "timeout"
    elif isinstance(error, AdapterError):
        outcome = "unavailable"
    else:
        logger.exception("payout adapter %s failed", acquirer.key, exc_info=error)
        outcome = "error"
    elapsed = time.monotonic() - started
    metrics.ACQUIRER_ATTEMPT_LATENCY.labels(acquirer.key, f"payout_{action}", outcome).observe(elapsed)
    health.record(acquirer, outcome=outcome, latency_ms=int(elapsed * 1000), decisive=probe)
    PayoutAttempt.objects.filter(pk=attempt.pk).update(
        outcome=outcome,
        error_class=type(error).__name__ if error else "",
        error_message=str(error)[:500] if error else "",
        latency_ms=int(elapsed * 1000),
    )
    Withdrawal.objects.filter(pk=withdrawal.pk).update(updated_at=timezone.now())
    return result, outcome


def _pay_out(withdrawal: Withdrawal) -> str:
    request = PayoutRequest(
        withdrawal_id=withdrawal.pk,
        idempotency_id=withdrawal.idempotency_id,
        amount=withdrawal.liquid_amount,
        key_type=withdrawal.pix_key_type,
        key_value=withdrawal.pix_key,
    )
    history = list(
        PayoutAttempt.objects.filter(withdrawal=withdrawal)
        .order_by("id")
        .values_list("acquirer_id", "action", "outcome")
    )
    # Acquirers that refused, failed, or never received it: we moved past
    # them for good, so they are never asked to pay again.
    done_with = {a for a, _, outcome in history if outcome in FINISHED_ELSEWHERE}
    contacted = [a for a, action, _ in history if action == PayoutAttempt.Action.SEND and a not in done_with]

    # First every acquirer that may hold the payout, whether or not it is
    # still in the chain (disabled, reordered, removed): a payout is never
    # sent elsewhere while one of them could still be paying it. Nor does an
    # open circuit breaker spare one of them the question: only its answer
    # lets the payout move on.
    for acquirer in Acquirer.objects.filter(pk__in=set(contacted)):
        answer, outcome = _attempt(withdrawal, acquirer, PayoutAttempt.Action.STATUS, _asker(acquirer, request))
        if outcome in FINISHED_ELSEWHERE:
            done_with.add(acquirer.pk)
            continue
        if answer is None:
            raise _undetermined(acquirer, outcome)
        return _settle(withdrawal, acquirer, answer)

    waiting_for: list[health.Gate] = []
    for acquirer in payout_chain(withdrawal.account, withdrawal.liquid_amount):
        if acquirer.pk in done_with:
            continue
        gate = health.admit(acquirer)
        if not gate.allowed:
            # Open circuit: not sent now, but not done with either. Nothing is
            # written to the attempts: a send row would read as "may hold it".
            health.skipped(acquirer, "payout", gate)
            waiting_for.append(gate)
            continue
        adapter = adapters.build(acquirer)

        def send(a: AcquirerAdapter = adapter) -> PayoutResult:
            return a.create_payout(request)

        Withdrawal.objects.filter(pk=withdrawal.pk).update(acquirer=acquirer)
        answer, outcome = _attempt(withdrawal, acquirer, PayoutAttempt.Action.SEND, send, probe=gate.probe)
        if answer is None and outcome not in FINISHED_ELSEWHERE:
            # Timeout or unclear answer: the acquirer may have it. Ask first.
            answer, outcome = _attempt(withdrawal, acquirer, PayoutAttempt.Action.STATUS, _asker(acquirer, request))
        if outcome in FINISHED_ELSEWHERE:
            done_with.add(acquirer.pk)
            metrics.ACQUIRER_FALLBACKS.labels(acquirer.key, "payout").inc()
            continue
        if answer is None:
            raise _undetermined(acquirer, outcome)
        return _settle(withdrawal, acquirer, answer)

    if waiting_for:
        # Nobody waits on a payout: rather than fail it while an acquirer of
        # its chain is cooling down, try again when the first cool-down ends
        # (beat's poll of approved withdrawals is the safety net).
        retry_in = max(1.0, min(gate.retry_at for gate in waiting_for) - health.clock())
        _enqueue_processing(withdrawal.pk, countdown=retry_in)
        metrics.PAYOUTS.labels("none", "deferred").inc()
        return "deferred"

    withdrawal_transition(
        withdrawal_id=withdrawal.pk,
        to_status=S.FAILED,
        source=WithdrawalTransition.Source.SYSTEM,
        reason="no acquirer could pay out",
    )
    metrics.PAYOUTS.labels("none", S.FAILED).inc()
    return S.FAILED


def _undetermined(acquirer: Acquirer, outcome: str) -> PayoutUndetermined:
    metrics.PAYOUTS.labels(acquirer.key, "undetermined").inc()
    return PayoutUndetermined(f"{acquirer.key}: payout status unknown ({outcome})")


def _asker(acquirer: Acquirer, request: PayoutRequest) -> Callable[[], PayoutResult]:
    adapter = adapters.build(acquirer)
    return lambda: adapter.get_payout_status(request.idempotency_id)


def _settle(withdrawal: Withdrawal, acquirer: Acquirer, result: PayoutResult) -> str:
    Withdrawal.objects.filter(pk=withdrawal.pk).update(
        acquirer=acquirer, provider_payout_id=result.provider_payout_id[:100]
    )
    if result.status is PayoutStatus.PAID:
        withdrawal_transition(
            withdrawal_id=withdrawal.pk,
            to_status=S.PAID,
            source=WithdrawalTransition.Source.ACQUIRER,
            e2e_id=result.e2e_id,
            paid_at=result.paid_at,
        )
        metrics.PAYOUTS.labels(acquirer.key, S.PAID).inc()
        return S.PAID
    metrics.PAYOUTS.labels(acquirer.key, "processing").inc()
    return "processing"  # confirmed later by a notification or by the poller


def payouts_poll(*, older_than: dt.timedelta = dt.timedelta(minutes=2), limit: int = 200) -> int:
    """Beat: withdrawals left approved (worker died, acquirer still
    processing, broker down) get processed again; pending ones of accounts
    without manual approval too."""
    now = timezone.now()
    cutoff = now - older_than
    stuck = (
        Withdrawal.objects.filter(updated_at__lt=cutoff)
        .filter(Q(status=S.APPROVED) | Q(status=S.PENDING, account__withdrawals_need_approval=False))
        .filter(Q(payout_leased_until__isnull=True) | Q(payout_leased_until__lt=now))
    )
    ids = list(stuck.order_by("updated_at").values_list("pk", flat=True)[:limit])
    for withdrawal_id in ids:
        _enqueue_processing(withdrawal_id)
    return len(ids)
