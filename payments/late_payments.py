"""A Pix received for a charge that is cancelled (or failed) here.

The contract refuses ``canceled → paid`` (decisions §4: any transition not in
its table is refused), so such a Pix cannot pay the charge. It is never
refused silently either: whichever way it is seen (the acquirer's
notification, a status poll, the cancel finding the charge paid there, the
daily reconciliation), it is recorded once per end-to-end id as a
:class:`~payments.models.LatePayment`, with its evidence, and waits for staff.
Staff resolve it by maker-checker (``payments.approvals``), one way only
(a database constraint on :class:`~payments.models.LatePaymentResolution`):

- credit the account: the Pix net of the account's cash-in fee, a
  ``late_payment_credit`` ledger entry that the statement shows under the
  charge; the charge stays ``canceled`` (no status change, so no webhook: the
  spec's webhooks are status changes);
- return it to the payer: a devolução through the acquirer's refund, the one
  guarded call, asked after the approval commits and again until the
  acquirer answers for certain (an id of its own per return: asking again is
  the same devolução, never a second one). A return the acquirer says it did
  not make leaves the late payment waiting for a decision again; a refusal
  that follows an ask left unanswered is not such a word until the acquirer
  confirms it (:func:`late_payment_return_pursue`).

A Pix the acquirer says went back to its payer by other means (a devolução
made there, MED) is never credited: :mod:`payments.late_evidence`.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
from collections.abc import Mapping
from typing import Any

from django.core.cache import cache
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from accounts.fees import cashin_fee
from accounts.models import Account, LedgerEntry
from accounts.services import ledger_post
from acquirers import calls
from acquirers.adapters.base import RefundRequest
from core.dispatch import enqueue
from core.exceptions import PixServiceError
from payments.devolucao_answers import Seen, Verdict, devolucao_judge, unclear_at_after
from payments.late_evidence import late_credit_refusal
from payments.models import Charge, ChargeStatus, LatePayment, LatePaymentResolution

logger = logging.getLogger(__name__)

#: A Pix for a charge in one of these is a late payment (it cannot pay the charge).
LATE_FROM = frozenset({ChargeStatus.CANCELED, ChargeStatus.FAILED})
#: How the ledger names a late payment's credit: ``late_payment:<LatePayment id>``.
REFERENCE_PREFIX = "late_payment:"
#: How often beat's sweep hands one return left processing to a worker again.
SWEEP_EVERY = dt.timedelta(minutes=5)


class LatePaymentNotOpen(PixServiceError):
    """The late payment was resolved already (or is being returned)."""

    default_message = "Este pagamento já foi resolvido."


class LatePaymentReturnedThere(PixServiceError):
    """The acquirer says the Pix (or part of it) went back to the payer: it cannot be credited."""


# --------------------------------------------------------------------------- recording


def late_payment_record(
    *,
    charge: Charge,
    e2e_id: str,
    amount: int,
    source: str,
    paid_at: dt.datetime | None = None,
    raw: Mapping[str, Any] | None = None,
) -> tuple[LatePayment, bool]:
    """Record a Pix received for ``charge`` (cancelled or failed here), in the
    caller's transaction with the charge's row locked. The same end-to-end id
    again is the same record: ``(record, False)``. The fee is the charge's
    when the Pix is of its amount, else the account's fee on what came."""
    existing = LatePayment.objects.filter(e2e_id=e2e_id).first()
    if existing is not None:
        return existing, False
    if amount == charge.amount:
        tax = charge.platform_tax
    else:
        tax = min(amount, cashin_fee(Account.objects.get(pk=charge.account_id), amount))
    kept = dict(raw or {})
    late = LatePayment.objects.create(
        charge=charge,
        account_id=charge.account_id,
        acquirer_id=charge.acquirer_id,
        e2e_id=e2e_id,
        amount=amount,
        platform_tax=tax,
        liquid_amount=amount - tax,
        charge_status=charge.status,
        source=source,
        paid_at=paid_at,
        payer_info=_payer_info(kept),
        raw=kept,
    )
    logger.warning(
        "charge %s is %s here but received a Pix (%s, %s centavos): late payment %s for staff",
        charge.pk,
        charge.status,
        e2e_id,
        amount,
        late.pk,
    )
    return late, True


