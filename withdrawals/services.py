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

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from accounts.fees import withdrawal_fee
from accounts.models import Account, LedgerEntry
from accounts.selectors import effective_minimum_withdrawal
from accounts.services import balance_lock, ledger_post
from acquirers import adapters, health
from acquirers.adapters.base import (
    AcquirerDeclined,
    AcquirerTimeout,
    AdapterError,
    PayoutRequest,
    PayoutResult,
    PayoutStatus,
)
from acquirers.chain import DeadlineExceeded, call_with_deadline
from acquirers.models import Acquirer
from acquirers.selectors import payout_chain
from core import metrics
from core.exceptions import BusinessRuleError, ValidationFailed
from core.money import brl as _brl
from webhooks.models import EventType
from webhooks.services import event_emit
from withdrawals import exceptions as err
from withdrawals.models import HoldReason, PayoutAttempt, Withdrawal, WithdrawalStatus, WithdrawalTransition
from withdrawals.payloads import withdrawal_payload
from withdrawals.selectors import withdrawn_today

logger = logging.getLogger(__name__)

S = WithdrawalStatus
K = LedgerEntry.Kind


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
    *,
    account: Account,
    amount: int,
    key_type: str,
    key_value: str,
    discount_fee: bool = True,
    in_transaction: Callable[[Withdrawal], None] | None = None,
) -> Withdrawal:
    """Accept a withdrawal: per-request limit, daily limit, balance (400s, in
    that order), then the row and its debit, all in one transaction under the
    account's balance lock, so no concurrency can overdraw or exceed a limit.
    ``key_value`` is already normalised for ``key_type``. ``in_transaction``
    runs with the new withdrawal before that transaction commits (the
    idempotency key's answer commits with the debit, or neither does)."""
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
        if in_transaction is not None:
            in_transaction(withdrawal)
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
                f"O saque não pode passar de {S(withdrawal.status).label} para {S(to_status).label}."
            )
        if key == (S.APPROVED, S.FAILED):
            _refuse_if_unsettled(withdrawal, lease_token)
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
        if to_status != S.APPROVED:
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
            data=withdrawal_payload(withdrawal),
        )
        if to_status == S.APPROVED:
            transaction.on_commit(functools.partial(_enqueue_processing, withdrawal.pk))
    return True


def _refuse_if_unsettled(withdrawal: Withdrawal, lease_token: str) -> None:
    """Money goes back only once no acquirer may still pay the withdrawal."""
    now = timezone.now()
    leased = withdrawal.payout_leased_until is not None and withdrawal.payout_leased_until > now
    if leased and withdrawal.payout_lease_token != lease_token:
        raise err.PayoutUnsettled(err.PAYOUT_IN_FLIGHT)
    if withdrawal.payout_unclear_since is not None:
        owner = withdrawal.payout_owner.key if withdrawal.payout_owner is not None else "?"
        raise err.PayoutUnsettled(err.PAYOUT_UNDETERMINED.format(acquirer=owner))
    if _sends_in_flight(withdrawal).exists():
        raise err.PayoutUnsettled(err.PAYOUT_IN_FLIGHT)


def withdrawal_approve(*, withdrawal_id: uuid.UUID | str, source: str, actor: str = "") -> bool:
    """Approve a pending withdrawal; the payout is sent after commit."""
    return withdrawal_transition(withdrawal_id=withdrawal_id, to_status=S.APPROVED, source=source, actor=actor)


# --------------------------------------------------------------------------- payout
#
# A payout belongs to the acquirer it was sent to (its "owner") until that
# acquirer answers definitively. Only a refusal of the send (nothing was or
# will be sent) or a "failed" status, given while no send of ours to it is
# still on its way, frees the chain to try the next acquirer. "Not found"
# after an unclear send is not an answer: the owner is asked again with
# backoff for the settle window, and sent the same payout again under the
# same idempotency id (acquirers deduplicate on it); past the window the
# payout waits for staff, its money still debited.

#: How long a run holds a payout; longer than a task may run (CELERY_TASK_TIME_LIMIT).
LEASE = dt.timedelta(minutes=5)
#: ``error_class`` of a send abandoned at our deadline (acquirers.chain).
ABANDONED = DeadlineExceeded.__name__
#: Outcomes of a call that returned an answer the engine can act on.
CLEAR = (PayoutStatus.PAID.value, PayoutStatus.PROCESSING.value)


