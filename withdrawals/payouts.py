"""The payout engine: sends an approved withdrawal's payout to the acquirers
of its chain, one guarded call at a time (:mod:`acquirers.calls`), and
settles it on their definitive answer.

A payout belongs to the acquirer it was sent to (its "owner") until that
acquirer answers definitively. Only a refusal of the send (nothing was or
will be sent) or a "failed" status, given while no send of ours to it is
still on its way, frees the chain to try the next acquirer; not for a payout
under the payee check, which then fails, money back (the refusal may be the
acquirer's own owner check: withdrawals.payees.payee_send_refused). "Not found"
after an unclear send is not an answer: the owner is asked again with
backoff for the settle window, and sent the same payout again under the
same idempotency id (acquirers deduplicate on it); past the window the
payout waits for staff, its money still debited.

Transitions, the refusal to return money while a payout may still land, and
the poll that hands stuck withdrawals back to this engine are
:mod:`withdrawals.services`' (called through the module, so that a test
replacing one of its functions replaces it here too).
"""

from __future__ import annotations

import enum
import logging
import uuid
from collections.abc import Callable, Collection
from typing import TypeAlias

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from accounts.models import Account
from acquirers import breaker, calls, capacity
from acquirers.adapters.base import AcquirerAdapter, PayoutRequest, PayoutResult, PayoutStatus
from acquirers.calls import Outcome
from acquirers.models import Acquirer
from acquirers.selectors import payout_chain
from core import metrics
from withdrawals import exceptions as err
from withdrawals import payee_rules, payees, services
from withdrawals.exceptions import PayoutUndetermined
from withdrawals.limits import waits_for_its_day
from withdrawals.models import HoldReason, PayoutAttempt, Withdrawal, WithdrawalStatus, WithdrawalTransition
from withdrawals.runs import IN_PROGRESS, calls_interrupted
from withdrawals.selectors import payout_hold_reason
from withdrawals.services import LEASE, payout_sends_in_flight, payout_settle_window

logger = logging.getLogger(__name__)


#: Answers of a call the engine can settle on.
CLEAR = (PayoutStatus.PAID.value, PayoutStatus.PROCESSING.value)


class ProcessOutcome(enum.StrEnum):
    """What a run of :func:`withdrawal_process` came to, when not the withdrawal's status."""

    AWAITING_APPROVAL = "awaiting_approval"  # pending: staff approve it
    HELD = "held"  # another run holds the payout's lease
    ON_HOLD = "on_hold"  # not sent for now: its account may not cash out, or its runs kept dying (hold_reason)
    DEFERRED = "deferred"  # acquirers left cooling down or busy: tried again after
    PROCESSING = "processing"  # accepted; paid later (a notification, the poller)
    UNDETERMINED = "undetermined"  # no definitive answer past the settle window: staff's queue
    SCHEDULED = "scheduled"  # scheduled for a later day: beat sends it on that day (withdrawals.schedule)


#: What :func:`withdrawal_process` returns: the withdrawal's status, or one of the words above.
Processed: TypeAlias = WithdrawalStatus | ProcessOutcome


class _NotApproved(Exception):
    """The withdrawal left ``approved`` while this run was at it."""


def _status_of(withdrawal: Withdrawal) -> WithdrawalStatus:
    return WithdrawalStatus(Withdrawal.objects.values_list("status", flat=True).get(pk=withdrawal.pk))


