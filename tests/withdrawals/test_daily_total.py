"""The daily limit's running total on the balance row (withdrawals/limits.py):
it follows every accepted, failed and canceled withdrawal and equals the
day's sum; a day the row does not hold is summed from the withdrawals
themselves; a withdrawal of another day never moves today's total; and the
limit costs no statement of its own (tests/perf/test_query_budgets.py)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.utils import timezone

from accounts.models import Account, AccountBalance
from accounts.selectors import available_balance, ledger_sum
from core.exceptions import BusinessRuleError
from tests.helpers import SAO_PAULO
from tests.withdrawals.conftest import Refused
from tests.withdrawals.test_request import (
    CPF,
    DAILY,
    account_with_balance,
    body,
    client_of,
    error,
    make_withdrawal,
    post,
)
from withdrawals import services
from withdrawals.models import WithdrawalStatus
from withdrawals.selectors import day_start, withdrawn_today

pytestmark = pytest.mark.django_db


def day_total(account: Account) -> tuple[dt.date | None, int]:
    day, total = AccountBalance.objects.values_list("withdrawn_day", "withdrawn_on_day").get(account=account)
    return day, total


def today() -> dt.date:
    return timezone.localdate(timezone.now(), SAO_PAULO)


def test_the_total_follows_requests_failures_and_cancels(no_enqueue: Any, refused: Refused) -> None:
    account = account_with_balance(withdrawal_daily_limit=10_000)
    client = client_of(account)
    ids = [post(client, body(amount)).json()["data"]["id"] for amount in (3000, 4000, 2000)]
    assert day_total(account) == (today(), 9000)
    refused(client_of(account), account, body(1001), 400, error(DAILY))

    services.withdrawal_transition(
        withdrawal_id=ids[1], to_status=WithdrawalStatus.FAILED, source="test", reason="recusado"
    )
    assert day_total(account) == (today(), 5000)
    services.withdrawal_transition(withdrawal_id=ids[2], to_status=WithdrawalStatus.CANCELED, source="test")
    assert day_total(account) == (today(), 3000) == (today(), withdrawn_today(account))

    # What failed or was canceled can be withdrawn again the same day, and no more.
    assert post(client, body(7000)).status_code == 201
    refused(client_of(account), account, body(1000), 400, error(DAILY))
    assert day_total(account) == (today(), 10_000) == (today(), withdrawn_today(account))
    assert available_balance(account) == ledger_sum(account)


def test_a_day_the_row_does_not_hold_is_summed_from_the_withdrawals(no_enqueue: Any, refused: Refused) -> None:
    account = account_with_balance(withdrawal_daily_limit=10_000)
    # A withdrawal of today the row never counted (made before the total
    # existed), and a row still holding yesterday's total.
    make_withdrawal(account, 6000)
    yesterday = today() - dt.timedelta(days=1)
    AccountBalance.objects.filter(account=account).update(withdrawn_day=yesterday, withdrawn_on_day=9_999)

    refused(client_of(account), account, body(4001), 400, error(DAILY))
    assert post(client_of(account), body(4000)).status_code == 201
    assert day_total(account) == (today(), 10_000) == (today(), withdrawn_today(account))


def test_a_failure_of_an_earlier_day_leaves_todays_total_alone(no_enqueue: Any, refused: Refused) -> None:
    account = account_with_balance(withdrawal_daily_limit=10_000)
    earlier = make_withdrawal(account, 5000, created_at=day_start() - dt.timedelta(seconds=1))
    assert post(client_of(account), body(8000)).status_code == 201

    services.withdrawal_transition(
        withdrawal_id=earlier.pk, to_status=WithdrawalStatus.FAILED, source="test", reason="recusado"
    )
    assert day_total(account) == (today(), 8000)
    refused(client_of(account), account, body(2001), 400, error(DAILY))


def test_a_withdrawal_created_before_midnight_that_reaches_the_lock_after_the_next_days_first(
    monkeypatch: pytest.MonkeyPatch, no_enqueue: Any
) -> None:
    """Its day's limit is checked against the sum since its own midnight,
    which also holds the next day's withdrawals (stricter, never looser), and
    the row, already on the next day, is left as it is."""
    account = account_with_balance(withdrawal_daily_limit=10_000)
    assert post(client_of(account), body(7000)).status_code == 201
    before_midnight = day_start() - dt.timedelta(milliseconds=1)
    monkeypatch.setattr(timezone, "now", lambda: before_midnight)

    with pytest.raises(BusinessRuleError):
        services.withdrawal_request(account=account, amount=3001, key_type="cpf", key_value=CPF)
    late = services.withdrawal_request(account=account, amount=3000, key_type="cpf", key_value=CPF)
    assert late.created_at == before_midnight
    monkeypatch.undo()
    assert day_total(account) == (today(), 7000) == (today(), withdrawn_today(account))


def test_a_scheduled_withdrawal_counts_on_its_day_and_never_moves_todays_row(no_enqueue: Any, refused: Refused) -> None:
    """The row stays today's; the scheduled day's total is summed from the
    withdrawals scheduled for it, and on that day the row's first sum has them
    (docs/api/scheduled-withdrawals.md)."""
    account = account_with_balance(withdrawal_daily_limit=10_000)
    tomorrow = (today() + dt.timedelta(days=1)).isoformat()
    assert post(client_of(account), body(6000)).status_code == 201
    assert post(client_of(account), body(10_000, scheduled_for=tomorrow)).status_code == 201
    refused(client_of(account), account, body(1000, scheduled_for=tomorrow), 400, error(DAILY))
    assert day_total(account) == (today(), 6000) == (today(), withdrawn_today(account))
    # A row of another day: a scheduled request leaves it where it is.
    AccountBalance.objects.filter(account=account).update(withdrawn_day=today() - dt.timedelta(days=1))
    assert (
        post(client_of(account), body(1000, scheduled_for=(today() + dt.timedelta(days=2)).isoformat())).status_code
        == 201
    )
    assert day_total(account) == (today() - dt.timedelta(days=1), 6000)
    # The next immediate one sums today (scheduled ones for later days excluded) and moves the row.
    assert post(client_of(account), body(4000)).status_code == 201
    assert day_total(account) == (today(), 10_000) == (today(), withdrawn_today(account))
    # Tomorrow, the sum has tomorrow's scheduled 10,000 and none of today's.
    assert withdrawn_today(account, now=day_start() + dt.timedelta(days=1, hours=1)) == 10_000
    assert available_balance(account) == ledger_sum(account)