class PayoutUndetermined(Exception):
    """An acquirer may have the payout and cannot tell us now: try again
    later, never elsewhere (a payout is never sent twice)."""


class _NotApproved(Exception):
    """The withdrawal left ``approved`` while this run was at it."""


def payout_settle_window() -> dt.timedelta:
    return dt.timedelta(minutes=settings.PAYOUT_SETTLE_WINDOW_MINUTES)


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
    token = uuid.uuid4().hex
    claimed = (
        Withdrawal.objects.filter(pk=withdrawal.pk, status=S.APPROVED)
        .filter(Q(payout_leased_until__isnull=True) | Q(payout_leased_until__lt=now))
        .update(payout_leased_until=now + LEASE, payout_lease_token=token, updated_at=now)
    )
    if not claimed:
        return "held"
    try:
        return _pay_out(withdrawal, token)
    except (err.WithdrawalTransitionNotAllowed, _NotApproved):
        # Staff or a notification moved it meanwhile; their change stands.
        return Withdrawal.objects.values_list("status", flat=True).get(pk=withdrawal.pk)
    finally:
        # Only this run's lease: a run that outlived it must not free another's.
        Withdrawal.objects.filter(pk=withdrawal.pk, payout_lease_token=token).update(
            payout_leased_until=None, payout_lease_token=""
        )


def _pay_out(withdrawal: Withdrawal, token: str) -> str:
    request = PayoutRequest(
        withdrawal_id=withdrawal.pk,
        idempotency_id=withdrawal.idempotency_id,
        amount=withdrawal.liquid_amount,
        key_type=withdrawal.pix_key_type,
        key_value=withdrawal.pix_key,
    )
    history = list(
        PayoutAttempt.objects.filter(withdrawal=withdrawal)
        .exclude(action=PayoutAttempt.Action.NOTICE)
        .order_by("id")
        .values_list("acquirer_id", "action", "released")
    )
    # Acquirers that refused or failed it for good: we moved past them, so
    # they are never asked to pay again.
    done_with = {a for a, _, released in history if released}
    contacted = list(dict.fromkeys(a for a, action, _ in history if action == PayoutAttempt.Action.SEND))
    contacted = [a for a in contacted if a not in done_with]

    # First every acquirer that may hold the payout, whether or not it is
    # still in the chain (disabled, reordered, removed): a payout is never
    # sent elsewhere while one of them could still be paying it. Nor does an
    # open circuit breaker spare one of them the question: only its answer
    # lets the payout move on.
    for acquirer in Acquirer.objects.filter(pk__in=contacted):
        settled = _ask_owner(withdrawal, acquirer, request, may_resend=True)
        if settled is not None:
            return settled
        done_with.add(acquirer.pk)
        metrics.ACQUIRER_FALLBACKS.labels(acquirer.key, "payout").inc()

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
        settled = _send(withdrawal, acquirer, request, probe=gate.probe)
        if settled is not None:
            return settled
        done_with.add(acquirer.pk)
        metrics.ACQUIRER_FALLBACKS.labels(acquirer.key, "payout").inc()

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
        lease_token=token,
    )
    metrics.PAYOUTS.labels("none", S.FAILED).inc()
    return S.FAILED


def _send(
    withdrawal: Withdrawal, acquirer: Acquirer, request: PayoutRequest, *, probe: bool, resend: bool = False
) -> str | None:
    """Send the payout to ``acquirer`` and settle with it. None: it refused
    for good (nothing was or will be sent), so the chain may move on.
    ``resend``: the same payout again after an unclear first send."""
    attempt = _begin_send(withdrawal, acquirer)
    if attempt is None:
        metrics.PAYOUTS.labels(acquirer.key, "on_hold").inc()
        return "on_hold"
    adapter = adapters.build(acquirer)
    answer, outcome = _attempt(
        attempt, acquirer, lambda: adapter.create_payout(request), probe=probe, on_late=_late_answer(attempt.pk)
    )
    if outcome == "declined":
        if resend:
            # A refusal of this second request says nothing of the first,
            # which the acquirer may still record and pay (a balance already
            # taken by it, a lookup that lags): it keeps the payout.
            return _undetermined(withdrawal, acquirer, outcome)
        _release(withdrawal, attempt)
        return None
    if answer is not None and answer.status is PayoutStatus.FAILED:
        # The call returned: nothing of this send is still on its way.
        _release(withdrawal, attempt)
        return None
    if answer is not None and outcome in CLEAR:
        return _settle(withdrawal, acquirer, answer)
    # Timeout or unclear answer: the acquirer may have it. Ask it, and only it.
    return _ask_owner(withdrawal, acquirer, request, may_resend=False)


