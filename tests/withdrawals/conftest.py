"""Fixtures of the withdrawal tests."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from rest_framework.test import APIClient

from accounts.models import Account, AccountBalance, LedgerEntry
from accounts.selectors import available_balance
from withdrawals import services
from withdrawals.models import Withdrawal

#: ``refused``'s check: (client, account, payload, status, expected body).
Refused = Callable[[APIClient, Account, Any, int, dict[str, Any]], None]


@pytest.fixture
def no_enqueue(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Nothing goes to the broker: on_commit hand-offs (which do run in
    transactional tests) are recorded instead, so no worker can process the
    withdrawal behind the test's back."""
    calls: list[Any] = []
    monkeypatch.setattr(services, "_enqueue_processing", lambda *args, **kwargs: calls.append(args))
    return calls


@dataclass(frozen=True)
class Snapshot:
    withdrawals: int
    balance: int
    day_total: tuple[dt.date | None, int]
    ledger: tuple[tuple[int, str, int, str], ...]


def snapshot(account: Account) -> Snapshot:
    return Snapshot(
        withdrawals=Withdrawal.objects.count(),
        balance=available_balance(account),
        # The daily limit's running total (withdrawals/limits.py).
        day_total=AccountBalance.objects.values_list("withdrawn_day", "withdrawn_on_day").get(account=account),
        ledger=tuple(
            LedgerEntry.objects.filter(account=account).order_by("id").values_list("id", "kind", "amount", "reference")
        ),
    )


@pytest.fixture
def refused(django_capture_on_commit_callbacks: Callable[..., Any]) -> Refused:
    """POST ``payload`` to /api/withdrawals and check the exact refusal, and
    that it changed nothing: no withdrawal, balance, ledger or day's total
    moved, nothing handed to the broker."""

    def check(client: APIClient, account: Account, payload: Any, status: int, expected: dict[str, Any]) -> None:
        before = snapshot(account)
        with django_capture_on_commit_callbacks() as callbacks:
            response = client.post("/api/withdrawals", payload, format="json")
        assert response.status_code == status, response.content
        assert response.json() == expected
        assert snapshot(account) == before
        assert callbacks == []

    return check
