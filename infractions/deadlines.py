"""``infraction.deadline`` notices: the merchant is told when the deadline of
a defence it has not sent is 48, 24 and 6 hours away (as Celcoin and Payzu
alert), once each.

Run by beat every few minutes. Each threshold an infraction has crossed is
recorded (a :class:`~infractions.models.DeadlineNotice`, unique per
infraction and hours) and one event is sent for the smallest of those not
recorded before: an infraction first seen 5 hours before its deadline gets
one notice (6 h), not three, and the 48 h and 24 h ones are never sent
after it. Runs side by side are safe: each infraction is taken under its row
lock, skipped while another run (or a change from the acquirer) holds it.
"""

from __future__ import annotations

import datetime as dt
import logging
import uuid

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from infractions.models import DeadlineNotice, Infraction
from infractions.selectors import undefended_ahead
from infractions.services import Event, infraction_emit

logger = logging.getLogger(__name__)

#: Hours before the deadline, largest first.
THRESHOLDS = (48, 24, 6)


def _due(now: dt.datetime) -> Q:
    """Open, the account's, undefended (or its defence refused), not waived, deadline ahead and within the
    largest threshold."""
    return undefended_ahead(now) & Q(
        account__isnull=False, defense_deadline__lte=now + dt.timedelta(hours=THRESHOLDS[0])
    )


def deadline_notices_send(*, now: dt.datetime | None = None) -> int:
    """Send the ``infraction.deadline`` events due at ``now``; how many were sent."""
    now = now or timezone.now()
    due = list(Infraction.objects.filter(_due(now)).order_by("defense_deadline").values_list("pk", flat=True))
    return sum(_notice(infraction_id, now) for infraction_id in due)


def _notice(infraction_id: uuid.UUID, now: dt.datetime) -> int:
    with transaction.atomic():
        infraction = Infraction.objects.select_for_update(skip_locked=True).filter(_due(now), pk=infraction_id).first()
        if infraction is None:  # taken by another run, or changed since it was listed
            return 0
        assert infraction.defense_deadline is not None  # _due
        left = infraction.defense_deadline - now
        crossed = {hours for hours in THRESHOLDS if left <= dt.timedelta(hours=hours)}
        noticed = set(DeadlineNotice.objects.filter(infraction=infraction).values_list("hours", flat=True))
        new = crossed - noticed
        if not new:
            return 0
        # ignore_conflicts: the unique constraint is the last word should a
        # notice appear without the row lock (staff, a shell).
        DeadlineNotice.objects.bulk_create(
            [DeadlineNotice(infraction=infraction, hours=hours) for hours in sorted(new)], ignore_conflicts=True
        )
        infraction_emit(infraction, Event.DEADLINE, hours_left=min(new))
        logger.info("infraction %s: deadline notice, %s h", infraction.pk, min(new))
        return 1
