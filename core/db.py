"""Database connections around outbound calls.

A payment gateway spends most of its time waiting on others (acquirers,
merchants' webhook receivers). A thread that keeps its pooled PostgreSQL
connection while it waits makes the pool, not the CPU, the limit: with a
pool of 8, eight charges waiting 300 ms on an acquirer are all one process
serves. So before every outbound call the calling thread hands its
connection back (:func:`release_connections`) and Django takes one again
on the next query.

With a pool (``OPTIONS["pool"]``), ``connection.close()`` returns the
connection to the pool rather than closing it (Django 5.1+); without one it
really closes it, and the next query reconnects. Either way nothing is held
while waiting. Inside a transaction there is nothing safe to release: the
transaction (and any row lock) would have to stay open across the call,
which is the bug this rule exists to prevent, so it is reported, and raised
under ``DB_RELEASE_STRICT`` (the tests).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Model, signals
from django.db.models.base import ModelState
from django.db.models.sql import InsertQuery, Query

logger = logging.getLogger(__name__)


class TransactionOpenAcrossCall(RuntimeError):
    """An outbound call was about to start inside a database transaction: its
    connection, and any row lock taken in it, would be held while waiting on
    a peer. A bug of the caller, raised under ``DB_RELEASE_STRICT``."""


def release_connections(*, before: str) -> None:
    """Give back this thread's database connections before an outbound call
    (``before`` names it, for the log). Cheap when there is nothing to give
    back; the next query takes a connection again.

    Inside a transaction nothing is released: an error is logged and, under
    ``DB_RELEASE_STRICT``, :class:`TransactionOpenAcrossCall` is raised. The
    transaction a test case wraps each test in is not the caller's: it is
    left alone silently (tests that must see the release run without it)."""
    for conn in connections.all(initialized_only=True):
        if conn.connection is None:
            continue
        if _in_transaction(conn):
            if _only_test_case_atomics(conn):
                continue
            message = f"database transaction open on {conn.alias!r} across an outbound call ({before})"
            logger.error(message, stack_info=True)
            if settings.DB_RELEASE_STRICT:
                raise TransactionOpenAcrossCall(message)
            continue
        conn.close()


def _in_transaction(conn: BaseDatabaseWrapper) -> bool:
    # An atomic block, or autocommit turned off by hand: either way a transaction may be open.
    return conn.in_atomic_block or not conn.get_autocommit()


def _only_test_case_atomics(conn: BaseDatabaseWrapper) -> bool:
    """Every open atomic block is one a Django test case entered (the mark
    Django itself checks before a ``durable`` block)."""
    return bool(conn.atomic_blocks) and all(getattr(block, "_from_testcase", False) for block in conn.atomic_blocks)


@contextlib.contextmanager
def read_snapshot(using: str = DEFAULT_DB_ALIAS) -> Iterator[None]:
    """A read-only transaction whose every query sees the database as it was
    at its first one (REPEATABLE READ): a list read in several queries (a
    server-side cursor's fetches, a related row looked up per record) is one
    consistent picture. For reading and leaving, never for waiting on a
    client or a peer inside it. Within a transaction already (a test case's)
    it is a savepoint of that one, at that one's isolation."""
    conn = connections[using]
    outermost = not conn.in_atomic_block
    with transaction.atomic(using=using):
        if outermost:
            with conn.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        yield


#: (model, fields, database) → its INSERT statement (:func:`insert_sql`).
_INSERTS: dict[tuple[type[Model], tuple[Any, ...], str], str] = {}


def insert_sql(instance: Model, *, using: str = "default") -> tuple[str, tuple[Any, ...]]:
    """The ``INSERT … RETURNING <pk>`` Django would send to create
    ``instance`` (defaults, ``auto_now_add`` and field conversions included),
    without sending it: for a caller that sends it together with another
    statement in one round trip. A primary key already set (a UUID made in
    Python) is inserted; an unset one is the database's (an auto field)."""
    meta = instance._meta
    fields = tuple(
        f
        for f in meta.local_concrete_fields
        if not f.generated and not (f.primary_key and getattr(instance, f.attname) is None)
    )
    connection = connections[using]
    values = [f.pre_save(instance, add=True) for f in fields]
    key = (type(instance), fields, using)
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
    query = InsertQuery(type(instance))
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
    binding the wrong value to a placeholder."""
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
    all of them run, in one snapshot, all or nothing."""
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
