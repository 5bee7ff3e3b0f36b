"""The sandbox acquirer's Pix Automático and the payer's bank it simulates:
recurrences created (QR and push journeys), decided by the payer, cancelled
by either side; cycle charges created only for an approved recurrence,
settled (the Pix listed for reconciliation), failed and retried under the
policy's rules; racing changes end as one of them."""

from __future__ import annotations

import datetime as dt
import functools
import re
import threading
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

import pytest
from django.utils import timezone

from acquirers import adapters, brcode, calls
from acquirers.adapters import sandbox_rec_records
from acquirers.adapters.base import (
    AcquirerDeclined,
    AcquirerUnavailable,
    CycleChargeRequest,
    CycleChargeState,
    InvalidResponse,
    ProviderRecordStatus,
    PushRequest,
    RecordNotFound,
    RecurrenceRequest,
)
from acquirers.adapters.recurrence import JOURNEY_PUSH, JOURNEY_QR
from acquirers.adapters.sandbox import SANDBOX_ISPB, SandboxAdapter, new_e2e_id
from acquirers.models import Acquirer
from payments.recurrence_terms import RecurrenceTerms
from tests.factories import AcquirerFactory

pytestmark = pytest.mark.django_db
T = TypeVar("T")
PAYER_ISPB = "12345678"
DEBTOR = "52998224725"
DUE = dt.date(2026, 12, 10)
RETRIES = "PERMITE_3R_7D"
NO_RETRIES = "NAO_PERMITE"


def sandbox(acquirer: Acquirer) -> SandboxAdapter:
    adapter = adapters.build(acquirer)
    assert isinstance(adapter, SandboxAdapter)
    return adapter


@pytest.fixture
def acquirer(db: Any) -> Acquirer:
    return AcquirerFactory(key=f"rec_{uuid.uuid4().hex[:8]}")


@pytest.fixture
def adapter(acquirer: Acquirer) -> SandboxAdapter:
    return sandbox(acquirer)


def terms(policy: str = RETRIES, contract: str = "CT-2026-0001") -> dict[str, Any]:
    """What ``RecurrenceTerms.to_api`` writes: 49.90 a month from 2026-12-10."""
    return {
        "vinculo": {"contrato": contract, "objeto": "Plano mensal", "devedor": {"cpf": DEBTOR, "nome": "Fulano"}},
        "calendario": {"dataInicial": DUE.isoformat(), "periodicidade": "MENSAL"},
        "valor": {"valorRec": "49.90"},
        "politicaRetentativa": policy,
    }


def rec_request(journey: str = JOURNEY_QR, policy: str = RETRIES, contract: str = "CT-2026-0001") -> RecurrenceRequest:
    return RecurrenceRequest(recurrence_id=uuid.uuid4(), terms=terms(policy, contract), journey=journey)


def approved(adapter: SandboxAdapter, policy: str = RETRIES) -> str:
    id_rec = adapter.create_recurrence(rec_request(policy=policy)).id_rec
    assert adapter.recurrence_approve(id_rec, payer_ispb=PAYER_ISPB).status == "APROVADA"
    return id_rec


def cobr_request(id_rec: str, amount: int = 4990, due: dt.date = DUE) -> CycleChargeRequest:
    return CycleChargeRequest(txid=uuid.uuid4().hex, id_rec=id_rec, due_date=due, amount=amount)


def cobr(adapter: SandboxAdapter, policy: str = RETRIES) -> str:
    request = cobr_request(approved(adapter, policy))
    adapter.create_cycle_charge(request)
    return request.txid


def push(id_rec: str) -> PushRequest:
    return PushRequest(
        id_rec=id_rec,
        expires_at=timezone.now() + dt.timedelta(days=2),
        payer_document=DEBTOR,
        payer_ispb=PAYER_ISPB,
        payer_branch="0001",
        payer_account="123456",
    )


def under_deadline(adapter: SandboxAdapter, func: Callable[[], T]) -> T:
    """As ``calls.call`` runs an operation: cut at the acquirer's connect + read
    timeout (the recurrence operations have no slot in ``acquirers.capacity``
    yet: the service that calls them adds them)."""
    return calls.call_with_deadline(func, adapter._deadline())


def day(n: int) -> dt.date:
    return DUE + dt.timedelta(days=n)


