"""Reads of recurrences and their cycles, always through the account: another
account's id reads as an unknown one (404)."""

from __future__ import annotations

from typing import Any

import django_filters
from django.db.models import QuerySet

from accounts.models import Account
from api.listing import ListingFilterSet
from core.documents import normalize_document
from core.selectors import get_by_uuid
from recurrences.exceptions import CycleNotFound, RecurrenceNotFound
from recurrences.models import Cycle, Recurrence, RecurrenceStatus


def _document(queryset: QuerySet[Recurrence], name: str, value: str) -> QuerySet[Recurrence]:
    # Formatted or not, as the creation takes it; no valid CPF/CNPJ matches nothing.
    return queryset.filter(debtor_document=normalize_document(value) or value)


class RecurrenceFilterSet(ListingFilterSet):
    status = django_filters.ChoiceFilter(field_name="status", choices=RecurrenceStatus.choices)
    contract = django_filters.CharFilter(field_name="contract", max_length=35)
    debtor_document = django_filters.CharFilter(max_length=20, method=_document)

    class Meta:
        model = Recurrence
        fields: list[str] = []


class CycleFilterSet(ListingFilterSet):
    class Meta:
        model = Cycle
        fields: list[str] = []


def recurrences_of(account: Account) -> QuerySet[Recurrence]:
    """The account's recurrences (the acquirer shown by key)."""
    return Recurrence.objects.filter(account=account).select_related("acquirer")


def recurrence_get(*, account: Account, recurrence_id: Any) -> Recurrence:
    """The account's recurrence, or :class:`RecurrenceNotFound` for unknown,
    malformed or someone else's ids."""
    return get_by_uuid(recurrences_of(account), recurrence_id, RecurrenceNotFound)


def cycles_of(recurrence: Recurrence) -> QuerySet[Cycle]:
    """The recurrence's cycles with their charges (one query for a page)."""
    return Cycle.objects.filter(recurrence=recurrence).select_related("charge")


def cycle_get(*, recurrence: Recurrence, index: Any) -> Cycle:
    """Cycle ``index`` of the recurrence, or :class:`CycleNotFound` (not opened yet, or not a number)."""
    try:
        number = int(str(index))
    except ValueError:
        raise CycleNotFound() from None
    cycle = cycles_of(recurrence).filter(index=number).first() if 0 <= number < 2**31 else None
    if cycle is None:
        raise CycleNotFound()
    return cycle