def withdrawal_process(
    *, withdrawal_id: uuid.UUID | str, lease_token: str = "", take_over: str | Collection[str] = ""
) -> Processed:
    """Move a withdrawal forward: auto-approve when the account allows it,
    then pay out through the chain. Idempotent and safe to run twice.
    ``lease_token`` (32 chars): this run's own. ``take_over``: the tokens
    of runs known to be dead (the caller's own attempt that lost its
    database connection, a run whose process died), whose lease this run may
    take while one of them still holds it."""
    dead = [take_over] if isinstance(take_over, str) else list(take_over)
    dead = [token for token in dead if token]
    withdrawal = Withdrawal.objects.select_related("account").get(pk=withdrawal_id)
    if withdrawal.status in (WithdrawalStatus.PENDING, WithdrawalStatus.APPROVED) and waits_for_its_day(withdrawal):
        return ProcessOutcome.SCHEDULED  # not approved automatically nor sent before its day
    if withdrawal.status == WithdrawalStatus.PENDING:
        if withdrawal.account.withdrawals_need_approval:
            return ProcessOutcome.AWAITING_APPROVAL
        # Approval enqueues processing again on commit; that run pays out.
        try:
            services.withdrawal_approve(withdrawal_id=withdrawal.pk, source=WithdrawalTransition.Source.SYSTEM)
        except err.WithdrawalTransitionNotAllowed:
            # "pending" was read without the lock: staff canceled it, or another
            # run approved and paid it, meanwhile. Their change stands.
            return _status_of(withdrawal)
        return WithdrawalStatus.APPROVED
    if withdrawal.status != WithdrawalStatus.APPROVED:
        return WithdrawalStatus(withdrawal.status)
    if withdrawal.hold_reason == HoldReason.PAYOUT_INTERRUPTED:
        return ProcessOutcome.ON_HOLD  # until staff resume it (withdrawals.runs)

    now = timezone.now()
    token = lease_token or uuid.uuid4().hex
    free = Q(payout_leased_until__isnull=True) | Q(payout_leased_until__lt=now)
    claimed = (
        Withdrawal.objects.filter(pk=withdrawal.pk, status=WithdrawalStatus.APPROVED)
        .filter(free | Q(payout_lease_token__in=dead) if dead else free)
        .update(payout_leased_until=now + LEASE, payout_lease_token=token, updated_at=now)
    )
    if not claimed:
        return ProcessOutcome.HELD
    try:
        return _pay_out(withdrawal, token)
    except (err.WithdrawalTransitionNotAllowed, _NotApproved):
        # Staff or a notification moved it meanwhile; their change stands.
        return _status_of(withdrawal)
    except capacity.AcquirerBusy:
        # Not called: only that acquirer may settle the payout. Soon, never elsewhere, nothing failed.
        services.withdrawal_process_later(withdrawal_id=withdrawal.pk, retry_in=capacity.BUSY_RETRY_SECONDS)
        return ProcessOutcome.DEFERRED
    finally:
        # Only this run's lease: a run that outlived it must not free another's.
        Withdrawal.objects.filter(pk=withdrawal.pk, payout_lease_token=token).update(
            payout_leased_until=None, payout_lease_token=""
        )