def _ask_owner(withdrawal: Withdrawal, acquirer: Acquirer, request: PayoutRequest, *, may_resend: bool) -> str | None:
    """Ask the acquirer that may hold the payout where it stands and act on a
    definitive answer only. None: it failed the payout for good."""
    attempt = _new_attempt(withdrawal, acquirer, PayoutAttempt.Action.STATUS)
    adapter = adapters.build(acquirer)
    answer, outcome = _attempt(attempt, acquirer, lambda: adapter.get_payout_status(request.idempotency_id))
    if answer is not None and outcome in CLEAR:
        return _settle(withdrawal, acquirer, answer)
    in_flight = _sends_in_flight(withdrawal).filter(acquirer=acquirer).exists()
    if outcome == PayoutStatus.FAILED.value and not in_flight:
        _release(withdrawal, attempt)
        return None
    # "Failed" while a send of ours may still land there is not its last word.
    if (
        outcome == PayoutStatus.NOT_FOUND.value
        and may_resend
        and not in_flight
        and not _past_window(withdrawal, acquirer)
    ):
        # Nothing of ours on the way and it never got it: send it again, to
        # it alone and under the same idempotency id, so it pays once at most.
        return _send(withdrawal, acquirer, request, probe=False, resend=True)
    return _undetermined(withdrawal, acquirer, outcome)


def _begin_send(withdrawal: Withdrawal, acquirer: Acquirer) -> PayoutAttempt | None:
    """Right before a send, under the withdrawal's row lock: the account may
    still cash out (else the withdrawal is held and None returned), the
    acquirer becomes the payout's owner, and the send is on record before the
    call (if this worker dies mid-send, the next run asks this acquirer first)."""
    with transaction.atomic():
        locked = Withdrawal.objects.select_for_update().get(pk=withdrawal.pk)
        if locked.status != S.APPROVED:
            raise _NotApproved()
        account = Account.objects.only("status", "is_blocked").get(pk=locked.account_id)
        hold = _hold_reason(account)
        now = timezone.now()
        if hold:
            if locked.hold_reason != hold:
                locked.hold_reason, locked.held_since = hold, now
                locked.save(update_fields=["hold_reason", "held_since", "updated_at"])
                logger.warning("withdrawal %s held: %s", locked.pk, hold)
            return None
        if locked.payout_owner_id != acquirer.pk:
            locked.payout_owner, locked.payout_owner_since = acquirer, now
        locked.acquirer = acquirer
        locked.hold_reason, locked.held_since = "", None
        locked.save(
            update_fields=["acquirer", "payout_owner", "payout_owner_since", "hold_reason", "held_since", "updated_at"]
        )
        return _new_attempt(locked, acquirer, PayoutAttempt.Action.SEND)


def _hold_reason(account: Account) -> str:
    if account.is_blocked:
        return HoldReason.ACCOUNT_BLOCKED
    if not account.is_approved:
        return HoldReason.ACCOUNT_NOT_APPROVED
    return ""


def _new_attempt(withdrawal: Withdrawal, acquirer: Acquirer, action: str) -> PayoutAttempt:
    return PayoutAttempt.objects.create(
        withdrawal=withdrawal, acquirer=acquirer, action=action, outcome="in_progress", latency_ms=0
    )