def _payer_info(raw: Mapping[str, Any]) -> str:
    """What the acquirer says of the payer: the API Pix's ``infoPagador`` and,
    where a PSP adds one, its ``pagador`` (not in the standard)."""
    parts = [str(raw[k]) for k in ("infoPagador", "pagador", "payer") if raw.get(k)]
    return " | ".join(parts)[:500]


# --------------------------------------------------------------------------- resolving


def _open(late_payment_id: int | str) -> LatePayment:
    late = LatePayment.objects.select_for_update().get(pk=late_payment_id)
    if late.status != LatePayment.Status.OPEN:
        raise LatePaymentNotOpen(f"Este pagamento já está {late.get_status_display().lower()}.")
    return late


def late_payment_credit(*, late_payment_id: int | str, actor: str, reason: str) -> LatePaymentResolution:
    """Credit the account with the Pix net of its fee (carried out when a
    second staff member approves). Raises :class:`LatePaymentNotOpen` when it
    was resolved already, :class:`LatePaymentReturnedThere` when the acquirer
    says its money went back to the payer; one credit at most (the
    resolution's constraint and the ledger's unique cause)."""
    with transaction.atomic():
        late = _open(late_payment_id)
        if late.liquid_amount <= 0:
            raise LatePaymentNotOpen("O valor recebido não cobre a taxa: não há o que creditar; devolva ao pagador.")
        if refusal := late_credit_refusal(late):
            # Judged under the lock: a reconciliation recording the return meanwhile wins.
            raise LatePaymentReturnedThere(refusal)
        now = timezone.now()
        resolution = LatePaymentResolution.objects.create(
            late_payment=late,
            kind=LatePaymentResolution.Kind.CREDIT,
            status=LatePaymentResolution.Status.DONE,
            actor=actor[:300],
            reason=reason,
            finished_at=now,
        )
        late.status, late.resolved_at = LatePayment.Status.CREDITED, now
        late.save(update_fields=["status", "resolved_at"])
        ledger_post(
            account_id=late.account_id,
            amount=late.liquid_amount,
            kind=LedgerEntry.Kind.LATE_PAYMENT_CREDIT,
            reference=f"{REFERENCE_PREFIX}{late.pk}",
        )
    return resolution


def late_payment_return(*, late_payment_id: int | str, actor: str, reason: str) -> LatePaymentResolution:
    """Order the Pix back to its payer (carried out when a second staff
    member approves): the return is recorded now and the acquirer is asked
    after the commit (:func:`late_payment_return_pursue`). No balance moves:
    the money never was the account's."""
    with transaction.atomic():
        late = _open(late_payment_id)
        now = timezone.now()
        resolution = LatePaymentResolution.objects.create(
            late_payment=late,
            kind=LatePaymentResolution.Kind.RETURN,
            status=LatePaymentResolution.Status.PROCESSING,
            actor=actor[:300],
            reason=reason,
        )
        late.status, late.resolved_at = LatePayment.Status.RETURNING, now
        late.save(update_fields=["status", "resolved_at"])
        transaction.on_commit(functools.partial(return_pursue_later, resolution_id=resolution.pk))
    return resolution


def return_pursue_later(*, resolution_id: int, countdown: float = 0) -> None:
    """Hand the return to a worker (:func:`payments.tasks.pursue_late_payment_return`);
    a lost hand-off is picked up by beat's sweep (:func:`late_returns_sweep`)."""
    enqueue(
        "payments.tasks.pursue_late_payment_return",
        resolution_id,
        countdown=countdown,
        left_to="the late payment returns' sweep",
    )


