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
from typing import Any, Literal

from django.core.cache import cache
from django.db import transaction
from django.db.models import F, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from accounts.fees import cashin_fee
from accounts.models import Account, LedgerEntry
from accounts.services import ledger_post
from acquirers import calls
from acquirers.adapters.base import RefundRequest, RefundStatus
from acquirers.calls import Outcome
from core.exceptions import PixServiceError
from payments.late_evidence import late_credit_refusal
from payments.models import Charge, ChargeStatus, LatePayment, LatePaymentResolution

logger = logging.getLogger(__name__)

S = ChargeStatus
L = LatePayment.Status
R = LatePaymentResolution.Status
#: A Pix for a charge in one of these is a late payment (it cannot pay the charge).
LATE_FROM = frozenset({S.CANCELED, S.FAILED})
#: How the ledger names a late payment's credit: ``late_payment:<LatePayment id>``.
REFERENCE_PREFIX = "late_payment:"
#: How often beat's sweep hands one return left processing to a worker again.
SWEEP_EVERY = dt.timedelta(minutes=5)
#: After an ask left unanswered (a timeout, a 5xx), how long a refusal or a
#: "no such devolução" is taken as "not visible yet" rather than "not made":
#: a PSP settles a devolução in seconds, but may queue it for hours when its
#: side of the SPI is down. A return concluded too early pays the payer twice
#: (staff credit or return the Pix again); one concluded late only waits.
RETURN_GRACE = dt.timedelta(hours=24)


#: What an answer without a definitive outcome says of the ask (:func:`_return_unclear`).
Unclear = Literal["asked", "not_answered", "not_asked"]


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
    if late.status != L.OPEN:
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
            status=R.DONE,
            actor=actor[:300],
            reason=reason,
            finished_at=now,
        )
        late.status, late.resolved_at = L.CREDITED, now
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
            status=R.PROCESSING,
            actor=actor[:300],
            reason=reason,
        )
        late.status, late.resolved_at = L.RETURNING, now
        late.save(update_fields=["status", "resolved_at"])
        transaction.on_commit(functools.partial(return_pursue_later, resolution_id=resolution.pk))
    return resolution


def return_pursue_later(*, resolution_id: int, countdown: float = 0) -> None:
    """Hand the return to a worker (:func:`payments.tasks.pursue_late_payment_return`);
    a lost hand-off is picked up by beat's sweep (:func:`late_returns_sweep`)."""
    from payments.tasks import pursue_late_payment_return

    try:
        pursue_late_payment_return.apply_async((resolution_id,), countdown=countdown, retry=False)
    except Exception:
        logger.warning("broker unavailable; late payment return %s left to the sweep", resolution_id, exc_info=True)


def late_payment_return_pursue(*, resolution_id: int) -> str:
    """Ask the acquirer for the return's devolução (the same id every time)
    and apply a definitive answer: returned, or not made (the late payment
    waits for a decision again). Returns the resolution's status:
    ``processing`` means ask again later. Holds no transaction while asking.

    Only an explicit "not made" (``NAO_REALIZADO``) is final at once. A
    refusal of the ask, or "no such devolução", is final only while no
    earlier ask went unanswered: after one, the PSP may still be processing
    that first ask, not visible yet, and a failure now would let staff
    credit or return the Pix again while it lands (the money out twice). It
    is asked again until :data:`RETURN_GRACE` after the last unanswered ask,
    then concluded only when the acquirer's read (``refund_status``) confirms
    there is no such devolução."""
    resolution = LatePaymentResolution.objects.select_related("late_payment__charge", "late_payment__acquirer").get(
        pk=resolution_id
    )
    if resolution.status != R.PROCESSING:
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
    result = call.result
    if result is None:
        if call.outcome is Outcome.DECLINED:
            # The acquirer refused the request (the API Pix adapter read our id's state first: none).
            return _return_refused(resolution, request, call.error_message or "recusada")
        # A timeout, a 5xx, an unreadable answer: the ask may have made it. Not
        # asked at all (circuit open, no capacity): nothing learned.
        asked = call.outcome not in (Outcome.CIRCUIT_OPEN, Outcome.BUSY)
        return _return_unclear(resolution_id, call.error_message or call.outcome, "asked" if asked else "not_asked")
    if result.status is RefundStatus.FAILED:
        return _return_ended(resolution_id, R.FAILED, result.reason or "sem motivo")
    if result.status is RefundStatus.PROCESSING:
        return _return_unclear(resolution_id, "em processamento na adquirente", "asked")
    if result.status is RefundStatus.NOT_FOUND:
        # No answer to a request to make it (never "done"): judged like a refusal.
        return _return_refused(resolution, request, "devolução não encontrada na adquirente", first_unclear=True)
    return _return_ended(resolution_id, R.DONE, "")


