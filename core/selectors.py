"""Reads shared by the apps."""

from __future__ import annotations

import functools
import uuid
from collections.abc import Sequence
from typing import Any, TypeVar

from django.core.exceptions import ObjectDoesNotExist
from django.db import connections, router
from django.db.models import Model, QuerySet

from core.db import from_rows, plain_columns, statement_of
from core.exceptions import NotFoundError

M = TypeVar("M", bound=Model)


def get_by_uuid(queryset: QuerySet[M], raw_id: Any, not_found: type[NotFoundError]) -> M:
    """The row of ``queryset`` (already scoped to the account) with this id;
    ``not_found`` for unknown, malformed or someone else's ids alike, so
    nothing about other accounts shows from outside."""
    key = _uuid_or(raw_id, not_found)
    try:
        return queryset.get(pk=key)  # no ORDER BY, unlike .first()
    except ObjectDoesNotExist:
        raise not_found() from None


@functools.cache
def _owned_row_statement(model: type[Model], fields: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
    """The SELECT of ``fields`` (and the primary key) of ``model``'s row by
    account and id, compiled once, with the columns it returns (attnames, in
    the model's order): the ORM's compilation cost as much CPU as the rest of
    a read by id (``make bench``)."""
    columns = plain_columns(model, fields, using=router.db_for_read(model))
    account, key = uuid.UUID(int=1), uuid.UUID(int=2)
    query = model._default_manager.filter(account_id=account, pk=key).values_list(*columns).query
    return statement_of(query, [account, key], what=model.__name__), columns


def owned_by_uuid(
    model: type[M], account_id: Any, raw_id: Any, not_found: type[NotFoundError], fields: Sequence[str]
) -> M:
    """As :func:`get_by_uuid` for the row of ``model`` whose ``account_id``
    is given, loading only ``fields`` (the others are deferred): the hot
    read-by-id path, same rows and same 404s, a precompiled statement read
    with a plain cursor (a RawQuerySet's column mapping cost a tenth of a
    read in py-spy under wrk)."""
    key = _uuid_or(raw_id, not_found)
    sql, columns = _owned_row_statement(model, tuple(fields))
    using = router.db_for_read(model)
    with connections[using].cursor() as cursor:
        cursor.execute(sql, [account_id, key])
        row = cursor.fetchone()
    if row is None:
        raise not_found()
    [record] = from_rows(model, using, columns, [row])
    return record


def _uuid_or(raw_id: Any, not_found: type[NotFoundError]) -> uuid.UUID:
    """``raw_id`` as a UUID; ``not_found`` when it is not one (a malformed id is just unknown)."""
    try:
        return uuid.UUID(str(raw_id))
    except ValueError:
        raise not_found() from None
