"""acquirers 0005 on an existing deployment: the conversion staff typed
becomes the override, so the listing shows the same numbers after the
migration; 0 (the old default, never typed) becomes "no override"."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("acquirers", "0004_verbose_names_pt_br")]
AFTER = [("acquirers", "0005_conversion_measured_and_override")]


def migrate(targets: list[tuple[str, str]]) -> Any:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


def test_typed_values_become_overrides_and_zero_becomes_none() -> None:
    old = migrate(BEFORE).get_model("acquirers", "Acquirer")
    try:
        for key, typed in (("typed", Decimal("92.50")), ("untyped", Decimal("0")), ("full", Decimal("100"))):
            old.objects.create(key=key, name=key, conversion_percent=typed)

        new = migrate(AFTER).get_model("acquirers", "Acquirer")
        after = dict(new.objects.values_list("key", "conversion_percent_override"))
        assert after == {"typed": Decimal("92.50"), "untyped": None, "full": Decimal("100.00")}
        assert set(new.objects.values_list("conversion_measured_percent", "conversion_sample")) == {(None, 0)}

        # And back: an empty override is the old default again, typed values untouched.
        old = migrate(BEFORE).get_model("acquirers", "Acquirer")
        before = dict(old.objects.values_list("key", "conversion_percent"))
        assert before == {"typed": Decimal("92.50"), "untyped": Decimal("0"), "full": Decimal("100.00")}
    finally:
        # Every app's latest state, not just acquirers 0005: rolling back to
        # 0004 also unapplied every later migration that depends on it.
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
