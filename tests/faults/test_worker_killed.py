"""A Celery worker killed with SIGKILL in the middle of its work (the OOM
killer, a lost machine): no shutdown code runs, the task is neither
acknowledged nor handed back. Another worker redoes the work, and what the
outside world sees happens once: one payout at the acquirer, one event per
status change, one successful delivery of the same event id.

A worker that is killed has a Redis of its own as the broker, so killing
it and shortening the visibility timeout touch nobody else's queues, and
the task it leaves unacknowledged goes away with that Redis.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.models import Account, LedgerEntry
from accounts.selectors import available_balance, ledger_sum
from acquirers import adapters
from acquirers.adapters.base import PayoutStatus
from acquirers.adapters.sandbox import SandboxAdapter
from acquirers.models import Acquirer, AcquirerSlot
from acquirers.services import acquirer_slots_set
from payments.models import Charge
from tests.factories import AcquirerFactory
from tests.faults.conftest import SEED
from tests.realworld import (
    CeleryWorker,
    Receiver,
    RedisServer,
    celery_broker,
    celery_worker,
    redis_server,
    wait_for,
)
from webhooks import capacity
from webhooks.models import WebhookAttempt, WebhookDelivery, WebhookEvent
from webhooks.services import endpoint_create
from webhooks.tasks import relay_webhooks
from withdrawals.models import PayoutAttempt, Withdrawal, WithdrawalStatus, WithdrawalTransition
from withdrawals.polling import payouts_poll

AMOUNT = 5000
CPF = "52998224725"
# Seconds a taken, unacknowledged task waits before the broker gives it to
# the next worker that starts (production: 1 h).
VISIBILITY = 1

# The workers are other processes: they see only committed rows.
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[RedisServer]:
    """A private Redis as this process's broker, for the workers the test
    starts with ``CELERY_BROKER_URL``."""
    with redis_server(tmp_path) as server, celery_broker(server.url):
        yield server


def sandbox_of(acquirer: Acquirer) -> SandboxAdapter:
    adapter = adapters.build(acquirer)
    assert isinstance(adapter, SandboxAdapter)
    return adapter


def task_ids(worker: CeleryWorker, task: str, state: str) -> list[str]:
    """Ids of ``task`` the worker's log reports as ``received`` or ``succeeded``."""
    marker = f"{task}["
    return [
        line.split(marker, 1)[1].split("]", 1)[0]
        for line in worker.output().splitlines()
        if marker in line and f"] {state}" in line
    ]


def attempts(withdrawal: Withdrawal) -> list[tuple[str, str, str]]:
    rows = PayoutAttempt.objects.filter(withdrawal=withdrawal).order_by("id").select_related("acquirer")
    return [(a.acquirer.key, a.action, a.outcome) for a in rows]


def events(record_id: uuid.UUID) -> list[str]:
    return list(
        WebhookEvent.objects.filter(record_id=record_id).order_by("created_at").values_list("status", flat=True)
    )


def ledger(account: Account) -> list[tuple[str, int]]:
    return [(e.kind, e.amount) for e in LedgerEntry.objects.filter(account=account).order_by("id")]


# --------------------------------------------------------------------------- payout


