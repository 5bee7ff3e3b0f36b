"""Pix Automático (``rec``, ``locrec``, ``solicrec``, ``cobr``) of the
``bacen_pix`` adapter against the fake API Pix PSP: every request and answer
is validated against Banco Central's OpenAPI 2.9.0 (the fixture fails a test
on any violation); the payer's PSP is played by :mod:`tests.acquirers.fake_psp_rec`."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from acquirers import adapters, brcode
from acquirers.adapters.apipix.bacen import DEFAULT_SCOPES, BacenPixAdapter
from acquirers.adapters.apipix.problems import HttpDeclined, HttpNotFound
from acquirers.adapters.apipix.rec_records import REC_SCOPES, check_rec_code, cycle_state, recurrence_state
from acquirers.adapters.base import (
    AcquirerDeclined,
    AcquirerTimeout,
    AcquirerUnavailable,
    CycleChargeRequest,
    InvalidOptions,
    InvalidResponse,
    PushRequest,
    RecurrenceRequest,
)
from acquirers.adapters.recurrence import JOURNEY_PUSH, JOURNEY_QR
from acquirers.models import Acquirer
from tests.acquirers.conftest import bacen_options, warm_up
from tests.acquirers.fake_psp import FakePsp, Fault, schema_errors, spec_document
from tests.acquirers.fake_psp_rec import (
    PAYER_ISPB,
    approve_rec,
    cancel_rec_by_payer,
    pay_cobr,
    reject_cobr_attempt,
    reject_rec,
    schedule_cobr,
)

pytestmark = pytest.mark.django_db
SCOPES = [*DEFAULT_SCOPES, *REC_SCOPES]
ACCOUNT = {"receiver_account": "012682", "receiver_account_type": "CORRENTE", "receiver_branch": "9708"}
DEBTOR = "45164632481"
#: What payments.recurrence_terms writes: a fixed monthly 35.00, retries allowed.
TERMS: dict[str, Any] = {
    "vinculo": {
        "contrato": "63100862",
        "devedor": {"cpf": DEBTOR, "nome": "Fulano de Tal"},
        "objeto": "Serviço de Streaming de Música",
    },
    "calendario": {"dataInicial": "2031-01-10", "periodicidade": "MENSAL"},
    "valor": {"valorRec": "35.00"},
    "politicaRetentativa": "PERMITE_3R_7D",
}
DUE = dt.date(2031, 1, 10)


def rec_request(journey: str = JOURNEY_QR, **terms: Any) -> RecurrenceRequest:
    return RecurrenceRequest(recurrence_id=uuid.uuid4(), terms=TERMS | terms, journey=journey)


def cycle_request(id_rec: str, *, amount: int = 3500, **extra: Any) -> CycleChargeRequest:
    fields: dict[str, Any] = {
        "txid": uuid.uuid4().hex,
        "id_rec": id_rec,
        "due_date": DUE,
        "amount": amount,
        "description": "Mensalidade de janeiro",
    }
    return CycleChargeRequest(**(fields | extra))


@pytest.fixture
def adapter(make_bacen_acquirer: Callable[..., Acquirer], fake_psp: FakePsp) -> BacenPixAdapter:
    built = adapters.build(make_bacen_acquirer(options=bacen_options(fake_psp, scopes=SCOPES, **ACCOUNT)))
    assert isinstance(built, BacenPixAdapter)
    return built


def one_ask(make: Callable[..., Acquirer], psp: FakePsp, **options: Any) -> BacenPixAdapter:
    """A short read timeout and no retry inside the client unless ``options`` say so."""
    acquirer = make(
        read_timeout_ms=700, options=bacen_options(psp, scopes=SCOPES, **(ACCOUNT | {"max_retries": 0} | options))
    )
    warm_up(acquirer)
    built = adapters.build(acquirer)
    assert isinstance(built, BacenPixAdapter)
    return built


def approved(psp: FakePsp, adapter: BacenPixAdapter, **terms: Any) -> str:
    created = adapter.create_recurrence(rec_request(JOURNEY_PUSH, **terms))
    approve_rec(psp, created.id_rec, journey="JORNADA_1")
    return created.id_rec


def operations(psp: FakePsp) -> list[str]:
    return [c.operation for c in psp.calls if c.operation != "token"]


# --------------------------------------------------------------------------- capability and options


def test_bacen_pix_offers_recurrences_and_validates_the_receiving_account(fake_psp: FakePsp) -> None:
    assert BacenPixAdapter.supports("recurrence")
    assert BacenPixAdapter.missing_methods() == []
    clean = BacenPixAdapter.validate_options(bacen_options(fake_psp, receiver_account="012682"))
    assert (clean["receiver_account"], clean["receiver_account_type"]) == ("012682", "CORRENTE")
    assert "receiver_account" not in BacenPixAdapter.validate_options(bacen_options(fake_psp))
    for wrong in (
        {"receiver_account": "0126-82"},
        {"receiver_account": "1" * 21},
        {"receiver_account": "01268X"},
        {"receiver_account": "012682", "receiver_account_type": "SALARIO"},
        {"receiver_account": "012682", "receiver_branch": "12345"},
        {"receiver_branch": "9708"},
    ):
        with pytest.raises(InvalidOptions):
            BacenPixAdapter.validate_options(bacen_options(fake_psp, **wrong))


def test_a_cycle_without_a_receiving_account_is_refused_before_any_call(
    make_bacen_acquirer: Callable[..., Acquirer], fake_psp: FakePsp
) -> None:
    adapter = adapters.build(make_bacen_acquirer(options=bacen_options(fake_psp, scopes=SCOPES)))
    with pytest.raises(InvalidOptions, match="receiver_account"):
        adapter.create_cycle_charge(cycle_request("RR1234567820240115abcdefghijk"))
    assert operations(fake_psp) == []


# --------------------------------------------------------------------------- recurrences


def test_the_qr_journey_makes_the_location_first_and_reads_the_code(
    fake_psp: FakePsp, adapter: BacenPixAdapter
) -> None:
    created = adapter.create_recurrence(rec_request(JOURNEY_QR))

    assert operations(fake_psp) == ["locrec.post", "rec.post", "rec.get"]
    (locrec,) = fake_psp.calls_of("locrec.post")
    assert locrec.body is None  # the operation declares no body
    (post,) = fake_psp.calls_of("rec.post")
    loc_id = post.body["loc"]
    assert post.body == TERMS | {"loc": loc_id}
    assert schema_errors(post.body, "/components/schemas/RecSolicitada") == []
    rec = fake_psp.recs[created.id_rec]
    assert (created.status, created.location) == ("CRIADA", rec["loc"]["location"])
    assert fake_psp.locrecs[loc_id]["idRec"] == created.id_rec
    assert brcode.parse(created.emv).location == created.location
    assert "54" not in brcode.parse(created.emv).fields  # no amount: the terms are the payload's


def test_a_qr_code_that_is_not_a_valid_br_code_is_refused(fake_psp: FakePsp, adapter: BacenPixAdapter) -> None:
    fake_psp.fail("rec.get", Fault.INVALID_EMV)
    with pytest.raises(InvalidResponse, match="CRC"):
        adapter.create_recurrence(rec_request(JOURNEY_QR))
    # The recurrence exists there: the caller settles it (find_recurrence), it never POSTs again.
    (rec,) = fake_psp.recs.values()
    assert rec["status"] == "CRIADA"


def test_the_push_journey_posts_the_rec_then_the_solicrec(fake_psp: FakePsp, adapter: BacenPixAdapter) -> None:
    created = adapter.create_recurrence(rec_request(JOURNEY_PUSH))
    assert (created.location, created.emv) == ("", "")
    assert operations(fake_psp) == ["rec.post"]
    assert "loc" not in fake_psp.calls_of("rec.post")[0].body

    expires = dt.datetime(2031, 1, 5, 12, 0, tzinfo=dt.UTC)
    sent = adapter.request_authorisation(
        PushRequest(
            id_rec=created.id_rec,
            expires_at=expires,
            payer_document=DEBTOR,
            payer_ispb=PAYER_ISPB,
            payer_branch="2569",
            payer_account="550689",
        )
    )

    (call,) = fake_psp.calls_of("solicrec.post")
    assert call.body == {
        "idRec": created.id_rec,
        "calendario": {"dataExpiracaoSolicitacao": "2031-01-05T12:00:00Z"},
        "destinatario": {"cpf": DEBTOR, "conta": "550689", "ispbParticipante": PAYER_ISPB, "agencia": "2569"},
    }
    assert schema_errors(call.body, "/components/schemas/SolicRecSolicitada") == []
    assert (sent.status, sent.id_solic_rec in fake_psp.solicrecs) == ("CRIADA", True)
    assert adapter.recurrence_status(created.id_rec).push_status == "CRIADA"

    approve_rec(fake_psp, created.id_rec, journey="JORNADA_1")
    state = adapter.recurrence_status(created.id_rec)
    assert (state.status, state.journey, state.payer_ispb, state.push_status) == (
        "APROVADA",
        "JORNADA_1",
        PAYER_ISPB,
        "ACEITA",
    )


def test_a_lost_rec_answer_is_settled_by_find_recurrence_not_a_second_post(
    fake_psp: FakePsp, make_bacen_acquirer: Callable[..., Acquirer]
) -> None:
    adapter = one_ask(make_bacen_acquirer, fake_psp, max_retries=1)  # a POST is never retried anyway
    fake_psp.delay = 1.5
    fake_psp.fail("rec.post", Fault.TIMEOUT)
    since = dt.datetime.now(dt.UTC)

    with pytest.raises(AcquirerTimeout):
        adapter.create_recurrence(rec_request(JOURNEY_PUSH))
    found = adapter.find_recurrence(debtor_document=DEBTOR, contract="63100862", since=since)

    (id_rec,) = fake_psp.recs
    assert found is not None
    assert (found.id_rec, found.status) == (id_rec, "CRIADA")
    assert operations(fake_psp) == ["rec.post", "rec.list"]
    (listing,) = fake_psp.calls_of("rec.list")
    assert f"cpf={DEBTOR}" in listing.query
    assert adapter.find_recurrence(debtor_document=DEBTOR, contract="another", since=since) is None


def test_find_recurrence_reads_every_page_and_takes_the_newest_live_one(
    fake_psp: FakePsp, adapter: BacenPixAdapter
) -> None:
    since = dt.datetime.now(dt.UTC)
    fake_psp.list_page_size = 1
    first = adapter.create_recurrence(rec_request(JOURNEY_PUSH)).id_rec
    adapter.create_recurrence(rec_request(JOURNEY_PUSH, vinculo=TERMS["vinculo"] | {"contrato": "other"}))
    newest = adapter.create_recurrence(rec_request(JOURNEY_PUSH)).id_rec
    older_ended = adapter.create_recurrence(rec_request(JOURNEY_PUSH)).id_rec
    reject_rec(fake_psp, older_ended)  # the newest of all, but ended: a live one wins

    found = adapter.find_recurrence(debtor_document=DEBTOR, contract="63100862", since=since)

    assert found is not None
    assert found.id_rec == newest != first
    assert len(fake_psp.calls_of("rec.list")) == 4


def test_endings_read_back_with_who_and_why(fake_psp: FakePsp, adapter: BacenPixAdapter) -> None:
    rejected = adapter.create_recurrence(rec_request(JOURNEY_PUSH)).id_rec
    reject_rec(fake_psp, rejected, code="AP13", text="Rejeitada pelo usuário pagador")
    revoked = approved(fake_psp, adapter)
    cancel_rec_by_payer(fake_psp, revoked)

    state = adapter.recurrence_status(rejected)
    assert (state.status, state.cancelled_by, state.reason) == ("REJEITADA", "", "AP13: Rejeitada pelo usuário pagador")
    state = adapter.recurrence_status(revoked)
    assert (state.status, state.cancelled_by, state.reason) == (
        "CANCELADA",
        "USUARIO_PAGADOR",
        "SLDB: Cancelada pelo usuário pagador",
    )


def test_cancel_recurrence_is_idempotent(fake_psp: FakePsp, adapter: BacenPixAdapter) -> None:
    id_rec = approved(fake_psp, adapter)

    state = adapter.cancel_recurrence(id_rec)
    again = adapter.cancel_recurrence(id_rec)  # refused by the PSP (not live): read back

    assert fake_psp.calls_of("rec.patch")[0].body == {"status": "CANCELADA"}
    assert (state.status, state.cancelled_by) == ("CANCELADA", "USUARIO_RECEBEDOR")
    assert (again.status, again.cancelled_by) == ("CANCELADA", "USUARIO_RECEBEDOR")
    assert len(fake_psp.calls_of("rec.patch")) == 2

    revoked = approved(fake_psp, adapter)
    cancel_rec_by_payer(fake_psp, revoked)
    assert adapter.cancel_recurrence(revoked).cancelled_by == "USUARIO_PAGADOR"


def test_an_unknown_recurrence_is_not_found(fake_psp: FakePsp, adapter: BacenPixAdapter) -> None:
    with pytest.raises(HttpNotFound):
        adapter.recurrence_status("RR1234567820240115abcdefghijk")
    with pytest.raises(HttpNotFound):
        adapter.cancel_recurrence("RR1234567820240115abcdefghijk")


def test_psp_failures_map_as_for_every_api_pix_call(fake_psp: FakePsp, adapter: BacenPixAdapter) -> None:
    fake_psp.fail("rec.post", Fault.UNAVAILABLE)
    with pytest.raises(AcquirerUnavailable):
        adapter.create_recurrence(rec_request(JOURNEY_PUSH))
    assert len(fake_psp.calls_of("rec.post")) == 1  # a POST is never repeated by the client
    assert fake_psp.recs == {}

    id_rec = approved(fake_psp, adapter)
    request = cycle_request(id_rec)
    adapter.create_cycle_charge(request)
    fake_psp.fail("cobr.get", Fault.GARBAGE)
    with pytest.raises(InvalidResponse):
        adapter.cycle_charge_status(request.txid)
    fake_psp.fail("solicrec.post", Fault.FORBIDDEN)  # a scope the PSP did not grant
    with pytest.raises(AcquirerDeclined):
        adapter.request_authorisation(
            PushRequest(
                id_rec=id_rec,
                expires_at=dt.datetime(2031, 1, 5, tzinfo=dt.UTC),
                payer_document=DEBTOR,
                payer_ispb=PAYER_ISPB,
                payer_branch="",
                payer_account="550689",
            )
        )


def test_the_standards_own_qr_code_is_checked_against_its_location() -> None:
    examples = spec_document()["components"]["examples"]  # read only: the document is cached
    rec = examples["recResponse3"]["value"]
    check_rec_code(rec["dadosQR"]["pixCopiaECola"], rec["loc"]["location"])
    with pytest.raises(InvalidResponse):
        check_rec_code(rec["dadosQR"]["pixCopiaECola"], "pix.example.com/qr/v2/rec/another")
    with pytest.raises(InvalidResponse):
        check_rec_code(rec["dadosQR"]["pixCopiaECola"][:-1] + "0", rec["loc"]["location"])  # CRC broken


def test_the_standards_own_example_answers_are_read() -> None:
    examples = spec_document()["components"]["examples"]  # read only: the document is cached
    cancelled = recurrence_state(examples["recResponse5"]["value"], "RR1026652320240821lab77511abf")
    assert (cancelled.status, cancelled.journey, cancelled.payer_ispb, cancelled.cancelled_by) == (
        "CANCELADA",
        "JORNADA_1",
        "52780028",
        "USUARIO_RECEBEDOR",
    )
    assert cancelled.reason == "SLCR: Cancelamento solicitado pelo usuário recebedor"
    cobr = cycle_state(examples["cobRResponse3"]["value"], "7f733863543b4a16b516d839bd4bc34e")
    assert (cobr.status, cobr.amount) == ("ATIVA", 5033)
    assert [(a.settles_on, a.kind, a.status) for a in cobr.attempts] == [
        (dt.date(2024, 6, 22), "AGND", "EXPIRADA"),
        (dt.date(2024, 6, 24), "NTAG", "AGENDADA"),
    ]
    ended = cycle_state(examples["cobRResponse4"]["value"], "517bd858b59d458a841280b0f0a60bfa")
    assert (ended.status, ended.reason) == (
        "CANCELADA",
        "SLCR: Cancelamento de agendamento solicitado pelo usuário recebedor",
    )


# --------------------------------------------------------------------------- cycles


def test_a_cycle_is_put_as_the_standard_describes_and_read_to_its_pix(
    fake_psp: FakePsp, adapter: BacenPixAdapter
) -> None:
    id_rec = approved(fake_psp, adapter)
    request = cycle_request(id_rec)

    created = adapter.create_cycle_charge(request)

    (call,) = fake_psp.calls_of("cobr.put")
    assert call.path == f"/api/cobr/{request.txid}"
    assert call.body == {
        "idRec": id_rec,
        "calendario": {"dataDeVencimento": "2031-01-10"},
        "valor": {"original": "35.00"},
        "ajusteDiaUtil": True,
        "recebedor": {"conta": "012682", "tipoConta": "CORRENTE", "agencia": "9708"},
        "infoAdicional": "Mensalidade de janeiro",
    }
    assert schema_errors(call.body, "/components/schemas/CobRSolicitada") == []
    assert (created.txid, created.status, created.amount, created.pix) == (request.txid, "CRIADA", 3500, ())
    assert [(a.settles_on, a.kind, a.status) for a in created.attempts] == [(DUE, "AGND", "SOLICITADA")]

    schedule_cobr(fake_psp, request.txid)
    assert adapter.cycle_charge_status(request.txid).attempts[0].status == "AGENDADA"
    e2e_id = pay_cobr(fake_psp, request.txid)
    paid = adapter.cycle_charge_status(request.txid)

    assert paid.status == "CONCLUIDA"
    assert [(p.e2e_id, p.amount, p.paid_at is not None) for p in paid.pix] == [(e2e_id, 3500, True)]
    assert (paid.attempts[0].status, paid.attempts[0].e2e_id) == ("PAGA", e2e_id)


def test_a_paid_cycle_without_pix_reads_its_pix_from_the_paga_attempt(
    fake_psp: FakePsp, adapter: BacenPixAdapter
) -> None:
    fake_psp.cobr_pix = False
    request = cycle_request(approved(fake_psp, adapter), amount=4990)
    adapter.create_cycle_charge(request)
    e2e_id = pay_cobr(fake_psp, request.txid)

    paid = adapter.cycle_charge_status(request.txid)

    assert "pix" not in paid.raw
    assert [(p.e2e_id, p.amount, p.paid_at is not None) for p in paid.pix] == [(e2e_id, 4990, True)]


def test_a_put_cut_by_a_timeout_is_retried_and_the_cobr_adopted(
    fake_psp: FakePsp, make_bacen_acquirer: Callable[..., Acquirer]
) -> None:
    adapter = one_ask(make_bacen_acquirer, fake_psp, max_retries=1)
    request = cycle_request(approved(fake_psp, adapter))
    fake_psp.delay = 1.5
    fake_psp.fail("cobr.put", Fault.TIMEOUT)  # created, answered too late: the client PUTs again

    state = adapter.create_cycle_charge(request)

    assert (state.txid, state.status) == (request.txid, "CRIADA")
    assert operations(fake_psp)[-3:] == ["cobr.put", "cobr.put", "cobr.get"]
    assert list(fake_psp.cobrs) == [request.txid]


def test_a_timed_out_create_asked_again_by_the_caller_is_the_same_cobr(
    fake_psp: FakePsp, make_bacen_acquirer: Callable[..., Acquirer]
) -> None:
    adapter = one_ask(make_bacen_acquirer, fake_psp)
    request = cycle_request(approved(fake_psp, adapter))
    fake_psp.delay = 1.5
    fake_psp.fail("cobr.put", Fault.TIMEOUT)

    with pytest.raises(AcquirerTimeout):
        adapter.create_cycle_charge(request)
    state = adapter.create_cycle_charge(request)

    assert state.status == "CRIADA"
    assert list(fake_psp.cobrs) == [request.txid]
    # Another amount under that txid is not ours: never taken for it.
    with pytest.raises(InvalidResponse):
        adapter.create_cycle_charge(cycle_request(request.id_rec, txid=request.txid, amount=9900))


def test_a_cobr_refused_by_a_problem_is_a_decline(fake_psp: FakePsp, adapter: BacenPixAdapter) -> None:
    pending = adapter.create_recurrence(rec_request(JOURNEY_PUSH)).id_rec  # not approved yet

    with pytest.raises(AcquirerDeclined) as declined:
        adapter.create_cycle_charge(cycle_request(pending))

    assert isinstance(declined.value, HttpDeclined)
    assert declined.value.problem is not None
    assert declined.value.problem.kind == "CobROperacaoInvalida"
    assert fake_psp.cobrs == {}


def test_a_failed_attempt_is_retried_on_a_date_and_rejections_read_back(
    fake_psp: FakePsp, adapter: BacenPixAdapter
) -> None:
    request = cycle_request(approved(fake_psp, adapter))
    adapter.create_cycle_charge(request)
    schedule_cobr(fake_psp, request.txid)
    reject_cobr_attempt(fake_psp, request.txid, code="AC06", text="Conta bloqueada")

    failed = adapter.cycle_charge_status(request.txid)
    assert (failed.status, failed.attempts[0].status, failed.attempts[0].reason) == (
        "ATIVA",
        "REJEITADA",
        "AC06: Conta bloqueada",
    )

    retried = adapter.retry_cycle_charge(request.txid, dt.date(2031, 1, 12))

    (call,) = fake_psp.calls_of("cobr.retentativa")
    assert (call.method, call.path, call.body) == ("POST", f"/api/cobr/{request.txid}/retentativa/2031-01-12", None)
    assert [(a.settles_on, a.kind, a.status) for a in retried.attempts] == [
        (DUE, "AGND", "REJEITADA"),
        (dt.date(2031, 1, 12), "RIFL", "SOLICITADA"),
    ]
    reject_cobr_attempt(fake_psp, request.txid, code="AM09", text="Valor não corresponde")
    with pytest.raises(AcquirerDeclined):  # that day was tried already
        adapter.retry_cycle_charge(request.txid, dt.date(2031, 1, 12))
    ended = adapter.cycle_charge_status(request.txid)
    assert (ended.status, ended.reason) == ("REJEITADA", "AM09: Valor não corresponde")


def test_a_recurrence_without_retries_refuses_a_retentativa(fake_psp: FakePsp, adapter: BacenPixAdapter) -> None:
    request = cycle_request(approved(fake_psp, adapter, politicaRetentativa="NAO_PERMITE"))
    adapter.create_cycle_charge(request)
    reject_cobr_attempt(fake_psp, request.txid)
    with pytest.raises(AcquirerDeclined, match="não permite retentativa"):
        adapter.retry_cycle_charge(request.txid, dt.date(2031, 1, 12))


def test_cancel_cycle_charge_is_idempotent_and_a_paid_one_stays_paid(
    fake_psp: FakePsp, adapter: BacenPixAdapter
) -> None:
    id_rec = approved(fake_psp, adapter)
    request = cycle_request(id_rec)
    adapter.create_cycle_charge(request)

    cancelled = adapter.cancel_cycle_charge(request.txid)
    again = adapter.cancel_cycle_charge(request.txid)

    assert fake_psp.calls_of("cobr.patch")[0].body == {"status": "CANCELADA"}
    assert (cancelled.status, cancelled.attempts[0].status) == ("CANCELADA", "CANCELADA")
    assert cancelled.reason.startswith("SLCR: ")
    assert again.status == "CANCELADA"

    paid = cycle_request(id_rec)
    adapter.create_cycle_charge(paid)
    pay_cobr(fake_psp, paid.txid)
    assert adapter.cancel_cycle_charge(paid.txid).status == "CONCLUIDA"
    with pytest.raises(HttpNotFound):
        adapter.cancel_cycle_charge(uuid.uuid4().hex)
