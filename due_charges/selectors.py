"""Reads of due-date charges: a :class:`payments.models.Charge` of kind
``due`` with its :class:`payments.due_models.DueCharge` (``charge.due``)."""

from __future__ import annotations

from typing import Any

import django_filters
from django.db.models import Q, QuerySet

from accounts.models import Account
from api.listing import DateOnlyField, ListingFilterSet, timestamp_filter
from core.documents import normalize_document
from core.selectors import get_by_uuid
from due_charges.exceptions import DueChargeNotFound
from payments.choices import ChargeKind
from payments.due_payments import now_in_brazil
from payments.models import Charge, ChargeStatus


class DateFilter(django_filters.Filter):
    field_class = DateOnlyField


def _overdue(queryset: QuerySet[Charge], name: str, value: str) -> QuerySet[Charge]:
    # Overdue: still pending after its due date (Brasília's today), payable or not.
    overdue = Q(status=ChargeStatus.PENDING, due__due_date__lt=now_in_brazil())
    return queryset.filter(overdue) if value == "true" else queryset.exclude(overdue)


def _document(queryset: QuerySet[Charge], name: str, value: str) -> QuerySet[Charge]:
    # Formatted or not, as the creation takes it; no valid CPF/CNPJ matches nothing.
    return queryset.filter(buyer_document=normalize_document(value) or value)


class DueChargeFilterSet(ListingFilterSet):
    status = django_filters.ChoiceFilter(field_name="status", choices=ChargeStatus.choices)
    due_date_from = DateFilter(field_name="due__due_date", lookup_expr="gte")
    due_date_to = DateFilter(field_name="due__due_date", lookup_expr="lte")
    overdue = django_filters.ChoiceFilter(choices=[("true", "true"), ("false", "false")], method=_overdue)
    created_at_start = timestamp_filter("created_at", "gte")
    created_at_end = timestamp_filter("created_at", "lte")
    document = django_filters.CharFilter(max_length=20, method=_document)
    txid = django_filters.CharFilter(field_name="txid", max_length=35)

    class Meta:
        model = Charge
        fields: list[str] = []


def due_charges_of(account: Account) -> QuerySet[Charge]:
    """The account's due-date charges with their terms (and acquirer, shown by key)."""
    return Charge.objects.filter(account=account, kind=ChargeKind.DUE).select_related("due", "acquirer")


def due_charge_get(*, account: Account, charge_id: Any) -> Charge:
    """The account's due-date charge, or :class:`DueChargeNotFound` for
    unknown, malformed or someone else's ids, and for immediate charges."""
    return get_by_uuid(due_charges_of(account), charge_id, DueChargeNotFound)
