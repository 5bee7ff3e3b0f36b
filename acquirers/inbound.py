"""What acquirers push to us: store, verify, dispatch.

An inbound notification is authenticated by the adapter's cheap check (a
signature, the URL's token), then stored raw, then verified (and, for
adapters that must, confirmed with the acquirer), then each of its events
is handed to the app that owns the record it names. A request that fails
the cheap check is kept only truncated: whoever can reach the URL cannot
make us store megabytes.

The apps that own records (payments: charges; withdrawals: payouts;
infractions; recurrences: Pix Automático's recurrences and cycles) register
their handler in ``AppConfig.ready`` (like dj-stripe's webhook handlers):
this layer sits below them and never imports them. Re-applying an event is
a no-op; that is each handler's promise.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, Protocol, get_args

from django.db import DatabaseError
from django.utils import timezone

from acquirers import adapters
from acquirers.adapters.base import (
    NOTIFICATION_TOKEN_HEADER,
    AdapterError,
    InvalidNotification,
    InvalidOptions,
    Notification,
)
from acquirers.exceptions import UnknownNotificationRecord
from acquirers.models import Acquirer, InboundNotification
from core import connections
from core.exceptions import PixServiceError

logger = logging.getLogger(__name__)

# Headers worth keeping for forensics; never credentials of ours (the
# notification token is a secret of the URL, handed to the adapter only).
_DROP_HEADERS = {"cookie", "authorization", "x-secret-key", NOTIFICATION_TOKEN_HEADER.lower()}

#: What is kept of the body of a request that failed authentication.
REJECTED_BODY_KEPT_BYTES = 2048


@dataclass(frozen=True)
class ApplyResult:
    """What one event did: ``changed`` when a record moved; ``detail`` says
    why it did not, when that is worth knowing."""

    changed: bool
    detail: str = ""


# --------------------------------------------------------------------------- dispatch

#: The kind of record an event is about: the part of its name before the dot
#: (``charge.paid`` → ``charge``, ``payout.failed`` → ``payout``,
#: ``recurrence.cycle_changed`` → ``recurrence``).
EventKind = Literal["charge", "payout", "infraction", "recurrence"]
EVENT_KINDS: tuple[EventKind, ...] = get_args(EventKind)


class EventHandler(Protocol):
    """Applies one event to the record its ``reference`` names. ``acquirer``
    None means the caller already resolved ownership (sandbox, staff);
    ``strict`` (a client asked for exactly this change) refuses what would
    otherwise be late news changing nothing. Raises a
    :class:`~core.exceptions.PixServiceError` for an event it refuses (an
    unknown or foreign record, a change the status does not allow)."""

    def __call__(
        self, *, acquirer: Acquirer | None, notification: Notification, source: str, strict: bool
    ) -> ApplyResult: ...


_HANDLERS: dict[str, EventHandler] = {}


def register(kind: EventKind, handler: EventHandler) -> None:
    """Make ``handler`` apply the events of ``kind``. Called from the owning
    app's ``AppConfig.ready``; registering again replaces (a reloaded app)."""
    if kind not in EVENT_KINDS:
        raise ValueError(f"unknown event kind {kind!r}: one of {', '.join(EVENT_KINDS)}")
    _HANDLERS[kind] = handler


def event_kind(notification: Notification) -> str:
    """The kind of record ``notification`` is about (see :data:`EventKind`)."""
    return notification.event.value.partition(".")[0]


def notification_apply(
    *, acquirer: Acquirer | None, notification: Notification, source: str, strict: bool = False
) -> ApplyResult:
    """Hand one event to the handler of its kind. An event no installed app
    handles is news of a record we do not have: refused like an unknown
    reference (:class:`UnknownNotificationRecord`)."""
    handler = _HANDLERS.get(event_kind(notification))
    if handler is None:
        raise UnknownNotificationRecord()
    return handler(acquirer=acquirer, notification=notification, source=source, strict=strict)


# --------------------------------------------------------------------------- store, verify, process


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
    # API Pix adapters confirm each Pix with the PSP (GET /pix/{e2eid}) here.
    connections.release_connections(before=f"acquirer {inbound.acquirer.key} notification lookup")
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
