"""Refunds a chargeback released while the acquirer was still processing
them (see :mod:`payments.refunds`): the chargeback's debit took the money
and the MED returned it to the payer, but the acquirer may still make the
devolução, and then the payer is repaid twice. Such a refund is asked about
(read only: asking never makes it) until the acquirer's answer is final;
made there, it is a reconciliation item for staff with the acquirer's
answer as evidence (reported through :mod:`payments.reports`), and nothing
is debited automatically: staff acknowledge it, or ask for the refund's
debit (:mod:`reconciliation.redebits`), which a second staff member
approves (``accounts.approvals``).

"No such devolução" is final only :data:`NOT_FOUND_FINAL_AFTER` after the
refund was last asked for: an ask whose answer was unclear may still be
arriving at the acquirer, and a look too soon would end it "not made"."""

from __future__ import annotations

import datetime as dt
import logging

from django.db import transaction
from django.utils import timezone

from acquirers import adapters, calls
from acquirers.adapters.base import InvalidOptions, RefundResult, RefundStatus
from payments.models import Charge, ChargeRefund
from payments.refund_requests import RefundOutcome, refund_request_for
from payments.reports import refund_made_report

logger = logging.getLogger(__name__)

#: How long after a released refund was last asked for (its release: it is
#: never asked for again after it) the acquirer's "no such devolução" is
#: believed. Before that it may be an ask still on its way (a timeout whose
#: PUT arrives late, a PSP that records devoluções asynchronously): the
#: refund is asked about again with the refund task's backoff. Far longer
#: than any call's deadline; the task's backoff reaches it in a few asks.
NOT_FOUND_FINAL_AFTER = dt.timedelta(hours=1)


def charge_refund_release_check(*, refund_id: int) -> RefundOutcome:
    """Ask the acquirer (read only: :meth:`refund_status`, through the one
    guarded call) where a refund stands that a chargeback released while it
    was processing there. Final answers are recorded once: not made (failed,
    or no such devolução once :data:`NOT_FOUND_FINAL_AFTER` has passed since
    its release; before that, undetermined) ends it; made means the payer
    was repaid twice (by MED and by the refund): a reconciliation item for
    staff with the acquirer's answer, and no money moved here (see the
    module docstring). ``processing`` and ``undetermined``: ask again later.
    Call it holding no transaction."""
    refund = ChargeRefund.objects.select_related("charge__acquirer").get(pk=refund_id)
    if refund.status != ChargeRefund.Status.RELEASED or refund.release_check != ChargeRefund.ReleaseCheck.PENDING:
        return RefundOutcome.ENDED
    charge = refund.charge
    if _never_asked(charge):
        # Every ask was refused before reaching the acquirer: nothing there to make.
        answer = RefundResult(status=RefundStatus.NOT_FOUND)
    else:
        call = calls.call(
            charge.acquirer, "refund_status", lambda adapter: adapter.refund_status(refund_request_for(charge))
        )
        if call.result is None:
            logger.warning("released refund %s: no answer from the acquirer (%s)", refund.pk, call.outcome)
            return RefundOutcome.UNDETERMINED
        answer = call.result
        if answer.status is RefundStatus.NOT_FOUND and not _not_found_is_final(refund):
            logger.info("released refund %s: no devolução at the acquirer yet; asked again", refund.pk)
            return RefundOutcome.UNDETERMINED
    if answer.status is RefundStatus.PROCESSING:
        return RefundOutcome.PROCESSING
    made = answer.status is RefundStatus.DONE
    with transaction.atomic():
        locked = ChargeRefund.objects.select_for_update().get(pk=refund.pk)
        if locked.release_check != ChargeRefund.ReleaseCheck.PENDING:
            return RefundOutcome.ENDED  # answered meanwhile, by another worker
        locked.release_check = ChargeRefund.ReleaseCheck.MADE if made else ChargeRefund.ReleaseCheck.NOT_MADE
        locked.release_checked_at = timezone.now()
        locked.save(update_fields=["release_check", "release_checked_at"])
        if made:
            charge.refresh_from_db(fields=["status"])
            refund_made_report(charge=charge, refund=locked, answer=answer)
    if made:
        logger.error("refund %s of charge %s was made by the acquirer after a chargeback", refund.pk, charge.pk)
    return RefundOutcome.ENDED


def _never_asked(charge: Charge) -> bool:
    """Whether the charge's devolução can never have been asked for: its
    adapter names it by the Pix's e2e id and the charge has none (both the
    API and staff refuse such a refund before calling). An adapter that does
    not need it may have made one: it is asked."""
    if charge.e2e_id:
        return False
    try:
        return adapters.adapter_class(charge.acquirer.adapter).refund_needs_e2e_id
    except InvalidOptions:
        return False  # an adapter this process lacks: asking will say (no answer: asked again)


def _not_found_is_final(refund: ChargeRefund) -> bool:
    released = refund.finished_at or refund.created_at
    return timezone.now() - released >= NOT_FOUND_FINAL_AFTER
