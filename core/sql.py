"""Core's hand-written SQL: statements compiled by the ORM once per process
and sent through a plain cursor, for the paths where compiling them per call
cost as much CPU as running them (``python -m bench.profile``), and INSERTs
sent together in one round trip.

Each app keeps its own statements in its ``sql`` module (``accounts.sql``,
``acquirers.sql``, ``withdrawals.sql``, ``observability.sql``; the api's are
its listings', ``api.listing_statements``), each with its reason and the
test that holds its plan or its round trips. Connections around outbound
calls are :mod:`core.connections`.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from django.db import connections, router
from django.db.models import Model, signals
from django.db.models.base import ModelState
from django.db.models.constants import OnConflict
from django.db.models.sql import InsertQuery, Query

#: (model, fields, database, conflicts ignored) → its INSERT statement (:func:`insert_sql`).
_INSERTS: dict[tuple[type[Model], tuple[Any, ...], str, bool], str] = {}


def insert_sql(
    instance: Model, *, using: str = "default", ignore_conflicts: bool = False
) -> tuple[str, tuple[Any, ...]]:
    """The ``INSERT … RETURNING <pk>`` Django would send to create
    ``instance`` (defaults, ``auto_now_add`` and field conversions included),
    without sending it: for a caller that sends it together with another
    statement in one round trip. A primary key already set (a UUID made in
    Python) is inserted; an unset one is the database's (an auto field).
    ``ignore_conflicts``: ``ON CONFLICT DO NOTHING``, so a row a unique
    constraint already holds is not inserted and nothing is returned."""
    meta = instance._meta
    fields = tuple(
        f
        for f in meta.local_concrete_fields
        if not f.generated and not (f.primary_key and getattr(instance, f.attname) is None)
    )
    connection = connections[using]
    values = [f.pre_save(instance, add=True) for f in fields]
    key = (type(instance), fields, using, ignore_conflicts)
    # An expression among the values (Value(), a database default) is
    # compiled into the statement itself: such a statement is neither taken
    # from nor kept for the others.
    plain = not any(hasattr(v, "resolve_expression") for v in values)
    sql = _INSERTS.get(key)
    if sql is not None and plain:
        # The statement depends on the model and its fields only: compiled once
        # per process (the compiler measured 30-60 µs a row, several rows a
        # request); the values are converted as the compiler converts them.
        return sql, tuple(f.get_db_prep_save(v, connection=connection) for f, v in zip(fields, values, strict=True))
    query = InsertQuery(type(instance), on_conflict=OnConflict.IGNORE if ignore_conflicts else None)
    query.insert_values(list(fields), [instance], raw=True)
    # raw: the values pre_save gave above, not a second pre_save (auto_now_add
    # would move and a default callable run again).
    for field, value in zip(fields, values, strict=True):
        setattr(instance, field.attname, value)
    compiler = query.get_compiler(using=using)
    compiler.returning_fields = [meta.pk]
    [(sql, params)] = compiler.as_sql()
    if plain and not any(hasattr(f, "get_placeholder") for f in fields):
        _INSERTS[key] = sql
    return sql, tuple(params)


M = TypeVar("M", bound=Model)


def plain_columns(model: type[Model], fields: Sequence[str], *, using: str) -> tuple[str, ...]:
    """The columns (attnames, in the model's order) of ``fields`` and the
    primary key, for rows read with a plain cursor into the model
    (:func:`from_rows`). Raises ``RuntimeError`` for a field whose values
    Python must convert (a ``from_db_value``): a plain cursor would return
    them unconverted."""
    meta = model._meta
    wanted = {meta.get_field(name).attname for name in fields} | {meta.pk.attname}  # type: ignore[union-attr]
    columns = tuple(field.attname for field in meta.concrete_fields if field.attname in wanted)
    for field in meta.concrete_fields:
        if field.attname in columns and field.get_db_converters(connections[using]):
            raise RuntimeError(f"{model.__name__}.{field.name} needs a converter: read it through the ORM")
    return columns


def from_rows(model: type[M], using: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[M]:
    """``model``'s instances of ``rows`` read with a plain cursor (each
    row's values of ``columns``, attnames; the other fields deferred), as
    ``Model.from_db`` builds them but without ``Model.__init__``, which
    walks every field of the model for each row: a tenth of a page of 15
    charges' CPU (``python -m bench.profile list``). A model with
    ``pre_init`` or ``post_init`` receivers gets ``from_db``, which sends them."""
    if signals.pre_init.has_listeners(model) or signals.post_init.has_listeners(model):
        return [model.from_db(using, list(columns), row) for row in rows]
    instances = []
    for row in rows:
        instance = model.__new__(model)
        state = ModelState()
        state.adding, state.db = False, using
        instance.__dict__.update(zip(columns, row, strict=True), _state=state)
        instances.append(instance)
    return instances


def statement_of(query: Query, placeholders: Sequence[Any], *, what: str) -> str:
    """The SQL of ``query`` (built with ``placeholders`` as its values),
    checked to take exactly those parameters in that order: for a hot path
    that compiles a statement once per process and binds the real values
    itself (the ORM's compilation cost as much CPU as the statement). A
    query the ORM would compile with other parameters (a value folded in,
    one added or reordered by a Django upgrade) fails at once instead of
    binding the wrong value to a placeholder (tests/platform/test_statement_of.py)."""
    sql, params = query.sql_with_params()
    if list(params) != list(placeholders):
        raise RuntimeError(f"{what}: unexpected parameters {params!r}")
    return str(sql)


@dataclass(frozen=True)
class Insert:
    """A new instance with the INSERT that creates it (:func:`insert_sql`),
    compiled ahead: for a caller that sends it later, under a lock, and would
    rather not compile it there. ``auto_now_add`` values are set at compilation."""

    instance: Model
    sql: str
    params: tuple[Any, ...]

    @classmethod
    def of(cls, instance: Model, *, using: str = "default") -> Insert:
        return cls(instance, *insert_sql(instance, using=using))


def insert_together(instances: Sequence[Model], *, using: str = "default") -> None:
    """Insert ``instances`` (new, unsaved) in one statement, each given its
    primary key: one round trip instead of one per row, plus the BEGIN and
    COMMIT that several statements would need, since one statement is atomic
    on its own. Each INSERT is a data-modifying CTE (:func:`insert_sql`: the
    SQL ``save()`` would send; no signals are sent, as with ``bulk_create``);
    all of them run, in one snapshot, all or nothing. A charge with its
    attempts is one statement: tests/perf/test_query_budgets.py::test_charge_creation;
    all or nothing: tests/platform/test_insert_together.py."""
    if not instances:
        return
    ctes: list[str] = []
    params: list[Any] = []
    for n, instance in enumerate(instances):
        sql, values = insert_sql(instance, using=using)
        ctes.append(f"i{n} AS ({sql})")
        params.extend(values)
    returned = ", ".join(f"(SELECT * FROM i{n})" for n in range(len(instances)))  # noqa: S608 - SQL from the ORM, values bound
    with connections[using].cursor() as cursor:
        cursor.execute(f"WITH {', '.join(ctes)} SELECT {returned}", params)
        row = cursor.fetchone()
    for instance, pk in zip(instances, row, strict=True):
        instance.pk = pk
        instance._state.adding = False
        instance._state.db = using


# --------------------------------------------------------------------------- a read by id


@functools.cache
def _owned_row_statement(model: type[Model], fields: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
    """The SELECT of ``fields`` (and the primary key) of ``model``'s row by
    account and id, compiled once, with the columns it returns (attnames, in
    the model's order): the ORM's compilation cost as much CPU as the rest of
    a read by id (``make bench``). Held to one statement a read by
    tests/perf/test_query_budgets.py::test_reads; its rows are the ORM's in
    tests/platform/test_owned_read.py."""
    columns = plain_columns(model, fields, using=router.db_for_read(model))
    account, key = uuid.UUID(int=1), uuid.UUID(int=2)
    query = model._default_manager.filter(account_id=account, pk=key).values_list(*columns).query
    return statement_of(query, [account, key], what=model.__name__), columns


def owned_row(model: type[M], account_id: Any, key: uuid.UUID, fields: Sequence[str]) -> M | None:
    """The row of ``model`` with this account and id, only ``fields`` loaded
    (the others deferred), read with a plain cursor (a RawQuerySet's column
    mapping cost a tenth of a read in py-spy under wrk); None when none."""
    sql, columns = _owned_row_statement(model, tuple(fields))
    using = router.db_for_read(model)
    with connections[using].cursor() as cursor:
        cursor.execute(sql, [account_id, key])
        row = cursor.fetchone()
    if row is None:
        return None
    [record] = from_rows(model, using, columns, [row])
    return record
