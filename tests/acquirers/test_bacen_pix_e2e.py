"""End to end through ``bacen_pix``, with every piece real: the API on a live
server, the fake PSP behind mTLS, a Celery worker process, a webhook receiver.

- a charge is created at the PSP, the payer pays, the PSP's callback reaches
  our notification URL over HTTP, the Pix is confirmed, the charge is paid,
  the balance credited and the account's webhook delivered;
- the PSP times out: the chain falls back to the next acquirer and the worker
  asks the PSP to withdraw the charge it created late (PATCH to removed).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from rest_framework.test import APIClient

from accounts.models import Account
from accounts.selectors import available_balance, ledger_sum
from acquirers.models import Acquirer
from payments.models import Charge, ChargeAttempt, ChargeStatus
from tests.acquirers.conftest import NOTIFY_TOKEN, warm_up
from tests.acquirers.fake_psp import FakePsp, Fault
from tests.factories import AcquirerFactory
from tests.realworld import CeleryWorker, Receiver, wait_for
from webhooks.services import endpoint_create

pytestmark = pytest.mark.django_db(transaction=True)
AMOUNT = 2500
LIQUID = 2432  # 2500 - (30 + 1.5%)
BODY = {
    "payment_method": "pix",
    "amount": AMOUNT,
    "buyer": {"buyer_name": "Fulana", "buyer_document": "11222333000181", "buyer_phone": "11999998888"},
}


def create_charge(api: APIClient) -> Charge:
    response = api.post("/api/transactions", BODY, format="json")
    assert response.status_code == 201, response.content
    return Charge.objects.get(pk=response.json()["data"]["id"])


def test_a_charge_paid_at_the_psp_is_paid_credited_and_announced(
    celery_worker_process: CeleryWorker,
    live_server: Any,
    receiver: Receiver,
    fake_psp: FakePsp,
    bacen_acquirer: Acquirer,
    account: Account,
    api: APIClient,
) -> None:
    endpoint_create(account=account, url=receiver.url)
    # What staff register at the PSP (PUT /webhook/{chave}); the PSP appends /pix.
    fake_psp.webhook_url = f"{live_server.url}/api/acquirers/{bacen_acquirer.key}/notifications/{NOTIFY_TOKEN}"
    charge = create_charge(api)
    assert fake_psp.cobs[charge.txid]["devedor"] == {"cnpj": "11222333000181", "nome": "Fulana"}

    e2e_id = fake_psp.pay(charge.txid, notify=True)

    assert fake_psp.callbacks[-1][1] == 200
    charge.refresh_from_db()
    assert (charge.status, charge.e2e_id) == (ChargeStatus.PAID, e2e_id)
    assert available_balance(account) == LIQUID == ledger_sum(account)
    (delivery,) = receiver.wait_for_requests(1)
    event = json.loads(delivery.body)
    assert event["event_type"] == "transaction"
    assert (event["data"]["id"], event["data"]["status"], event["data"]["e2e_id"]) == (str(charge.pk), "paid", e2e_id)


def test_a_psp_timeout_falls_back_and_the_late_charge_is_withdrawn(
    celery_worker_process: CeleryWorker,
    fake_psp: FakePsp,
    make_bacen_acquirer: Callable[..., Acquirer],
    account: Account,
    api: APIClient,
) -> None:
    bacen = make_bacen_acquirer(default_priority=1, connect_timeout_ms=1000, read_timeout_ms=1000)
    warm_up(bacen)
    sandbox = AcquirerFactory(key="sbx_fallback", default_priority=2)
    fake_psp.delay = 3.0
    fake_psp.fail("cob.put", Fault.TIMEOUT, Fault.TIMEOUT)  # the call and its retry

    charge = create_charge(api)

    assert charge.acquirer == sandbox
    attempts = list(ChargeAttempt.objects.filter(charge_id=charge.pk).order_by("position"))
    assert [(a.acquirer_id, a.outcome) for a in attempts] == [(bacen.pk, "timeout"), (sandbox.pk, "ok")]
    # The PSP created the charge although we gave up: the worker asks it to withdraw it.
    wait_for(lambda: fake_psp.cobs.get(charge.txid, {}).get("status") == "REMOVIDA_PELO_USUARIO_RECEBEDOR")
    (patch,) = fake_psp.calls_of("cob.patch")
    assert patch.path == f"/api/cob/{charge.txid}"
    assert patch.body == {"status": "REMOVIDA_PELO_USUARIO_RECEBEDOR"}
    assert patch.client_cert  # mTLS from the worker process too
