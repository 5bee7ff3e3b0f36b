"""A listing's count and page as statements compiled once per process and
per set of filters given, instead of by the ORM on every request.

A filtered page of charges spent about a third of its CPU in the ORM
(py-spy under wrk, ``python -m bench.profile list``): the filterset applied
to a queryset, then the count and the page, with its key subquery, each
compiled, and each row built through the model iterable. Here the same two
statements are compiled by the ORM from the same filters, once for each
*shape* (model, scope, filters given, order), with placeholder values, and
checked by :func:`core.sql.statement_of` to bind exactly those values in that
order; a request binds its own. The rows are read through a plain cursor
into the model, as a read by id is (:func:`core.selectors.owned_by_uuid`).

Only plain filters are compiled: a field compared with the cleaned value
(django-filter's ``Filter.filter`` with no ``method``, ``exclude`` or
``distinct``) and the inclusive timestamp end. Anything else, or a statement
that does not bind what it was built with, makes :func:`compiled` answer
``None`` and the listing goes through the ORM as before: slower, never
different.

This is the api's one module of hand-written SQL. Plans:
tests/perf/test_listing_plans.py (every filter reads an index); round
trips: tests/perf/test_query_counts.py (COUNT and page); answers as the
ORM's: tests/platform/test_listing_statements.py.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import django_filters
from django.db import connections, router
from django.db.models import Count, Model, QuerySet
from django_filters.constants import EMPTY_VALUES

from core.sql import from_rows, plain_columns, statement_of

log = logging.getLogger(__name__)

M = TypeVar("M", bound=Model)

# The page's LIMIT and OFFSET are written into the SQL by the ORM, not bound:
# the statement is compiled with these and they are replaced by placeholders.
_LIMIT, _OFFSET = 3_333_333_331, 800_000_002


@dataclass(frozen=True)
class Scope(Generic[M]):
    """The records a listing shows, as a shape that compiles: ``model`` rows
    whose fields equal ``where``'s values (the account's), of which the page
    loads ``fields`` (the others deferred: the item serializer reads only
    these)."""

    model: type[M]
    where: Mapping[str, Any]
    fields: Sequence[str]

    def queryset(self) -> QuerySet[M]:
        return self.model._default_manager.filter(**self.where)


class _Unsupported(Exception):
    """A filter this module does not compile: the listing uses the ORM."""


def inclusive_end(value: dt.datetime) -> dt.datetime | None:
    """The bound of an inclusive ``…_end`` timestamp: records carry
    microseconds, so ``<= 00:00:00`` would miss one shown as ``00:00:00``;
    ``None`` past the last second there is (nothing comes after it)."""
    try:
        return value + dt.timedelta(seconds=1)
    except OverflowError:
        return None


def _bound(f: django_filters.Filter, value: Any) -> Any:
    """The value ``f`` binds for the cleaned ``value``; ``None`` when it
    does not filter. Raises :class:`_Unsupported` for a filter that is not
    a plain comparison. A filter that binds something other than its value
    says what through ``statement_value`` (the inclusive timestamp end)."""
    if value in EMPTY_VALUES:
        return None
    if f.method is not None or f.exclude or f.distinct:
        raise _Unsupported(f)
    convert = getattr(f, "statement_value", None)
    if convert is not None:
        return convert(value)
    plain = type(f).filter is django_filters.Filter.filter
    choice = type(f).filter is django_filters.ChoiceFilter.filter and value != f.null_value
    if not (plain or choice):
        raise _Unsupported(f)  # a filter of its own
    return value


@dataclass(frozen=True)
class Statements:
    """A shape's count and page, and the columns the page returns
    (attnames). The page binds the scope's values, then the scope's and the
    filters' again (its key subquery), ``constants`` (the keys' order's own),
    then its LIMIT and OFFSET."""

    count: str
    page: str
    constants: tuple[Any, ...]
    columns: tuple[str, ...]


@dataclass(frozen=True)
class Shape:
    """What a listing's statements depend on: the scope's and the filters'
    names with their values' types, the fields shown, the orders."""

    model: type[Model]
    scope: tuple[tuple[str, type], ...]
    filterset: type[django_filters.FilterSet]
    filters: tuple[tuple[str, type], ...]
    fields: tuple[str, ...]
    order: tuple[Any, ...]
    keys_order: tuple[Any, ...]


@functools.lru_cache(maxsize=512)
def compiled(shape: Shape) -> Statements | None:
    """The statements of ``shape``, or ``None`` when they cannot be compiled
    here (the listing then goes through the ORM)."""
    try:
        return _statements(shape)
    except (_Unsupported, RuntimeError) as exc:
        # Logged once per shape and process (the answer is cached).
        log.warning("listing of %s not compiled (%s): read through the ORM", shape.model.__name__, exc)
        return None


