"""Filters and pagination shared by the charge and withdrawal listings
(decisions §3). Invalid parameters are 422s keyed by the parameter name."""

from __future__ import annotations

import datetime as dt
import math
import re
import zoneinfo
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

import django_filters
from django import forms
from django.db.models import F, Model, QuerySet
from django.utils import timezone

from core.exceptions import ValidationFailed

TIMESTAMP_FORMAT = "%Y-%m-%d %H:%M:%S"
# strptime alone also takes one-digit fields and non-ASCII digits.
_TIMESTAMP_SHAPE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}")
#: Exactly the values TimestampField takes (real calendar dates, years
#: 0001-9999, leap years included), for the OpenAPI schema: a client, or a
#: fuzzer, can tell a valid filter from the schema alone.
TIMESTAMP_PATTERN = (
    r"^(?:"
    r"(?:[0-9]{3}[1-9]|[0-9]{2}[1-9][0-9]|[0-9][1-9][0-9]{2}|[1-9][0-9]{3})-"  # year 0001-9999
    r"(?:(?:0[1-9]|1[0-2])-(?:0[1-9]|1[0-9]|2[0-8])"  # days every month has
    r"|(?:0[13-9]|1[0-2])-(?:29|30)"  # 29 and 30, not in February
    r"|(?:0[13578]|1[02])-31)"
    r"|(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26])00)-02-29"  # leap years
    r") (?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]$"
)
BLANK_MESSAGE = "Este campo não pode ser em branco."
DEFAULT_PER_PAGE = 15
MAX_PER_PAGE = 100
#: Newest first, ``id`` breaking ties (decisions §3); the listing indexes end with these.
ORDER = ("-created_at", "-id")
#: The same order written so that no index yields it: the page's keys are
#: then sorted from the filters' own index range (see filter_and_paginate).
SORTED_ORDER = ((F("created_at") + dt.timedelta(0)).desc(), F("id").desc())
#: A paid_at window that ends further back than this is sorted, not walked.
WALK_HORIZON = dt.timedelta(days=1)


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
            if not _TIMESTAMP_SHAPE.fullmatch(str(value)):
                raise ValueError(value)
            naive = dt.datetime.strptime(str(value), TIMESTAMP_FORMAT)
        except ValueError:
            raise forms.ValidationError(self.error_messages["invalid"], code="invalid") from None
        return timezone.make_aware(naive, zoneinfo.ZoneInfo("America/Sao_Paulo"))


_DATE_SHAPE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


class DateOnlyField(forms.Field):
    """Exactly ``YYYY-MM-DD``, a real calendar date (a day of America/Sao_Paulo)."""

    default_error_messages = {"invalid": "Use o formato AAAA-MM-DD."}

    def to_python(self, value: Any) -> dt.date | None:
        if value in self.empty_values:
            return None
        try:
            if not _DATE_SHAPE.fullmatch(str(value)):
                raise ValueError(value)
            return dt.datetime.strptime(str(value), "%Y-%m-%d").date()
        except ValueError:
            raise forms.ValidationError(self.error_messages["invalid"], code="invalid") from None


class DatePeriodForm(forms.Form):
    date_start = DateOnlyField(required=False)
    date_end = DateOnlyField(required=False)


def date_period(params: Mapping[str, Any], *, required: str) -> tuple[dt.date, dt.date]:
    """``date_start`` and ``date_end``, both required (``required``: the
    message), or :class:`ValidationFailed` naming each bad one as the listings do."""
    form = DatePeriodForm(data=params)
    if errors := _refused(params, form.fields, form):
        raise ValidationFailed(errors)
    start, end = require_all(form.cleaned_data, ("date_start", "date_end"), required)
    return start, end


def require_all(cleaned: Mapping[str, Any], names: Sequence[str], message: str) -> list[Any]:
    """The values of ``names``, or :class:`ValidationFailed` with ``message``
    under each one missing (a period's bounds)."""
    values = [cleaned.get(name) for name in names]
    if missing := [name for name, value in zip(names, values, strict=True) if value is None]:
        raise ValidationFailed({name: [message] for name in missing})
    return values


class TimestampFilter(django_filters.Filter):
    field_class = TimestampField


class TimestampEndFilter(TimestampFilter):
    """Inclusive of the whole second shown: records carry microseconds, so
    ``<= 00:00:00`` would miss one shown as ``00:00:00``."""

    def filter(self, qs: QuerySet[Any], value: Any) -> QuerySet[Any]:
        if value is None:
            return qs
        try:
            end = value + dt.timedelta(seconds=1)
        except OverflowError:  # 9999-12-31 23:59:59: nothing comes after it
            return qs
        return qs.filter(**{f"{self.field_name}__lt": end})


def timestamp_filter(field_name: str, lookup: str) -> TimestampFilter:
    if lookup == "lte":
        return TimestampEndFilter(field_name=field_name)
    return TimestampFilter(field_name=field_name, lookup_expr=lookup)