def late_payment_return_pursue(*, resolution_id: int) -> str:
    """Ask the acquirer for the return's devolução (the same id every time)
    and apply a definitive answer: returned, or not made (the late payment
    waits for a decision again). Returns the resolution's status:
    ``processing`` means ask again later. Holds no transaction while asking.

    Only an explicit "not made" (``NAO_REALIZADO``) is final at once. A
    refusal of the ask, or "no such devolução", after an ask left unanswered
    (``unclear_at``) is final only once the grace has passed and the
    acquirer's read confirms there is none (:mod:`payments.devolucao_answers`,
    the rule a charge's refund follows too): failed earlier, staff could
    credit or return the Pix again while the first devolução lands."""
    resolution = LatePaymentResolution.objects.select_related("late_payment__charge", "late_payment__acquirer").get(
        pk=resolution_id
    )
    if resolution.status != LatePaymentResolution.Status.PROCESSING:
        return resolution.status
    late = resolution.late_payment
    request = RefundRequest(
        charge_id=late.charge_id,
        txid=late.charge.txid,
        e2e_id=late.e2e_id,
        refund_id=resolution.refund_id,
        amount=late.amount,
        reason=resolution.reason[:140],
    )
    call = calls.call(late.acquirer, "refund", lambda adapter: adapter.refund_charge(request))
    answer = devolucao_judge(acquirer=late.acquirer, request=request, call=call, unclear_at=resolution.unclear_at)
    if answer.verdict is Verdict.DONE:
        return _return_ended(resolution_id, LatePaymentResolution.Status.DONE, "")
    if answer.verdict is Verdict.NOT_MADE:
        return _return_ended(resolution_id, LatePaymentResolution.Status.FAILED, answer.detail)
    return _return_unclear(resolution_id, answer.detail, answer.seen)


def _return_unclear(resolution_id: int, error: str, seen: Seen) -> str:
    """No definitive answer: ask again later, ``unclear_at`` moved as
    :func:`~payments.devolucao_answers.unclear_at_after` says."""
    LatePaymentResolution.objects.filter(pk=resolution_id, status=LatePaymentResolution.Status.PROCESSING).update(
        attempts=F("attempts") + 1, last_error=error[:500], unclear_at=unclear_at_after(seen)
    )
    logger.warning("late payment return %s: no definitive answer (%s)", resolution_id, error)
    return LatePaymentResolution.Status.PROCESSING


def _return_ended(resolution_id: int, status: str, failure_reason: str) -> str:
    with transaction.atomic():
        resolution = LatePaymentResolution.objects.select_for_update().get(pk=resolution_id)
        if resolution.status != LatePaymentResolution.Status.PROCESSING:
            return resolution.status  # answered meanwhile by another worker
        late = LatePayment.objects.select_for_update().get(pk=resolution.late_payment_id)
        resolution.status = status
        resolution.attempts += 1
        resolution.failure_reason = failure_reason[:500]
        resolution.finished_at = timezone.now()
        resolution.save()
        if status == LatePaymentResolution.Status.DONE:
            late.status = LatePayment.Status.RETURNED
        else:
            # Not returned: the money is still held for it; staff decide again.
            late.status, late.resolved_at = LatePayment.Status.OPEN, None
        late.save(update_fields=["status", "resolved_at"])
    return status


def late_returns_sweep(*, older_than: dt.timedelta = dt.timedelta(minutes=2), limit: int = 200) -> int:
    """Beat's net under the return tasks (a hand-off lost, retries run out, a
    devolução still processing): every return processing for longer than
    ``older_than`` is handed to a worker again, at most once per
    :data:`SWEEP_EVERY`. Returns how many."""
    ids = (
        LatePaymentResolution.objects.filter(
            status=LatePaymentResolution.Status.PROCESSING, created_at__lte=timezone.now() - older_than
        )
        .order_by("created_at")
        .values_list("pk", flat=True)[:limit]
    )
    handed = 0
    for resolution_id in ids:
        if cache.add(_sweep_key(resolution_id), "1", int(SWEEP_EVERY.total_seconds())):
            return_pursue_later(resolution_id=resolution_id)
            handed += 1
    return handed


def late_return_sweep_skip(*, resolution_id: int, seconds: float) -> None:
    """A retry of this return's task is due within ``seconds``: the sweep
    leaves it alone until then (one chain of asks, not two)."""
    cache.set(_sweep_key(resolution_id), "1", int(seconds) + 60)


def _sweep_key(resolution_id: int) -> str:
    return f"late-return-sweep:{resolution_id}"
