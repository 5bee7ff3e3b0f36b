"""Merchants' receivers cannot stall payouts (issue 11 §4).

64 receivers that drip-feed one header byte a second never trip a read
timeout; they belong to two merchants, as one may hold only half the webhook
worker (issue 29). Deliveries to them run on the webhook worker, each cut at
its total timeout (2 s here), while the payouts of another account run on
the payout worker as deployed (three workers, three queues) and are paid
within their normal latency, measured in the same test.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from django.db import transaction

from accounts.models import Account
from acquirers.models import Acquirer, AcquirerSlot
from acquirers.services import acquirer_slots_set
from tests.factories import AccountFactory, AcquirerFactory
from tests.realworld import DripFeeders, celery_workers_apart, drip_feeders, wait_for
from webhooks.models import WebhookAttempt, WebhookDelivery
from webhooks.services import endpoint_create, event_emit
from withdrawals.models import PayoutAttempt, Withdrawal, WithdrawalStatus
from withdrawals.services import withdrawal_request

RECEIVERS = 64
WEBHOOK_SLOTS = 4
AMOUNT = 5000
CPF = "52998224725"

# The workers are other processes: they see only committed rows.
pytestmark = pytest.mark.django_db(transaction=True)


def paid_in(account: Account) -> float:
    """Seconds from the request of a withdrawal to its being paid."""
    started = time.monotonic()
    withdrawal = withdrawal_request(account=account, amount=AMOUNT, key_type="cpf", key_value=CPF)

    def paid() -> bool:
        withdrawal.refresh_from_db()
        return withdrawal.status == WithdrawalStatus.PAID

    wait_for(paid, timeout=60, interval=0.02)
    return time.monotonic() - started


def stall_every_delivery_slot(merchants: list[Account], drip: DripFeeders) -> None:
    # Two merchants, half the receivers each: one account holds at most half
    # the webhook worker (WEBHOOK_ACCOUNT_SHARE), two of them every thread.
    for index, url in enumerate(drip.urls):
        endpoint_create(account=merchants[index % len(merchants)], url=url)
    for merchant in merchants:
        with transaction.atomic():
            event_emit(
                account_id=merchant.pk,
                event_type="transaction",
                record_id=uuid.uuid4(),
                status="paid",
                data={"status": "paid"},
            )
    assert WebhookDelivery.objects.filter(event__account__in=merchants).count() == RECEIVERS
    # Every delivery slot is held by a receiver that answers one byte a second.
    wait_for(lambda: drip.open >= WEBHOOK_SLOTS, timeout=30)


def test_64_drip_feeding_receivers_do_not_delay_the_payouts_of_another_account(
    database_name: str, account: Account, tmp_path: Path, settings: Any
) -> None:
    # 32 endpoints of each account, past the default limit: this is about the
    # worker's threads, not about what an account may register.
    settings.WEBHOOK_MAX_ENDPOINTS_PER_ACCOUNT = RECEIVERS // 2
    acquirer: Acquirer = AcquirerFactory(
        key=f"sbx_iso_{uuid.uuid4().hex[:8]}",
        options={"charge": "ok", "payout": "ok"},
        connect_timeout_ms=1000,
        read_timeout_ms=2000,
    )
    acquirer_slots_set(account=account, purpose=AcquirerSlot.Purpose.CASHOUT, acquirers=[acquirer])
    merchants: list[Account] = AccountFactory.create_batch(2)

    with (
        drip_feeders(RECEIVERS) as drip,
        celery_workers_apart(database_name, tmp_path, concurrency=2, webhook_concurrency=WEBHOOK_SLOTS),
    ):
        # Normal latency: the same payouts with no receiver misbehaving
        # (the first one also warms the worker up).
        baseline = max(paid_in(account) for _ in range(2))

        stall_every_delivery_slot(merchants, drip)
        under_load = [paid_in(account) for _ in range(4)]

        # A payout may take its acquirer's whole deadline more than usual;
        # anything beyond that was waiting on something else.
        bound = baseline + acquirer.deadline_seconds
        assert max(under_load) <= bound, (baseline, under_load)
        # The receivers hold at most the webhook worker's slots, each until
        # its total timeout: attempts end as timeouts, connections closed.
        assert drip.open <= WEBHOOK_SLOTS
        wait_for(lambda: drip.closed >= WEBHOOK_SLOTS, timeout=30)
        timed_out = WebhookAttempt.objects.filter(delivery__event__account__in=merchants, error__startswith="Timeout")
        wait_for(lambda: timed_out.count() >= WEBHOOK_SLOTS, timeout=30)
        assert drip.open <= WEBHOOK_SLOTS

    # Each payout was sent once and paid.
    withdrawals = Withdrawal.objects.filter(account=account)
    assert withdrawals.count() == 6
    assert set(withdrawals.values_list("status", flat=True)) == {WithdrawalStatus.PAID}
    assert PayoutAttempt.objects.filter(withdrawal__account=account, action=PayoutAttempt.Action.SEND).count() == 6
    assert not WebhookAttempt.objects.filter(delivery__event__account__in=merchants, succeeded=True).exists()