def received(adapter: SandboxAdapter) -> list[tuple[str, int, str | None]]:
    now = timezone.now()
    listing = adapter.list_received(now - dt.timedelta(days=1), now + dt.timedelta(days=1))
    assert all(r.status is ProviderRecordStatus.PAID for r in listing.records)
    return [(r.reference, r.amount, r.e2e_id) for r in listing.records]


def test_the_sandbox_claims_the_capability_with_every_method() -> None:
    assert SandboxAdapter.supports("recurrence")
    assert SandboxAdapter.missing_methods() == []
    assert sandbox_rec_records.RECEIVER_ISPB == SANDBOX_ISPB


# ---------------------------------------------------------------- recurrences


@pytest.mark.parametrize(("policy", "prefix"), [(RETRIES, "RR"), (NO_RETRIES, "RN")])
def test_a_qr_recurrence_gets_an_id_of_its_policy_and_a_code_that_points_at_its_location(
    adapter: SandboxAdapter, policy: str, prefix: str
) -> None:
    request = rec_request(policy=policy)

    created = adapter.create_recurrence(request)

    today = timezone.localdate()
    assert re.fullmatch(rf"{prefix}{SANDBOX_ISPB}{today:%Y%m%d}[a-zA-Z0-9]{{11}}", created.id_rec)
    RecurrenceTerms.from_api(request.terms).check_id_rec(created.id_rec)  # what payments will hold it to
    assert (created.status, created.location) == ("CRIADA", f"pix.sandbox.local/qr/v2/rec/{created.id_rec}")
    code = brcode.parse(created.emv)
    assert (code.location, code.amount) == (created.location, None)  # the terms are read at the location
    found = adapter.recurrence_status(created.id_rec)
    assert (found.status, found.journey, found.payer_ispb, found.push_status) == ("CRIADA", JOURNEY_QR, "", "")
    assert found.raw["terms"] == request.terms


def test_the_push_journey_sends_one_request_that_the_payers_approval_accepts(adapter: SandboxAdapter) -> None:
    created = adapter.create_recurrence(rec_request(JOURNEY_PUSH))
    assert (created.location, created.emv) == ("", "")

    sent = adapter.request_authorisation(push(created.id_rec))

    assert re.fullmatch(rf"SC{SANDBOX_ISPB}\d{{8}}[a-zA-Z0-9]{{11}}", sent.id_solic_rec)
    assert sent.status == "ENVIADA"
    assert adapter.request_authorisation(push(created.id_rec)) == sent  # asked again: the one sent
    assert adapter.recurrence_status(created.id_rec).push_status == "ENVIADA"

    state = adapter.recurrence_approve(created.id_rec, payer_ispb=PAYER_ISPB)

    assert (state.status, state.payer_ispb, state.push_status) == ("APROVADA", PAYER_ISPB, "ACEITA")
    with pytest.raises(AcquirerDeclined, match="it is APROVADA"):
        adapter.request_authorisation(push(created.id_rec))


def test_a_qr_recurrence_takes_no_push_request(adapter: SandboxAdapter) -> None:
    id_rec = adapter.create_recurrence(rec_request(JOURNEY_QR)).id_rec

    with pytest.raises(AcquirerDeclined, match="journey is JORNADA_2"):
        adapter.request_authorisation(push(id_rec))
    assert adapter.recurrence_status(id_rec).push_status == ""


def test_the_payer_decides_once_and_only_a_created_recurrence(adapter: SandboxAdapter) -> None:
    rejected = adapter.create_recurrence(rec_request(JOURNEY_PUSH)).id_rec
    adapter.request_authorisation(push(rejected))
    expired = adapter.create_recurrence(rec_request()).id_rec

    state = adapter.recurrence_reject(rejected)

    assert (state.status, state.push_status, state.reason[:4]) == ("REJEITADA", "REJEITADA", "AP13")
    assert adapter.recurrence_expire(expired).status == "EXPIRADA"
    # Decided already: nothing changes, the state says so.
    for id_rec, status in ((rejected, "REJEITADA"), (expired, "EXPIRADA")):
        assert adapter.recurrence_approve(id_rec, payer_ispb=PAYER_ISPB).status == status
        assert adapter.recurrence_status(id_rec).payer_ispb == ""
    id_rec = approved(adapter)
    assert adapter.recurrence_reject(id_rec).status == "APROVADA"
    assert adapter.recurrence_expire(id_rec).status == "APROVADA"
    with pytest.raises(AcquirerUnavailable, match="not found"):
        adapter.recurrence_approve("RR99999999202612010000000none", payer_ispb=PAYER_ISPB)


