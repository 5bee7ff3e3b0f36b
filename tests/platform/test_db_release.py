"""``core.connections.release_connections``: what it gives back, and what it refuses
to hide (a transaction open across an outbound call)."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from django.db import connection, transaction

from accounts.models import Account
from core.connections import TransactionOpenAcrossCall, release_connections
from tests.factories import AccountFactory
from tests.realworld import ConnectionState, ConnectionWatch


@pytest.mark.django_db(transaction=True)
def test_outside_a_transaction_the_connection_goes_back_to_the_pool_and_comes_back_on_the_next_query() -> None:
    account = AccountFactory()
    watch = ConnectionWatch()
    watch.look()

    release_connections(before="test")
    watch.look()

    assert watch.seen == [ConnectionState(held=True, checked_out=1), ConnectionState(held=False, checked_out=0)]
    assert Account.objects.get(pk=account.pk).pk == account.pk
    assert connection.connection is not None


@pytest.mark.django_db(transaction=True)
def test_inside_a_transaction_it_raises_under_strict_and_leaves_the_transaction_alone(
    settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    settings.DB_RELEASE_STRICT = True
    account = AccountFactory()

    with transaction.atomic():
        Account.objects.select_for_update().get(pk=account.pk)
        with pytest.raises(TransactionOpenAcrossCall, match="across an outbound call \\(webhook delivery 1\\)"):
            release_connections(before="webhook delivery 1")
        # Nothing was closed under the transaction: it goes on and commits.
        Account.objects.filter(pk=account.pk).update(name="still here")

    assert Account.objects.get(pk=account.pk).name == "still here"
    assert [r.levelno for r in caplog.records if r.name == "core.connections"] == [logging.ERROR]


@pytest.mark.django_db(transaction=True)
def test_inside_a_transaction_it_logs_an_error_without_strict_and_holds_on(
    settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Production default: the call goes ahead (refusing it could strand a
    payment mid-way); the error and its stack tell operators where."""
    settings.DB_RELEASE_STRICT = False
    account = AccountFactory()

    with transaction.atomic():
        Account.objects.select_for_update().get(pk=account.pk)
        release_connections(before="acquirer alpha create_charge")
        assert connection.connection is not None

    (record,) = [r for r in caplog.records if r.name == "core.connections"]
    assert record.levelno == logging.ERROR
    assert "acquirer alpha create_charge" in record.getMessage()
    assert record.stack_info


@pytest.mark.django_db
def test_the_test_cases_own_transaction_is_left_alone(db: Any, caplog: pytest.LogCaptureFixture) -> None:
    """pytest-django's ``db`` wraps each test in a transaction the code under
    test did not open: nothing to release, nothing to report."""
    account = AccountFactory()
    assert connection.in_atomic_block

    release_connections(before="test")

    assert connection.connection is not None
    assert Account.objects.filter(pk=account.pk).exists()
    assert not [r for r in caplog.records if r.name == "core.connections"]


@pytest.mark.django_db
def test_a_transaction_opened_inside_a_test_case_is_still_caught(db: Any) -> None:
    with pytest.raises(TransactionOpenAcrossCall), transaction.atomic():
        release_connections(before="test")