def _pay_out(withdrawal: Withdrawal, token: str) -> Processed:
    # The document the key must belong to, if any: Efí, say, checks it again on the send.
    expected = payee_rules.expected_document(account=withdrawal.account, payee_document=withdrawal.payee_document)
    request = PayoutRequest(
        withdrawal_id=withdrawal.pk,
        idempotency_id=withdrawal.idempotency_id,
        amount=withdrawal.liquid_amount,
        key_type=withdrawal.pix_key_type,
        key_value=withdrawal.pix_key,
        payee_document=expected,
    )
    rows = list(
        PayoutAttempt.objects.filter(withdrawal=withdrawal)
        .exclude(action=PayoutAttempt.Action.NOTICE)
        # A send found its acquirer busy between admission and the call: it
        # was never made, so that acquirer holds nothing of it.
        .exclude(action=PayoutAttempt.Action.SEND, outcome=Outcome.BUSY)
        .order_by("id")
        .values_list("pk", "acquirer_id", "action", "released", "outcome")
    )
    # This run holds the lease and has called nobody yet: a call still "in
    # progress" is a dead run's (its process or its connection died).
    calls_interrupted([pk for pk, _, _, _, outcome in rows if outcome == IN_PROGRESS])
    history = [(acquirer_id, action, released) for _, acquirer_id, action, released, _ in rows]
    # Acquirers that refused or failed it for good: never asked to pay again.
    done_with = {a for a, _, released in history if released}
    contacted = list(dict.fromkeys(a for a, action, _ in history if action == PayoutAttempt.Action.SEND))
    contacted = [a for a in contacted if a not in done_with]
    if not any(action == PayoutAttempt.Action.SEND for _, action, _ in history):
        # The payee check (withdrawals.payees), before the first send only: a
        # payout an acquirer may hold is never decided again.
        decision = payees.payee_verdict(withdrawal, expected=expected, lease_token=token)
        if decision is not payees.Decision.SEND:
            return ProcessOutcome.DEFERRED if decision is payees.Decision.DEFERRED else WithdrawalStatus.FAILED

    # First every acquirer that may hold the payout, in the chain or not: a payout is never sent
    # elsewhere while one of them could still be paying it. Nor does an open circuit breaker
    # spare one of them the question: only its answer lets the payout move on.
    for acquirer in Acquirer.objects.filter(pk__in=contacted):
        settled = _ask_owner(withdrawal, acquirer, request, may_resend=True)
        if settled is not None:
            return settled
        done_with.add(acquirer.pk)
        metrics.ACQUIRER_FALLBACKS.labels(acquirer.key, "payout").inc()
    if request.payee_document and done_with:  # a checked payout refused once goes nowhere else (payees)
        return payees.payee_send_refused(withdrawal, lease_token=token)

    waiting_for: list[breaker.Gate] = []
    for acquirer in payout_chain(withdrawal.account, withdrawal.liquid_amount):
        if acquirer.pk in done_with:
            continue
        gate = calls.admit(acquirer, "payout")
        if not gate.allowed:
            # Open circuit or busy: not sent now, not done with; no attempt row ("may hold it").
            waiting_for.append(gate)
            continue
        settled = _send(withdrawal, acquirer, request, probe=gate.probe)
        if settled is not None:
            return settled
        if request.payee_document:  # its refusal may be the owner check (decisions §13): no fallback
            return payees.payee_send_refused(withdrawal, lease_token=token)
        done_with.add(acquirer.pk)
        metrics.ACQUIRER_FALLBACKS.labels(acquirer.key, "payout").inc()

    if waiting_for:
        # Rather than fail it while an acquirer of its chain is cooling down
        # (or busy), try again when the first cool-down ends (or in a few seconds).
        retry_in = min(gate.retry_at for gate in waiting_for) - breaker.clock()
        services.withdrawal_process_later(withdrawal_id=withdrawal.pk, retry_in=retry_in)
        return ProcessOutcome.DEFERRED

    services.withdrawal_transition(
        withdrawal_id=withdrawal.pk,
        to_status=WithdrawalStatus.FAILED,
        source=WithdrawalTransition.Source.SYSTEM,
        reason="no acquirer could pay out",
        lease_token=token,
    )
    metrics.PAYOUTS.labels("none", WithdrawalStatus.FAILED).inc()
    return WithdrawalStatus.FAILED


def _send(
    withdrawal: Withdrawal, acquirer: Acquirer, request: PayoutRequest, *, probe: bool, resend: bool = False
) -> Processed | None:
    """Send the payout to ``acquirer`` and settle with it. None: it refused
    for good (nothing was or will be sent), so the chain may move on.
    ``resend``: the same payout again after an unclear first send."""
    attempt = _begin_send(withdrawal, acquirer)
    if attempt is None:
        metrics.PAYOUTS.labels(acquirer.key, ProcessOutcome.ON_HOLD).inc()
        return ProcessOutcome.ON_HOLD
    # Past its deadline the send's connection is closed: a timeout, unclear
    # (the acquirer may have it), and no answer of it arrives later.
    answer, outcome = _attempt(attempt, acquirer, lambda adapter: adapter.create_payout(request), probe=probe)
    if outcome == Outcome.DECLINED:
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


def _ask_owner(
    withdrawal: Withdrawal, acquirer: Acquirer, request: PayoutRequest, *, may_resend: bool
) -> Processed | None:
    """Ask the acquirer that may hold the payout where it stands and act on a
    definitive answer only. None: it failed the payout for good."""
    attempt = _new_attempt(withdrawal, acquirer, PayoutAttempt.Action.STATUS)
    answer, outcome = _attempt(attempt, acquirer, lambda adapter: adapter.get_payout_status(request.idempotency_id))
    if answer is not None and outcome in CLEAR:
        return _settle(withdrawal, acquirer, answer)
    in_flight = payout_sends_in_flight(withdrawal).filter(acquirer=acquirer).exists()
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
        if locked.status != WithdrawalStatus.APPROVED:
            raise _NotApproved()
        if locked.hold_reason == HoldReason.PAYOUT_INTERRUPTED:
            return None  # held for staff meanwhile (a run that outlived its lease)
        account = Account.objects.only("status", "is_blocked").get(pk=locked.account_id)
        hold = payout_hold_reason(account)
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


