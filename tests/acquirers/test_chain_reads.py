"""An account's chains are built from every acquirer (one snapshot per
process) and the account's own slots, read by statements compiled once
(``acquirers.selectors``): the chains must be what the rules give (decisions
§4, §5), in the database's order, and taking an account's chain again must
cost its slots' read, not the acquirers' too."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection

from accounts.models import Account
from acquirers.models import Acquirer, AcquirerSlot
from acquirers.selectors import cashin_chain, payout_chain, platform_default_chain
from acquirers.services import acquirer_grants_set, acquirer_slots_set
from tests.factories import AccountFactory, AcquirerFactory

pytestmark = pytest.mark.django_db

CASHIN, CASHOUT = AcquirerSlot.Purpose.CASHIN, AcquirerSlot.Purpose.CASHOUT


def keys(acquirers: list[Acquirer]) -> list[str]:
    return [a.key for a in acquirers]


@pytest.fixture
def acquirers() -> dict[str, Acquirer]:
    made: dict[str, Acquirer] = {
        # Two tied on priority: the database's collation orders them, as the ORM's ORDER BY does.
        "ab": AcquirerFactory(key="ab", default_priority=2),
        "a_b": AcquirerFactory(key="a_b", default_priority=2),
        "first": AcquirerFactory(key="first", default_priority=1),
        "off": AcquirerFactory(key="off", default_priority=0, enabled=False),
        "small": AcquirerFactory(key="small", max_ticket=500),
        "extra": AcquirerFactory(key="extra"),
    }
    return made


def test_the_default_chain_is_the_databases_order(acquirers: dict[str, Acquirer]) -> None:
    expected = Acquirer.objects.filter(enabled=True, default_priority__isnull=False).order_by("default_priority", "key")

    assert keys(platform_default_chain()) == keys(list(expected))
    account: Account = AccountFactory()
    assert keys(cashin_chain(account, 1000)) == keys(list(expected))
    assert keys(payout_chain(account, 1000)) == keys(list(expected))


def test_configured_chains_follow_their_slots_grants_and_the_amount(acquirers: dict[str, Acquirer]) -> None:
    account: Account = AccountFactory()
    acquirer_grants_set(account=account, acquirers=[acquirers["extra"], acquirers["small"], acquirers["ab"]])
    acquirer_slots_set(account=account, purpose=CASHIN, acquirers=[acquirers["extra"], acquirers["small"]])
    # A slot whose grant is gone (written around the services, which would have moved it out).
    AcquirerSlot.objects.create(account=account, purpose=CASHIN, priority=3, acquirer=acquirers["first"])

    assert keys(cashin_chain(account, 400)) == ["extra", "small"]
    assert keys(cashin_chain(account, 1000)) == ["extra"]  # past small's ticket
    # Payouts follow the cash-in slots while there are no cash-out ones (grants are for charges).
    assert keys(payout_chain(account, 400)) == ["extra", "small", "first"]

    acquirer_slots_set(account=account, purpose=CASHOUT, acquirers=[acquirers["ab"], acquirers["extra"]])
    assert keys(payout_chain(account, 1000)) == ["ab", "extra"]
    Acquirer.objects.filter(pk=acquirers["extra"].pk).update(enabled=False)
    assert keys(payout_chain(account, 1000)) == ["ab"]
    assert keys(cashin_chain(account, 400)) == ["small"]


def test_an_account_chain_taken_again_reads_its_slots_only(
    acquirers: dict[str, Acquirer], django_assert_num_queries: Any, settings: Any
) -> None:
    settings.SNAPSHOT_TTL_SECONDS = 3600  # no expiry in the middle of the test on a slow machine
    default = keys(
        list(Acquirer.objects.filter(enabled=True, default_priority__isnull=False).order_by("default_priority", "key"))
    )
    plain, configured = AccountFactory(), AccountFactory()
    acquirer_grants_set(account=configured, acquirers=[acquirers["extra"]])
    acquirer_slots_set(account=configured, purpose=CASHIN, acquirers=[acquirers["extra"]])
    cashin_chain(AccountFactory(), 1000)  # every acquirer, read once for all accounts

    with django_assert_num_queries(1):  # its slots (none: the default chain)
        assert keys(cashin_chain(plain, 1000)) == default
    with django_assert_num_queries(2):  # its slots, then its grants
        assert keys(cashin_chain(configured, 1000)) == ["extra"]
    with django_assert_num_queries(1):
        assert keys(payout_chain(configured, 1000)) == ["extra"]
    with django_assert_num_queries(0):  # and then remembered
        assert keys(cashin_chain(plain, 1000)) == default


def test_a_slot_naming_an_acquirer_newer_than_the_snapshot_still_gets_it(
    acquirers: dict[str, Acquirer], settings: Any
) -> None:
    settings.SNAPSHOT_TTL_SECONDS = 3600
    account: Account = AccountFactory()
    cashin_chain(AccountFactory(), 1000)  # every acquirer as they stand now
    # A new acquirer made the account's cash-out primary by writes no snapshot
    # hears of (another process's, between this request's generation and its read).
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO acquirers_acquirer (key, name, nominal, adapter, options, enabled, max_ticket,"
            " conversion_sample, is_new, connect_timeout_ms, read_timeout_ms, created_at, updated_at)"
            " SELECT 'newer', name, nominal, adapter, options, true, max_ticket, conversion_sample, is_new,"
            " connect_timeout_ms, read_timeout_ms, now(), now() FROM acquirers_acquirer WHERE key = 'extra'"
            " RETURNING id"
        )
        [newer_id] = cursor.fetchone()
        cursor.execute(
            "INSERT INTO acquirers_acquirerslot (account_id, acquirer_id, purpose, priority) VALUES (%s, %s, %s, 1)",
            [account.pk, newer_id, CASHOUT],
        )

    assert keys(payout_chain(account, 1000)) == ["newer"]
