"""A due-date charge (cobv) goes through the acquirer chain as a charge
does: the first acquirer that creates it usably takes it, a failure moves on,
one that may hold a live cobv we do not use is named to cancel, and an
acquirer whose adapter cannot create cobv is never in its chain."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import pytest

from accounts.models import Account
from acquirers import adapters
from acquirers.adapters.base import DueChargeRequest
from acquirers.adapters.sandbox import SandboxAdapter
from acquirers.calls import Outcome
from acquirers.chain import run_due_charge_chain
from acquirers.models import Acquirer, AcquirerSlot
from acquirers.selectors import cashin_chain, due_chain
from acquirers.services import acquirer_grants_set, acquirer_slots_set
from acquirers.tasks import cancel_due_charge_at_acquirer
from tests.factories import AcquirerFactory

pytestmark = pytest.mark.django_db


def due_request() -> DueChargeRequest:
    charge_id = uuid.uuid4()
    return DueChargeRequest(
        charge_id=charge_id,
        txid=charge_id.hex,
        due_date=dt.date(2026, 12, 10),
        validity_after_due=30,
        debtor_name="Fulano de Tal",
        debtor_document="52998224725",
        valor={"original": "150.00"},
    )


def status_at(acquirer: Acquirer, txid: str) -> str:
    adapter = adapters.build(acquirer)
    assert isinstance(adapter, SandboxAdapter)
    return adapter.due_charge_status(txid).status


def test_a_failing_sandbox_passes_the_cobv_to_the_next(db: Any) -> None:
    failing = AcquirerFactory(key="due_down", options={"charge": "fail"})
    working = AcquirerFactory(key="due_up")
    request = due_request()

    outcome = run_due_charge_chain([failing, working], request)

    assert outcome.acquirer == working
    assert outcome.result is not None
    assert outcome.result.provider_charge_id == f"sbx_{request.txid}"
    assert [(a.acquirer.key, a.outcome) for a in outcome.attempts] == [
        ("due_down", Outcome.UNAVAILABLE),
        ("due_up", Outcome.OK),
    ]
    assert outcome.to_cancel == []  # refused: nothing was created there
    assert status_at(working, request.txid) == "ATIVA"


def test_a_timed_out_acquirer_is_named_to_cancel_and_the_task_withdraws_its_cobv(db: Any) -> None:
    late = AcquirerFactory(key="due_late", options={"charge": "timeout"}, connect_timeout_ms=100, read_timeout_ms=200)
    working = AcquirerFactory(key="due_up")
    request = due_request()

    outcome = run_due_charge_chain([late, working], request)

    assert (outcome.acquirer, outcome.to_cancel) == (working, [late])
    assert outcome.attempts[0].outcome is Outcome.TIMEOUT
    cancel_due_charge_at_acquirer(late.pk, request.txid)  # the task's body, on this thread
    assert status_at(late, request.txid) == "REMOVIDA_PELO_USUARIO_RECEBEDOR"
    assert status_at(working, request.txid) == "ATIVA"


def test_a_code_with_a_wrong_crc_is_refused_and_named_to_cancel(db: Any) -> None:
    broken = AcquirerFactory(key="due_broken", options={"charge": "invalid_emv"})
    request = due_request()

    outcome = run_due_charge_chain([broken], request)

    assert (outcome.acquirer, outcome.result, outcome.to_cancel) == (None, None, [broken])
    assert outcome.attempts[0].outcome is Outcome.INVALID_RESPONSE


def test_an_acquirer_without_due_charges_is_never_in_the_due_chain(
    account: Account, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The selectors read the adapter's flag only: the bacen_pix acquirer is never built.
    monkeypatch.setattr(SandboxAdapter, "supports_due_charge", False)
    immediate = AcquirerFactory(key="due_immediate")
    cobv = AcquirerFactory(key="due_cobv", adapter="bacen_pix", options={})
    acquirer_grants_set(account=account, acquirers=[immediate, cobv])
    acquirer_slots_set(account=account, purpose=AcquirerSlot.Purpose.CASHIN, acquirers=[immediate, cobv])

    assert cashin_chain(account, 15000) == [immediate, cobv]
    assert due_chain(account, 15000) == [cobv]
    assert due_chain(account, 15000, override=[immediate]) == []
    assert due_chain(account, 15000, override=[immediate, cobv]) == [cobv]
    assert due_chain(account, cobv.max_ticket + 1) == []  # the cash-in chain's rules hold
