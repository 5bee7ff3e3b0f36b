"""What acquirers tell us about charges and payouts, applied through the
same services the sandbox and the back office use. Re-applying is a no-op.

- Pushed: inbound notifications, authenticated by the adapter's cheap check
  (a signature, the URL's token), then stored raw, then verified (and, for
  adapters that must, confirmed with the acquirer), then applied. A request
  that fails the cheap check is kept only truncated: whoever can reach the
  URL cannot make us store megabytes.
- Pulled: status polling of charges left pending (reconciliation), whose
  answer is applied as the same events.
- Answered: a refund asked of the acquirer, applied once it says the money
  went back.
"""

from __future__ import annotations

import datetime as dt
import enum
import logging
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from django.core.cache import cache
from django.db import DatabaseError
from django.utils import timezone

from acquirers import adapters, chain
from acquirers.adapters.base import (
    NOTIFICATION_TOKEN_HEADER,
    AdapterError,
    InvalidNotification,
    InvalidOptions,
    Notification,
    NotificationEvent,
    ProviderChargeState,
    RefundRequest,
    RefundStatus,
)
from acquirers.models import Acquirer, InboundNotification
from core.exceptions import PixServiceError

logger = logging.getLogger(__name__)
T = TypeVar("T")

# Headers worth keeping for forensics; never credentials of ours (the
# notification token is a secret of the URL, handed to the adapter only).
_DROP_HEADERS = {"cookie", "authorization", "x-secret-key", NOTIFICATION_TOKEN_HEADER.lower()}


@dataclass(frozen=True)
class ApplyResult:
    changed: bool
    detail: str = ""


#: What is kept of the body of a request that failed authentication.
REJECTED_BODY_KEPT_BYTES = 2048


def notification_authenticate(*, acquirer: Acquirer, headers: Mapping[str, str], body: bytes) -> None:
    """The adapter's cheap check (it calls no acquirer), before anything is
    stored. Raises :class:`InvalidNotification`; an acquirer whose options
    this version cannot read authenticates nothing."""
    try:
        adapter = adapters.build(acquirer)
    except InvalidOptions as exc:
        logger.warning("acquirer %s: notification refused, unusable options: %s", acquirer.key, exc)
        raise InvalidNotification(f"the acquirer's options are unusable: {exc}"[:500]) from exc
    adapter.authenticate_notification(headers, body)


def notification_store(
    *, acquirer: Acquirer, headers: Mapping[str, str], body: bytes, remote_addr: str | None
) -> InboundNotification:
    """Keep an authenticated request exactly as received, before anything can fail."""
    return InboundNotification.objects.create(
        acquirer=acquirer,
        headers=_kept_headers(headers),
        body=_text(body),
        remote_addr=remote_addr,
    )


def notification_store_rejected(
    *, acquirer: Acquirer, headers: Mapping[str, str], body: bytes, remote_addr: str | None, reason: str
) -> InboundNotification:
    """Keep a request that failed authentication for forensics, its body cut
    to :data:`REJECTED_BODY_KEPT_BYTES` (the error says how long it was)."""
    kept = body[:REJECTED_BODY_KEPT_BYTES]
    if len(body) > len(kept):
        reason = f"{reason} (body of {len(body)} bytes, first {len(kept)} kept)"
    return InboundNotification.objects.create(
        acquirer=acquirer,
        headers=_kept_headers(headers),
        body=_text(kept),
        remote_addr=remote_addr,
        status=InboundNotification.Status.REJECTED,
        error=reason[:2000],
        processed_at=timezone.now(),
    )


def _kept_headers(headers: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in headers.items() if k.lower() not in _DROP_HEADERS}


def _text(body: bytes) -> str:
    # PostgreSQL text cannot hold NUL: kept visible as U+FFFD instead of failing the store.
    return body.decode("utf-8", errors="replace").replace("\x00", "\ufffd")


def notification_process(
    *, inbound: InboundNotification, body: bytes, headers: Mapping[str, str] | None = None
) -> list[ApplyResult]:
    """Verify with the adapter, then apply each event. ``headers`` are the
    request's as the adapter must see them (the stored ones lack secrets).

    Raises :class:`InvalidNotification` when verification fails (stored as
    rejected), and :class:`AdapterError` when the adapter could not confirm
    the news with the acquirer (stored as failed; the acquirer retries)."""
    try:
        notifications = adapters.build(inbound.acquirer).parse_notification(
            inbound.headers if headers is None else headers, body
        )
    except InvalidNotification as exc:
        _finish(inbound, InboundNotification.Status.REJECTED, str(exc))
        raise
    except AdapterError as exc:
        _finish(inbound, InboundNotification.Status.FAILED, f"not confirmed with the acquirer: {exc}"[:2000])
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