def _new_attempt(withdrawal: Withdrawal, acquirer: Acquirer, action: str) -> PayoutAttempt:
    return PayoutAttempt.objects.create(
        withdrawal=withdrawal, acquirer=acquirer, action=action, outcome=IN_PROGRESS, latency_ms=0
    )


def _attempt(
    attempt: PayoutAttempt,
    acquirer: Acquirer,
    func: Callable[[AcquirerAdapter], PayoutResult],
    *,
    probe: bool = False,
) -> tuple[PayoutResult | None, str]:
    """One guarded call, recorded on ``attempt``: a failure as its outcome, an
    answer as the payout's status there (``probe``: this call is the
    breaker's half-open probe)."""
    done = calls.call(
        acquirer,
        f"payout_{attempt.action}",
        func,
        probe=probe,
        label=lambda result: result.status.value,
    )
    PayoutAttempt.objects.filter(pk=attempt.pk).update(
        outcome=done.label, error_class=done.error_class, error_message=done.error_message, latency_ms=done.latency_ms
    )
    Withdrawal.objects.filter(pk=attempt.withdrawal_id).update(updated_at=timezone.now())
    if isinstance(done.error, capacity.AcquirerBusy):  # not called: the run stops here, for later
        raise done.error
    return done.result, done.label


def _release(withdrawal: Withdrawal, attempt: PayoutAttempt) -> None:
    """The acquirer refused or failed the payout for good: it owns it no more."""
    PayoutAttempt.objects.filter(pk=attempt.pk).update(released=True)
    Withdrawal.objects.filter(pk=withdrawal.pk).update(
        payout_owner=None, payout_owner_since=None, payout_unclear_since=None
    )


def _past_window(withdrawal: Withdrawal, acquirer: Acquirer) -> bool:
    since = Withdrawal.objects.values_list("payout_unclear_since", flat=True).get(pk=withdrawal.pk)
    return since is not None and timezone.now() - since > payout_settle_window()


def _undetermined(withdrawal: Withdrawal, acquirer: Acquirer, outcome: str) -> Processed:
    """No definitive answer from the owner: within the settle window the
    task asks again later (PayoutUndetermined); past it the payout waits in
    staff's queue, its money still debited."""
    now = timezone.now()
    Withdrawal.objects.filter(pk=withdrawal.pk, payout_unclear_since__isnull=True).update(payout_unclear_since=now)
    Withdrawal.objects.filter(pk=withdrawal.pk, payout_owner__isnull=True).update(
        payout_owner=acquirer, payout_owner_since=now
    )
    metrics.PAYOUTS.labels(acquirer.key, ProcessOutcome.UNDETERMINED).inc()
    if _past_window(withdrawal, acquirer):
        logger.warning(
            "payout of withdrawal %s undetermined at %s past the settle window (%s): staff's queue",
            withdrawal.pk,
            acquirer.key,
            outcome,
        )
        return ProcessOutcome.UNDETERMINED
    raise PayoutUndetermined(f"{acquirer.key}: payout status unknown ({outcome})")


def _settle(withdrawal: Withdrawal, acquirer: Acquirer, result: PayoutResult) -> Processed:
    Withdrawal.objects.filter(pk=withdrawal.pk).update(
        acquirer=acquirer,
        provider_payout_id=result.provider_payout_id[:100],
        payout_owner=acquirer,
        payout_unclear_since=None,
    )
    if result.status is PayoutStatus.PAID:
        services.withdrawal_transition(
            withdrawal_id=withdrawal.pk,
            to_status=WithdrawalStatus.PAID,
            source=WithdrawalTransition.Source.ACQUIRER,
            e2e_id=result.e2e_id,
            paid_at=result.paid_at,
        )
        metrics.PAYOUTS.labels(acquirer.key, WithdrawalStatus.PAID).inc()
        return WithdrawalStatus.PAID
    metrics.PAYOUTS.labels(acquirer.key, ProcessOutcome.PROCESSING).inc()
    return ProcessOutcome.PROCESSING  # confirmed later by a notification or by the poller


def withdrawal_payout_ask(*, withdrawal_id: uuid.UUID | str) -> Processed:
    """Staff's "ask the acquirer again": one run of the payout engine, which
    asks the acquirer that may hold the payout first and moves money only on
    its definitive answer, as any run does."""
    try:
        return withdrawal_process(withdrawal_id=withdrawal_id)
    except PayoutUndetermined:
        return ProcessOutcome.UNDETERMINED
