"""Reads for charges."""

from __future__ import annotations

from typing import Any

import django_filters
from django.db.models import QuerySet

from accounts.models import Account
from payments.exceptions import ChargeNotFound
from payments.models import Charge, ChargeStatus
from pix_service.listing import RecordFilterSet
from pix_service.selectors import get_by_uuid


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
    return get_by_uuid(charges_of(account), charge_id, ChargeNotFound)
