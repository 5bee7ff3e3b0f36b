"""The merchant's defence of an infraction (or staff's on its behalf): kept
here, then handed to a worker that delivers it to the acquirer
(:mod:`infractions.defense_delivery`)."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Sequence

from django.db import transaction
from django.utils import timezone

from accounts.models import Account
from core import dispatch
from infractions import exceptions as err
from infractions.models import DefenseAttachment, Infraction

# --------------------------------------------------------------------------- the defence


@dataclasses.dataclass(frozen=True)
class Attachment:
    name: str
    content_type: str
    content: bytes


def infraction_defend(
    *,
    infraction_id: uuid.UUID | str,
    text: str,
    attachments: Sequence[Attachment] = (),
    by: str,
    account: Account | None = None,
) -> Infraction:
    """Record the defence (``account``: the merchant's own infractions only;
    None: staff on its behalf) and hand it to a worker for the acquirer.
    Refused with nothing changed when the infraction is closed, already
    defended (unless the acquirer refused that defence), waived, or past its
    deadline (409)."""
    with transaction.atomic():
        found = Infraction.objects.select_for_update().filter(pk=infraction_id)
        if account is not None:
            found = found.filter(account=account)
        infraction = found.first()
        if infraction is None:
            raise err.InfractionNotFound()
        now = timezone.now()
        if infraction.is_closed:
            raise err.DefenseNotAllowed(err.DEFENSE_CLOSED)
        # A defence the acquirer refused (too long, a file it did not take...)
        # may be sent again, corrected, while the deadline allows.
        if infraction.defense_submitted_at is not None and not infraction.defense_error:
            raise err.DefenseNotAllowed(err.DEFENSE_ALREADY_SENT)
        if infraction.defense_waived_at is not None:
            raise err.DefenseNotAllowed(err.DEFENSE_WAIVED)
        if infraction.defense_deadline is not None and now >= infraction.defense_deadline:
            raise err.DefenseNotAllowed(err.DEFENSE_DEADLINE_PASSED)
        infraction.defense_text = text
        infraction.defense_by = by[:150]
        infraction.defense_submitted_at = now
        infraction.defense_sent_at, infraction.defense_error = None, ""
        infraction.save(
            update_fields=[
                "defense_text",
                "defense_by",
                "defense_submitted_at",
                "defense_sent_at",
                "defense_error",
                "updated_at",
            ]
        )
        infraction.attachments.all().delete()
        DefenseAttachment.objects.bulk_create(
            DefenseAttachment(
                infraction=infraction,
                name=a.name[:200],
                content_type=a.content_type[:100],
                size=len(a.content),
                content=a.content,
            )
            for a in attachments
        )
        transaction.on_commit(lambda: defense_send_later(infraction_id=infraction.pk))
    return infraction


def defense_send_later(*, infraction_id: uuid.UUID | str, countdown: float = 0) -> None:
    """Hand the defence to a worker (``infractions.tasks.send_defense``); a lost
    hand-off is taken by beat's sweep of defences not yet delivered."""
    dispatch.enqueue(
        "infractions.tasks.send_defense", str(infraction_id), countdown=countdown, left_to="the defences' sweep"
    )
