"""Fixtures of the withdrawal tests."""

from __future__ import annotations

from typing import Any

import pytest

from withdrawals import services


@pytest.fixture
def no_enqueue(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Nothing goes to the broker: on_commit hand-offs (which do run in
    transactional tests) are recorded instead, so no worker can process the
    withdrawal behind the test's back."""
    calls: list[Any] = []
    monkeypatch.setattr(services, "_enqueue_processing", lambda *args, **kwargs: calls.append(args))
    return calls