def _attempt(
    attempt: PayoutAttempt,
    acquirer: Acquirer,
    call: Callable[[], PayoutResult],
    *,
    probe: bool = False,
    on_late: Callable[[PayoutResult | None, BaseException | None], None] | None = None,
) -> tuple[PayoutResult | None, str]:
    """One call, its outcome recorded on ``attempt`` and fed to the acquirer's
    circuit breaker (``probe``: this call is the half-open probe)."""
    started = time.monotonic()
    result: PayoutResult | None = None
    error: BaseException | None = None
    try:
        result = call_with_deadline(call, acquirer.deadline_seconds, on_late=on_late)
    except Exception as exc:  # noqa: BLE001 - every failure is classified and recorded
        error = exc
    outcome = _classify(acquirer, result, error)
    elapsed = time.monotonic() - started
    metrics.ACQUIRER_ATTEMPT_LATENCY.labels(acquirer.key, f"payout_{attempt.action}", outcome).observe(elapsed)
    health.record(acquirer, outcome=outcome, latency_ms=int(elapsed * 1000), decisive=probe)
    PayoutAttempt.objects.filter(pk=attempt.pk).update(
        outcome=outcome,
        error_class=type(error).__name__ if error else "",
        error_message=str(error)[:500] if error else "",
        latency_ms=int(elapsed * 1000),
    )
    Withdrawal.objects.filter(pk=attempt.withdrawal_id).update(updated_at=timezone.now())
    return result, outcome


def _classify(acquirer: Acquirer, result: PayoutResult | None, error: BaseException | None) -> str:
    if error is None:
        assert isinstance(result, PayoutResult)
        return result.status.value
    if isinstance(error, AcquirerDeclined):
        return "declined"
    if isinstance(error, AcquirerTimeout):
        return "timeout"
    if isinstance(error, AdapterError):
        return "unavailable"
    logger.error("payout adapter %s failed", acquirer.key, exc_info=error)
    return "error"


def _late_answer(attempt_id: int) -> Callable[[PayoutResult | None, BaseException | None], None]:
    """Evidence from a send abandoned at its deadline: what it finally
    returned or raised, written on its attempt from the call's own thread."""

    def record(result: PayoutResult | None, error: BaseException | None) -> None:
        try:
            attempt = PayoutAttempt.objects.select_related("acquirer").get(pk=attempt_id)
            outcome = _classify(attempt.acquirer, result, error)
            if error is not None:
                detail = f"{type(error).__name__}: {error}"
            else:
                assert result is not None
                detail = " ".join(
                    f"{name}={value}"
                    for name, value in (
                        ("provider_payout_id", result.provider_payout_id),
                        ("e2e_id", result.e2e_id),
                        ("reason", result.reason),
                    )
                    if value
                )
            PayoutAttempt.objects.filter(pk=attempt_id).update(
                late_outcome=outcome, late_detail=detail[:500], late_at=timezone.now()
            )
            logger.warning("payout attempt %s answered after its deadline: %s %s", attempt_id, outcome, detail)
        except PayoutAttempt.DoesNotExist:
            logger.warning("payout attempt %s answered after its deadline, but it is gone", attempt_id)
        finally:
            # A thread of the shared pool: its connection must not outlive this call.
            connection.close()

    return record


def _sends_in_flight(withdrawal: Withdrawal) -> QuerySet[PayoutAttempt]:
    """Sends that timed out and may still land: any for the lease after it
    was made; one abandoned at our deadline (its call still running in its
    thread, no late answer yet) for as long as the settle window, since
    nothing bounds how long a peer may drip-feed it. A worker that died took
    its calls with it: such a send waits out the window, then staff's queue."""
    now = timezone.now()
    return PayoutAttempt.objects.filter(
        withdrawal_id=withdrawal.pk,
        action=PayoutAttempt.Action.SEND,
        outcome="timeout",
        late_at__isnull=True,
    ).filter(
        Q(created_at__gt=now - LEASE)
        | Q(error_class=ABANDONED, created_at__gt=now - max(LEASE, payout_settle_window()))
    )


def _release(withdrawal: Withdrawal, attempt: PayoutAttempt) -> None:
    """The acquirer refused or failed the payout for good: it owns it no more."""
    PayoutAttempt.objects.filter(pk=attempt.pk).update(released=True)
    Withdrawal.objects.filter(pk=withdrawal.pk).update(
        payout_owner=None, payout_owner_since=None, payout_unclear_since=None
    )


def _past_window(withdrawal: Withdrawal, acquirer: Acquirer) -> bool:
    since = Withdrawal.objects.values_list("payout_unclear_since", flat=True).get(pk=withdrawal.pk)
    return since is not None and timezone.now() - since > payout_settle_window()


