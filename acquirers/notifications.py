"""Inbound acquirer notifications: stored raw first, then verified by the
acquirer's adapter, then applied through the same services the sandbox and
the back office use. Re-applying a notification is a no-op."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from django.db import DatabaseError
from django.utils import timezone

from acquirers import adapters
from acquirers.adapters.base import InvalidNotification, Notification, NotificationEvent
from acquirers.models import Acquirer, InboundNotification
from pix_service.exceptions import PixServiceError

logger = logging.getLogger(__name__)

# Headers worth keeping for forensics; never credentials of ours.
_DROP_HEADERS = {"cookie", "authorization", "x-secret-key"}


@dataclass(frozen=True)
class ApplyResult:
    changed: bool
    detail: str = ""


def notification_store(
    *, acquirer: Acquirer, headers: Mapping[str, str], body: bytes, remote_addr: str | None
) -> InboundNotification:
    """Keep the request exactly as received, before anything can fail."""
    return InboundNotification.objects.create(
        acquirer=acquirer,
        headers={k: v for k, v in headers.items() if k.lower() not in _DROP_HEADERS},
        body=body.decode("utf-8", errors="replace"),
        remote_addr=remote_addr,
    )


def notification_process(*, inbound: InboundNotification, body: bytes) -> list[ApplyResult]:
    """Verify with the adapter, then apply each event. Raises
    :class:`InvalidNotification` when verification fails (stored as rejected)."""
    try:
        notifications = adapters.build(inbound.acquirer).parse_notification(inbound.headers, body)
    except InvalidNotification as exc:
        _finish(inbound, InboundNotification.Status.REJECTED, str(exc))
        raise
    results: list[ApplyResult] = []
    errors: list[str] = []
    for notification in notifications:
        # One bad event (refused transition, an e2e id the database refuses)
        # must not cost the others in the same body.
        try:
            results.append(notification_apply(acquirer=inbound.acquirer, notification=notification, source="acquirer"))
        except PixServiceError as exc:
            errors.append(f"{notification.event} {notification.reference}: {exc.message}")
        except DatabaseError as exc:
            logger.warning("notification %s: event %s not applied", inbound.pk, notification.reference, exc_info=True)
            errors.append(f"{notification.event} {notification.reference}: {type(exc).__name__}: {exc}"[:1000])
    status = InboundNotification.Status.FAILED if errors else InboundNotification.Status.PROCESSED
    _finish(inbound, status, "\n".join(errors))
    return results


def _finish(inbound: InboundNotification, status: str, error: str) -> None:
    inbound.status = status
    inbound.error = error
    inbound.processed_at = timezone.now()
    inbound.save(update_fields=["status", "error", "processed_at"])


PAYOUT_EVENTS = (
    NotificationEvent.PAYOUT_PAID,
    NotificationEvent.PAYOUT_FAILED,
    NotificationEvent.PAYOUT_RETURNED,
)


def notification_apply(*, acquirer: Acquirer | None, notification: Notification, source: str) -> ApplyResult:
    """Apply one event to our charge (``reference`` = txid) or withdrawal
    (``reference`` = its idempotency id). ``acquirer`` None means the caller
    already resolved ownership (sandbox, staff)."""
    if notification.event in PAYOUT_EVENTS:
        return _apply_payout(acquirer=acquirer, notification=notification, source=source)
    from payments.exceptions import ChargeNotFound
    from payments.models import Charge, ChargeStatus
    from payments.services import charge_transition

    charge = Charge.objects.filter(txid=notification.reference).only("pk", "status", "acquirer_id").first()
    if charge is None or (acquirer is not None and charge.acquirer_id != acquirer.pk):
        raise ChargeNotFound()

    event = notification.event
    already_paid = (ChargeStatus.PAID, ChargeStatus.CHARGEBACK, ChargeStatus.REFUNDED)
    if event is NotificationEvent.CHARGE_PAID and charge.status in already_paid:
        # A late or repeated confirmation must never undo a chargeback or credit twice.
        return ApplyResult(changed=False, detail="already paid")
    target = {
        NotificationEvent.CHARGE_PAID: ChargeStatus.PAID,
        NotificationEvent.CHARGE_FAILED: ChargeStatus.FAILED,
        NotificationEvent.CHARGE_REFUNDED: ChargeStatus.REFUNDED,
        NotificationEvent.CHARGE_CHARGEBACK: ChargeStatus.CHARGEBACK,
        NotificationEvent.CHARGE_CHARGEBACK_RESOLVED: ChargeStatus.PAID,
    }.get(event)
    if target is None:
        raise PixServiceError(f"Evento não suportado: {event}.")
    if event is NotificationEvent.CHARGE_CHARGEBACK_RESOLVED and charge.status != ChargeStatus.CHARGEBACK:
        return ApplyResult(changed=False, detail="no open chargeback")
    changed = charge_transition(
        charge_id=charge.pk,
        to_status=target,
        source=source,
        e2e_id=notification.e2e_id,
        paid_at=notification.occurred_at,
    )
    return ApplyResult(changed=changed)


def _apply_payout(*, acquirer: Acquirer | None, notification: Notification, source: str) -> ApplyResult:
    from withdrawals.exceptions import WithdrawalNotFound
    from withdrawals.models import Withdrawal, WithdrawalStatus
    from withdrawals.services import withdrawal_transition

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
    target = {
        NotificationEvent.PAYOUT_PAID: WithdrawalStatus.PAID,
        NotificationEvent.PAYOUT_FAILED: WithdrawalStatus.FAILED,
        NotificationEvent.PAYOUT_RETURNED: WithdrawalStatus.REFUNDED,
    }[event]
    changed = withdrawal_transition(
        withdrawal_id=withdrawal.pk,
        to_status=target,
        source=source,
        e2e_id=notification.e2e_id,
        paid_at=notification.occurred_at,
        reason="refused by the acquirer" if target == WithdrawalStatus.FAILED else "",
    )
    return ApplyResult(changed=changed)