def test_the_payer_cancels_an_approved_recurrence_and_its_active_cycle_charges_with_it(
    adapter: SandboxAdapter,
) -> None:
    id_rec = approved(adapter)
    paid, active = cobr_request(id_rec), cobr_request(id_rec, due=day(31))
    adapter.create_cycle_charge(paid)
    adapter.create_cycle_charge(active)
    adapter.cycle_settle(paid.txid, on=DUE, e2e_id=new_e2e_id(), at=timezone.now())

    state = adapter.recurrence_payer_cancel(id_rec)

    assert (state.status, state.cancelled_by, state.reason[:4]) == ("CANCELADA", "USUARIO_PAGADOR", "SLDB")
    cancelled = adapter.cycle_charge_status(active.txid)
    assert (cancelled.status, cancelled.raw["cancelled_by"], cancelled.reason[:4]) == (
        "CANCELADA",
        "USUARIO_PAGADOR",
        "CCLD",
    )
    assert [a.status for a in cancelled.attempts] == ["CANCELADA"]
    assert adapter.cycle_charge_status(paid.txid).status == "CONCLUIDA"  # settled first, it stands
    assert adapter.cycle_settle(active.txid, on=day(31), e2e_id=new_e2e_id(), at=timezone.now()) is None


def test_the_payer_cancels_only_an_approved_recurrence(adapter: SandboxAdapter) -> None:
    id_rec = adapter.create_recurrence(rec_request()).id_rec

    assert adapter.recurrence_payer_cancel(id_rec).status == "CRIADA"


def test_the_receiver_cancels_a_pending_or_approved_recurrence_once(adapter: SandboxAdapter) -> None:
    pending = adapter.create_recurrence(rec_request(JOURNEY_PUSH)).id_rec
    adapter.request_authorisation(push(pending))
    txid = cobr(adapter)
    id_rec = adapter.cycle_charge_status(txid).raw["id_rec"]

    state = adapter.cancel_recurrence(pending)

    assert (state.status, state.cancelled_by, state.push_status) == ("CANCELADA", "USUARIO_RECEBEDOR", "CANCELADA")
    assert state.reason.startswith("SLCR: ")
    assert adapter.cancel_recurrence(pending) == state  # asked again: the same
    assert adapter.recurrence_approve(pending, payer_ispb=PAYER_ISPB).status == "CANCELADA"
    assert adapter.cancel_recurrence(id_rec).cancelled_by == "USUARIO_RECEBEDOR"
    cancelled = adapter.cycle_charge_status(txid)
    assert (cancelled.status, cancelled.raw["cancelled_by"]) == ("CANCELADA", "USUARIO_RECEBEDOR")
    with pytest.raises(AcquirerUnavailable, match="not found"):
        adapter.cancel_recurrence("RR99999999202612010000000none")


def test_a_create_whose_answer_was_lost_is_found_by_debtor_and_contract() -> None:
    acquirer = AcquirerFactory(
        key=f"rec_late_{uuid.uuid4().hex[:6]}",
        options={"charge": "timeout"},
        connect_timeout_ms=100,
        read_timeout_ms=200,
    )
    request = rec_request(contract="CT-LATE")
    since = timezone.now()

    adapter = sandbox(acquirer)

    with pytest.raises(calls.DeadlineExceeded):
        under_deadline(adapter, lambda: adapter.create_recurrence(request))

    found = adapter.find_recurrence(debtor_document=DEBTOR, contract="CT-LATE", since=since)
    assert found is not None
    assert (found.status, found.raw["recurrence_id"]) == ("CRIADA", str(request.recurrence_id))
    later = timezone.now() + dt.timedelta(seconds=1)
    assert adapter.find_recurrence(debtor_document=DEBTOR, contract="CT-LATE", since=later) is None
    assert adapter.find_recurrence(debtor_document=DEBTOR, contract="CT-OTHER", since=since) is None
    assert adapter.find_recurrence(debtor_document="11144477735", contract="CT-LATE", since=since) is None


def test_find_answers_the_newest_recurrence_of_the_contract(adapter: SandboxAdapter) -> None:
    since = timezone.now()
    adapter.create_recurrence(rec_request(contract="CT-TWICE"))
    newest = adapter.create_recurrence(rec_request(contract="CT-TWICE"))

    found = adapter.find_recurrence(debtor_document=DEBTOR, contract="CT-TWICE", since=since)

    assert found is not None
    assert found.id_rec == newest.id_rec