def notification_apply(
    *, acquirer: Acquirer | None, notification: Notification, source: str, strict: bool = False
) -> ApplyResult:
    """Apply one event to our charge (``reference`` = txid) or withdrawal
    (``reference`` = its idempotency id). ``acquirer`` None means the caller
    already resolved ownership (sandbox, staff).

    A confirmation that comes too late (a charge already refunded or charged
    back) is news an acquirer may send and changes nothing; with ``strict``
    (the sandbox drivers, where a client asked for exactly this change) it is
    refused like any change the status does not allow. A repeat of the change
    that made the status is a no-op either way."""
    if notification.event in PAYOUT_EVENTS:
        return _apply_payout(acquirer=acquirer, notification=notification, source=source)
    from payments.exceptions import ChargeNotFound
    from payments.models import Charge, ChargeStatus
    from payments.services import charge_transition

    charge = Charge.objects.filter(txid=notification.reference).only("pk", "status", "acquirer_id", "amount").first()
    if charge is None or (acquirer is not None and charge.acquirer_id != acquirer.pk):
        raise ChargeNotFound()
    if (
        notification.event is NotificationEvent.CHARGE_PAID
        and notification.amount is not None
        and notification.amount != charge.amount
    ):
        # Our charges have a fixed value: another amount is for staff, never credited as is.
        raise PixServiceError(f"Valor pago ({notification.amount}) difere do valor da cobrança ({charge.amount}).")

    event = notification.event
    already_paid = (ChargeStatus.PAID, ChargeStatus.CHARGEBACK, ChargeStatus.REFUNDED)
    late = strict and charge.status != ChargeStatus.PAID
    if event is NotificationEvent.CHARGE_PAID and charge.status in already_paid and not late:
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
    # The checks above read without the lock (a fast path); the same rules go
    # to the transition, which judges them again under the charge's lock.
    only_from: set[str] | None = None
    if event is NotificationEvent.CHARGE_PAID:
        only_from = {s.value for s in ChargeStatus} - {s.value for s in already_paid}
    elif event is NotificationEvent.CHARGE_CHARGEBACK_RESOLVED:
        only_from = {ChargeStatus.CHARGEBACK.value}
    changed = charge_transition(
        charge_id=charge.pk,
        to_status=target,
        source=source,
        e2e_id=notification.e2e_id,
        paid_at=notification.occurred_at,
        only_from=only_from,
        strict=strict,
    )
    return ApplyResult(changed=changed)


def _apply_payout(*, acquirer: Acquirer | None, notification: Notification, source: str) -> ApplyResult:
    from withdrawals.exceptions import WithdrawalNotFound
    from withdrawals.models import Withdrawal, WithdrawalStatus
    from withdrawals.services import withdrawal_payout_failure_report, withdrawal_transition

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
        changed = withdrawal_payout_failure_report(
            withdrawal_id=withdrawal.pk, acquirer=acquirer, source=source, reason="refused by the acquirer"
        )
        return ApplyResult(changed=changed, detail="" if changed else "kept as evidence: payout not settled")
    target = {
        NotificationEvent.PAYOUT_PAID: WithdrawalStatus.PAID,
        NotificationEvent.PAYOUT_RETURNED: WithdrawalStatus.REFUNDED,
    }[event]
    changed = withdrawal_transition(
        withdrawal_id=withdrawal.pk,
        to_status=target,
        source=source,
        e2e_id=notification.e2e_id,
        paid_at=notification.occurred_at,
    )
    return ApplyResult(changed=changed)


# --------------------------------------------------------------------------- pulled: reconciliation


def _call(acquirer: Acquirer, func: Callable[[], T]) -> T:
    """An acquirer call under the chain's hard deadline (an :class:`AcquirerTimeout`
    when it passes). The adapter's own budget (connect + read) is the soft one;
    this is the backstop."""
    limit = 2 * acquirer.deadline_seconds
    return chain.call_with_deadline(func, limit)


def charge_reconcile(*, charge_id: uuid.UUID | str) -> list[ApplyResult]:
    """Ask the charge's acquirer where a pending charge stands and apply what
    it says: paid (and refunded), or removed there (failed here). Raises
    :class:`AdapterError` when the acquirer cannot answer."""
    from payments.models import Charge, ChargeStatus

    charge = Charge.objects.select_related("acquirer").get(pk=charge_id)
    acquirer = charge.acquirer
    adapter = adapters.build(acquirer)
    if not adapter.supports_charge_status:
        return []
    status = _call(acquirer, lambda: adapter.charge_status(charge.txid))
    events = list(status.events)
    if status.state is ProviderChargeState.REMOVED and charge.status == ChargeStatus.PENDING:
        events = [Notification(event=NotificationEvent.CHARGE_FAILED, reference=charge.txid)]
    elif status.state is ProviderChargeState.NOT_FOUND:
        logger.warning("acquirer %s does not know charge %s", acquirer.key, charge.txid)
    return [notification_apply(acquirer=acquirer, notification=event, source="acquirer") for event in events]


