"""Filters and pagination shared by the charge and withdrawal listings
(decisions §3). Invalid parameters are 422s keyed by the parameter name."""

from __future__ import annotations

import datetime as dt
import math
import zoneinfo
from collections.abc import Mapping
from typing import Any, TypeVar

import django_filters
from django import forms
from django.db.models import Model, QuerySet
from django.utils import timezone

from pix_service.exceptions import ValidationFailed

TIMESTAMP_FORMAT = "%Y-%m-%d %H:%M:%S"
DEFAULT_PER_PAGE = 15
MAX_PER_PAGE = 100


class TimestampField(forms.Field):
    """Exactly ``YYYY-MM-DD HH:mm:ss`` in America/Sao_Paulo (decisions §3).

    Django's DateTimeField also takes ISO 8601 with offsets and fractions;
    the contract names one format, so nothing else is accepted.
    """

    default_error_messages = {"invalid": "Use o formato AAAA-MM-DD HH:mm:ss."}

    def to_python(self, value: Any) -> dt.datetime | None:
        if value in self.empty_values:
            return None
        try:
            naive = dt.datetime.strptime(str(value), TIMESTAMP_FORMAT)
        except ValueError:
            raise forms.ValidationError(self.error_messages["invalid"], code="invalid") from None
        return timezone.make_aware(naive, zoneinfo.ZoneInfo("America/Sao_Paulo"))


class TimestampFilter(django_filters.Filter):
    field_class = TimestampField


class TimestampEndFilter(TimestampFilter):
    """Inclusive of the whole second shown: records carry microseconds, so
    ``<= 00:00:00`` would miss one shown as ``00:00:00``."""

    def filter(self, qs: QuerySet[Any], value: Any) -> QuerySet[Any]:
        if value is None:
            return qs
        return qs.filter(**{f"{self.field_name}__lt": value + dt.timedelta(seconds=1)})


def timestamp_filter(field_name: str, lookup: str) -> TimestampFilter:
    if lookup == "lte":
        return TimestampEndFilter(field_name=field_name)
    return TimestampFilter(field_name=field_name, lookup_expr=lookup)


class IntegerFilter(django_filters.NumberFilter):
    # Centavos are integers: "10.5" is a 422, not a silently rounded bound.
    field_class = forms.IntegerField


def _integer(field_name: str, lookup: str) -> IntegerFilter:
    return IntegerFilter(field_name=field_name, lookup_expr=lookup)


class RecordFilterSet(django_filters.FilterSet):
    """Filters of both listings; subclasses set ``Meta.model`` and ``status`` choices."""

    id = django_filters.UUIDFilter(field_name="id")
    e2e_id = django_filters.CharFilter(field_name="e2e_id", max_length=64)
    amount_min = _integer("amount", "gte")
    amount_max = _integer("amount", "lte")
    paid_at_start = timestamp_filter("paid_at", "gte")
    paid_at_end = timestamp_filter("paid_at", "lte")
    created_at_start = timestamp_filter("created_at", "gte")
    created_at_end = timestamp_filter("created_at", "lte")


class PageForm(forms.Form):
    page = forms.IntegerField(min_value=1, required=False)
    per_page = forms.IntegerField(min_value=1, max_value=MAX_PER_PAGE, required=False)


M = TypeVar("M", bound=Model)


def filter_and_paginate(
    filterset_class: type[django_filters.FilterSet], queryset: QuerySet[M], params: Mapping[str, Any]
) -> tuple[list[M], dict[str, int]]:
    """Apply the listing's filters and page, newest first. Raises
    :class:`ValidationFailed` naming every bad parameter."""
    filterset = filterset_class(data=params, queryset=queryset)
    page_form = PageForm(data=params)
    errors: dict[str, list[str]] = {}
    if not filterset.is_valid():
        errors.update({field: [str(m) for m in messages] for field, messages in filterset.errors.items()})
    if not page_form.is_valid():
        errors.update({field: [str(m) for m in messages] for field, messages in page_form.errors.items()})
    if errors:
        raise ValidationFailed(errors)

    page = page_form.cleaned_data.get("page") or 1
    per_page = page_form.cleaned_data.get("per_page") or DEFAULT_PER_PAGE
    rows = filterset.qs.order_by("-created_at", "-id")
    total = rows.count()
    items = list(rows[(page - 1) * per_page : page * per_page]) if (page - 1) * per_page < total else []
    pagination = {
        "current_page": page,
        "last_page": max(1, math.ceil(total / per_page)),
        "per_page": per_page,
        "total": total,
    }
    return items, pagination
