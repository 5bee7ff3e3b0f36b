"""Database connections around outbound calls, and read snapshots.

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

The statements compiled once per process are another concern: :mod:`core.sql`.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper

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
            # Session control, not a statement on data: it belongs with the
            # transaction it shapes, not in core.sql.
            with conn.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        yield
