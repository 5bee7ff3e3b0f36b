"""Filters and pagination shared by the charge and withdrawal listings
(decisions §3). Invalid parameters are 422s keyed by the parameter name."""

from __future__ import annotations

import datetime as dt
import math
import re
import zoneinfo
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import django_filters
from django import forms
from django.db.models import F, Model, QuerySet
from django.utils import timezone

from api.listing_statements import Scope, inclusive_end, listing
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
    """Inclusive of the whole second shown (:func:`inclusive_end`)."""

    statement_value = staticmethod(inclusive_end)

    def filter(self, qs: QuerySet[Any], value: Any) -> QuerySet[Any]:
        end = None if value is None else inclusive_end(value)
        if end is None:
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


class _SharedFields(dict[str, forms.Field]):
    """A form's ``base_fields`` that its instances share instead of each
    deep-copying them (Django's ``BaseForm.__init__``): a tenth of a filtered
    page's CPU (``python -m bench.profile list``). Safe for what validating
    a listing's parameters does with them: a field keeps no state of a call
    (the value and the errors travel in arguments, exceptions and the
    form's own ``cleaned_data``), and nothing changes a listing form's fields
    after the class is built."""

    def __deepcopy__(self, memo: dict[int, Any]) -> _SharedFields:
        return self


F_ = TypeVar("F_", bound=forms.Form)


def shared_fields(form_class: type[F_]) -> type[F_]:
    """``form_class`` whose instances share its fields (:class:`_SharedFields`)."""
    shared = type(form_class.__name__, (form_class,), {})
    # After the class exists: Django's form metaclass sets base_fields itself.
    shared.base_fields = _SharedFields(form_class.base_fields)  # type: ignore[attr-defined]
    return shared


class ListingFilterSet(django_filters.FilterSet):
    """A FilterSet whose form class is built once per class. django-filter
    builds it for every request (a new class, each filter's form field and
    label derived again): about a tenth of a filtered page's CPU (cProfile of
    ``GET /api/transactions``). Its filters may not depend on the request
    (none here does)."""

    def get_form_class(self) -> type[forms.Form]:
        return type(self).form_class()

    @classmethod
    def form_class(cls) -> type[forms.Form]:
        """The form of ``cls``'s filters, built once. Every instance
        deep-copies its fields, as Django's forms do, so sharing the class is
        safe; :meth:`shared_form_class`'s instances share them too."""
        form = cls.__dict__.get("_listing_form_class")
        if form is None:
            form = super().get_form_class(cls(queryset=cls._meta.model._default_manager.none()))
            cls._listing_form_class = form
        return form  # type: ignore[no-any-return]

    @classmethod
    def shared_form_class(cls) -> type[forms.Form]:
        """:meth:`form_class` with its fields shared by every instance (:func:`shared_fields`)."""
        form = cls.__dict__.get("_shared_form_class")
        if form is None:
            form = shared_fields(cls.form_class())
            cls._shared_form_class = form
        return form


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


SharedPageForm = shared_fields(PageForm)


M = TypeVar("M", bound=Model)


class _Rows(Protocol[M]):
    def count(self) -> int: ...

    def page(self, start: int, size: int) -> list[M]: ...


def filter_and_paginate(
    filterset_class: type[django_filters.FilterSet],
    records: QuerySet[M] | Scope[M],
    params: Mapping[str, Any],
    *,
    order: Sequence[str] = ORDER,
) -> tuple[list[M], dict[str, int]]:
    """Apply the listing's filters and page, newest first (``order``; the
    statement pages by ledger id, the order its balances follow). Raises
    :class:`ValidationFailed` naming every bad parameter. ``records`` as a
    :class:`Scope` (a :class:`ListingFilterSet`'s): the count and the page
    are statements compiled once per set of filters
    (:mod:`api.listing_statements`); as a queryset, the ORM's."""
    scope: Scope[M] | None = None
    filterset: django_filters.FilterSet | None = None
    if isinstance(records, Scope) and issubclass(filterset_class, ListingFilterSet):
        scope, form = records, filterset_class.shared_form_class()(data=params)
    else:
        filterset = filterset_class(data=params, queryset=_queryset(records))
        form = filterset.form
    page_form = SharedPageForm(data=params)
    errors = {**_refused(params, filterset_class.base_filters, form), **_refused(params, page_form.fields, page_form)}
    if errors:
        raise ValidationFailed(errors)

    page = page_form.cleaned_data.get("page") or 1
    per_page = page_form.cleaned_data.get("per_page") or DEFAULT_PER_PAGE
    # paid_at follows created_at (a record is paid minutes after it is
    # created), but the planner takes a filter's matches to be spread
    # evenly along the newest-first order, so it may fill the page by
    # walking that order from the top: through every record newer than
    # the paid_at window before the first match (500,000 index entries
    # for one day paid 90 days ago among 1,000,000 charges: 90-230 ms).
    # A window that ended more than WALK_HORIZON ago has its own keys
    # sorted instead, in proportion to its matches as the COUNT; a recent
    # one keeps the walk, which then starts inside it.
    paid_until = form.cleaned_data.get("paid_at_end")
    keys_order: Sequence[Any] = order
    if paid_until is not None and paid_until < timezone.now() - WALK_HORIZON:
        keys_order = SORTED_ORDER
    rows: _Rows[M] | None = None
    if scope is not None:
        rows = listing(scope, filterset_class, form.cleaned_data, order=order, keys_order=keys_order)
    if rows is None:
        queryset = _queryset(records)
        filterset = filterset or filterset_class(data=params, queryset=queryset)
        rows = _OrmRows(queryset, filterset.qs, order, keys_order)

    start = (page - 1) * per_page
    if page == 1:
        # A first page that is not full holds every match: its length is
        # the total, and the COUNT is not sent (a filter by id or e2e_id, a
        # small account). A later page counts first, so that a page past
        # the end costs the COUNT alone, not an OFFSET through every match.
        items = rows.page(0, per_page)
        total = len(items) if len(items) < per_page else rows.count()
    else:
        total = rows.count()
        items = rows.page(start, per_page) if start < total else []
    pagination = {
        "current_page": page,
        "last_page": max(1, math.ceil(total / per_page)),
        "per_page": per_page,
        "total": total,
    }
    return items, pagination


def _queryset(records: QuerySet[M] | Scope[M]) -> QuerySet[M]:
    return records.queryset() if isinstance(records, Scope) else records


@dataclass(frozen=True)
class _OrmRows(Generic[M]):
    """The count and the page through the ORM (a listing with no scope, or
    one whose filters do not compile)."""

    queryset: QuerySet[M]
    filtered: QuerySet[M]
    order: Sequence[Any]
    keys_order: Sequence[Any]

    def count(self) -> int:
        return self.filtered.count()

    def page(self, start: int, size: int) -> list[M]:
        # Deferred join: the page's keys come from the index alone (the
        # listing indexes carry created_at and id), so OFFSET skips index
        # entries instead of reading every skipped row from the table — page
        # 66,667 of a million charges costs one index pass, not a million
        # heap fetches. Only the page's rows are then read, by primary key.
        keys = self.filtered.order_by(*self.keys_order).values("pk")[start : start + size]
        return list(self.queryset.filter(pk__in=keys).order_by(*self.order))


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
