"""Reads for charges."""

from __future__ import annotations

import uuid
from typing import Any

import django_filters
from django.db.models import QuerySet

from accounts.models import Account
from payments.exceptions import ChargeNotFound
from payments.models import Charge, ChargeStatus
from pix_service.listing import RecordFilterSet


class ChargeFilterSet(RecordFilterSet):
    status = django_filters.ChoiceFilter(field_name="status", choices=ChargeStatus.choices)

    class Meta:
        model = Charge
        fields: list[str] = []


def charges_of(account: Account) -> QuerySet[Charge]:
    return Charge.objects.filter(account=account)


def charge_get(*, account: Account, charge_id: Any) -> Charge:
    """The account's charge, or :class:`ChargeNotFound` for unknown, malformed
    or someone else's ids (no difference visible from outside)."""
    try:
        key = uuid.UUID(str(charge_id))
    except ValueError:
        raise ChargeNotFound() from None
    charge = charges_of(account).filter(pk=key).first()
    if charge is None:
        raise ChargeNotFound()
    return charge
