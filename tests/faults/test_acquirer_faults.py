"""Acquirers that misbehave, played by the sandbox acquirer's fault
behaviours (``slow``, ``flaky``, ``garbage``, ``invalid_emv``): the chain
of decisions §4 takes the first good answer, records every attempt, answers
the all-failed envelope when nothing is left, and no payer is ever handed
two codes for one charge.

What tests/payments/test_charge_create.py already covers is not repeated
here: plain refusal and timeout with its cancel, and bad BR Codes or adapter
bugs from test-only adapters.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any

import pytest
from rest_framework.test import APIClient

from accounts.models import Account, AccountBalance, LedgerEntry
from acquirers import adapters, brcode
from acquirers.adapters.base import InvalidOptions
from acquirers.adapters.sandbox import SandboxAdapter
from acquirers.models import Acquirer, AcquirerSlot
from acquirers.services import acquirer_grants_set, acquirer_slots_set
from acquirers.tasks import cancel_charge_at_acquirer
from payments.models import Charge, ChargeAttempt
from tests.factories import AcquirerFactory
from tests.faults.conftest import SEED

ALL_FAILED = {"success": False, "message": "Erro ao processar o pagamento. Tente novamente mais tarde.", "data": None}
CPF = "52998224725"
# A deadline of 2 s (connect + read): "slow" answers after half of it.
TIMEOUTS = {"connect_timeout_ms": 100, "read_timeout_ms": 1900}

pytestmark = pytest.mark.django_db


def sandbox(behaviour: str) -> Acquirer:
    """A sandbox acquirer of a key no earlier run used (``flaky`` counts
    calls per key, in Redis)."""
    return AcquirerFactory(key=f"sbx_{behaviour}_{uuid.uuid4().hex[:8]}", options={"charge": behaviour}, **TIMEOUTS)


def chain(account: Account, *acquirers: Acquirer) -> None:
    acquirer_grants_set(account=account, acquirers=list(acquirers))
    acquirer_slots_set(account=account, purpose=AcquirerSlot.Purpose.CASHIN, acquirers=list(acquirers))


def held_by(acquirer: Acquirer, txid: str) -> str | None:
    """What the acquirer itself holds for this charge: active, canceled or None."""
    adapter = adapters.build(acquirer)
    assert isinstance(adapter, SandboxAdapter)
    return adapter.charge_state(txid)


def create(api: APIClient, amount: int = 1500) -> Any:
    body = {
        "payment_method": "pix",
        "amount": amount,
        "buyer": {"buyer_name": "Fulano", "buyer_document": CPF, "buyer_phone": "11999998888"},
    }
    return api.post("/api/transactions", body, format="json")


def attempts(charge_id: Any) -> list[tuple[str, str, str]]:
    rows = ChargeAttempt.objects.filter(charge_id=charge_id).select_related("acquirer").order_by("position")
    return [(a.acquirer.key, a.outcome, a.error_class) for a in rows]


@dataclass(frozen=True)
class Snapshot:
    charges: int
    balance: int
    ledger: tuple[tuple[Any, ...], ...]


def snapshot(account: Account) -> Snapshot:
    return Snapshot(
        charges=Charge.objects.count(),
        balance=AccountBalance.objects.get(account=account).available,
        ledger=tuple(LedgerEntry.objects.filter(account=account).order_by("id").values_list("id", "amount")),
    )


@pytest.fixture
def cancels(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    """Cancels asked of acquirers (decisions §4: only after a timeout)."""
    asked: list[tuple[Any, ...]] = []
    monkeypatch.setattr(cancel_charge_at_acquirer, "delay", lambda *args: asked.append(args))
    return asked


def test_a_slow_acquirer_within_its_deadline_keeps_the_charge(
    api: APIClient, account: Account, cancels: list[tuple[Any, ...]], django_capture_on_commit_callbacks: Any
) -> None:
    slow, spare = sandbox("slow"), sandbox("ok")
    chain(account, slow, spare)

    started = time.monotonic()
    with django_capture_on_commit_callbacks(execute=True):
        response = create(api)
    elapsed = time.monotonic() - started

    assert response.status_code == 201, response.content
    charge = Charge.objects.get(pk=response.json()["data"]["id"])
    assert charge.acquirer_id == slow.pk
    assert response.json()["data"]["pix"]["emv"] == charge.emv
    brcode.check(charge.emv, amount=1500)
    # It took its time (half the 2 s deadline), and that was fine: no fallback, nothing to cancel.
    assert elapsed >= 1.0
    ((key, outcome, error_class),) = attempts(charge.pk)
    assert (key, outcome, error_class) == (slow.key, "ok", "")
    assert 1000 <= ChargeAttempt.objects.get(charge_id=charge.pk).latency_ms < 2000
    assert (held_by(slow, charge.txid), held_by(spare, charge.txid)) == ("active", None)
    assert cancels == []


def test_an_intermittently_failing_acquirer_hands_every_other_charge_to_the_next(
    api: APIClient, account: Account, cancels: list[tuple[Any, ...]], django_capture_on_commit_callbacks: Any
) -> None:
    flaky, spare = sandbox("flaky"), sandbox("ok")
    chain(account, flaky, spare)

    with django_capture_on_commit_callbacks(execute=True):
        responses = [create(api, amount=1000 + i) for i in range(4)]

    assert [r.status_code for r in responses] == [201] * 4
    charges = [Charge.objects.get(pk=r.json()["data"]["id"]) for r in responses]
    refused = (flaky.key, "unavailable", "AcquirerUnavailable")
    assert [attempts(c.pk) for c in charges] == [
        [refused, (spare.key, "ok", "")],
        [(flaky.key, "ok", "")],
        [refused, (spare.key, "ok", "")],
        [(flaky.key, "ok", "")],
    ]
    assert [c.acquirer_id for c in charges] == [spare.pk, flaky.pk, spare.pk, flaky.pk]
    for i, charge in enumerate(charges):
        brcode.check(responses[i].json()["data"]["pix"]["emv"], amount=1000 + i)
        # One live code per charge, at the acquirer that took it; a refusal created nothing.
        holders = {a.key: held_by(a, charge.txid) for a in (flaky, spare)}
        assert holders == {a.key: ("active" if a.pk == charge.acquirer_id else None) for a in (flaky, spare)}
    assert cancels == []


def test_an_unreadable_answer_moves_the_chain_on(api: APIClient, account: Account) -> None:
    garbage, spare = sandbox("garbage"), sandbox("ok")
    chain(account, garbage, spare)

    response = create(api)

    assert response.status_code == 201, response.content
    charge = Charge.objects.get(pk=response.json()["data"]["id"])
    assert charge.acquirer_id == spare.pk
    assert attempts(charge.pk) == [(garbage.key, "invalid_response", "InvalidResponse"), (spare.key, "ok", "")]
    assert (held_by(garbage, charge.txid), held_by(spare, charge.txid)) == (None, "active")


def test_when_every_acquirer_misbehaves_nothing_is_charged_and_a_retry_charges_once(
    api: APIClient, account: Account, cancels: list[tuple[Any, ...]], django_capture_on_commit_callbacks: Any
) -> None:
    garbage, invalid, flaky = sandbox("garbage"), sandbox("invalid_emv"), sandbox("flaky")
    chain(account, garbage, invalid, flaky)
    before = snapshot(account)

    with django_capture_on_commit_callbacks(execute=True):
        response = create(api)

    assert response.status_code == 400
    assert response.json() == ALL_FAILED
    assert snapshot(account) == before
    failed = list(ChargeAttempt.objects.order_by("position").select_related("acquirer"))
    assert [(a.acquirer.key, a.outcome, a.error_class) for a in failed] == [
        (garbage.key, "invalid_response", "InvalidResponse"),
        (invalid.key, "invalid_response", "InvalidBRCode"),
        (flaky.key, "unavailable", "AcquirerUnavailable"),
    ]
    (failed_id,) = {a.charge_id for a in failed}
    assert not Charge.objects.filter(pk=failed_id).exists()
    # The invalid code reached nobody: not the client, not the database.
    assert "pix" not in response.content.decode()

    # The client tries again: the flaky acquirer answers this time.
    with django_capture_on_commit_callbacks(execute=True):
        retried = create(api)

    assert retried.status_code == 201, retried.content
    charge = Charge.objects.get()
    assert charge.acquirer_id == flaky.pk
    assert charge.pk != failed_id
    brcode.check(retried.json()["data"]["pix"]["emv"], amount=1500)
    assert [a[1] for a in attempts(charge.pk)] == ["invalid_response", "invalid_response", "ok"]
    assert held_by(flaky, charge.txid) == "active"
    assert held_by(flaky, failed_id.hex) is None  # refused the first time: nothing was created
    assert snapshot(account) == Snapshot(charges=1, balance=SEED, ledger=before.ledger)
    # An acquirer whose answer we refused may still hold a charge: each
    # is asked to withdraw it, for both requests; the one that refused is not.
    assert sorted(cancels) == sorted(
        (acquirer.pk, txid) for txid in (failed_id.hex, charge.txid) for acquirer in (garbage, invalid)
    )


@pytest.mark.parametrize("behaviour", ["ok", "fail", "timeout", "slow", "flaky", "garbage", "invalid_emv"])
def test_every_charge_fault_is_an_option_staff_can_set(behaviour: str) -> None:
    assert adapters.validate_options("sandbox", {"charge": behaviour})["charge"] == behaviour


@pytest.mark.parametrize("behaviour", ["slow", "flaky", "garbage", "invalid_emv", "nope"])
def test_payouts_take_only_their_own_behaviours(behaviour: str) -> None:
    with pytest.raises(InvalidOptions, match="payout must be one of ok, fail, timeout"):
        adapters.validate_options("sandbox", {"payout": behaviour})