@pytest.mark.parametrize(("behaviour", "error"), [("fail", AcquirerUnavailable), ("garbage", InvalidResponse)])
def test_a_refused_create_leaves_no_recurrence(behaviour: str, error: type[Exception]) -> None:
    acquirer = AcquirerFactory(key=f"rec_{behaviour}_{uuid.uuid4().hex[:6]}", options={"charge": behaviour})
    request = rec_request(contract=f"CT-{behaviour}")
    since = timezone.now()

    adapter = sandbox(acquirer)

    with pytest.raises(error):
        adapter.create_recurrence(request)

    assert adapter.find_recurrence(debtor_document=DEBTOR, contract=f"CT-{behaviour}", since=since) is None


def test_an_invalid_emv_behaviour_answers_a_code_with_a_wrong_crc() -> None:
    adapter = sandbox(AcquirerFactory(key=f"rec_emv_{uuid.uuid4().hex[:6]}", options={"charge": "invalid_emv"}))

    created = adapter.create_recurrence(rec_request())

    with pytest.raises(brcode.InvalidBRCode, match="CRC"):
        brcode.parse(created.emv)
    assert adapter.recurrence_status(created.id_rec).status == "CRIADA"


# ---------------------------------------------------------------- cycle charges


def test_a_cycle_charge_is_refused_until_its_recurrence_is_approved(adapter: SandboxAdapter) -> None:
    id_rec = adapter.create_recurrence(rec_request()).id_rec
    request = cobr_request(id_rec)

    with pytest.raises(AcquirerDeclined, match="is CRIADA, not APROVADA"):
        adapter.create_cycle_charge(request)
    with pytest.raises(RecordNotFound):
        adapter.cycle_charge_status(request.txid)  # nothing created
    with pytest.raises(AcquirerDeclined, match="no recurrence"):
        adapter.create_cycle_charge(cobr_request("RR99999999202612010000000none"))
    adapter.recurrence_reject(id_rec)
    with pytest.raises(AcquirerDeclined, match="is REJEITADA, not APROVADA"):
        adapter.create_cycle_charge(request)

    assert adapter.create_cycle_charge(cobr_request(approved(adapter))).status == "ATIVA"


def test_a_cycle_charge_is_active_with_its_first_attempt_scheduled_on_the_due_date(adapter: SandboxAdapter) -> None:
    request = cobr_request(approved(adapter))

    state = adapter.create_cycle_charge(request)

    assert (state.txid, state.status, state.amount, state.pix, state.reason) == (request.txid, "ATIVA", 4990, (), "")
    (attempt,) = state.attempts
    assert (attempt.settles_on, attempt.kind, attempt.status) == (DUE, "AGND", "AGENDADA")
    assert adapter.cycle_charge_status(request.txid) == state


def test_creating_a_cycle_charge_again_answers_the_stored_one_and_never_another(adapter: SandboxAdapter) -> None:
    id_rec = approved(adapter)
    request = cobr_request(id_rec)
    first = adapter.create_cycle_charge(request)

    assert adapter.create_cycle_charge(request) == first
    with pytest.raises(InvalidResponse):
        adapter.create_cycle_charge(CycleChargeRequest(**{**request.__dict__, "amount": 5000}))
    with pytest.raises(InvalidResponse):
        adapter.create_cycle_charge(CycleChargeRequest(**{**request.__dict__, "id_rec": approved(adapter)}))
    adapter.cancel_cycle_charge(request.txid)
    # Cancelled since: the stored one as it stands, never revived.
    assert adapter.create_cycle_charge(request).status == "CANCELADA"
    assert adapter.recurrence_status(id_rec).raw["cobrs"] == [request.txid]


def test_a_timed_out_cycle_charge_was_created_there_all_the_same() -> None:
    acquirer = AcquirerFactory(
        key=f"rec_cobr_late_{uuid.uuid4().hex[:6]}",
        options={"charge": "timeout"},
        connect_timeout_ms=100,
        read_timeout_ms=200,
    )
    adapter = sandbox(acquirer)
    request = cobr_request(approved(adapter))  # answered late without a deadline: still created

    with pytest.raises(calls.DeadlineExceeded):
        under_deadline(adapter, lambda: adapter.create_cycle_charge(request))

    assert adapter.cycle_charge_status(request.txid).status == "ATIVA"


