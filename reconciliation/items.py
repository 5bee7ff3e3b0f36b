"""Reconciliation items: storing what a run (or the check of a refund a
chargeback released) found, the debits staff may ask for on them, and the
state of items that wait for a second staff member (the approvals queue,
``accounts``, decides the request, and the item follows)."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from accounts.models import MoneyActionRequest
from acquirers.adapters.base import ProviderRecordStatus
from reconciliation.findings import Finding
from reconciliation.models import ReconciliationItem, ReconciliationRun

Item = ReconciliationItem
State = MoneyActionRequest.State


@dataclass(frozen=True)
class Redebit:
    """A maker-checker debit an item may ask for: the request's action, the
    acquirer's word it needs first (the latest run's), and what it is called."""

    action: str
    confirmed: str  # the item's theirs_status once the acquirer confirmed the money left
    unconfirmed: str  # staff's message while it has not
    label: str
    #: The request names the item (its evidence decides the amount), not the record it is about.
    names_item: bool = False


REDEBITS: dict[str, Redebit] = {
    Item.Kind.PAYOUT_SENT_THERE_FAILED_HERE: Redebit(
        action=MoneyActionRequest.Action.REDEBIT_SENT_PAYOUT,
        confirmed=ProviderRecordStatus.PAID,
        unconfirmed="a adquirente ainda não confirmou o envio",
        label="redébito do saque",
    ),
    Item.Kind.REFUNDED_THERE_CHARGEBACK_HERE: Redebit(
        action=MoneyActionRequest.Action.REDEBIT_REFUND_AFTER_CHARGEBACK,
        confirmed=ProviderRecordStatus.REFUNDED,
        unconfirmed="a adquirente não diz que o Pix foi devolvido por inteiro",
        label="débito do estorno",
        names_item=True,
    ),
}


def repaid_excess(*, amount: int, by_med: int | None, by_refund: int | None) -> int:
    """Centavos of a charged-back Pix of ``amount`` that went back to its
    payer beyond the amount: what the MED returned plus what a refund
    returned, less the Pix, never more than the Pix. The MED's return is what
    the acquirer lists as returned by MED; when it lists none, the chargeback
    here stands for it in full (the acquirer's notice of the MED, whose debit
    was the whole liquid amount)."""
    med = by_med or amount
    return max(0, min(amount, med + (by_refund or 0) - amount))


#: The items a redébito resolves: a payout sent there, failed here (its debit
#: given back); a refund made there after a chargeback here.
REDEBIT_KINDS = tuple(REDEBITS)


def reconciliation_item_store(
    finding: Finding, *, acquirer_id: int, direction: str, run: ReconciliationRun | None = None
) -> ReconciliationItem:
    """One item per finding (acquirer, kind and key), or the one already
    there with what each side says now (a payout "processing" there may have
    settled or failed since: staff decide on the latest word). Never a
    duplicate, never a resolved item reopened. ``run``: the daily run that
    found it (None: found outside one, by the check of a released refund)."""
    now = timezone.now()
    with transaction.atomic():
        item, created = Item.objects.select_for_update().get_or_create(
            acquirer_id=acquirer_id,
            kind=finding.kind.value,
            key=finding.key[:100],
            defaults={
                "run": run,
                "direction": direction,
                "reference": finding.reference[:64],
                "e2e_id": (finding.e2e_id or "")[:64],
                "target_type": finding.target_type,
                "target_id": finding.target_id,
                "ours_status": finding.ours_status,
                "ours_amount": finding.ours_amount,
                "theirs_status": finding.theirs_status,
                "theirs_amount": finding.theirs_amount,
                "theirs_raw": dict(finding.raw),
                "returned_by_med": finding.returned_by_med,
                "returned_by_refund": finding.returned_by_refund,
                "detail": finding.detail[:500],
                "status": Item.Status.HEALED if finding.healed else Item.Status.OPEN,
                "resolution": Item.Resolution.HEALED if finding.healed else "",
                "resolved_at": now if finding.healed else None,
                "last_seen_at": now,
            },
        )
        if not created:
            item.last_seen_at = now
            item.ours_status, item.ours_amount = finding.ours_status, finding.ours_amount
            item.theirs_status, item.theirs_amount = finding.theirs_status, finding.theirs_amount
            item.theirs_raw = dict(finding.raw)
            fields = ["last_seen_at", "ours_status", "ours_amount", "theirs_status", "theirs_amount", "theirs_raw"]
            # Money returned to the payer stays returned: each source's most is
            # kept (a refund's check knows the devolução, the day's listing the MED).
            for name in ("returned_by_med", "returned_by_refund"):
                said = [v for v in (getattr(item, name), getattr(finding, name)) if v is not None]
                if said and max(said) != getattr(item, name):
                    setattr(item, name, max(said))
                    fields.append(name)
            if item.run_id is None and run is not None:
                item.run = run  # found first by a refund's check, now by the day's run too
                fields.append("run")
            item.save(update_fields=fields)
    return item


def reconciliation_items_follow_approvals() -> int:
    """Items awaiting approval whose request was decided: resolved when it
    was approved and carried out, open again (for another resolution) when it
    was rejected or could not be carried out. Two UPDATEs; idempotent.
    Returns how many items changed."""
    waiting = Item.objects.filter(status=Item.Status.AWAITING_APPROVAL)
    resolved = waiting.filter(approval_request__state=State.APPROVED).update(status=Item.Status.RESOLVED)
    not_done = waiting.filter(approval_request__state__in=(State.REJECTED, State.FAILED))
    reopened = not_done.update(status=Item.Status.OPEN, resolution="", resolved_by=None, resolved_at=None)
    return resolved + reopened
