"""A batch whose account's due-date chain starts at an API Pix PSP goes as
one lotecobv (against the fake PSP on loopback): each cobv the PSP created
becomes a stored charge with the PSP's code, one it refused fails with the
PSP's reason, and a lote sent again after a lost answer changes nothing."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from rest_framework.test import APIClient

from accounts.services import credential_issue
from acquirers import adapters
from acquirers.adapters.apipix.bacen import BacenPixAdapter
from acquirers.models import Acquirer
from due_charges.batch_lotes import item_due_request, lote_poll, lote_start
from due_charges.models import DueChargeBatch, DueChargeBatchItem
from payments.models import Charge
from tests.acquirers.fake_psp import FakePsp
from tests.conftest import client_for
from tests.due_charges.test_batches import URL, item
from tests.factories import AccountFactory
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

    # The sweep's repeat: the same lote PUT again, read again, nothing new.
    DueChargeBatch.objects.filter(pk=batch_id).update(status="processing", finished_at=None)
    assert lote_start(batch_id) is True
    assert lote_poll(batch_id) == 0
    assert Charge.objects.filter(account=batch.account).count() == 2
    assert len(fake_psp.calls_of("lotecobv.put")) == 2