def test_a_payout_cut_short_by_a_killed_worker_is_finished_by_the_next_one_and_sent_once(
    database_name: str, broker: RedisServer, api: APIClient, account: Account, tmp_path: Path
) -> None:
    # payout "timeout": the sandbox makes the transfer, then holds the answer
    # past the deadline (31 s here): the worker is killed while it waits.
    acquirer = AcquirerFactory(
        key=f"sbx_killed_{uuid.uuid4().hex[:8]}",
        options={"charge": "ok", "payout": "timeout"},
        connect_timeout_ms=1000,
        read_timeout_ms=30_000,
    )
    acquirer_slots_set(account=account, purpose=AcquirerSlot.Purpose.CASHOUT, acquirers=[acquirer])
    sandbox = sandbox_of(acquirer)
    env = {"CELERY_BROKER_URL": broker.url, "CELERY_VISIBILITY_TIMEOUT": str(VISIBILITY)}
    task = "withdrawals.tasks.process_withdrawal"

    with celery_worker(database_name, tmp_path, env=env) as first:
        response = api.post("/api/withdrawals", {"amount": AMOUNT, "key_value": CPF}, format="json")
        assert response.status_code == 201, response.content
        withdrawal = Withdrawal.objects.get(pk=response.json()["data"]["id"])
        wait_for(lambda: sandbox.get_payout_status(withdrawal.idempotency_id).status is PayoutStatus.PAID, timeout=30)
        first.kill()
    # Approved by a first run; the second, the payout, died mid-send.
    (interrupted,) = set(task_ids(first, task, "received")) - set(task_ids(first, task, "succeeded"))

    withdrawal.refresh_from_db()
    assert withdrawal.status == WithdrawalStatus.APPROVED
    assert withdrawal.payout_leased_until is not None
    assert withdrawal.payout_leased_until > timezone.now()  # still the dead worker's
    assert attempts(withdrawal) == [(acquirer.key, "send", "in_progress")]
    assert events(withdrawal.pk) == [WithdrawalStatus.APPROVED]
    assert sandbox.payout_requests(withdrawal.idempotency_id) == 1
    assert available_balance(account) == SEED - AMOUNT

    # The lease (5 min, as long as a task may run) keeps every other run off
    # a payout its holder may still be sending. The whole worker died: no
    # main process saw its child die and vouched for its lease (as it does
    # for a pool child killed alone, tests/faults/test_payout_worker_lost.py).
    # In production the lease has long run out when the broker redelivers
    # (1 h), and beat's poller (every minute, covered in
    # tests/withdrawals/test_payout.py) takes the withdrawal even sooner; here
    # the broker's clock is seconds, so the lease's is moved on.
    Withdrawal.objects.filter(pk=withdrawal.pk).update(payout_leased_until=timezone.now() - dt.timedelta(seconds=1))
    # The next worker to start takes the abandoned task back.
    wait_for(lambda: broker.abandoned(VISIBILITY) == 1, timeout=30)

    with celery_worker(database_name, tmp_path, env=env, queue=first.queue) as second:
        # The very task that was killed, redelivered and run to the end.
        wait_for(lambda: interrupted in task_ids(second, task, "succeeded"), timeout=30)
    (finished,) = [line for line in second.output().splitlines() if f"{task}[{interrupted}] succeeded" in line]
    assert finished.endswith(": 'paid'")

    withdrawal.refresh_from_db()
    held = sandbox.get_payout_status(withdrawal.idempotency_id)
    assert (withdrawal.status, withdrawal.e2e_id, withdrawal.acquirer_id) == (
        WithdrawalStatus.PAID,
        held.e2e_id,
        acquirer.pk,
    )
    assert withdrawal.paid_at is not None
    assert withdrawal.payout_leased_until is None
    # It asked before anything else, found the transfer made, and never sent again;
    # the dead run's send is on record as what it is, unclear (RunInterrupted).
    assert attempts(withdrawal) == [(acquirer.key, "send", "timeout"), (acquirer.key, "status", "paid")]
    assert PayoutAttempt.objects.filter(withdrawal=withdrawal).order_by("id")[0].error_class == "RunInterrupted"
    assert sandbox.payout_requests(withdrawal.idempotency_id) == 1
    transitions = WithdrawalTransition.objects.filter(withdrawal=withdrawal).order_by("id")
    assert [(t.from_status, t.to_status) for t in transitions] == [
        (WithdrawalStatus.PENDING, WithdrawalStatus.APPROVED),
        (WithdrawalStatus.APPROVED, WithdrawalStatus.PAID),
    ]
    assert events(withdrawal.pk) == [WithdrawalStatus.APPROVED, WithdrawalStatus.PAID]
    # Debited once, at the request; nothing moved when it was paid.
    assert ledger(account) == [(LedgerEntry.Kind.CHARGE_PAID, SEED), (LedgerEntry.Kind.WITHDRAWAL, -AMOUNT)]
    assert available_balance(account) == SEED - AMOUNT == ledger_sum(account)
    read = api.get(f"/api/withdrawals/{withdrawal.pk}").json()["data"]
    assert (read["status"], read["e2e_id"]) == (WithdrawalStatus.PAID, withdrawal.e2e_id)
    assert payouts_poll(older_than=dt.timedelta(0)) == 0  # nothing left for beat


# --------------------------------------------------------------------------- webhook delivery


