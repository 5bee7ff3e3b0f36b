"""core.sql.statement_of: a statement compiled once for a hot path binds
exactly the values it was built with, or refuses to be used."""

from __future__ import annotations

import uuid

import pytest
from django.db import connection
from django.db.models import Value
from django.db.models.functions import Concat

from accounts.models import Account, AccountBalance
from core.sql import statement_of
from tests.factories import AccountFactory

pytestmark = pytest.mark.django_db


def test_the_sql_runs_with_the_real_values_bound() -> None:
    account = AccountFactory()
    placeholder = uuid.UUID(int=1)
    sql = statement_of(
        AccountBalance.objects.filter(account_id=placeholder).values_list("account_id").query, [placeholder], what="t"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [account.pk])
        assert cursor.fetchone() == (account.pk,)


def test_a_query_with_another_parameter_is_refused() -> None:
    placeholder = uuid.UUID(int=1)
    # A value the ORM binds as one more parameter: bound by position, the
    # caller's account id would land on it.
    query = Account.objects.annotate(tag=Concat("name", Value("!"))).filter(pk=placeholder).values_list("tag").query
    with pytest.raises(RuntimeError, match="t: unexpected parameters"):
        statement_of(query, [placeholder], what="t")


def test_parameters_in_another_order_are_refused() -> None:
    first, second = uuid.UUID(int=1), uuid.UUID(int=2)
    query = Account.objects.filter(pk=first).exclude(pk=second).query
    assert statement_of(query, [first, second], what="t")
    with pytest.raises(RuntimeError, match="unexpected parameters"):
        statement_of(query, [second, first], what="t")