def _undetermined(withdrawal: Withdrawal, acquirer: Acquirer, outcome: str) -> str:
    """No definitive answer from the owner: within the settle window the
    task asks again later (PayoutUndetermined); past it the payout waits in
    staff's queue, its money still debited."""
    now = timezone.now()
    Withdrawal.objects.filter(pk=withdrawal.pk, payout_unclear_since__isnull=True).update(payout_unclear_since=now)
    Withdrawal.objects.filter(pk=withdrawal.pk, payout_owner__isnull=True).update(
        payout_owner=acquirer, payout_owner_since=now
    )
    metrics.PAYOUTS.labels(acquirer.key, "undetermined").inc()
    if _past_window(withdrawal, acquirer):
        logger.warning(
            "payout of withdrawal %s undetermined at %s past the settle window (%s): staff's queue",
            withdrawal.pk,
            acquirer.key,
            outcome,
        )
        return "undetermined"
    raise PayoutUndetermined(f"{acquirer.key}: payout status unknown ({outcome})")


def _settle(withdrawal: Withdrawal, acquirer: Acquirer, result: PayoutResult) -> str:
    Withdrawal.objects.filter(pk=withdrawal.pk).update(
        acquirer=acquirer,
        provider_payout_id=result.provider_payout_id[:100],
        payout_owner=acquirer,
        payout_unclear_since=None,
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


def withdrawal_payout_failure_report(
    *, withdrawal_id: uuid.UUID | str, acquirer: Acquirer | None, source: str, reason: str
) -> bool:
    """An acquirer says the payout failed. Applied (failed, money back) when
    nothing may still pay it; otherwise (a send in flight, an owner that has
    not settled it) kept as evidence on the payout's attempts, and the payout
    engine settles with the owner. True when the withdrawal changed."""
    try:
        return withdrawal_transition(withdrawal_id=withdrawal_id, to_status=S.FAILED, source=source, reason=reason)
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


def withdrawal_payout_ask(*, withdrawal_id: uuid.UUID | str) -> str:
    """Staff's "ask the acquirer again": one run of the payout engine, which
    asks the acquirer that may hold the payout first and moves money only on
    its definitive answer, as any run does."""
    try:
        return withdrawal_process(withdrawal_id=withdrawal_id)
    except PayoutUndetermined:
        return "undetermined"


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
    if to_status not in (S.PAID, S.FAILED) or (to_status == S.PAID and not e2e_id):
        raise ValidationFailed({"to_status": [err.RESOLVE_OUTCOME]})
    with transaction.atomic():
        withdrawal = Withdrawal.objects.select_for_update().get(pk=withdrawal_id)
        if withdrawal.status != S.APPROVED or withdrawal.payout_unclear_since is None:
            raise err.WithdrawalTransitionNotAllowed(err.RESOLVE_NOT_UNDETERMINED)
        now = timezone.now()
        leased = withdrawal.payout_leased_until is not None and withdrawal.payout_leased_until > now
        if leased or _sends_in_flight(withdrawal).exists():
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
                released=to_status == S.FAILED,
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


def withdrawals_resume_held(account_id: uuid.UUID | str) -> int:
    """The account may cash out again: its held withdrawals are processed now."""
    ids = list(
        Withdrawal.objects.filter(account_id=account_id, status=S.APPROVED)
        .exclude(hold_reason="")
        .values_list("pk", flat=True)
    )
    for withdrawal_id in ids:
        _enqueue_processing(withdrawal_id)
    return len(ids)


def payouts_poll(*, older_than: dt.timedelta = dt.timedelta(minutes=2), limit: int = 200) -> int:
    """Beat: withdrawals left approved (worker died, acquirer still
    processing, broker down) get processed again; pending ones of accounts
    without manual approval too. Held ones wait until their account may cash
    out again; undetermined ones past the settle window are only asked about."""
    now = timezone.now()
    cutoff = now - older_than
    stuck = (
        Withdrawal.objects.filter(updated_at__lt=cutoff)
        .filter(Q(status=S.APPROVED) | Q(status=S.PENDING, account__withdrawals_need_approval=False))
        .filter(Q(payout_leased_until__isnull=True) | Q(payout_leased_until__lt=now))
        .filter(Q(hold_reason="") | Q(account__is_blocked=False, account__status=Account.Status.APPROVED))
    )
    ids = list(stuck.order_by("updated_at").values_list("pk", flat=True)[:limit])
    for withdrawal_id in ids:
        _enqueue_processing(withdrawal_id)
    return len(ids)
