"""A batch whose account's due-date chain starts at an API Pix PSP goes as
one lotecobv (against the fake PSP on loopback): each cobv the PSP created
becomes a stored charge with the PSP's code, one it refused fails with the
PSP's reason, and a lote sent again after a lost answer changes nothing."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.services import credential_issue
from acquirers import adapters
from acquirers.adapters.apipix.bacen import BacenPixAdapter
from acquirers.models import Acquirer
from due_charges import batch_lotes, batches
from due_charges.batch_lotes import LOTE_SENDS, item_due_request, lote_poll, lote_start
from due_charges.batches import CLAIM_LEASE, ITEMS_TASK, PROCESS_TASK, item_process
from due_charges.models import DueChargeBatch, DueChargeBatchItem
from due_charges.tasks import due_batch_process, sweep_due_batches
from payments.models import Charge
from tests.acquirers.conftest import bacen_options, warm_up
from tests.acquirers.fake_psp import FakePsp, Fault
from tests.conftest import client_for
from tests.due_charges.test_batches import URL, item
from tests.factories import AccountFactory, AcquirerFactory
from webhooks.models import WebhookEvent

pytestmark = pytest.mark.django_db


@pytest.fixture
def psp_acquirer(make_bacen_acquirer: Callable[..., Acquirer]) -> Acquirer:
    return make_bacen_acquirer(default_priority=1)


def test_a_batch_goes_as_one_lote_and_each_item_settles_from_the_lotes_answer(
    fake_psp: FakePsp, psp_acquirer: Acquirer
) -> None:
    client: APIClient = client_for(credential_issue(account=AccountFactory()))
    response = client.post(
        URL, data=json.dumps({"items": [item(0), item(1), item(2)]}), content_type="application/json"
    )
    assert response.status_code == 202, response.json()
    batch_id = response.json()["data"]["id"]
    taken = DueChargeBatchItem.objects.get(batch_id=batch_id, position=1)
    adapter = adapters.build(psp_acquirer)
    assert isinstance(adapter, BacenPixAdapter)
    adapter.create_due_charge(item_due_request(taken))  # its txid is in use: the PSP refuses that cobv

    assert lote_start(batch_id) is True
    assert lote_poll(batch_id) == 0

    (put,) = fake_psp.calls_of("lotecobv.put")
    assert len(put.body["cobsv"]) == 3
    items = {i.position: i for i in DueChargeBatchItem.objects.filter(batch_id=batch_id)}
    assert [items[n].status for n in range(3)] == ["created", "failed", "created"]
    assert items[1].errors["non_field_errors"][0].startswith("Recusada pela adquirente: Cobrança inválida.")
    for n in (0, 2):
        charge = Charge.objects.get(pk=items[n].charge_id)
        assert charge.acquirer == psp_acquirer
        assert charge.emv == fake_psp.cobvs[charge.txid]["pixCopiaECola"]
    assert not Charge.objects.filter(pk=items[1].charge_id).exists()
    batch = DueChargeBatch.objects.get(pk=batch_id)
    assert batch.status == "done"
    assert [e.data["counts"] for e in WebhookEvent.objects.filter(event_type="due_charge_batch")] == [
        {"total": 3, "pending": 0, "created": 2, "failed": 1}
    ]

    # The sweep's repeat: the lote the PSP took is read again, never sent again; nothing new.
    DueChargeBatch.objects.filter(pk=batch_id).update(status="processing", finished_at=None)
    assert lote_start(batch_id) is True
    assert lote_poll(batch_id) == 0
    assert Charge.objects.filter(account=batch.account).count() == 2
    assert len(fake_psp.calls_of("lotecobv.put")) == 1
    assert len(fake_psp.calls_of("lotecobv.get")) == 3


@pytest.fixture
def enqueued(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, tuple[Any, ...]]]:
    """Tasks published (not run): the test plays the worker."""
    sent: list[tuple[str, tuple[Any, ...]]] = []
    for module in (batch_lotes, batches):
        monkeypatch.setattr(module, "enqueue", lambda task, *args, **_: sent.append((task, args)))
    return sent


def three_item_batch() -> uuid.UUID:
    client: APIClient = client_for(credential_issue(account=AccountFactory()))
    response = client.post(
        URL, data=json.dumps({"items": [item(0), item(1), item(2)]}), content_type="application/json"
    )
    assert response.status_code == 202, response.json()
    return uuid.UUID(response.json()["data"]["id"])


def test_a_lote_still_processing_is_read_for_a_while_then_by_the_sweep_and_never_sent_again(
    fake_psp: FakePsp, psp_acquirer: Acquirer, enqueued: list[tuple[str, tuple[Any, ...]]]
) -> None:
    batch_id = three_item_batch()
    assert lote_start(batch_id) is True
    batch = DueChargeBatch.objects.get(pk=batch_id)
    assert batch.lote_id is not None
    lote = fake_psp.lotes[batch.lote_id]
    decided = [dict(entry) for entry in lote["cobsv"]]
    for entry in lote["cobsv"]:  # the PSP is still on it
        entry["status"] = "EM_PROCESSAMENTO"
    assert [task for task, _ in enqueued] == [batch_lotes.POLL_TASK]

    # Within the window: read again shortly, one read per task.
    assert lote_poll(batch_id) == 3
    assert [task for task, _ in enqueued] == [batch_lotes.POLL_TASK] * 2

    # Past it: the task ends without asking for another read.
    sent_long_ago = timezone.now() - batch_lotes.POLL_WINDOW
    DueChargeBatch.objects.filter(pk=batch_id).update(lote_sent_at=sent_long_ago)
    assert lote_poll(batch_id) == 3
    assert len(enqueued) == 2
    assert batches.batches_stalled() == []  # just read: the sweep waits a lease

    # Then the sweep reads it once per lease: read, never PUT again.
    DueChargeBatch.objects.filter(pk=batch_id).update(progress_at=timezone.now() - CLAIM_LEASE)
    assert sweep_due_batches() == 1
    assert sweep_due_batches() == 0
    assert len(fake_psp.calls_of("lotecobv.put")) == 1
    assert len(fake_psp.calls_of("lotecobv.get")) == 3
    assert len(enqueued) == 2
    assert DueChargeBatch.objects.get(pk=batch_id).status == "processing"

    lote["cobsv"] = decided  # the PSP is done
    DueChargeBatch.objects.filter(pk=batch_id).update(progress_at=timezone.now() - CLAIM_LEASE)
    assert sweep_due_batches() == 1
    assert DueChargeBatch.objects.get(pk=batch_id).status == "done"
    assert Charge.objects.filter(pk__in=batch.items.values("charge_id")).count() == 3


def test_a_lote_refused_as_a_whole_goes_item_by_item(
    fake_psp: FakePsp, psp_acquirer: Acquirer, enqueued: list[tuple[str, tuple[Any, ...]]]
) -> None:
    batch_id = three_item_batch()
    fake_psp.fail("lotecobv.put", Fault.DECLINED)

    assert lote_start(batch_id) is True

    batch = DueChargeBatch.objects.get(pk=batch_id)
    assert (batch.lote_acquirer, batch.lote_sent_at) == (None, None)
    assert enqueued == [(PROCESS_TASK, (str(batch_id),))]
    assert due_batch_process(str(batch_id)) == 3  # one by one now: handed to workers
    (task, (_, chunk)) = enqueued[-1]
    assert task == ITEMS_TASK
    assert [item_process(item_id) for item_id in chunk] == ["created"] * 3

    assert len(fake_psp.calls_of("lotecobv.put")) == 1
    assert len(fake_psp.calls_of("cobv.put")) == 3
    for entry in batch.items.all():
        charge = Charge.objects.get(pk=entry.charge_id)
        assert (charge.acquirer, charge.emv) == (psp_acquirer, fake_psp.cobvs[charge.txid]["pixCopiaECola"])
    assert DueChargeBatch.objects.get(pk=batch_id).status == "done"


def test_a_lote_never_answered_is_given_up_and_items_stored_elsewhere_withdraw_its_cobv(
    fake_psp: FakePsp,
    make_bacen_acquirer: Callable[..., Acquirer],
    enqueued: list[tuple[str, tuple[Any, ...]]],
    django_capture_on_commit_callbacks: Any,
) -> None:
    lote_at = make_bacen_acquirer(
        default_priority=1, read_timeout_ms=700, options=bacen_options(fake_psp, max_retries=0)
    )
    warm_up(lote_at)
    other = AcquirerFactory(key="due_other", default_priority=2)  # the sandbox: no lotes
    batch_id = three_item_batch()
    fake_psp.delay = 1.5
    fake_psp.fail("lotecobv.put", *[Fault.TIMEOUT] * LOTE_SENDS)  # the PSP creates the lote; we never hear

    assert lote_start(batch_id) is True
    for _ in range(LOTE_SENDS - 1):
        assert batch_lotes.lote_send(batch_id) == "timeout"

    batch = DueChargeBatch.objects.get(pk=batch_id)
    assert (batch.lote_acquirer, batch.lote_abandoned_at, batch.lote_sent_at) == (None, lote_at, None)
    assert [task for task, _ in enqueued] == [batch_lotes.SEND_TASK] * (LOTE_SENDS - 1) + [PROCESS_TASK]
    assert len(fake_psp.calls_of("lotecobv.put")) == LOTE_SENDS
    assert len(fake_psp.cobvs) == 3  # created there before the answers were lost

    # One by one now; the lote's acquirer refuses (or is open): the items go to the next.
    fake_psp.fail("cobv.put", *[Fault.UNAVAILABLE] * 3)
    assert due_batch_process(str(batch_id)) == 3
    (task, (_, chunk)) = enqueued[-1]
    assert task == ITEMS_TASK
    with django_capture_on_commit_callbacks(execute=True):
        assert [item_process(item_id) for item_id in chunk] == ["created"] * 3

    txids = set()
    for entry in batch.items.all():
        charge = Charge.objects.get(pk=entry.charge_id)
        assert charge.acquirer == other
        txids.add(charge.txid)
    assert txids == set(fake_psp.cobvs)
    withdrawals = sorted(args for task, args in enqueued if task == batches.WITHDRAW_TASK)
    assert withdrawals == sorted((lote_at.pk, txid) for txid in txids)  # one per item, at the lote's acquirer
    assert DueChargeBatch.objects.get(pk=batch_id).status == "done"