def test_settling_concludes_the_charge_and_records_the_pix_for_reconciliation(adapter: SandboxAdapter) -> None:
    txid = cobr(adapter)
    e2e_id, at = new_e2e_id(), timezone.now().replace(microsecond=0)

    assert adapter.cycle_settle(txid, on=day(1), e2e_id=e2e_id, at=at) is None  # nothing scheduled that day
    state = adapter.cycle_settle(txid, on=DUE, e2e_id=e2e_id, at=at)

    assert state is not None
    assert state.status == "CONCLUIDA"
    (attempt,) = state.attempts
    assert (attempt.status, attempt.e2e_id) == ("PAGA", e2e_id)
    (pix,) = state.pix
    assert (pix.e2e_id, pix.amount, pix.paid_at) == (e2e_id, 4990, at)
    assert received(adapter) == [(txid, 4990, e2e_id)]
    # Settled again: the first Pix stands; cancelled now: it stays concluded.
    again = adapter.cycle_settle(txid, on=DUE, e2e_id=new_e2e_id(), at=timezone.now())
    assert again is not None
    assert again.pix == state.pix
    assert received(adapter) == [(txid, 4990, e2e_id)]
    assert adapter.cancel_cycle_charge(txid).status == "CONCLUIDA"


def test_a_cancelled_cycle_charge_cannot_be_settled_and_no_pix_is_listed(adapter: SandboxAdapter) -> None:
    txid = cobr(adapter)

    state = adapter.cancel_cycle_charge(txid)

    assert (state.status, state.raw["cancelled_by"], state.reason[:4]) == ("CANCELADA", "USUARIO_RECEBEDOR", "SLCR")
    assert [a.status for a in state.attempts] == ["CANCELADA"]
    assert adapter.cancel_cycle_charge(txid) == state  # asked again: the same
    assert adapter.cycle_settle(txid, on=DUE, e2e_id=new_e2e_id(), at=timezone.now()) is None
    assert adapter.cycle_fail(txid, on=DUE) is None
    assert adapter.cycle_charge_status(txid).status == "CANCELADA"
    assert received(adapter) == []
    # A read that finds none is the acquirer's definitive 404 (a create stores its cobr first);
    # a cancel of an unknown one is asked again, as a cobv's is.
    with pytest.raises(RecordNotFound, match="not found"):
        adapter.cycle_charge_status(uuid.uuid4().hex)
    with pytest.raises(AcquirerUnavailable, match="not found"):
        adapter.cancel_cycle_charge(uuid.uuid4().hex)


# ---------------------------------------------------------------- failures and retries


def test_a_failed_attempt_leaves_the_charge_open_to_three_retries_on_different_days_within_seven_days(
    adapter: SandboxAdapter,
) -> None:
    txid = cobr(adapter)

    state = adapter.cycle_fail(txid, on=DUE)

    assert state is not None
    assert state.status == "ATIVA"
    assert (state.attempts[0].status, state.attempts[0].reason[:4]) == ("REJEITADA", "AM02")
    assert adapter.cycle_fail(txid, on=DUE) is None  # nothing scheduled any more
    with pytest.raises(AcquirerDeclined, match="settles on 2026-12-10 already"):
        adapter.retry_cycle_charge(txid, DUE)
    with pytest.raises(AcquirerDeclined, match="no later than 2026-12-17"):
        adapter.retry_cycle_charge(txid, day(8))

    for n in (1, 3, 7):
        retried = adapter.retry_cycle_charge(txid, day(n))
        assert (retried.attempts[-1].settles_on, retried.attempts[-1].kind, retried.attempts[-1].status) == (
            day(n),
            "RIFL",
            "AGENDADA",
        )
        with pytest.raises(AcquirerDeclined, match="last attempt is AGENDADA"):
            adapter.retry_cycle_charge(txid, day(n + 1))
        failed = adapter.cycle_fail(txid, on=day(n))
        assert failed is not None
        assert failed.status == "ATIVA"
        if n == 3:
            with pytest.raises(AcquirerDeclined, match="after the last attempt"):
                adapter.retry_cycle_charge(txid, day(2))

    with pytest.raises(AcquirerDeclined, match="3 retries, at most 3"):
        adapter.retry_cycle_charge(txid, day(6))
    assert [a.kind for a in adapter.cycle_charge_status(txid).attempts] == ["AGND", "RIFL", "RIFL", "RIFL"]