def _return_refused(
    resolution: LatePaymentResolution, request: RefundRequest, detail: str, *, first_unclear: bool = False
) -> str:
    """The ask was refused, or the acquirer knows no such devolução. Failed
    at once when no earlier ask went unanswered (and ``first_unclear`` is
    off); else asked again until :data:`RETURN_GRACE` after the last
    unanswered ask, then failed only if ``refund_status`` finds none.
    ``first_unclear``: this answer itself is no answer to the ask (a
    "not found"), so the grace starts now if it has not."""
    since = resolution.unclear_at
    if since is None and not first_unclear:
        return _return_ended(resolution.pk, R.FAILED, detail)
    if since is None or timezone.now() < since + RETURN_GRACE:
        why = "não é resposta ao pedido" if since is None else "um pedido anterior ficou sem resposta"
        note = f"{detail}; {why} e a devolução pode estar em processamento: pedido de novo"
        return _return_unclear(resolution.pk, note, "not_answered")
    late = resolution.late_payment
    look = calls.call(late.acquirer, "refund_status", lambda adapter: adapter.refund_status(request))
    if look.result is None:
        error = f"{detail}; consulta falhou: {look.error_message or look.outcome}"
        return _return_unclear(resolution.pk, error, "not_asked")
    status = look.result.status
    if status is RefundStatus.NOT_FOUND:
        hours = int(RETURN_GRACE.total_seconds() // 3600)
        return _return_ended(resolution.pk, R.FAILED, f"{detail}; sem devolução na adquirente {hours} h depois")
    if status is RefundStatus.FAILED:
        return _return_ended(resolution.pk, R.FAILED, look.result.reason or detail)
    if status is RefundStatus.PROCESSING:
        return _return_unclear(resolution.pk, "em processamento na adquirente", "asked")
    return _return_ended(resolution.pk, R.DONE, "")


def _return_unclear(resolution_id: int, error: str, seen: Unclear) -> str:
    """No definitive answer: ask again later. ``seen`` sets the start of the
    grace of :func:`_return_refused`: ``asked``, the ask reached the
    acquirer and may have made the devolução (the grace starts again);
    ``not_answered``, an answer that does not answer the ask (a refusal or
    "not found" within the grace: it starts if it had not, never extends);
    ``not_asked``, nothing reached it (circuit open, a read that failed)."""
    now = timezone.now()
    unclear_at = {
        "asked": Value(now),
        "not_answered": Coalesce(F("unclear_at"), Value(now)),
        "not_asked": F("unclear_at"),
    }[seen]
    LatePaymentResolution.objects.filter(pk=resolution_id, status=R.PROCESSING).update(
        attempts=F("attempts") + 1, last_error=error[:500], unclear_at=unclear_at
    )
    logger.warning("late payment return %s: no definitive answer (%s)", resolution_id, error)
    return R.PROCESSING


def _return_ended(resolution_id: int, status: str, failure_reason: str) -> str:
    with transaction.atomic():
        resolution = LatePaymentResolution.objects.select_for_update().get(pk=resolution_id)
        if resolution.status != R.PROCESSING:
            return resolution.status  # answered meanwhile by another worker
        late = LatePayment.objects.select_for_update().get(pk=resolution.late_payment_id)
        resolution.status = status
        resolution.attempts += 1
        resolution.failure_reason = failure_reason[:500]
        resolution.finished_at = timezone.now()
        resolution.save()
        if status == R.DONE:
            late.status = L.RETURNED
        else:
            # Not returned: the money is still held for it; staff decide again.
            late.status, late.resolved_at = L.OPEN, None
        late.save(update_fields=["status", "resolved_at"])
    return status


def late_returns_sweep(*, older_than: dt.timedelta = dt.timedelta(minutes=2), limit: int = 200) -> int:
    """Beat's net under the return tasks (a hand-off lost, retries run out, a
    devolução still processing): every return processing for longer than
    ``older_than`` is handed to a worker again, at most once per
    :data:`SWEEP_EVERY`. Returns how many."""
    ids = (
        LatePaymentResolution.objects.filter(status=R.PROCESSING, created_at__lte=timezone.now() - older_than)
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
