"""The sandbox acquirer's due-date charges (cobv): created with the charge
behaviours, read back, withdrawn, paid by its drivers, and the Pix paid
listed for reconciliation as an immediate charge's is."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import pytest
from django.utils import timezone

from acquirers import adapters, brcode, calls
from acquirers.adapters.base import AcquirerUnavailable, DueChargeRequest, InvalidResponse, ProviderRecordStatus
from acquirers.adapters.sandbox import SandboxAdapter, new_e2e_id
from acquirers.calls import Outcome
from acquirers.models import Acquirer
from tests.factories import AcquirerFactory

pytestmark = pytest.mark.django_db
REMOVED = "REMOVIDA_PELO_USUARIO_RECEBEDOR"
#: Paid a week late: 150.00 + 2 % fine + interest.
PAID = {"original": 15000, "multa": 300, "juros": 32}


def due_request(original: str = "150.00") -> DueChargeRequest:
    charge_id = uuid.uuid4()
    return DueChargeRequest(
        charge_id=charge_id,
        txid=charge_id.hex,
        due_date=dt.date(2026, 12, 10),
        validity_after_due=30,
        debtor_name="Fulano de Tal",
        debtor_document="52998224725",
        valor={"original": original, "multa": {"modalidade": 2, "valorPerc": "2.00"}},
    )


def sandbox(acquirer: Acquirer) -> SandboxAdapter:
    adapter = adapters.build(acquirer)
    assert isinstance(adapter, SandboxAdapter)
    return adapter


@pytest.fixture
def acquirer(db: Any) -> Acquirer:
    return AcquirerFactory(key=f"due_{uuid.uuid4().hex[:8]}")


def pay(adapter: SandboxAdapter, txid: str, at: dt.datetime | None = None) -> tuple[bool, str]:
    e2e_id = new_e2e_id()
    paid = adapter.due_charge_pay(
        txid, e2e_id=e2e_id, amount=sum(PAID.values()), components=PAID, at=at or timezone.now()
    )
    return paid, e2e_id


def test_a_created_cobv_is_active_with_a_dynamic_code_that_leaves_the_amount_to_the_pay_day(acquirer: Acquirer) -> None:
    adapter, request = sandbox(acquirer), due_request()

    result = adapter.create_due_charge(request)

    assert (result.status, result.location) == ("ATIVA", f"pix.sandbox.local/qr/v2/cobv/{request.txid}")
    code = brcode.check_due(result.emv, original=15000)
    assert (code.location, code.amount) == (result.location, None)
    status = adapter.due_charge_status(request.txid)
    assert (status.status, status.original, status.pix) == ("ATIVA", 15000, ())


def test_creating_again_answers_the_same_cobv_and_never_revives_a_withdrawn_one(acquirer: Acquirer) -> None:
    adapter, request = sandbox(acquirer), due_request()
    first = adapter.create_due_charge(request)

    assert adapter.create_due_charge(request) == first
    adapter.cancel_due_charge(request.txid)
    with pytest.raises(InvalidResponse):
        adapter.create_due_charge(request)
    assert adapter.due_charge_status(request.txid).status == REMOVED


def test_a_txid_holding_another_amount_is_not_taken_for_ours(acquirer: Acquirer) -> None:
    adapter, request = sandbox(acquirer), due_request()
    adapter.create_due_charge(request)

    with pytest.raises(InvalidResponse):
        adapter.create_due_charge(DueChargeRequest(**{**request.__dict__, "valor": {"original": "151.00"}}))


def test_an_unknown_cobv_is_not_found_yet(acquirer: Acquirer) -> None:
    adapter = sandbox(acquirer)

    with pytest.raises(AcquirerUnavailable, match="not found"):
        adapter.due_charge_status(uuid.uuid4().hex)
    with pytest.raises(AcquirerUnavailable, match="not found"):
        adapter.cancel_due_charge(uuid.uuid4().hex)


def test_a_withdrawn_cobv_cannot_be_paid_and_no_pix_is_listed(acquirer: Acquirer) -> None:
    adapter, request = sandbox(acquirer), due_request()
    adapter.create_due_charge(request)

    assert adapter.cancel_due_charge(request.txid).status == REMOVED
    assert adapter.cancel_due_charge(request.txid).status == REMOVED  # asked again: the same

    assert pay(adapter, request.txid)[0] is False
    assert adapter.due_charge_status(request.txid).status == REMOVED
    day = timezone.now()
    assert adapter.list_received(day - dt.timedelta(days=1), day + dt.timedelta(days=1)).records == ()


def test_a_cobv_paid_first_stays_concluded_when_withdrawn_and_its_pix_is_listed_at_the_amount_paid(
    acquirer: Acquirer,
) -> None:
    adapter, request = sandbox(acquirer), due_request()
    adapter.create_due_charge(request)
    at = timezone.now().replace(microsecond=0)

    paid, e2e_id = pay(adapter, request.txid, at)

    assert paid is True
    status = adapter.cancel_due_charge(request.txid)
    assert (status.status, status.e2e_ids) == ("CONCLUIDA", (e2e_id,))
    (pix,) = status.pix
    assert (pix.amount, dict(pix.components), pix.paid_at) == (15332, PAID, at)
    (record,) = adapter.list_received(at - dt.timedelta(hours=1), at + dt.timedelta(hours=1)).records
    assert (record.reference, record.amount, record.e2e_id, record.status) == (
        request.txid,
        15332,
        e2e_id,
        ProviderRecordStatus.PAID,
    )


def test_paying_again_keeps_the_first_pix(acquirer: Acquirer) -> None:
    adapter, request = sandbox(acquirer), due_request()
    adapter.create_due_charge(request)
    _, first = pay(adapter, request.txid)

    assert pay(adapter, request.txid)[0] is True

    assert adapter.due_charge_status(request.txid).e2e_ids == (first,)
    day = timezone.now()
    (record,) = adapter.list_received(day - dt.timedelta(days=1), day + dt.timedelta(days=1)).records
    assert record.e2e_id == first


@pytest.mark.parametrize(
    ("behaviour", "outcome"),
    [("fail", Outcome.UNAVAILABLE), ("garbage", Outcome.INVALID_RESPONSE), ("invalid_emv", Outcome.INVALID_RESPONSE)],
)
def test_the_charge_behaviours_apply_to_a_cobv(behaviour: str, outcome: Outcome) -> None:
    acquirer = AcquirerFactory(key=f"due_{behaviour}", options={"charge": behaviour})
    request = due_request()

    def usable(result: Any) -> None:
        brcode.check_due(result.emv, original=15000)

    done = calls.call(acquirer, "create_due_charge", lambda a: a.create_due_charge(request), check=usable)

    assert done.outcome is outcome
    created = behaviour == "invalid_emv"  # created, then answered with a code we refuse
    try:
        found = sandbox(acquirer).due_charge_status(request.txid).status
    except AcquirerUnavailable:
        found = None
    assert found == ("ATIVA" if created else None)


def test_a_flaky_sandbox_refuses_every_other_cobv() -> None:
    acquirer = AcquirerFactory(key=f"due_flaky_{uuid.uuid4().hex[:6]}", options={"charge": "flaky"})
    adapter = sandbox(acquirer)

    with pytest.raises(AcquirerUnavailable):
        adapter.create_due_charge(due_request())
    assert adapter.create_due_charge(due_request()).status == "ATIVA"


def test_a_timed_out_cobv_was_created_there_all_the_same() -> None:
    acquirer = AcquirerFactory(
        key="due_late", options={"charge": "timeout"}, connect_timeout_ms=100, read_timeout_ms=200
    )
    request = due_request()

    done = calls.call(acquirer, "create_due_charge", lambda a: a.create_due_charge(request))

    assert done.outcome is Outcome.TIMEOUT
    assert sandbox(acquirer).due_charge_status(request.txid).status == "ATIVA"
