"""A payout batch through Efí's fake on loopback (``tests/acquirers/fake_efi.py``),
end to end with a Celery worker: every item sent once under its own idEnvio,
paid on Efí's word, the batch completed once with its webhook, the balance
equal to the ledger (docs/api/payout-batches.md)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.db import transaction

from accounts.models import Account, LedgerEntry
from accounts.selectors import available_balance, ledger_sum
from accounts.services import ledger_post
from acquirers.models import Acquirer, AcquirerSlot
from acquirers.services import acquirer_slots_set
from tests.acquirers.fake_efi import FakeEfi
from tests.factories import AccountFactory
from tests.realworld import CeleryWorker, wait_for
from webhooks.models import WebhookEvent
from withdrawals.batches import payout_batch_create
from withdrawals.models import PayoutBatch, Withdrawal, WithdrawalStatus
from withdrawals.polling import payouts_poll

pytestmark = pytest.mark.django_db(transaction=True)

CPF = "52998224725"


@pytest.fixture
def account(db: Any) -> Account:
    account = AccountFactory(withdrawal_fee_fixed=100, withdrawal_fee_bps=0)
    with transaction.atomic():
        ledger_post(account_id=account.pk, amount=50_000, kind=LedgerEntry.Kind.CHARGE_PAID, reference="seed:efi-b")
    return account


def test_a_batch_is_paid_through_efi_each_item_sent_once(
    celery_worker_process: CeleryWorker, fake_efi: FakeEfi, efi_acquirer: Acquirer, account: Account
) -> None:
    fake_efi.outcome = "paid"  # settles right after answering EM_PROCESSAMENTO
    acquirer_slots_set(account=account, purpose=AcquirerSlot.Purpose.CASHOUT, acquirers=[efi_acquirer])
    items = [{"amount": 1000 * (n + 2), "key_type": "cpf", "key_value": CPF, "external_id": f"e{n}"} for n in range(3)]
    batch = payout_batch_create(account=account, items=items)
    ids = {w.idempotency_id for w in Withdrawal.objects.filter(batch=batch)}

    # Each item sent once; Efí answers "processing", then its lookup says paid.
    wait_for(
        lambda: (
            set(fake_efi.sends) >= ids
            and not Withdrawal.objects.filter(batch=batch, payout_leased_until__isnull=False).exists()
        )
    )

    def completed() -> bool:
        payouts_poll(older_than=dt.timedelta(0))
        return PayoutBatch.objects.get(pk=batch.pk).status == PayoutBatch.Status.COMPLETED

    wait_for(completed, timeout=30, interval=0.5)
    assert set(Withdrawal.objects.filter(batch=batch).values_list("status", flat=True)) == {WithdrawalStatus.PAID}
    assert len(fake_efi.calls_of("send")) == 3
    assert set(fake_efi.sends) == ids
    [event] = WebhookEvent.objects.filter(record_id=batch.pk, event_type="payout_batch")
    assert event.data["counts"]["paid"] == 3
    assert available_balance(account) == ledger_sum(account) == 50_000 - 9000
