"""Reads for infractions: the merchant's listing and read, and the statement's
lookup of the charge a MED entry is for."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import django_filters
from django.db.models import OuterRef, Prefetch, Q, QuerySet, Subquery, UUIDField
from django.db.models.functions import Cast, Substr

from accounts.models import Account
from accounts.selectors import StatementReference
from api.listing import ListingFilterSet, timestamp_filter
from core.selectors import get_by_uuid
from infractions.choices import InfractionStatus
from infractions.exceptions import InfractionNotFound
from infractions.models import DefenseAttachment, Infraction

#: What a defence's attachment shows (its ``content`` is never read to list it: up to 2 MB each).
ATTACHMENT_COLUMNS = ("id", "infraction_id", "name", "content_type", "size")


#: An open infraction whose defence deadline ends within this, undefended, needs
#: a person now: the back office's queue filter, its overview card and the
#: ``pix_infractions_deadline_near`` gauge all count them with :func:`deadline_near`.
DEADLINE_NEAR = dt.timedelta(hours=24)


def undefended() -> Q:
    """No defence, or one the acquirer refused (a new one may be sent)."""
    return Q(defense_submitted_at__isnull=True) | (Q(defense_sent_at__isnull=True) & ~Q(defense_error=""))


def undefended_ahead(now: dt.datetime) -> Q:
    """Open, nobody defended it (:func:`undefended`) nor gave up defending it, its deadline still ahead."""
    return undefended() & Q(closed_at__isnull=True, defense_waived_at__isnull=True, defense_deadline__gt=now)


def deadline_near(now: dt.datetime) -> Q:
    """:func:`undefended_ahead`, the deadline within :data:`DEADLINE_NEAR`."""
    return undefended_ahead(now) & Q(defense_deadline__lte=now + DEADLINE_NEAR)


class InfractionFilterSet(ListingFilterSet):
    """The listing's filters: the others' names (``created_at_start``/``_end``
    as the charges' and withdrawals'), and the charge as ``transaction_id``."""

    status = django_filters.ChoiceFilter(field_name="status", choices=InfractionStatus.choices)
    transaction_id = django_filters.UUIDFilter(field_name="charge_id")
    e2e_id = django_filters.CharFilter(field_name="e2e_id", max_length=64)
    created_at_start = timestamp_filter("created_at", "gte")
    created_at_end = timestamp_filter("created_at", "lte")

    class Meta:
        model = Infraction
        fields: list[str] = []


def infractions_of(account: Account) -> QuerySet[Infraction]:
    """The account's infractions, each with its defence's attachments (one
    query per page, without their content)."""
    attachments = DefenseAttachment.objects.only(*ATTACHMENT_COLUMNS).order_by("id")
    return Infraction.objects.filter(account=account).prefetch_related(Prefetch("attachments", queryset=attachments))


def infraction_get(*, account: Account, infraction_id: Any) -> Infraction:
    """The account's infraction, or :class:`InfractionNotFound` for unknown,
    malformed or someone else's ids (no difference visible from outside)."""
    return get_by_uuid(infractions_of(account), infraction_id, InfractionNotFound)


def infraction_key(raw_id: Any) -> uuid.UUID:
    """A path's id as a UUID; :class:`InfractionNotFound` when it is not one
    (a malformed id is just unknown)."""
    try:
        return uuid.UUID(str(raw_id))
    except ValueError:
        raise InfractionNotFound() from None


# --------------------------------------------------------------------------- statement

#: How infractions.services names its ledger entries: ``infraction:<uuid>:hold``,
#: ``infraction:<uuid>:release`` and ``infraction:<uuid>:returned:<centavos>``.
_REFERENCE = (
    r"^infraction:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}:(hold|release|returned:[0-9]{1,18})$"
)


def infraction_charge_id() -> Subquery:
    """The charge of the infraction a MED entry's reference names (only
    evaluated where :data:`STATEMENT_INFRACTION`'s pattern matches, so the
    cast always reads a uuid)."""
    infraction = Cast(Substr(OuterRef("reference"), len("infraction:") + 1, 36), UUIDField())
    return Subquery(Infraction.objects.filter(pk=infraction).order_by().values("charge_id")[:1])


#: The statement shows a block, its release and a MED return as entries of the disputed charge.
STATEMENT_INFRACTION = StatementReference(pattern=_REFERENCE, record_type="transaction", record_id=infraction_charge_id)
