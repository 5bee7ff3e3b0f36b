"""Observability's hand-written SQL: the readiness probe's ``SELECT 1``, the
cheapest statement that proves a connection answers (no table, no lock),
sent on every orchestrator poll. One statement and nothing else:
tests/perf/test_query_counts.py::test_readiness.
"""

from __future__ import annotations

from django.db import connection


def database_answers() -> None:
    """Send ``SELECT 1``; raises whatever the driver raises when the database does not answer."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
