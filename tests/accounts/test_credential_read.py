"""The credential behind a request is read, with its account, by one
precompiled statement through a plain cursor (``accounts.selectors.
active_credential``): it must give what the ORM's ``select_related`` read
gives, field for field, and nothing for a revoked or unknown key."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db.models import Model
from django.utils import timezone

from accounts.models import Account, ApiCredential
from accounts.selectors import active_credential
from accounts.services import credential_issue, credential_revoke
from tests.factories import AccountFactory

pytestmark = pytest.mark.django_db


def fields_of(instance: Model) -> dict[str, Any]:
    return {field.attname: getattr(instance, field.attname) for field in type(instance)._meta.concrete_fields}


def test_the_credential_and_its_account_are_what_the_orm_reads(django_assert_num_queries: Any) -> None:
    # Every kind of column set away from its default: a list, nulls and not, dates, fees, limits.
    account = AccountFactory(
        is_blocked=True,
        payment_methods=["pix"],
        cashin_fee_fixed=12,
        cashin_fee_bps=150,
        withdrawal_daily_limit=10**9,
        withdrawals_need_approval=True,
        charge_expiry_seconds=900,
        previous_postback_secret="whsec_old",
        previous_postback_secret_expires_at=timezone.now() + timedelta(hours=1),
    )
    AccountFactory()  # another account's row, not to be mixed in
    issued = credential_issue(account=account, permission=ApiCredential.Permission.CASHIN, label="loja")
    ApiCredential.objects.filter(pk=issued.credential.pk).update_unwatched(last_used_at=timezone.now())
    expected = ApiCredential.objects.select_related("account").get(pk=issued.credential.pk)

    with django_assert_num_queries(1):
        read = active_credential(issued.credential.public_key)

    assert read is not None
    assert fields_of(read) == fields_of(expected)
    assert fields_of(read.account) == fields_of(expected.account)
    assert read.account.pk == account.pk
    assert read.account_id == account.pk
    # Saved as the ORM's own instances would be: an existing row, not a new one.
    assert not read._state.adding
    assert not read.account._state.adding


def test_a_revoked_or_unknown_key_reads_nothing() -> None:
    account: Account = AccountFactory()
    issued = credential_issue(account=account)
    credential_revoke(credential=issued.credential)

    assert active_credential(issued.credential.public_key) is None
    assert active_credential("pk_nobody") is None
