"""What a merchant reads of MED blocks and returns: the balance (what may be
withdrawn, what is blocked), the statement (each MED entry names its charge)
and the settlement (blocks, releases and returns shown apart)."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.models import Account, LedgerEntry
from accounts.selectors import ledger_sum
from accounts.services import ledger_post
from acquirers.adapters.base import InfractionStatus
from acquirers.models import Acquirer
from tests.helpers import listing_data
from tests.infractions.conftest import close_infraction, open_infraction, paid_charge

pytestmark = pytest.mark.django_db

LIQUID = 9_900  # a charge of 10_000 less its 1 % fee


def balance(api: APIClient) -> dict[str, Any]:
    response = api.get("/api/withdrawals/balance")
    assert response.status_code == 200
    data: dict[str, Any] = response.json()["data"]
    return data


def debit(account: Account, amount: int) -> None:
    """The merchant moved money on (a withdrawal, as the ledger sees it)."""
    with transaction.atomic():
        ledger_post(account_id=account.pk, amount=-amount, kind=LedgerEntry.Kind.WITHDRAWAL, reference="moved-on")


def test_a_covered_block_leaves_the_balance_and_shows_as_blocked(
    api: APIClient, account: Account, acquirer: Acquirer
) -> None:
    charge = paid_charge(account, acquirer)
    paid_charge(account, acquirer)
    assert (balance(api)["available_balance"], balance(api)["blocked_balance"]) == (2 * LIQUID, 0)

    infraction = open_infraction(acquirer, charge)
    assert (balance(api)["available_balance"], balance(api)["blocked_balance"]) == (LIQUID, LIQUID)

    close_infraction(acquirer, infraction, InfractionStatus.REJECTED)
    assert (balance(api)["available_balance"], balance(api)["blocked_balance"]) == (2 * LIQUID, 0)


def test_an_uncovered_block_is_kept_back_from_what_may_be_withdrawn(
    api: APIClient, account: Account, acquirer: Acquirer
) -> None:
    charge = paid_charge(account, acquirer)
    debit(account, 5_000)  # 4_900 left: the block covers that, the rest (5_000) is kept back
    infraction = open_infraction(acquirer, charge)
    assert ledger_sum(account) == 0
    assert balance(api)["available_balance"] == 0
    assert balance(api)["blocked_balance"] == LIQUID

    paid_charge(account, acquirer, amount=20_000)  # 19_800 more: 5_000 of it stays back
    assert balance(api)["available_balance"] == 19_800 - 5_000
    assert ledger_sum(account) == 19_800

    close_infraction(acquirer, infraction, InfractionStatus.ACCEPTED, returned=10_000)
    # Released (4_900 back), then the merchant's share of the return debited (9_900).
    after = balance(api)
    assert (after["available_balance"], after["blocked_balance"]) == (19_800 + 4_900 - LIQUID, 0)


def test_the_balance_keeps_its_statement_count(
    api: APIClient, account: Account, acquirer: Acquirer, django_assert_max_num_queries: Any
) -> None:
    open_infraction(acquirer, paid_charge(account, acquirer))
    balance(api)
    # The balance row (one read for all its figures) and the day's withdrawals.
    with django_assert_max_num_queries(2):
        assert balance(api)["blocked_balance"] == LIQUID


def test_the_statement_names_the_charge_of_every_med_entry(
    api: APIClient, account: Account, acquirer: Acquirer
) -> None:
    charge = paid_charge(account, acquirer)
    infraction = open_infraction(acquirer, charge)
    close_infraction(acquirer, infraction, InfractionStatus.ACCEPTED, returned=4_000)

    entries = listing_data(api, "/api/statement")["entries"]

    record = {"type": "transaction", "id": str(charge.pk)}
    assert [(e["kind"], e["amount"], e["record"]) for e in entries] == [
        ("med_return", -4_000, record),
        ("med_hold_release", LIQUID, record),
        ("med_hold", -LIQUID, record),
        ("charge_paid", LIQUID, record),
    ]
    assert [e["id"] for e in listing_data(api, "/api/statement", kind="med_hold")["entries"]] == [entries[2]["id"]]


def test_the_settlement_shows_blocks_releases_and_returns(api: APIClient, account: Account, acquirer: Acquirer) -> None:
    first, second = paid_charge(account, acquirer), paid_charge(account, acquirer)
    close_infraction(acquirer, open_infraction(acquirer, first), InfractionStatus.REJECTED)
    close_infraction(acquirer, open_infraction(acquirer, second), InfractionStatus.ACCEPTED, returned=3_000)
    today = timezone.localdate().isoformat()

    response = api.get("/api/settlements", {"date_start": today, "date_end": today})

    assert response.status_code == 200
    [day] = response.json()["data"]["days"]
    assert (day["med_blocked"], day["med_released"], day["med_returned"]) == (2 * LIQUID, 2 * LIQUID, 3_000)
    assert day["credits"] == 2 * LIQUID + 2 * LIQUID
    assert day["debits"] == 2 * LIQUID + 3_000
    assert day["closing_balance"] == ledger_sum(account) == 2 * LIQUID - 3_000
    totals = response.json()["data"]["totals"]
    assert (totals["med_blocked"], totals["med_released"], totals["med_returned"]) == (2 * LIQUID, 2 * LIQUID, 3_000)