def _statements(shape: Shape) -> Statements:
    model = shape.model
    placeholders = iter(range(1, 1000))
    scope = {name: _placeholder(kind, next(placeholders)) for name, kind in shape.scope}
    queryset = model._default_manager.filter(**scope)
    rows = queryset
    bound: list[Any] = []
    for name, kind in shape.filters:
        f = shape.filterset.base_filters[name]
        value = _placeholder(kind, next(placeholders))
        rows = f.filter(rows, value)
        bound.append(_bound(f, value))
    count = rows.query.clone()
    count.clear_ordering(force=True)
    count.clear_select_clause()
    count.add_annotation(Count("*"), "__count", select=True)
    count_sql = statement_of(count, [*scope.values(), *bound], what=f"{model.__name__} listing count")

    columns = plain_columns(model, shape.fields, using=router.db_for_read(model))
    keys = rows.order_by(*shape.keys_order).values("pk")[_OFFSET : _OFFSET + _LIMIT]
    page = queryset.filter(pk__in=keys).order_by(*shape.order).values_list(*columns)
    leading = [*scope.values(), *scope.values(), *bound]
    # The keys' order may bind constants of its own (SORTED_ORDER's interval), after the filters.
    constants = tuple(page.query.sql_with_params()[1][len(leading) :])
    if any(not isinstance(value, dt.timedelta) for value in constants):
        raise _Unsupported(f"unexpected values {constants!r}")
    page_sql = statement_of(page.query, [*leading, *constants], what=f"{model.__name__} listing page")
    literal = f"LIMIT {_LIMIT} OFFSET {_OFFSET}"
    if page_sql.count(literal) != 1 or "%s" in page_sql.split(literal, 1)[1]:
        raise _Unsupported(f"the page's LIMIT and OFFSET are not where they were expected: {page_sql}")
    return Statements(count_sql, page_sql.replace(literal, "LIMIT %s OFFSET %s"), constants, columns)


def _placeholder(kind: type, n: int) -> Any:
    """A value of type ``kind`` that no other placeholder of the statement
    equals (``n``: its position), for :func:`statement_of` to find where
    each one is bound."""
    if kind is uuid.UUID:
        return uuid.UUID(int=n)
    if kind is dt.datetime:
        return dt.datetime(2001, 1, 1, tzinfo=dt.UTC) + dt.timedelta(days=n)
    if kind is int:
        return 7_000_000_000 + n
    if kind is str:
        return f"\x1fplaceholder {n}"
    raise _Unsupported(kind)


@dataclass(frozen=True)
class Listing(Generic[M]):
    """A request's listing through compiled statements: its shape's
    statements and the values it binds."""

    scope: Scope[M]
    statements: Statements
    values: tuple[Any, ...]

    def count(self) -> int:
        with connections[router.db_for_read(self.scope.model)].cursor() as cursor:
            cursor.execute(self.statements.count, self.values)
            (total,) = cursor.fetchone()
        return int(total)

    def page(self, start: int, size: int) -> list[M]:
        model = self.scope.model
        using = router.db_for_read(model)
        scope = self.values[: len(self.scope.where)]
        params = [*scope, *self.values, *self.statements.constants, size, start]
        with connections[using].cursor() as cursor:
            cursor.execute(self.statements.page, params)
            rows = cursor.fetchall()
        return from_rows(model, using, self.statements.columns, rows)


def listing(
    scope: Scope[M],
    filterset: type[django_filters.FilterSet],
    cleaned: Mapping[str, Any],
    *,
    order: Sequence[Any],
    keys_order: Sequence[Any],
) -> Listing[M] | None:
    """``scope``'s records through ``filterset``'s filters with their valid
    values (``cleaned``), as compiled statements; ``None`` when they do not
    compile (use the ORM)."""
    filters: list[tuple[str, type]] = []
    values: list[Any] = list(scope.where.values())
    try:
        for name, f in filterset.base_filters.items():
            value = _bound(f, cleaned.get(name))
            if value is not None:
                filters.append((name, type(value)))
                values.append(value)
    except _Unsupported:
        return None
    shape = Shape(
        model=scope.model,
        scope=tuple((name, type(value)) for name, value in scope.where.items()),
        filterset=filterset,
        filters=tuple(filters),
        fields=tuple(scope.fields),
        order=tuple(order),
        keys_order=tuple(keys_order),
    )
    statements = compiled(shape)
    return None if statements is None else Listing(scope, statements, tuple(values))
