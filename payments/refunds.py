"""Refunds of charges: the reservation of their amount, and asking the
acquirer to return the Pix (a devolução).

Staff (the back office's action) and merchants (``POST
/api/transactions/{id}/refund``) share one refund: the same devolução id
(:func:`refund_id_for`), the same guarded call and the same reading of its
answer (:func:`charge_refund_ask`), the same reservation and release. They
differ only in policy:

- staff (:func:`charge_refund`) ask the acquirer at once, in the request,
  and reserve the amount when it answers "processing"; like a refund, the
  reservation may take the balance below zero (decisions §4): staff refunds
  are never refused for want of balance;
- a merchant's request (:func:`charge_refund_request`) reserves the amount
  first, refused when the available balance does not cover it, and the
  acquirer is asked after the commit, by a task
  (:func:`charge_refund_pursue`), asked again until it answers definitively.

The money of a refund is the payer's as soon as it is asked for: reserved
(``refund_hold``, a debit) so the merchant cannot withdraw it meanwhile. A
refund the acquirer did not make releases it (``refund_release``, the credit
back); a refund that is done turns it into the refund: the transition to
``refunded`` releases the reservation and posts the refund's own debit in one
transaction, so the balance moves once. An unclear answer (timeout, 5xx, an
answer that cannot be read) releases nothing, and after one a refusal or
"no such devolução" releases nothing either until the acquirer confirms, a
grace later, that it has none (:mod:`payments.devolucao_answers`): it may be
queueing the first ask's devolução without showing it yet.

A chargeback that takes the money while a refund is processing releases
the reservation (the chargeback's debit replaces it), but the acquirer may
still make the devolução: such a refund is then asked about, never asked
for, until the acquirer's answer is final (:mod:`payments.refunds_released`:
the payer repaid twice is an item for staff, nothing debited automatically).

Every change here runs under the charge's row lock, then the balance's (the
order of ``charge_transition``), in the transaction that changes the
:class:`~payments.models.ChargeRefund` row. No transaction or lock is held
while the acquirer is asked.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
import uuid
from collections.abc import Callable

from django.core.cache import cache
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from accounts.models import Account, LedgerEntry
from accounts.services import balance_lock, ledger_post
from acquirers import adapters, calls
from acquirers.adapters.base import AdapterError, InvalidOptions
from core.dispatch import enqueue
from core.exceptions import BusinessRuleError
from payments import exceptions as err
from payments import services
from payments.devolucao_answers import Verdict, devolucao_judge, unclear_at_after
from payments.models import Charge, ChargeRefund, ChargeStatus, ChargeTransition
from payments.refund_requests import RefundAnswer as RefundAnswer
from payments.refund_requests import RefundOutcome as RefundOutcome
from payments.refund_requests import refund_id_for as refund_id_for
from payments.refund_requests import refund_request_for
from payments.refund_reservations import charge_refund_close
from payments.refunds_released import charge_refund_release_check
from payments.selectors import charge_get

logger = logging.getLogger(__name__)

#: How often beat's sweep hands one refund left processing to a worker again.
SWEEP_EVERY = dt.timedelta(minutes=5)


# --------------------------------------------------------------------------- the shared part


def charge_refund_ask(*, charge: Charge, actor: str, source: str, reason: str = "") -> RefundAnswer:
    """Ask the charge's acquirer for its full refund (the same devolução id
    every time: idempotent there) and apply a definitive answer: done → the
    charge becomes ``refunded`` (its reservation, if any, gives way to the
    refund's debit); not made → the reservation, if any, is released.
    "Processing" and every unclear outcome change nothing here but the
    refund's ``unclear_at``. Only an explicit "not made" (``NAO_REALIZADO``)
    is final at once: a refusal of the request, or "no such devolução",
    after an ask left unanswered keeps the reservation until the grace has
    passed and the acquirer's read confirms there is none
    (:mod:`payments.devolucao_answers`): released earlier, the merchant
    would get back money the first devolução still takes to the payer. Call
    it holding no transaction."""
    request = refund_request_for(charge, reason=reason)
    # The one guarded call: deadline, outcome, latency metric and breaker as
    # for a charge or a payout.
    call = calls.call(charge.acquirer, "refund", lambda adapter: adapter.refund_charge(request))
    since = charge.refunds.filter(status=ChargeRefund.Status.PROCESSING).values_list("unclear_at", flat=True).first()
    answer = devolucao_judge(acquirer=charge.acquirer, request=request, call=call, unclear_at=since)
    if answer.verdict is Verdict.NOT_MADE:
        charge_refund_release(charge_id=charge.pk, failure_reason=answer.detail)
        return RefundAnswer(RefundOutcome.FAILED, answer.detail)
    if answer.verdict is Verdict.DONE:
        services.charge_transition(charge_id=charge.pk, to_status=ChargeStatus.REFUNDED, source=source, actor=actor)
        return RefundAnswer(RefundOutcome.REFUNDED)
    unclear = answer.seen != "not_asked"
    if unclear:
        ChargeRefund.objects.filter(charge=charge, status=ChargeRefund.Status.PROCESSING).update(
            unclear_at=unclear_at_after(answer.seen)
        )
    if answer.verdict is Verdict.PROCESSING:
        return RefundAnswer(RefundOutcome.PROCESSING, unclear=unclear)
    return RefundAnswer(RefundOutcome.UNDETERMINED, answer.detail, unclear=unclear)


# --------------------------------------------------------------------------- staff


def charge_refund(*, charge_id: uuid.UUID | str, actor: str, reason: str = "") -> RefundOutcome:
    """Staff's refund of a paid charge: ask its acquirer to return the Pix
    (when the adapter can) and apply ``refunded`` once the acquirer says it is
    done. Asking again for the same charge is idempotent and reports the
    current state. A charge in chargeback (MED already returned the money),
    or at an acquirer without refunds, is only marked refunded. A refund the
    acquirer is still processing, or whose outcome is not known (no answer,
    an unreadable one), reserves its amount at once
    (:func:`charge_refund_reserve`) and is asked about again by beat's sweep
    (:func:`refunds_sweep`); a failed one gives it back. Never refused
    for want of balance: a refund may take it below zero (decisions §4).
    Raises :class:`~payments.exceptions.RefundFailed` when the refund was not
    made (:class:`~payments.exceptions.RefundUndetermined` when that is not
    known yet)."""
    charge = Charge.objects.select_related("acquirer").get(pk=charge_id)
    if charge.status not in (ChargeStatus.PAID, ChargeStatus.CHARGEBACK):
        raise err.TransitionNotAllowed("Só cobranças pagas ou contestadas podem ser estornadas.")
    if charge.med_open:
        # Asked before any acquirer is: the payer's PSP is already returning it (MED).
        raise err.TransitionNotAllowed(err.REFUND_MED_OPEN)
    try:
        adapter = adapters.build(charge.acquirer)
    except AdapterError as exc:  # an adapter this process lacks (the sandbox, switched off)
        raise err.RefundFailed(f"Adquirente indisponível para a devolução: {exc}"[:500]) from exc

    if charge.status == ChargeStatus.CHARGEBACK or not adapter.supports_refund:
        services.charge_transition(
            charge_id=charge.pk, to_status=ChargeStatus.REFUNDED, source=ChargeTransition.Source.STAFF, actor=actor
        )
        return RefundOutcome.MARKED
    if adapter.refund_needs_e2e_id and not charge.e2e_id:
        raise err.RefundFailed("Cobrança paga sem e2e id: a devolução não pode ser pedida à adquirente.")
    answer = charge_refund_ask(charge=charge, actor=actor, source=ChargeTransition.Source.STAFF, reason=reason)
    if answer.outcome is RefundOutcome.UNDETERMINED:
        # The acquirer may have made the devolução (a timeout after it acted,
        # an answer lost on the way): the money may be the payer's already.
        # Reserved as one it is processing, and asked about again by beat's
        # sweep until it answers for certain; without this, nothing would
        # ever ask, and a devolução made there would never be debited here.
        charge_refund_reserve(charge_id=charge.pk, reason=reason, unclear=answer.unclear)
        raise err.RefundUndetermined(
            f"Sem resposta definitiva da adquirente para a devolução ({answer.detail}): o valor fica reservado "
            "e a adquirente é consultada de novo até responder."[:500]
        )
    if answer.outcome is RefundOutcome.FAILED:
        raise err.RefundFailed(f"Devolução não realizada pela adquirente: {answer.detail}"[:500])
    if answer.outcome is RefundOutcome.PROCESSING:
        # The money is the payer's already: reserved now, so it cannot be
        # withdrawn while the acquirer finishes (its callback, or asking again).
        charge_refund_reserve(charge_id=charge.pk, reason=reason, unclear=answer.unclear)
    return answer.outcome


def charge_refund_reserve(*, charge_id: uuid.UUID | str, reason: str = "", unclear: bool = False) -> bool:
    """Staff's reservation of a refund its acquirer is processing (it may take
    the balance below zero). False, changing nothing, when the charge is no
    longer paid (the refund finished first, or a chargeback took the money)
    or its refund is already reserved (asked again, or asked by API).
    ``unclear``: the ask just made may have reached the acquirer unanswered
    (its ``unclear_at`` starts now: a refusal that follows is not final)."""
    with transaction.atomic():
        charge = Charge.objects.select_for_update().get(pk=charge_id)
        if (
            charge.status != ChargeStatus.PAID
            or charge.med_open
            or charge.refunds.filter(status=ChargeRefund.Status.PROCESSING).exists()
        ):
            return False
        refund = ChargeRefund.objects.create(
            charge=charge,
            amount=charge.liquid_amount,
            source=ChargeRefund.Source.STAFF,
            reason=reason[:140],
            unclear_at=timezone.now() if unclear else None,
        )
        ledger_post(
            account_id=charge.account_id,
            amount=-refund.amount,
            kind=LedgerEntry.Kind.REFUND_HOLD,
            reference=f"refund:{refund.pk}",
        )
    return True


def charge_refund_release(*, charge_id: uuid.UUID | str, failure_reason: str = "") -> bool:
    """The acquirer says the refund was not made: give the reserved amount
    back. False when nothing was reserved."""
    with transaction.atomic():
        charge = Charge.objects.select_for_update().get(pk=charge_id)
        return charge_refund_close(charge=charge, status=ChargeRefund.Status.FAILED, failure_reason=failure_reason)


# --------------------------------------------------------------------------- merchants (API)


def charge_refund_request(
    *,
    account: Account,
    charge_id: uuid.UUID | str,
    reason: str = "",
    in_transaction: Callable[[ChargeRefund], None] | None = None,
) -> ChargeRefund:
    """A merchant asks for the full refund of its paid charge. In one
    transaction, under the charge's lock then the balance's: the refund
    (processing) and the reservation of its amount, refused with nothing
    changed when the charge is not paid, a refund is in progress or was
    already refused by the acquirer (409), the acquirer cannot refund it, or
    the available balance does not cover it (400). The acquirer is asked
    after the commit (:func:`charge_refund_pursue`, a task).
    ``in_transaction`` runs with the new refund before the commit (the
    idempotency key's answer commits with it, or neither does)."""
    charge = charge_get(account=account, charge_id=charge_id)  # 404 for unknown or another account's
    try:
        adapter = adapters.adapter_class(charge.acquirer.adapter)
    except InvalidOptions:  # an adapter this version or process lacks
        adapter = None
    with transaction.atomic():
        locked = Charge.objects.select_for_update().get(pk=charge.pk)
        _refuse_unless_refundable(locked)
        if adapter is None or not adapter.supports_refund or (adapter.refund_needs_e2e_id and not locked.e2e_id):
            raise BusinessRuleError(err.REFUND_UNAVAILABLE)
        balance = balance_lock(account_id=locked.account_id)
        # A MED block the balance could not cover keeps its part back (docs/api/infractions.md).
        if balance.available - balance.hold_uncovered < locked.liquid_amount:
            raise BusinessRuleError(err.REFUND_INSUFFICIENT_BALANCE)
        refund = ChargeRefund.objects.create(
            charge=locked, amount=locked.liquid_amount, source=ChargeRefund.Source.API, reason=reason
        )
        ledger_post(
            account_id=locked.account_id,
            amount=-refund.amount,
            kind=LedgerEntry.Kind.REFUND_HOLD,
            reference=f"refund:{refund.pk}",
            locked=balance,
        )
        if in_transaction is not None:
            in_transaction(refund)
        transaction.on_commit(functools.partial(refund_pursue_later, refund_id=refund.pk))
    return refund


def _refuse_unless_refundable(charge: Charge) -> None:
    if charge.status != ChargeStatus.PAID:
        raise err.RefundNotAllowed(err.REFUND_NOT_PAID.format(status=ChargeStatus(charge.status).label.lower()))
    if charge.med_open:
        raise err.RefundNotAllowed(err.REFUND_MED_OPEN)
    statuses = set(charge.refunds.values_list("status", flat=True))
    if ChargeRefund.Status.PROCESSING in statuses:
        raise err.RefundNotAllowed(err.REFUND_IN_PROGRESS)
    if ChargeRefund.Status.FAILED in statuses:
        # The devolução id is the charge's: asking again gets the same "not made".
        raise err.RefundNotAllowed(err.REFUND_ALREADY_FAILED)


def refund_pursue_later(*, refund_id: int, countdown: float = 0) -> None:
    """Hand the refund to a worker (:func:`payments.tasks.pursue_refund`).
    A lost hand-off is picked up by beat's sweep of refunds left processing."""
    enqueue("payments.tasks.pursue_refund", refund_id, countdown=countdown, left_to="the refunds' sweep")


def charge_refund_pursue(*, refund_id: int) -> RefundOutcome:
    """The acquirer's side of a refund asked by API: ask it (the same
    devolução every time) and apply its definitive answer. Idempotent: a
    refund that ended already (done, failed) is left as it is; one a
    chargeback released is asked about, never asked for
    (:func:`charge_refund_release_check`). ``processing`` and
    ``undetermined`` mean: ask again later."""
    refund = ChargeRefund.objects.select_related("charge__acquirer").get(pk=refund_id)
    if refund.status == ChargeRefund.Status.RELEASED:
        return charge_refund_release_check(refund_id=refund.pk)
    if refund.status != ChargeRefund.Status.PROCESSING:
        return RefundOutcome.ENDED
    actor = "api" if refund.source == ChargeRefund.Source.API else ""
    answer = charge_refund_ask(
        charge=refund.charge, actor=actor, source=ChargeTransition.Source.ACQUIRER, reason=refund.reason
    )
    if answer.outcome is RefundOutcome.UNDETERMINED:
        logger.warning("refund %s: no definitive answer from the acquirer (%s)", refund_id, answer.detail)
    return answer.outcome


def refunds_sweep(*, older_than: dt.timedelta = dt.timedelta(minutes=2), limit: int = 200) -> int:
    """Beat's net under the refund tasks (a hand-off lost with the broker, a
    task that ran out of retries, a staff refund answered "processing" whose
    callback never came, or one that got no definitive answer): every refund
    still processing for longer than ``older_than``, or released by a
    chargeback and not yet answered for good, is handed to a worker again,
    each at most once per :data:`SWEEP_EVERY` whichever process runs this.
    Returns how many."""
    ids = (
        ChargeRefund.objects.filter(
            Q(status=ChargeRefund.Status.PROCESSING) | Q(release_check=ChargeRefund.ReleaseCheck.PENDING),
            created_at__lte=timezone.now() - older_than,
        )
        .order_by("created_at")
        .values_list("pk", flat=True)
        .iterator(chunk_size=500)
    )
    handed = 0
    for refund_id in ids:
        # ``limit`` counts the refunds handed out, not the ones looked at: old
        # refunds already in hand (their task retrying) never starve newer ones.
        if handed >= limit:
            break
        if cache.add(_sweep_key(refund_id), "1", int(SWEEP_EVERY.total_seconds())):
            refund_pursue_later(refund_id=refund_id)
            handed += 1
    return handed


def refund_sweep_skip(*, refund_id: int, seconds: float) -> None:
    """A retry of this refund's task is scheduled within ``seconds``: the
    sweep leaves it alone until then (one chain of asks, not two)."""
    cache.set(_sweep_key(refund_id), "1", int(seconds) + 60)


def _sweep_key(refund_id: int) -> str:
    return f"refund-sweep:{refund_id}"
