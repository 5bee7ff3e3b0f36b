"""The ``bacen_pix`` adapter against a fake API Pix PSP (mTLS, OAuth2) that
validates every request and answer against Banco Central's OpenAPI 2.9.0
(``tests/acquirers/fake_psp.py``; the fixture fails a test on any violation)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest

from acquirers import adapters, brcode
from acquirers.adapters.apipix.bacen import BacenPixAdapter
from acquirers.adapters.apipix.problems import HttpDeclined
from acquirers.adapters.base import (
    AcquirerDeclined,
    AcquirerTimeout,
    AcquirerUnavailable,
    CancelResult,
    ChargeRequest,
    ChargeResult,
    InvalidOptions,
    InvalidResponse,
    NotificationEvent,
    PayoutStatus,
    ProviderChargeState,
    RefundRequest,
    RefundStatus,
)
from acquirers.chain import run_charge_chain
from acquirers.models import Acquirer
from tests.acquirers.conftest import CHAVE, PKI, bacen_options, warm_up
from tests.acquirers.fake_psp import FakePsp, Fault
from tests.acquirers.fake_server import Pki
from tests.realworld import run_concurrently, wait_for

pytestmark = pytest.mark.django_db
AMOUNT = 1234


def charge_request(amount: int = AMOUNT, document: str = "52998224725", **extra: Any) -> ChargeRequest:
    charge_id = uuid.uuid4()
    fields: dict[str, Any] = {
        "charge_id": charge_id,
        "txid": charge_id.hex,
        "amount": amount,
        "expires_in": 1800,
        "payer_name": "Fulano de Tal",
        "payer_document": document,
        "merchant_name": "Loja",
        "merchant_city": "SAO PAULO",
    }
    return ChargeRequest(**(fields | extra))


def common_name(cert: dict[str, Any] | None) -> str | None:
    pairs = [pair for rdn in (cert or {}).get("subject", ()) for pair in rdn]
    return dict(pairs).get("commonName")


def adapter_of(acquirer: Acquirer) -> BacenPixAdapter:
    adapter = adapters.build(acquirer)
    assert isinstance(adapter, BacenPixAdapter)
    return adapter


# --------------------------------------------------------------------------- create_charge


def test_create_charge_puts_the_cob_the_standard_describes(fake_psp: FakePsp, bacen_acquirer: Acquirer) -> None:
    request = charge_request(description="Pedido 42")

    result = adapter_of(bacen_acquirer).create_charge(request)

    (call,) = fake_psp.calls_of("cob.put")
    assert call.path == f"/api/cob/{request.txid}"
    assert call.body == {
        "calendario": {"expiracao": 1800},
        "valor": {"original": "12.34"},
        "chave": CHAVE,
        "devedor": {"cpf": "52998224725", "nome": "Fulano de Tal"},
        "solicitacaoPagador": "Pedido 42",
    }
    assert result.provider_charge_id == request.txid
    assert result.emv == fake_psp.cobs[request.txid]["pixCopiaECola"]
    assert brcode.check(result.emv, amount=AMOUNT)
    # mTLS on every call, the token request included, with our certificate.
    assert [c.operation for c in fake_psp.calls] == ["token", "cob.put"]
    assert all(common_name(c.client_cert) == "pix-service" for c in fake_psp.calls)


@pytest.mark.parametrize(
    ("document", "devedor"),
    [
        ("11222333000181", {"cnpj": "11222333000181", "nome": "Fulano de Tal"}),
        ("12ABC34501DE35", {"cnpj": "12ABC34501DE35", "nome": "Fulano de Tal"}),  # alphanumeric CNPJ
    ],
)
def test_devedor_is_a_cnpj_when_the_buyer_is_a_company(
    fake_psp: FakePsp, bacen_acquirer: Acquirer, document: str, devedor: dict[str, str]
) -> None:
    adapter_of(bacen_acquirer).create_charge(charge_request(document=document))
    assert fake_psp.calls_of("cob.put")[0].body["devedor"] == devedor


def test_the_token_is_shared_through_the_cache_until_it_expires(fake_psp: FakePsp, bacen_acquirer: Acquirer) -> None:
    for _ in range(3):
        # A new adapter each time, like each request or task: the token lives in Redis.
        adapter_of(bacen_acquirer).create_charge(charge_request())
    assert fake_psp.token_requests == 1
    assert len(fake_psp.calls_of("cob.put")) == 3


def test_concurrent_first_calls_fetch_one_token(fake_psp: FakePsp, bacen_acquirer: Acquirer) -> None:
    # Cold cache, four callers at once (threads here; web and worker
    # processes share the same Redis lock): one token request, not four.
    outcomes = run_concurrently([lambda: adapter_of(bacen_acquirer).create_charge(charge_request())] * 4)
    assert [type(o) for o in outcomes] == [ChargeResult] * 4, outcomes
    assert fake_psp.token_requests == 1


def test_a_revoked_token_is_replaced_and_the_call_made_once_more(fake_psp: FakePsp, bacen_acquirer: Acquirer) -> None:
    adapter_of(bacen_acquirer).create_charge(charge_request())
    fake_psp.fail("cob.put", Fault.UNAUTHORIZED)

    adapter_of(bacen_acquirer).create_charge(charge_request())

    assert fake_psp.token_requests == 2
    assert len(fake_psp.calls_of("cob.put")) == 3


def test_an_idempotent_put_is_retried_after_a_5xx(fake_psp: FakePsp, bacen_acquirer: Acquirer) -> None:
    fake_psp.fail("cob.put", Fault.UNAVAILABLE)
    request = charge_request()

    result = adapter_of(bacen_acquirer).create_charge(request)

    assert len(fake_psp.calls_of("cob.put")) == 2
    assert result.emv == fake_psp.cobs[request.txid]["pixCopiaECola"]


def test_a_lost_answer_is_retried_and_the_charge_already_created_is_adopted(
    fake_psp: FakePsp, bacen_acquirer: Acquirer
) -> None:
    # The PSP created the cob but its answer was a 500; our retried PUT meets
    # "txid in use" (this PSP is strict), and a GET shows the cob is ours.
    fake_psp.fail("cob.put", Fault.LOST_ANSWER)
    request = charge_request()

    result = adapter_of(bacen_acquirer).create_charge(request)

    assert [c.operation for c in fake_psp.calls if c.operation != "token"] == ["cob.put", "cob.put", "cob.get"]
    assert list(fake_psp.cobs) == [request.txid]
    assert result.emv == fake_psp.cobs[request.txid]["pixCopiaECola"]


def test_a_retried_put_at_a_psp_that_answers_it_again_needs_no_lookup(
    fake_psp: FakePsp, bacen_acquirer: Acquirer
) -> None:
    fake_psp.idempotent_put = True
    fake_psp.fail("cob.put", Fault.LOST_ANSWER)
    adapter_of(bacen_acquirer).create_charge(charge_request())
    assert [c.operation for c in fake_psp.calls if c.operation != "token"] == ["cob.put", "cob.put"]


def test_no_retry_when_retries_are_off(fake_psp: FakePsp, make_bacen_acquirer: Callable[..., Acquirer]) -> None:
    acquirer = make_bacen_acquirer(options=bacen_options(fake_psp, max_retries=0))
    fake_psp.fail("cob.put", Fault.UNAVAILABLE)
    with pytest.raises(AcquirerUnavailable, match="503 ServicoIndisponivel"):
        adapter_of(acquirer).create_charge(charge_request())
    assert len(fake_psp.calls_of("cob.put")) == 1


@pytest.mark.parametrize(
    ("faults", "error", "message"),
    [
        (
            (Fault.DECLINED,),
            AcquirerDeclined,
            "HTTP 400 CobOperacaoInvalida - Cobrança inválida.*cob.chave: chave não pertence ao recebedor.*corr-123",
        ),
        ((Fault.FORBIDDEN,), AcquirerDeclined, "HTTP 403 AcessoNegado"),
        ((Fault.UNAVAILABLE, Fault.UNAVAILABLE), AcquirerUnavailable, "HTTP 503 ServicoIndisponivel"),
        ((Fault.ERROR, Fault.ERROR), AcquirerUnavailable, "HTTP 500 ErroInternoDoServidor"),
        ((Fault.GATEWAY_TIMEOUT, Fault.GATEWAY_TIMEOUT), AcquirerTimeout, "HTTP 504"),
        ((Fault.GARBAGE,), InvalidResponse, "not JSON"),
        ((Fault.RESET, Fault.RESET), AcquirerUnavailable, "connection failed"),
    ],
)
def test_rfc7807_problems_and_failures_map_to_our_error_classes(
    fake_psp: FakePsp, bacen_acquirer: Acquirer, faults: tuple[Fault, ...], error: type[Exception], message: str
) -> None:
    fake_psp.fail("cob.put", *faults)
    with pytest.raises(error, match=message):
        adapter_of(bacen_acquirer).create_charge(charge_request())


def test_declined_and_unavailable_are_told_apart(fake_psp: FakePsp, bacen_acquirer: Acquirer) -> None:
    fake_psp.fail("cob.put", Fault.DECLINED)
    with pytest.raises(AcquirerDeclined) as declined:
        adapter_of(bacen_acquirer).create_charge(charge_request())
    assert not isinstance(declined.value, AcquirerUnavailable)
    assert isinstance(declined.value, HttpDeclined)
    assert declined.value.problem is not None
    assert declined.value.problem.kind == "CobOperacaoInvalida"
    assert len(fake_psp.calls_of("cob.put")) == 1  # a refusal is never retried


def test_a_timeout_is_reported_as_such_and_the_psp_may_hold_the_charge(
    fake_psp: FakePsp, make_bacen_acquirer: Callable[..., Acquirer]
) -> None:
    acquirer = make_bacen_acquirer(connect_timeout_ms=1000, read_timeout_ms=1000)
    warm_up(acquirer)
    fake_psp.delay = 2.5
    fake_psp.fail("cob.put", Fault.TIMEOUT, Fault.TIMEOUT)  # the call and its retry
    request = charge_request()
    with pytest.raises(AcquirerTimeout):
        adapter_of(acquirer).create_charge(request)
    assert fake_psp.cobs[request.txid]["status"] == "ATIVA"


def test_a_put_that_timed_out_is_retried_within_the_budget_and_adopted(
    fake_psp: FakePsp, make_bacen_acquirer: Callable[..., Acquirer]
) -> None:
    acquirer = make_bacen_acquirer(connect_timeout_ms=1000, read_timeout_ms=1000)
    warm_up(acquirer)
    fake_psp.delay = 2.5
    fake_psp.fail("cob.put", Fault.TIMEOUT)
    request = charge_request()
    result = adapter_of(acquirer).create_charge(request)
    assert result.emv == fake_psp.cobs[request.txid]["pixCopiaECola"]
    assert [c.operation for c in fake_psp.calls if c.operation != "token"] == ["cob.put", "cob.put", "cob.get"]


def test_an_invalid_pix_copia_e_cola_fails_the_chain_check(fake_psp: FakePsp, bacen_acquirer: Acquirer) -> None:
    fake_psp.fail("cob.put", Fault.INVALID_EMV)
    outcome = run_charge_chain([bacen_acquirer], charge_request())
    assert outcome.result is None
    (attempt,) = outcome.attempts
    assert (attempt.outcome, attempt.error_class) == ("invalid_response", "InvalidBRCode")


# --------------------------------------------------------------------------- mTLS and configuration


def test_the_psp_refuses_a_client_certificate_it_does_not_trust(
    fake_psp: FakePsp, make_bacen_acquirer: Callable[..., Acquirer], tmp_path: Any
) -> None:
    (tmp_path / "rogue.pem").write_text(Pki.cert_pem(PKI.rogue) + Pki.key_pem(PKI.rogue))
    options = bacen_options(fake_psp, cert_path=str(tmp_path / "rogue.pem"))
    del options["cert_pem_env"], options["key_pem_env"]
    acquirer = make_bacen_acquirer(options=options)

    with pytest.raises(AcquirerUnavailable, match="TLS failure"):
        adapter_of(acquirer).create_charge(charge_request())

    # The PSP's thread records the refused handshake as our client reads its
    # alert: the two race, so wait for the record rather than read it at once.
    assert wait_for(lambda: [c.operation for c in fake_psp.calls] == ["tls_refused"], timeout=5)
    assert fake_psp.token_requests == 0


def test_we_refuse_a_psp_whose_certificate_we_do_not_trust(
    fake_psp: FakePsp, make_bacen_acquirer: Callable[..., Acquirer]
) -> None:
    options = bacen_options(fake_psp)
    del options["ca_bundle_pem_env"]  # the system's CAs: they never signed the test PSP's certificate
    with pytest.raises(AcquirerUnavailable, match="TLS failure"):
        adapter_of(make_bacen_acquirer(options=options)).create_charge(charge_request())
    assert fake_psp.token_requests == 0


def test_wrong_client_credentials_make_the_acquirer_unavailable(
    fake_psp: FakePsp, make_bacen_acquirer: Callable[..., Acquirer], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PIX_TEST_BACEN_OTHER_SECRET", "not-the-secret")
    acquirer = make_bacen_acquirer(options=bacen_options(fake_psp, client_secret_env="PIX_TEST_BACEN_OTHER_SECRET"))
    with pytest.raises(AcquirerUnavailable, match="token request refused: HTTP 401 invalid_client"):
        adapter_of(acquirer).create_charge(charge_request())
    assert fake_psp.calls_of("cob.put") == []


def test_a_missing_environment_variable_is_named(
    fake_psp: FakePsp, make_bacen_acquirer: Callable[..., Acquirer]
) -> None:
    acquirer = make_bacen_acquirer(options=bacen_options(fake_psp, client_secret_env="PIX_TEST_BACEN_UNSET"))
    with pytest.raises(AcquirerUnavailable, match="environment variable PIX_TEST_BACEN_UNSET is not set"):
        adapter_of(acquirer).create_charge(charge_request())


def test_pem_pasted_on_one_line_with_escaped_newlines_works(
    fake_psp: FakePsp, make_bacen_acquirer: Callable[..., Acquirer], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PIX_TEST_BACEN_ONE_LINE_KEY", Pki.key_pem(PKI.client).replace("\n", "\\n"))
    acquirer = make_bacen_acquirer(options=bacen_options(fake_psp, key_pem_env="PIX_TEST_BACEN_ONE_LINE_KEY"))
    adapter_of(acquirer).create_charge(charge_request())


VALID = {
    "base_url": "https://psp.example/api/v2",
    "token_url": "https://psp.example/oauth/token",
    "client_id": "abc",
    "client_secret_env": "PSP_SECRET",
    "cert_path": "/etc/pix/psp.pem",
    "chave": CHAVE,
}


def test_options_are_normalised_with_their_defaults() -> None:
    assert adapters.validate_options("bacen_pix", VALID) == {
        **VALID,
        "scopes": ["cob.write", "cob.read", "pix.write", "pix.read"],
        "token_auth": "basic",
        "token_body": "form",
        "max_retries": 1,
    }


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"client_secret": "s3cr3t"}, "client_secret must not be stored in the options.*client_secret_env"),
        ({"cert_pem": "-----BEGIN"}, "cert_pem must not be stored in the options.*cert_pem_env"),
        ({"notification_token": "t"}, "notification_token must not be stored.*notification_token_env"),
        ({"base_url": "http://psp.example/api"}, "base_url must be an https URL"),
        ({"token_url": "https://user:pw@psp.example/token"}, "token_url must be an https URL without credentials"),
        ({"client_secret_env": "not a name"}, "client_secret_env must be the name of an environment variable"),
        ({"client_secret_env": None}, "client_secret_env is required"),
        ({"cert_pem_env": "PSP_CERT"}, "exactly one of cert_path or cert_pem_env"),
        ({"cert_path": "relative.pem"}, "cert_path must be an absolute file path"),
        ({"chave": ""}, "chave is required"),
        ({"max_retries": 7}, "max_retries must be an integer from 0 to 3"),
        ({"scopes": "cob.write"}, "scopes must be a list"),
        ({"client_id_env": "PSP_ID"}, "exactly one of client_id or client_id_env"),
        ({"colour": "blue"}, "unknown options: colour"),
    ],
)
def test_options_that_would_hold_a_secret_or_cannot_work_are_refused(change: dict[str, Any], message: str) -> None:
    options = {k: v for k, v in (VALID | change).items() if v is not None}
    with pytest.raises(InvalidOptions, match=message):
        adapters.validate_options("bacen_pix", options)


# --------------------------------------------------------------------------- cancel, status, refund


def create(acquirer: Acquirer) -> ChargeRequest:
    request = charge_request()
    adapter_of(acquirer).create_charge(request)
    return request


def test_cancel_patches_the_cob_to_removed_by_the_receiver(fake_psp: FakePsp, bacen_acquirer: Acquirer) -> None:
    request = create(bacen_acquirer)

    assert adapter_of(bacen_acquirer).cancel_charge(request.txid) is CancelResult.REMOVED
    # Again: already removed is done.
    assert adapter_of(bacen_acquirer).cancel_charge(request.txid) is CancelResult.REMOVED

    assert fake_psp.cobs[request.txid]["status"] == "REMOVIDA_PELO_USUARIO_RECEBEDOR"
    assert fake_psp.calls_of("cob.patch")[0].body == {"status": "REMOVIDA_PELO_USUARIO_RECEBEDOR"}


def test_cancel_of_a_charge_not_there_yet_raises_so_the_task_retries(
    fake_psp: FakePsp, bacen_acquirer: Acquirer
) -> None:
    with pytest.raises(AcquirerDeclined, match="404"):
        adapter_of(bacen_acquirer).cancel_charge(uuid.uuid4().hex)


def test_cancel_of_a_charge_paid_meanwhile_says_it_was_paid(fake_psp: FakePsp, bacen_acquirer: Acquirer) -> None:
    request = create(bacen_acquirer)
    fake_psp.pay(request.txid, notify=False)

    assert adapter_of(bacen_acquirer).cancel_charge(request.txid) is CancelResult.PAID

    assert fake_psp.cobs[request.txid]["status"] == "CONCLUIDA"


def test_status_of_an_active_a_removed_and_an_unknown_charge(fake_psp: FakePsp, bacen_acquirer: Acquirer) -> None:
    adapter = adapter_of(bacen_acquirer)
    active, removed = create(bacen_acquirer), create(bacen_acquirer)
    adapter.cancel_charge(removed.txid)

    assert adapter.charge_status(active.txid).state is ProviderChargeState.ACTIVE
    assert adapter.charge_status(removed.txid).state is ProviderChargeState.REMOVED
    assert adapter.charge_status(uuid.uuid4().hex).state is ProviderChargeState.NOT_FOUND


def test_status_of_a_concluded_charge_reports_the_payment(fake_psp: FakePsp, bacen_acquirer: Acquirer) -> None:
    request = create(bacen_acquirer)
    e2e_id = fake_psp.pay(request.txid, notify=False)

    status = adapter_of(bacen_acquirer).charge_status(request.txid)

    assert status.state is ProviderChargeState.COMPLETED
    (paid,) = status.events
    assert (paid.event, paid.reference, paid.e2e_id, paid.amount) == (
        NotificationEvent.CHARGE_PAID,
        request.txid,
        e2e_id,
        AMOUNT,
    )
    assert paid.occurred_at is not None


@pytest.mark.parametrize(("mode", "expected"), [("immediate", RefundStatus.DONE), ("async", RefundStatus.PROCESSING)])
def test_refund_puts_a_devolucao_of_the_whole_pix(
    fake_psp: FakePsp, bacen_acquirer: Acquirer, mode: str, expected: RefundStatus
) -> None:
    fake_psp.refund_mode = mode
    request = create(bacen_acquirer)
    e2e_id = fake_psp.pay(request.txid, notify=False)
    refund = RefundRequest(
        charge_id=request.charge_id,
        txid=request.txid,
        e2e_id=e2e_id,
        refund_id="D" + request.charge_id.hex,
        amount=AMOUNT,
        reason="Pedido cancelado",
    )

    result = adapter_of(bacen_acquirer).refund_charge(refund)
    again = adapter_of(bacen_acquirer).refund_charge(refund)  # same id: the same devolução, not a second one

    assert result.status is again.status is expected
    assert result.provider_refund_id.startswith("D")
    (devolucao,) = fake_psp.pix[e2e_id]["devolucoes"]
    assert (devolucao["id"], devolucao["valor"]) == (refund.refund_id, "12.34")
    assert fake_psp.calls_of("devolucao.put")[0].body == {
        "valor": "12.34",
        "natureza": "ORIGINAL",
        "descricao": "Pedido cancelado",
    }


def test_a_refund_the_psp_could_not_make_is_failed(fake_psp: FakePsp, bacen_acquirer: Acquirer) -> None:
    fake_psp.refund_mode = "async"
    request = create(bacen_acquirer)
    e2e_id = fake_psp.pay(request.txid, notify=False)
    refund = RefundRequest(request.charge_id, request.txid, e2e_id, "D" + request.charge_id.hex, AMOUNT)
    adapter_of(bacen_acquirer).refund_charge(refund)
    fake_psp.settle_refund(e2e_id, refund.refund_id, status="NAO_REALIZADO", notify=False)

    result = adapter_of(bacen_acquirer).refund_charge(refund)

    assert (result.status, result.reason) == (RefundStatus.FAILED, "Conta do pagador encerrada")


def test_payouts_are_not_this_adapters(fake_psp: FakePsp, bacen_acquirer: Acquirer) -> None:
    adapter = adapter_of(bacen_acquirer)
    assert adapter.get_payout_status("abc").status is PayoutStatus.NOT_FOUND
    assert fake_psp.calls == []