def test_a_retry_can_settle_the_charge(adapter: SandboxAdapter) -> None:
    txid = cobr(adapter)
    adapter.cycle_fail(txid, on=DUE)
    adapter.retry_cycle_charge(txid, day(2))
    e2e_id = new_e2e_id()

    state = adapter.cycle_settle(txid, on=day(2), e2e_id=e2e_id, at=timezone.now())

    assert state is not None
    assert (state.status, [a.status for a in state.attempts]) == ("CONCLUIDA", ["REJEITADA", "PAGA"])
    with pytest.raises(AcquirerDeclined, match="it is CONCLUIDA, not ATIVA"):
        adapter.retry_cycle_charge(txid, day(3))
    assert received(adapter) == [(txid, 4990, e2e_id)]


def test_without_retries_a_failed_attempt_rejects_the_charge(adapter: SandboxAdapter) -> None:
    txid = cobr(adapter, policy=NO_RETRIES)

    state = adapter.cycle_fail(txid, on=DUE, reason_code="AB10")

    assert state is not None
    assert (state.status, state.reason[:4], state.attempts[0].status) == ("REJEITADA", "AB10", "REJEITADA")
    with pytest.raises(AcquirerDeclined, match=r"allows no retry \(NAO_PERMITE\)"):
        adapter.retry_cycle_charge(txid, day(1))


def test_a_rejection_code_that_ends_the_charge_rejects_it_even_with_retries(adapter: SandboxAdapter) -> None:
    txid = cobr(adapter)

    state = adapter.cycle_fail(txid, on=DUE, reason_code="AC05")

    assert state is not None
    assert (state.status, state.reason[:4]) == ("REJEITADA", "AC05")
    with pytest.raises(AcquirerDeclined, match="it is REJEITADA"):
        adapter.retry_cycle_charge(txid, day(1))
    with pytest.raises(ValueError, match="not a tentativa rejeicao code"):
        adapter.cycle_fail(cobr(adapter), on=DUE, reason_code="AM04")


# ---------------------------------------------------------------- races


def race(first: Callable[[], T], second: Callable[[], Any]) -> tuple[T, Any]:
    """Both at once, from two threads released together."""
    barrier, results = threading.Barrier(2), [None, None]

    def run(i: int, func: Callable[[], Any]) -> None:
        barrier.wait()
        results[i] = func()

    threads = [threading.Thread(target=run, args=(i, f)) for i, f in enumerate((first, second))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results[0], results[1]  # type: ignore[return-value]


@pytest.mark.parametrize("cancel", ["receiver", "payer"])
def test_a_settle_and_a_cancel_racing_end_as_one_of_them(adapter: SandboxAdapter, cancel: str) -> None:
    outcomes = set()
    for _ in range(25):
        txid = cobr(adapter)
        id_rec = adapter.cycle_charge_status(txid).raw["id_rec"]
        e2e_id = new_e2e_id()
        settling = functools.partial(adapter.cycle_settle, txid, on=DUE, e2e_id=e2e_id, at=timezone.now())
        if cancel == "receiver":
            cancelling: Callable[[], Any] = functools.partial(adapter.cancel_cycle_charge, txid)
        else:
            cancelling = functools.partial(adapter.recurrence_payer_cancel, id_rec)

        settled, cancelled = race(settling, cancelling)

        final: CycleChargeState = adapter.cycle_charge_status(txid)
        listed = [r for r in received(adapter) if r[0] == txid]
        if final.status == "CONCLUIDA":
            assert settled is not None
            assert settled.status == "CONCLUIDA"
            assert [a.status for a in final.attempts] == ["PAGA"]
            assert listed == [(txid, 4990, e2e_id)]
        else:
            assert final.status == "CANCELADA"
            assert settled is None
            assert ([a.status for a in final.attempts], final.pix, listed) == (["CANCELADA"], (), [])
        # One end, never both: the cobr's history ends once, and the cancel's answer says how.
        assert [u["status"] for u in final.raw["atualizacao"]] == ["CRIADA", "ATIVA", final.status]
        if cancel == "receiver":
            assert cancelled.status == final.status
        outcomes.add(final.status)
    assert outcomes <= {"CONCLUIDA", "CANCELADA"}
