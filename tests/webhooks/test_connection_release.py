"""No database connection is held while a webhook receiver answers (issue 13).

A real receiver on loopback looks, while it holds the request, at the thread
delivering it: its Django connection must be given back and the process's
pool must have none handed out. After the answer the same thread records
it (the delivery and its attempt are written). In process, on the test's
thread: the worker runs the same function."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import transaction

from accounts.models import Account
from core.connections import TransactionOpenAcrossCall
from tests.factories import AccountFactory
from tests.realworld import ConnectionState, ConnectionWatch, Receiver, http_receiver
from webhooks import services
from webhooks.delivery import delivery_attempt
from webhooks.models import WebhookAttempt, WebhookDelivery, WebhookEvent

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def account(db: Any) -> Account:
    return AccountFactory()


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[Receiver]:
    # The attempt runs here, by hand: nothing is handed to a worker.
    monkeypatch.setattr(services, "_enqueue", lambda delivery_id, countdown: None)
    with http_receiver() as receiver:
        yield receiver


def pending_delivery(account: Account, url: str) -> WebhookDelivery:
    endpoint = services.endpoint_create(account=account, url=url).endpoint
    with transaction.atomic():
        event: WebhookEvent = services.event_emit(
            account_id=account.pk,
            event_type="transaction",
            record_id=uuid.uuid4(),
            status="paid",
            data={"status": "paid"},
        )
    return WebhookDelivery.objects.get(event=event, endpoint=endpoint)


def test_a_delivery_holds_no_connection_while_the_receiver_answers(account: Account, receiver: Receiver) -> None:
    watch = ConnectionWatch()  # this thread delivers
    receiver.while_holding = watch.look
    delivery = pending_delivery(account, receiver.url)

    outcome = delivery_attempt(delivery_id=delivery.pk)

    assert outcome == "succeeded"
    assert watch.seen == [ConnectionState(held=False, checked_out=0)]
    # Taken again after the answer: the outcome was recorded.
    delivery.refresh_from_db()
    assert delivery.status == WebhookDelivery.Status.SUCCEEDED
    assert list(WebhookAttempt.objects.filter(delivery=delivery).values_list("status_code", "succeeded")) == [
        (200, True)
    ]


def test_a_delivery_inside_a_transaction_is_refused_before_anything_is_sent(
    account: Account, receiver: Receiver
) -> None:
    """Under DB_RELEASE_STRICT (the tests) a delivery started inside a
    transaction fails before the request leaves, and the transaction rolls back."""
    delivery = pending_delivery(account, receiver.url)

    with pytest.raises(TransactionOpenAcrossCall), transaction.atomic():
        delivery_attempt(delivery_id=delivery.pk)

    assert receiver.requests == []
    delivery.refresh_from_db()
    assert delivery.status == WebhookDelivery.Status.PENDING
    assert delivery.leased_until is None  # the claim rolled back with the block
    assert not WebhookAttempt.objects.filter(delivery=delivery).exists()