class AsciiIntegerField(forms.IntegerField):
    """Digits 0-9 only: Django's IntegerField (int()) also takes full-width
    and Arabic-Indic digits, which the schema's integer type does not."""

    _SHAPE = re.compile(r"[+-]?[0-9]+")

    def to_python(self, value: Any) -> int | None:
        if value not in self.empty_values and not self._SHAPE.fullmatch(str(value).strip()):
            raise forms.ValidationError(self.error_messages["invalid"], code="invalid")
        return super().to_python(value)


class IntegerFilter(django_filters.NumberFilter):
    # Centavos are integers: "10.5" is a 422, not a silently rounded bound.
    field_class = AsciiIntegerField


def _integer(field_name: str, lookup: str) -> IntegerFilter:
    return IntegerFilter(field_name=field_name, lookup_expr=lookup)


class ListingFilterSet(django_filters.FilterSet):
    """A FilterSet whose form class is built once per class. django-filter
    builds it for every request (a new class, each filter's form field and
    label derived again): about a tenth of a filtered page's CPU (cProfile of
    ``GET /api/transactions``). The class holds field prototypes only; every
    form deep-copies them, as Django's forms do, so sharing it is safe. Its
    filters may not depend on the request (none here does)."""

    def get_form_class(self) -> type[forms.Form]:
        cls = type(self)
        form = cls.__dict__.get("_listing_form_class")
        if form is None:
            form = super().get_form_class()
            cls._listing_form_class = form
        return form  # type: ignore[no-any-return]


class RecordFilterSet(ListingFilterSet):
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
    page = AsciiIntegerField(min_value=1, required=False)
    per_page = AsciiIntegerField(min_value=1, max_value=MAX_PER_PAGE, required=False)


M = TypeVar("M", bound=Model)


def filter_and_paginate(
    filterset_class: type[django_filters.FilterSet],
    queryset: QuerySet[M],
    params: Mapping[str, Any],
    *,
    order: Sequence[str] = ORDER,
) -> tuple[list[M], dict[str, int]]:
    """Apply the listing's filters and page, newest first (``order``; the
    statement pages by ledger id, the order its balances follow). Raises
    :class:`ValidationFailed` naming every bad parameter."""
    filterset = filterset_class(data=params, queryset=queryset)
    page_form = PageForm(data=params)
    errors = {**_refused(params, filterset.filters, filterset.form), **_refused(params, page_form.fields, page_form)}
    if errors:
        raise ValidationFailed(errors)

    page = page_form.cleaned_data.get("page") or 1
    per_page = page_form.cleaned_data.get("per_page") or DEFAULT_PER_PAGE
    rows = filterset.qs.order_by(*order)
    total = rows.count()
    start = (page - 1) * per_page
    items: list[M] = []
    if start < total:
        # Deferred join: the page's keys come from the index alone (the
        # listing indexes carry created_at and id), so OFFSET skips index
        # entries instead of reading every skipped row from the table — page
        # 66,667 of a million charges costs one index pass, not a million
        # heap fetches. Only the page's rows are then read, by primary key.
        keys = rows
        # paid_at follows created_at (a record is paid minutes after it is
        # created), but the planner takes a filter's matches to be spread
        # evenly along the newest-first order, so it may fill the page by
        # walking that order from the top: through every record newer than
        # the paid_at window before the first match (500,000 index entries
        # for one day paid 90 days ago among 1,000,000 charges: 90-230 ms).
        # A window that ended more than WALK_HORIZON ago has its own keys
        # sorted instead, in proportion to its matches as the COUNT above;
        # a recent one keeps the walk, which then starts inside it.
        paid_until = filterset.form.cleaned_data.get("paid_at_end")
        if paid_until is not None and paid_until < timezone.now() - WALK_HORIZON:
            keys = rows.order_by(*SORTED_ORDER)
        items = list(queryset.filter(pk__in=keys.values("pk")[start : start + per_page]).order_by(*order))
    pagination = {
        "current_page": page,
        "last_page": max(1, math.ceil(total / per_page)),
        "per_page": per_page,
        "total": total,
    }
    return items, pagination


def valid_filterset(
    filterset_class: type[django_filters.FilterSet], queryset: QuerySet[Any], params: Mapping[str, Any]
) -> django_filters.FilterSet:
    """The bound filterset of a listing's export (no pages): the listing's
    rules for its filters, the same 422s. Raises :class:`ValidationFailed`."""
    filterset = filterset_class(data=params, queryset=queryset)
    if errors := _refused(params, filterset.filters, filterset.form):
        raise ValidationFailed(errors)
    return filterset


def _refused(params: Mapping[str, Any], names: Iterable[str], form: forms.Form) -> dict[str, list[str]]:
    """Every bad parameter among ``names``, with its messages. Django's forms
    read an empty value as "not given"; a parameter sent with no value is an
    invalid value here (``?id=`` is not a UUID), so a typo never silently
    widens a listing."""
    errors = {name: [BLANK_MESSAGE] for name in names if name in params and not str(params[name]).strip()}
    if not form.is_valid():
        errors.update({field: [str(m) for m in messages] for field, messages in form.errors.items()})
    return errors