def charges_reconcile(
    *,
    older_than: dt.timedelta = dt.timedelta(minutes=2),
    every: dt.timedelta = dt.timedelta(minutes=5),
    limit: int = 100,
    time_budget: float = 120.0,
) -> int:
    """Poll the acquirers of charges pending for longer than ``older_than``
    (their notification may have been lost), each charge at most once per
    ``every`` whichever process runs this, within ``time_budget`` seconds (well
    under the task time limit, whatever the acquirers do). Returns how many
    charges changed."""
    from payments.models import Charge, ChargeStatus

    pollable = []
    for acquirer in Acquirer.objects.all():
        try:
            if adapters.adapter_class(acquirer.adapter).supports_charge_status:
                pollable.append(acquirer.pk)
        except InvalidOptions:
            continue  # an adapter this version does not have: nothing to poll
    rows = list(
        Charge.objects.filter(
            status=ChargeStatus.PENDING, acquirer_id__in=pollable, created_at__lte=timezone.now() - older_than
        )
        .order_by("created_at")
        .values_list("pk", "acquirer_id")[:limit]
    )
    changed = 0
    down: set[int] = set()
    stop_at = time.monotonic() + time_budget
    for charge_id, acquirer_id in rows:
        if time.monotonic() > stop_at:
            break
        if acquirer_id in down:
            continue  # an acquirer that failed once this run is not asked again until the next
        if not cache.add(f"charge-reconcile:{charge_id}", "1", int(every.total_seconds())):
            continue  # polled recently, here or by another process
        try:
            changed += sum(r.changed for r in charge_reconcile(charge_id=charge_id))
        except AdapterError as exc:
            down.add(acquirer_id)
            logger.warning("reconciling charge %s: %s: %s", charge_id, type(exc).__name__, exc)
        except PixServiceError as exc:  # a refused transition, an amount that differs: staff's
            logger.warning("reconciling charge %s: %s", charge_id, exc.message)
    return changed


# --------------------------------------------------------------------------- answered: refunds


class RefundOutcome(enum.StrEnum):
    REFUNDED = "refunded"  # the acquirer returned the money; the charge is refunded
    PROCESSING = "processing"  # asked; the acquirer's callback (or asking again) finishes it
    MARKED = "marked"  # no money to move at the acquirer: marked refunded here only


class RefundFailed(PixServiceError):
    """The acquirer could not, or did not, return the money."""

    default_message = "A devolução não foi realizada pela adquirente."
    default_code = "refund_failed"


def refund_id_for(charge_id: uuid.UUID | str) -> str:
    """The devolução id of a charge's full refund: derived from the charge, so
    asking again names the same devolução (idempotent at the acquirer)."""
    return "D" + uuid.UUID(str(charge_id)).hex


def charge_refund(*, charge_id: uuid.UUID | str, actor: str, reason: str = "") -> RefundOutcome:
    """Refund a paid charge: ask its acquirer to return the Pix (when the
    adapter can) and apply ``refunded`` once the acquirer says it is done.
    Asking again for the same charge is idempotent and reports the current
    state. A charge in chargeback (MED already returned the money), or at an
    acquirer without refunds, is only marked refunded. A refund the acquirer
    is still processing reserves its amount at once (:mod:`payments.refunds`);
    a failed one gives it back. Never refused for want of balance: a refund
    may take it below zero (decisions §4)."""
    from payments import exceptions as payment_errors
    from payments.models import Charge, ChargeStatus, ChargeTransition
    from payments.refunds import charge_refund_release, charge_refund_reserve
    from payments.services import charge_transition

    charge = Charge.objects.select_related("acquirer").get(pk=charge_id)
    if charge.status not in (ChargeStatus.PAID, ChargeStatus.CHARGEBACK):
        raise payment_errors.TransitionNotAllowed("Só cobranças pagas ou contestadas podem ser estornadas.")
    try:
        adapter = adapters.build(charge.acquirer)
    except AdapterError as exc:  # an adapter this process lacks (the sandbox, switched off)
        raise RefundFailed(f"Adquirente indisponível para a devolução: {exc}"[:500]) from exc

    def mark() -> None:
        charge_transition(
            charge_id=charge.pk, to_status=ChargeStatus.REFUNDED, source=ChargeTransition.Source.STAFF, actor=actor
        )

    if charge.status == ChargeStatus.CHARGEBACK or not adapter.supports_refund:
        mark()
        return RefundOutcome.MARKED
    if not charge.e2e_id:
        raise RefundFailed("Cobrança paga sem e2e id: a devolução não pode ser pedida à adquirente.")
    request = RefundRequest(
        charge_id=charge.pk,
        txid=charge.txid,
        e2e_id=charge.e2e_id,
        refund_id=refund_id_for(charge.pk),
        amount=charge.amount,
        reason=reason,
    )
    try:
        result = _call(charge.acquirer, lambda: adapter.refund_charge(request))
    except AdapterError as exc:
        raise RefundFailed(f"Adquirente indisponível para a devolução: {exc}"[:500]) from exc
    if result.status is RefundStatus.FAILED:
        charge_refund_release(charge_id=charge.pk)  # the reservation of an earlier "processing", if any
        raise RefundFailed(f"Devolução não realizada pela adquirente: {result.reason or 'sem motivo'}"[:500])
    if result.status is RefundStatus.PROCESSING:
        # The money is the payer's already: reserved now, so it cannot be
        # withdrawn while the acquirer finishes (its callback, or asking again).
        charge_refund_reserve(charge_id=charge.pk)
        return RefundOutcome.PROCESSING
    mark()
    return RefundOutcome.REFUNDED
