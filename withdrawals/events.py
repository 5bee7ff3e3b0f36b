"""What an acquirer's news does to a withdrawal's payout (``reference`` =
the withdrawal's idempotency id), registered with :mod:`acquirers.inbound`
and applied through the withdrawal's transition service."""

from __future__ import annotations

from acquirers.adapters.base import Notification, NotificationEvent
from acquirers.inbound import ApplyResult
from acquirers.models import Acquirer
from core.exceptions import PixServiceError
from withdrawals import services
from withdrawals.exceptions import WithdrawalNotFound
from withdrawals.models import Withdrawal, WithdrawalStatus


def payout_event_apply(
    *, acquirer: Acquirer | None, notification: Notification, source: str, strict: bool = False
) -> ApplyResult:
    """Apply one payout event. ``acquirer`` None means the caller already
    resolved ownership (staff); otherwise the payout must have gone through
    ``acquirer``, or the withdrawal is unknown (:class:`WithdrawalNotFound`).
    ``strict`` changes nothing here: no client drives payouts' news."""
    withdrawal = (
        Withdrawal.objects.filter(idempotency_id=notification.reference).only("pk", "status", "acquirer_id").first()
    )
    # A payout notification may come from any acquirer we sent to; it must
    # at least be one that the payout went through.
    if withdrawal is None or (
        acquirer is not None and not withdrawal.payout_attempts.filter(acquirer=acquirer).exists()
    ):
        raise WithdrawalNotFound()
    event = notification.event
    if event is NotificationEvent.PAYOUT_PAID and withdrawal.status == WithdrawalStatus.REFUNDED:
        return ApplyResult(changed=False, detail="already paid")
    if event is NotificationEvent.PAYOUT_PAID and not notification.e2e_id:
        raise PixServiceError("Confirmação de pagamento sem e2e_id.")
    if event is not NotificationEvent.PAYOUT_PAID and acquirer is not None and withdrawal.acquirer_id != acquirer.pk:
        # Stale news from an acquirer the chain moved past (it refused): it must
        # not fail or refund a payout another acquirer is making.
        return ApplyResult(changed=False, detail="not the acquirer holding this payout")
    if event is NotificationEvent.PAYOUT_FAILED:
        # Money goes back only when nothing may still pay it; else the news is
        # kept as evidence and the payout engine settles with the acquirer.
        changed = services.withdrawal_payout_failure_report(
            withdrawal_id=withdrawal.pk, acquirer=acquirer, source=source, reason="refused by the acquirer"
        )
        return ApplyResult(changed=changed, detail="" if changed else "kept as evidence: payout not settled")
    target = {
        NotificationEvent.PAYOUT_PAID: WithdrawalStatus.PAID,
        NotificationEvent.PAYOUT_RETURNED: WithdrawalStatus.REFUNDED,
    }[event]
    changed = services.withdrawal_transition(
        withdrawal_id=withdrawal.pk,
        to_status=target,
        source=source,
        e2e_id=notification.e2e_id,
        paid_at=notification.occurred_at,
    )
    return ApplyResult(changed=changed)
