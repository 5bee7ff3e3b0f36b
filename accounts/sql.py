"""Accounts' hand-written SQL: the balance lock, a ledger entry with the
balance it moves in one statement, and the key-authenticated request's
credential read. Each is compiled by the ORM once per process (or built
from the ORM's INSERT) and sent through a plain cursor; each says why, and
which test holds its round trips or its plan.

Callers are :mod:`accounts.services` (the lock, the posting) and
:mod:`accounts.selectors` (the credential); other apps compose
:func:`post_entry` into statements of their own (``withdrawals.sql``).
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from django.db import connections, router, transaction

from accounts.models import Account, AccountBalance, ApiCredential, LedgerEntry
from core.sql import from_rows, insert_sql, plain_columns, statement_of

# --------------------------------------------------------------------------- the balance lock


@functools.cache
def _balance_lock_statement() -> tuple[str, tuple[str, ...]]:
    """The ``SELECT … FOR UPDATE`` of the balance row, compiled by the ORM
    once: compiled per call it was 8% of a withdrawal's CPU (py-spy under
    wrk), and every money movement of the account waits behind it. Exactly
    one per withdrawal: tests/perf/test_query_budgets.py::test_withdrawal_request."""
    columns = tuple(field.attname for field in AccountBalance._meta.concrete_fields)
    account = uuid.UUID(int=1)
    query = AccountBalance.objects.select_for_update().filter(account_id=account).values_list(*columns).query
    return statement_of(query, [account], what="balance lock"), columns


def balance_row_locked(account_id: Any) -> AccountBalance | None:
    """The account's balance row, locked until the current transaction ends; None when it has none."""
    sql, columns = _balance_lock_statement()
    connection = transaction.get_connection()
    with connection.cursor() as cursor:
        cursor.execute(sql, [account_id])
        row = cursor.fetchone()
    if row is None:
        return None
    [balance] = from_rows(AccountBalance, connection.alias, columns, [row])
    return balance


# --------------------------------------------------------------------------- a posting


def post_entry(
    entry: LedgerEntry,
    balance: AccountBalance,
    moves: Mapping[str, Any],
    *,
    repeat_is_noop: bool,
    ahead: Sequence[tuple[str, Sequence[Any]]] = (),
) -> bool:
    """Insert ``entry`` (new) and set ``moves`` (field → value) on its
    account's locked ``balance`` row, in one statement: one round trip on
    every money movement, under the balance lock. A data-modifying CTE runs
    whatever the outer statement returns, in the same snapshot and
    transaction, all or nothing; the balance moves only if the entry is
    inserted (its UPDATE reads the INSERT's RETURNING), so balance = ledger.

    ``repeat_is_noop``: an entry whose ``(kind, reference)`` is already in
    the ledger is not inserted and nothing moves (``ON CONFLICT DO
    NOTHING``: the idempotency check is the INSERT itself, no SELECT before
    it); without it such an entry violates the unique constraint and fails
    the caller's transaction (a reference the caller has just created).
    ``ahead``: the caller's own data-modifying statements (an INSERT of the
    record the entry is for), sent first in the same statement.

    True, with ``entry`` saved and ``balance`` holding ``moves``, when posted.
    Round trips: tests/perf/test_ledger_statements.py and
    tests/perf/test_query_budgets.py::test_withdrawal_request."""
    connection = transaction.get_connection()
    fields = [AccountBalance._meta.get_field(name) for name in moves]
    values = [field.get_db_prep_save(moves[field.name], connection=connection) for field in fields]  # type: ignore[union-attr]
    insert, entry_params = insert_sql(entry, using=connection.alias, ignore_conflicts=repeat_is_noop)
    ctes = [f"ahead{n} AS ({sql})" for n, (sql, _) in enumerate(ahead)]
    ctes += [f"entry AS ({insert})", _balance_moved(tuple(moves), connection.alias)]
    params = [*(value for _, bound in ahead for value in bound), *entry_params, *values, balance.account_id]
    with connection.cursor() as cursor:
        cursor.execute(f"WITH {', '.join(ctes)} SELECT * FROM entry", params)  # noqa: S608 - SQL from the ORM, values bound
        row = cursor.fetchone()
    if row is None:
        return False
    entry.pk = row[0]
    entry._state.adding, entry._state.db = False, connection.alias
    for name, value in moves.items():
        setattr(balance, name, value)
    return True


@functools.cache
def _balance_moved(names: tuple[str, ...], using: str) -> str:
    """The posting's UPDATE of the balance row's ``names`` fields, made once
    per set of fields (it is sent under the balance lock). It waits on the
    entry's INSERT: nothing moves unless the entry is new."""
    quote = connections[using].ops.quote_name
    column = {field.name: str(field.column) for field in AccountBalance._meta.concrete_fields}
    assignments = ", ".join(f"{quote(column[name])} = %s" for name in names)
    return (
        f"moved AS (UPDATE {quote(AccountBalance._meta.db_table)} SET {assignments} "  # noqa: S608 - names from the models, values bound
        f"WHERE {quote(column['account'])} = %s AND EXISTS (SELECT 1 FROM entry))"
    )


# --------------------------------------------------------------------------- the credential of a request


@functools.cache
def _active_credential_statement() -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    """The credential and its account in one SELECT, compiled once, with the
    columns of each (attnames, in the models' order): compiling the ORM's
    ``select_related`` query was most of a key-authenticated request's CPU
    whenever the credential's snapshot had to be taken again (an account
    calling less than once a second: ``make bench``'s 1,000 accounts). One
    statement: tests/perf/test_query_budgets.py::test_withdrawal_request_with_snapshots_taken_again."""
    using = router.db_for_read(ApiCredential)
    credential = plain_columns(ApiCredential, [f.name for f in ApiCredential._meta.concrete_fields], using=using)
    account = plain_columns(Account, [f.name for f in Account._meta.concrete_fields], using=using)
    placeholder = "pk_placeholder"
    query = (
        ApiCredential.objects.filter(public_key=placeholder, is_active=True)
        .order_by()
        .values_list(*credential, *(f"account__{column}" for column in account))
        .query
    )
    return statement_of(query, [placeholder], what="the active credential"), credential, account


def active_credential_row(public_key: str) -> ApiCredential | None:
    """The active credential with this public key, its account loaded with
    it (as ``select_related("account")`` would), or None."""
    sql, credential_columns, account_columns = _active_credential_statement()
    using = router.db_for_read(ApiCredential)
    with connections[using].cursor() as cursor:
        cursor.execute(sql, [public_key])
        row = cursor.fetchone()
    if row is None:
        return None
    split = len(credential_columns)
    [credential] = from_rows(ApiCredential, using, credential_columns, [row[:split]])
    [account] = from_rows(Account, using, account_columns, [row[split:]])
    credential.account = account
    return credential
