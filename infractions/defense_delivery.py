"""Delivering a merchant's defence to the acquirer (``infractions.tasks.send_defense``).

The defence was recorded by :func:`infractions.services.infraction_defend`;
here it goes to the acquirer through the one guarded call
(:func:`acquirers.calls.call`, operation ``defend_infraction``), with no
database transaction or connection held while it answers:

- **taken** (or the acquirer already has a defence: a delivery asked again
  after an unclear answer): ``defense_sent_at`` is set, and an open
  infraction is in defence;
- **refused** for good (:class:`~acquirers.adapters.base.AcquirerDeclined`:
  closed there, past its deadline): the refusal is kept in
  ``defense_error`` for the merchant and staff, and never sent again;
- **unknown** (a timeout, a 5xx, the acquirer busy or its circuit open):
  nothing changes and the task asks again later; beat's sweep
  (:func:`defenses_sweep`) takes up deliveries whose task was lost.

Two deliveries of one defence never run at once (a lock in Redis), and an
acquirer asked twice answers "already defended" the second time.
"""

from __future__ import annotations

import datetime as dt
import enum
import logging
import uuid

from django.core.cache import cache
from django.db import transaction
from django.utils import timezone

from acquirers import calls
from acquirers.adapters.base import DefenseAttachment, InfractionDefense
from infractions.choices import InfractionStatus
from infractions.defenses import defense_send_later
from infractions.models import Infraction
from infractions.polling import infractions_supported

logger = logging.getLogger(__name__)

#: The operation's name for acquirers.calls and acquirers.capacity.
OPERATION = "defend_infraction"
#: A defence not delivered this long after it was submitted is the sweep's.
SWEEP_AFTER = dt.timedelta(minutes=2)
#: How long one delivery may hold the lock (well past any acquirer's deadline).
LOCK_SECONDS = 300
NOT_SUPPORTED = "Esta adquirente não recebe defesas pela API: a equipe entrega a defesa por outro canal."


class Delivery(enum.StrEnum):
    SENT = "sent"
    DECLINED = "declined"
    #: No definitive answer: asked again later.
    UNKNOWN = "unknown"
    #: Nothing to deliver (already delivered or refused, no defence, closed) or another delivery is running.
    SKIPPED = "skipped"


def _pending(infraction: Infraction) -> bool:
    return (
        infraction.defense_submitted_at is not None
        and infraction.defense_sent_at is None
        and not infraction.defense_error
        and not infraction.is_closed
    )


def defense_send(*, infraction_id: uuid.UUID | str) -> Delivery:
    """Deliver the defence of ``infraction_id`` once (see the module docstring)."""
    lock = f"infraction-defense:{infraction_id}"
    if not cache.add(lock, "1", LOCK_SECONDS):
        return Delivery.SKIPPED  # another worker is delivering it right now
    try:
        return _send(infraction_id)
    finally:
        cache.delete(lock)


def _send(infraction_id: uuid.UUID | str) -> Delivery:
    infraction = Infraction.objects.select_related("acquirer").filter(pk=infraction_id).first()
    if infraction is None or not _pending(infraction):
        return Delivery.SKIPPED
    acquirer = infraction.acquirer
    if not infractions_supported(acquirer):
        _refused(infraction.pk, NOT_SUPPORTED)
        return Delivery.DECLINED
    defense = InfractionDefense(
        external_id=infraction.external_id,
        text=infraction.defense_text,
        attachments=tuple(
            DefenseAttachment(name=a.name, content_type=a.content_type, content=bytes(a.content))
            for a in infraction.attachments.all()
        ),
    )
    call = calls.call(acquirer, OPERATION, lambda adapter: adapter.defend_infraction(defense))
    if call.outcome is calls.Outcome.OK:
        with transaction.atomic():
            locked = Infraction.objects.select_for_update().get(pk=infraction.pk)
            locked.defense_sent_at = timezone.now()
            fields = ["defense_sent_at", "updated_at"]
            if locked.status == InfractionStatus.OPEN:
                locked.status = InfractionStatus.IN_DEFENSE
                fields.append("status")
            locked.save(update_fields=fields)
        return Delivery.SENT
    if call.outcome in (calls.Outcome.DECLINED, calls.Outcome.NOT_SUPPORTED):
        _refused(infraction.pk, f"A adquirente recusou a defesa: {call.error_message}")
        return Delivery.DECLINED
    logger.warning(
        "acquirer %s: defence of infraction %s not confirmed (%s: %s); asked again later",
        acquirer.key,
        infraction.pk,
        call.outcome,
        call.error_message,
    )
    return Delivery.UNKNOWN


def _refused(infraction_id: uuid.UUID, error: str) -> None:
    Infraction.objects.filter(pk=infraction_id, defense_sent_at__isnull=True).update(
        defense_error=error[:500], updated_at=timezone.now()
    )
    logger.warning("infraction %s: defence refused: %s", infraction_id, error)


def _skip_key(infraction_id: uuid.UUID | str) -> str:
    return f"infraction-defense-next:{infraction_id}"


def defense_sweep_skip(*, infraction_id: uuid.UUID | str, seconds: float) -> None:
    """The task asks again in ``seconds``: the sweep leaves it alone until then."""
    cache.set(_skip_key(infraction_id), "1", max(1, int(seconds) + 30))


def defenses_sweep(*, older_than: dt.timedelta = SWEEP_AFTER, limit: int = 200) -> int:
    """Beat: hand to a worker again the defences submitted more than
    ``older_than`` ago and not delivered (their task lost, or its retries
    spent), except those whose next ask is already scheduled. How many."""
    ids = list(
        Infraction.objects.filter(
            defense_submitted_at__lte=timezone.now() - older_than,
            defense_sent_at__isnull=True,
            defense_error="",
            closed_at__isnull=True,
        )
        .order_by("defense_submitted_at")
        .values_list("pk", flat=True)[:limit]
    )
    handed = 0
    for infraction_id in ids:
        if cache.get(_skip_key(infraction_id)) is not None:
            continue
        defense_sweep_skip(infraction_id=infraction_id, seconds=older_than.total_seconds())
        defense_send_later(infraction_id=infraction_id)
        handed += 1
    return handed
