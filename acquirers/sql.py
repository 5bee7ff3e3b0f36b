"""Acquirers' hand-written SQL: an account's slots and grants, read when its
chain is taken again (an account that calls less than once a second: most
of ``make bench``'s 1,000), as statements compiled once per process through
a plain cursor. The ORM's compilation of these two, with the slots joined to
their acquirers, was half of such a charge's CPU. Round trips held by
tests/perf/test_query_budgets.py::test_charge_creation_with_snapshots_taken_again
(the credential, the slots, every acquirer, the charge) and
tests/perf/test_query_counts.py::test_acquirer_listing.
"""

from __future__ import annotations

import functools
import uuid
from typing import Any

from django.db import connections, router

from acquirers.models import AcquirerGrant, AcquirerSlot
from core.sql import statement_of

_PLACEHOLDER = uuid.UUID(int=1)


@functools.cache
def _slots_statement() -> str:
    slots = AcquirerSlot.objects.filter(account_id=_PLACEHOLDER).order_by()
    return statement_of(
        slots.values_list("purpose", "priority", "acquirer").query, [_PLACEHOLDER], what="an account's slots"
    )


@functools.cache
def _grants_statement() -> str:
    grants = AcquirerGrant.objects.filter(account_id=_PLACEHOLDER).order_by()
    return statement_of(grants.values_list("acquirer").query, [_PLACEHOLDER], what="an account's grants")


def _account_rows(sql: str, account_id: uuid.UUID) -> list[tuple[Any, ...]]:
    with connections[router.db_for_read(AcquirerSlot)].cursor() as cursor:
        cursor.execute(sql, [account_id])
        rows: list[tuple[Any, ...]] = cursor.fetchall()
    return rows


def account_slot_rows(account_id: uuid.UUID) -> list[tuple[Any, ...]]:
    """(purpose, priority, acquirer id) of each of the account's slots, unordered."""
    return _account_rows(_slots_statement(), account_id)


def account_granted_ids(account_id: uuid.UUID) -> list[Any]:
    """The ids of the acquirers granted to the account."""
    return [row[0] for row in _account_rows(_grants_statement(), account_id)]
