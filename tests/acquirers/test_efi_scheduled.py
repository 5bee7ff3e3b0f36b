"""A scheduled withdrawal against Efí's fake on loopback (docs/api/scheduled-withdrawals.md):
nothing reaches Efí before its day, whoever runs the payout engine; on its day beat's
release sends it once, and it is paid as any withdrawal."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone

from accounts.models import Account, LedgerEntry
from accounts.selectors import available_balance, ledger_sum
from accounts.services import ledger_post
from acquirers.models import Acquirer, AcquirerSlot
from acquirers.services import acquirer_slots_set
from tests.acquirers.fake_efi import FakeEfi
from tests.acquirers.test_efi_payout import (
    CPF,
    SEED,
    WITHDRAWAL,
    assert_one_send,
    attempts,
    poll_now,
    wait_attempts,
    wait_status,
)
from tests.factories import AccountFactory
from tests.realworld import CeleryWorker
from withdrawals.limits import sao_paulo_today
from withdrawals.models import Withdrawal, WithdrawalStatus
from withdrawals.payouts import ProcessOutcome, withdrawal_process
from withdrawals.polling import payouts_poll
from withdrawals.schedule import scheduled_payouts_release
from withdrawals.services import withdrawal_request

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def account(db: Any) -> Account:
    account = AccountFactory(withdrawal_fee_fixed=100, withdrawal_fee_bps=100)
    with transaction.atomic():
        ledger_post(account_id=account.pk, amount=SEED, kind=LedgerEntry.Kind.CHARGE_PAID, reference="seed:efi")
    return account


def test_a_scheduled_withdrawal_reaches_efi_only_on_its_day(
    celery_worker_process: CeleryWorker, fake_efi: FakeEfi, efi_acquirer: Acquirer, account: Account
) -> None:
    fake_efi.outcome = "paid"
    acquirer_slots_set(account=account, purpose=AcquirerSlot.Purpose.CASHOUT, acquirers=[efi_acquirer])
    withdrawal = withdrawal_request(
        account=account,
        amount=WITHDRAWAL,
        key_type="cpf",
        key_value=CPF,
        scheduled_for=sao_paulo_today() + dt.timedelta(days=1),
    )
    assert available_balance(account) == SEED - WITHDRAWAL == ledger_sum(account)

    # Before its day: the engine, the poller and beat's release leave it alone.
    assert withdrawal_process(withdrawal_id=withdrawal.pk) == ProcessOutcome.SCHEDULED
    Withdrawal.objects.filter(pk=withdrawal.pk).update(updated_at=timezone.now() - dt.timedelta(hours=1))
    assert payouts_poll(older_than=dt.timedelta(0)) == 0
    assert scheduled_payouts_release() == 0
    assert fake_efi.calls_of("send") == []
    assert attempts(withdrawal) == []

    # Its day (the row as it stands then; the worker runs on the real clock).
    Withdrawal.objects.filter(pk=withdrawal.pk).update(
        scheduled_for=sao_paulo_today(), updated_at=timezone.now() - dt.timedelta(days=1)
    )
    assert scheduled_payouts_release() == 1
    wait_attempts(withdrawal, [("efi", "send", "processing")])
    poll_now()

    wait_status(withdrawal, WithdrawalStatus.PAID)
    assert_one_send(fake_efi, withdrawal)
    assert available_balance(account) == SEED - WITHDRAWAL == ledger_sum(account)