def test_a_delivery_cut_short_by_a_killed_worker_is_sent_again_and_succeeds(
    database_name: str,
    celery_worker_process: CeleryWorker,
    api: APIClient,
    account: Account,
    receiver: Receiver,
    tmp_path: Path,
) -> None:
    AcquirerFactory(key=f"sbx_hook_{uuid.uuid4().hex[:8]}", default_priority=1)
    endpoint = endpoint_create(account=account, url=receiver.url).endpoint
    # The receiver holds the first request (the worker is killed meanwhile)
    # and answers the next one at once.
    receiver.respond((200, {}, 60.0), 200)
    response = api.post(
        "/api/transactions",
        {
            "payment_method": "pix",
            "amount": 1000,
            "buyer": {"buyer_name": "Fulano", "buyer_document": CPF, "buyer_phone": "11999998888"},
        },
        format="json",
    )
    assert response.status_code == 201, response.content
    charge = Charge.objects.get(pk=response.json()["data"]["id"])

    # The worker that dies has a broker of its own: the task it never
    # acknowledged goes away with it instead of lingering in the shared one.
    with redis_server(tmp_path) as broker, celery_broker(broker.url):
        # A request timeout longer than the hold: the kill, not the timeout, ends the attempt.
        env = {"CELERY_BROKER_URL": broker.url, "WEBHOOK_TIMEOUT": "60"}
        with celery_worker(database_name, tmp_path, env=env) as doomed:
            assert api.post(f"/api/sandbox/transactions/{charge.pk}/pay").status_code == 200
            receiver.wait_for_requests(1, timeout=30)
            doomed.kill()

    event = WebhookEvent.objects.get(record_id=charge.pk)
    delivery = WebhookDelivery.objects.get(event=event)
    assert (delivery.status, delivery.attempt_count, delivery.endpoint_id) == (
        WebhookDelivery.Status.PENDING,
        0,
        endpoint.pk,
    )
    assert delivery.leased_until is not None
    assert delivery.leased_until > timezone.now()  # still the dead worker's
    # The attempt is on record before the call: the receiver may have seen it.
    (interrupted,) = WebhookAttempt.objects.filter(delivery=delivery)
    assert (interrupted.number, interrupted.status_code, interrupted.succeeded) == (1, None, False)
    assert interrupted.error.startswith("interrupted")

    # In production the lease (connect + total timeout + 30 s) runs out and
    # the relay, which beat runs every 10 s, hands the delivery to a live
    # worker; the killed task itself would come back only after the broker's
    # visibility timeout (1 h), and find the delivery done. Here the lease's
    # clock is moved on, and the relay task is sent as beat sends it, to the
    # session's worker.
    moved = timezone.now() - dt.timedelta(minutes=2)
    WebhookDelivery.objects.filter(pk=delivery.pk).update(leased_until=moved, next_attempt_at=moved)
    # The dead worker's concurrency slots (webhooks.capacity) end with the same
    # lease: with the session worker's 4 threads its endpoint may hold only one.
    capacity._client().delete(*capacity.delivery_caps(endpoint_id=endpoint.pk, account_id=account.pk))
    relay_webhooks.delay()
    wait_for(lambda: WebhookDelivery.objects.get(pk=delivery.pk).status == WebhookDelivery.Status.SUCCEEDED, timeout=30)

    # At least once: the receiver saw the same event twice, and deduplicates on its id.
    first_request, second_request = receiver.requests
    for request in (first_request, second_request):
        assert request.headers["X-Webhook-Event-ID"] == request.headers["webhook-id"] == str(event.id)
        assert request.headers["X-Webhook-Code"] == endpoint.code
    assert json.loads(first_request.body) == json.loads(second_request.body)
    assert json.loads(second_request.body)["data"]["status"] == "paid"

    delivery.refresh_from_db()
    assert (delivery.attempt_count, delivery.last_status_code, delivery.next_attempt_at) == (1, 200, None)
    assert delivery.leased_until is None
    # Both attempts are on record: the interrupted one and the one that finished.
    first, second = WebhookAttempt.objects.filter(delivery=delivery).order_by("number")
    assert (first.number, first.status_code, first.succeeded) == (1, None, False)
    assert (second.number, second.status_code, second.succeeded) == (2, 200, True)
    assert not WebhookDelivery.objects.filter(status=WebhookDelivery.Status.PENDING).exists()
    assert len(receiver.requests) == 2
    assert events(charge.pk) == ["paid"]
