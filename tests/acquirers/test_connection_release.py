"""No database connection is held while an acquirer answers (issue 13).

The acquirer is the fake API Pix PSP on loopback (mTLS, the ``bacen_pix``
adapter). Its handler looks, while it holds each request, at the thread that
called it: that thread's Django connection must be given back, and the
process's pool must have none handed out. After the call the same thread
queries again (the charge and its attempts are written after the answer).

Not in the test case's transaction (``transaction=True``): inside it nothing
can be released, so the release is skipped there (core/connections.py)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from django.db import connection, transaction
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.models import Account
from acquirers import calls
from acquirers.adapters.base import ChargeRequest
from acquirers.models import Acquirer
from acquirers.tasks import cancel_charge_at_acquirer
from core.connections import TransactionOpenAcrossCall
from payments.models import Charge, ChargeAttempt, ChargeStatus
from reconciliation.run import acquirer_reconcile
from tests.acquirers.conftest import CHAVE, CLIENT_SECRET, NOTIFY_TOKEN, PKI
from tests.acquirers.fake_psp import FakePsp, Handler
from tests.acquirers.fake_server import FakeHandler
from tests.realworld import ConnectionState, ConnectionWatch

pytestmark = pytest.mark.django_db(transaction=True)

BODY = {
    "payment_method": "pix",
    "amount": 1000,
    "buyer": {"buyer_name": "Fulano", "buyer_document": "52998224725", "buyer_phone": "11999998888"},
}
#: What every look from the PSP must find: nothing held, here or anywhere in the process.
NOTHING_HELD = ConnectionState(held=False, checked_out=0)


class _WatchingHandler(Handler):
    def _handle(self, method: str) -> None:
        watch = self.server.fake.watch
        if watch is not None:
            watch.look()
        super()._handle(method)


@dataclass
class WatchedPsp(FakePsp):
    """The fake PSP, looking at its caller while it holds each request."""

    watch: ConnectionWatch | None = None

    def handler(self) -> type[FakeHandler]:
        return _WatchingHandler


@pytest.fixture
def fake_psp() -> Iterator[FakePsp]:
    """Replaces the acquirer tests' PSP (same checks against the spec)."""
    psp = WatchedPsp(pki=PKI, client_id=f"watched-{uuid.uuid4().hex[:8]}", client_secret=CLIENT_SECRET, chave=CHAVE)
    with psp.running():
        yield psp
    assert psp.violations == [], "\n".join(psp.violations)


@pytest.fixture
def watched(fake_psp: FakePsp) -> WatchedPsp:
    assert isinstance(fake_psp, WatchedPsp)
    fake_psp.watch = ConnectionWatch()  # built here: the test's thread, which makes the calls
    return fake_psp


def looks(psp: WatchedPsp, *operations: str) -> list[ConnectionState]:
    assert psp.watch is not None
    assert [c.operation for c in psp.calls if c.operation != "token"] == list(operations)
    return psp.watch.seen


def test_a_charge_holds_no_connection_while_its_acquirer_answers(
    api: APIClient, account: Account, bacen_acquirer: Acquirer, watched: WatchedPsp
) -> None:
    response = api.post("/api/transactions", BODY, format="json")

    assert response.status_code == 201, response.content
    # The token request and the PUT /cob: the request's thread held nothing during either.
    assert looks(watched, "cob.put")
    assert set(looks(watched, "cob.put")) == {NOTHING_HELD}
    # Taken again after the answer: the charge and its attempt were written.
    charge = Charge.objects.get(pk=response.json()["data"]["id"])
    assert charge.emv == watched.cobs[charge.txid]["pixCopiaECola"]
    assert list(ChargeAttempt.objects.filter(charge_id=charge.pk).values_list("outcome", flat=True)) == ["ok"]


def test_a_notification_holds_no_connection_while_the_pix_is_confirmed(
    api: APIClient, account: Account, bacen_acquirer: Acquirer, watched: WatchedPsp
) -> None:
    response = api.post("/api/transactions", BODY, format="json")
    charge = Charge.objects.get(pk=response.json()["data"]["id"])
    e2e_id = watched.pay(charge.txid)
    assert watched.watch is not None
    watched.watch.seen.clear()

    answer = APIClient().post(
        f"/api/acquirers/bacen/notifications/{NOTIFY_TOKEN}/pix",
        data=json.dumps(watched.callback_body([e2e_id])),
        content_type="application/json",
    )

    assert answer.status_code == 200, answer.content
    assert looks(watched, "cob.put", "pix.get")
    assert set(watched.watch.seen) == {NOTHING_HELD}  # during GET /pix/{e2eid}
    charge.refresh_from_db()
    assert charge.status == ChargeStatus.PAID


def test_the_cancel_task_holds_no_connection_while_the_acquirer_answers(
    api: APIClient, account: Account, bacen_acquirer: Acquirer, watched: WatchedPsp
) -> None:
    response = api.post("/api/transactions", BODY, format="json")
    charge = Charge.objects.get(pk=response.json()["data"]["id"])
    assert watched.watch is not None
    watched.watch.seen.clear()

    cancel_charge_at_acquirer(bacen_acquirer.pk, charge.txid)  # the task's body, on this thread

    assert looks(watched, "cob.put", "cob.patch")
    assert set(watched.watch.seen) == {NOTHING_HELD}
    assert watched.cobs[charge.txid]["status"] == "REMOVIDA_PELO_USUARIO_RECEBEDOR"


def test_reconciliation_holds_no_connection_while_the_listings_are_read(
    api: APIClient, account: Account, bacen_acquirer: Acquirer, watched: WatchedPsp
) -> None:
    watched.list_page_size = 1
    charges = [Charge.objects.get(pk=api.post("/api/transactions", BODY, format="json").json()["data"]["id"])]
    charges.append(Charge.objects.get(pk=api.post("/api/transactions", BODY, format="json").json()["data"]["id"]))
    for charge in charges:
        watched.pay(charge.txid)
    assert watched.watch is not None
    watched.watch.seen.clear()

    run = acquirer_reconcile(acquirer_id=bacen_acquirer.pk, day=timezone.localdate())

    # Two pages of GET /pix, two of GET /cob: nothing held during any of them.
    assert looks(watched, "cob.put", "cob.put", "pix.list", "pix.list", "cob.list", "cob.list")
    assert set(watched.watch.seen) == {NOTHING_HELD}
    assert (run.status, run.healed_count) == ("done", 2)


def test_an_acquirer_call_inside_a_transaction_is_refused_before_anything_is_sent(
    account: Account, bacen_acquirer: Acquirer, watched: WatchedPsp
) -> None:
    """The bug the rule guards against: a row lock held while a PSP answers.
    Under DB_RELEASE_STRICT (the tests) the call fails before it leaves."""
    txid = uuid.uuid4().hex
    request = ChargeRequest(
        charge_id=uuid.uuid4(),
        txid=txid,
        amount=1000,
        expires_in=3600,
        payer_name="Fulano",
        payer_document="52998224725",
        merchant_name="Loja",
        merchant_city="SAO PAULO",
    )

    with transaction.atomic():
        Account.objects.select_for_update().get(pk=account.pk)
        with pytest.raises(TransactionOpenAcrossCall):
            calls.call(bacen_acquirer, "create_charge", lambda adapter: adapter.create_charge(request))
        # Refused before anything was closed: the transaction goes on.
        assert Account.objects.filter(pk=account.pk).exists()

    assert watched.calls == []
    assert txid not in watched.cobs
    assert not connection.in_atomic_block
