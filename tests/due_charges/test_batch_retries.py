"""A batch item whose creation came to no clear answer is not a failure: the
acquirer may hold its cobv. It waits and is tried again with the same txid
(the acquirer answers the cobv it holds), and nothing is withdrawn there
meanwhile; it fails at once only on definitive refusals, and after a few
tries it is given up with its cobv withdrawn wherever it may be."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from rest_framework.test import APIClient

from accounts.services import credential_issue
from acquirers import adapters, tasks
from acquirers.adapters.base import AcquirerDeclined
from acquirers.adapters.sandbox import SandboxAdapter
from acquirers.models import Acquirer
from due_charges import batches
from due_charges.batches import CLAIM_LEASE, MAX_ATTEMPTS, item_process
from due_charges.models import DueChargeBatch, DueChargeBatchItem
from payments.models import Charge
from tests.conftest import client_for
from tests.due_charges.test_batches import item, post
from tests.factories import AccountFactory, AcquirerFactory

pytestmark = pytest.mark.django_db

WITHDRAW = "acquirers.tasks.cancel_due_charge_at_acquirer"


@pytest.fixture
def late(db: Any) -> Acquirer:
    """The only acquirer: creates the cobv, then answers past its deadline."""
    return AcquirerFactory(
        key="due_late", default_priority=1, options={"charge": "timeout"}, connect_timeout_ms=100, read_timeout_ms=200
    )


@pytest.fixture
def withdrawals(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, str]]:
    """Withdrawals asked for (not run), however they are queued."""
    asked: list[tuple[int, str]] = []
    monkeypatch.setattr(tasks.cancel_due_charge_at_acquirer, "delay", lambda *args: asked.append(args))

    def enqueue(task: str, *args: Any, **_: Any) -> None:
        if task == WITHDRAW:
            asked.append(args)

    monkeypatch.setattr(batches, "enqueue", enqueue)
    return asked


def one_item() -> DueChargeBatchItem:
    client: APIClient = client_for(credential_issue(account=AccountFactory()))
    response = post(client, {"items": [item()]})
    assert response.status_code == 202, response.json()
    return DueChargeBatchItem.objects.get(batch_id=response.json()["data"]["id"])


def wait_out(pending: DueChargeBatchItem) -> None:
    """The item's wait before its next try has passed."""
    DueChargeBatchItem.objects.filter(pk=pending.pk).update(
        updated_at=dt.datetime.now(dt.UTC) - CLAIM_LEASE - dt.timedelta(seconds=1)
    )


def test_a_timed_out_item_waits_and_its_retry_takes_the_cobv_the_acquirer_made(
    late: Acquirer, withdrawals: list[tuple[int, str]], django_capture_on_commit_callbacks: Any
) -> None:
    pending = one_item()

    with django_capture_on_commit_callbacks(execute=True):
        assert item_process(pending.pk) == batches.RETRY
    pending.refresh_from_db()
    assert (pending.status, pending.errors) == ("pending", {})
    assert not Charge.objects.filter(pk=pending.charge_id).exists()
    assert withdrawals == []  # it may be ours: left alone

    Acquirer.objects.filter(pk=late.pk).update(options={})  # answers in time now
    wait_out(pending)
    with django_capture_on_commit_callbacks(execute=True):
        assert item_process(pending.pk) == "created"

    charge = Charge.objects.get(pk=pending.charge_id)
    assert (charge.acquirer_id, charge.txid) == (late.pk, pending.charge_id.hex)
    assert Charge.objects.filter(account=charge.account).count() == 1
    adapter = adapters.build(late)
    assert isinstance(adapter, SandboxAdapter)
    assert adapter.due_charge_status(charge.txid).status == "ATIVA"
    assert withdrawals == []
    assert DueChargeBatch.objects.get(pk=pending.batch_id).status == "done"


def test_an_item_that_never_gets_a_clear_answer_is_given_up_and_withdrawn_where_it_may_be(
    late: Acquirer, withdrawals: list[tuple[int, str]], django_capture_on_commit_callbacks: Any
) -> None:
    pending = one_item()

    for _ in range(MAX_ATTEMPTS - 1):
        assert item_process(pending.pk) == batches.RETRY
        wait_out(pending)
    assert withdrawals == []
    with django_capture_on_commit_callbacks(execute=True):
        assert item_process(pending.pk) == "failed"

    pending.refresh_from_db()
    assert pending.errors == {"non_field_errors": [batches.GAVE_UP.format(tries=MAX_ATTEMPTS)]}
    assert withdrawals == [(late.pk, pending.charge_id.hex)]
    assert not Charge.objects.filter(pk=pending.charge_id).exists()
    assert DueChargeBatch.objects.get(pk=pending.batch_id).status == "done"


def test_an_item_every_acquirer_refused_fails_at_once(
    db: Any,
    withdrawals: list[tuple[int, str]],
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Any,
) -> None:
    AcquirerFactory(key="due_refuses", default_priority=1)

    def refuse(self: SandboxAdapter, request: Any) -> Any:
        raise AcquirerDeclined("cobv refused")

    monkeypatch.setattr(SandboxAdapter, "create_due_charge", refuse)
    pending = one_item()

    with django_capture_on_commit_callbacks(execute=True):
        assert item_process(pending.pk) == "failed"
    pending.refresh_from_db()
    assert pending.status == "failed"
    assert pending.errors["non_field_errors"]
    assert withdrawals == []
