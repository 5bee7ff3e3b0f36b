"""The state of reconciliation items that wait for a second staff member:
the approvals queue (``accounts``) decides the request, and the item follows."""

from __future__ import annotations

from accounts.models import MoneyActionRequest
from payments.models import ReconciliationItem

Item = ReconciliationItem
State = MoneyActionRequest.State


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
