"""The ``efi_pix`` payout adapter against a fake of Efí's send-Pix API
(``tests/acquirers/fake_efi.py``: mTLS, Efí's OAuth2 form, request shapes
checked strictly against Efí's documented fields; the fixture fails a test
on any departure), then end to end through the real payout path: a Celery
worker process runs ``withdrawals.payouts`` against the fake.

What matters most (decisions §5): a payout is never sent twice. After a
timeout or an unclear answer the worker asks Efí for the status; only Efí's
documented "never received" lets the chain move on, and Efí's 409 to a
reused ``idEnvio`` is resolved by the lookup, never read as a refusal.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from django.db import transaction

from accounts.models import Account, LedgerEntry
from accounts.selectors import available_balance, ledger_sum
from accounts.services import ledger_post
from acquirers import adapters
from acquirers.adapters.apipix.efi import EfiPixAdapter
from acquirers.adapters.base import (
    NOTIFICATION_TOKEN_HEADER,
    AcquirerDeclined,
    AcquirerTimeout,
    AcquirerUnavailable,
    ChargeRequest,
    InvalidNotification,
    InvalidOptions,
    InvalidResponse,
    NotificationEvent,
    PayoutRequest,
    PayoutStatus,
)
from acquirers.models import Acquirer, AcquirerSlot, InboundNotification
from acquirers.selectors import cashin_chain
from acquirers.services import acquirer_slots_set
from tests.acquirers.conftest import EFI_CHAVE, EFI_NOTIFY_TOKEN, efi_options, warm_up
from tests.acquirers.fake_efi import EfiFault, FakeEfi
from tests.factories import AccountFactory, AcquirerFactory
from tests.realworld import CeleryWorker, wait_for
from webhooks.models import WebhookEvent
from withdrawals.models import PayoutAttempt, Withdrawal, WithdrawalStatus
from withdrawals.polling import payouts_poll
from withdrawals.services import withdrawal_request

pytestmark = pytest.mark.django_db
AMOUNT = 1234
CPF = "52998224725"


def payout_request(amount: int = AMOUNT, key: str = "fulano@example.com") -> PayoutRequest:
    withdrawal_id = uuid.uuid4()
    return PayoutRequest(
        withdrawal_id=withdrawal_id, idempotency_id=withdrawal_id.hex, amount=amount, key_type="email", key_value=key
    )


def adapter_of(acquirer: Acquirer) -> EfiPixAdapter:
    adapter = adapters.build(acquirer)
    assert isinstance(adapter, EfiPixAdapter)
    return adapter


def operations(efi: FakeEfi) -> list[str]:
    return [c.operation for c in efi.calls if c.operation != "token"]


def common_name(cert: dict[str, Any] | None) -> str | None:
    pairs = [pair for rdn in (cert or {}).get("subject", ()) for pair in rdn]
    return dict(pairs).get("commonName")


# --------------------------------------------------------------------------- options


def test_options_default_to_efis_token_form_and_refuse_literal_secrets(fake_efi: FakeEfi) -> None:
    clean = EfiPixAdapter.validate_options(efi_options(fake_efi))
    assert clean["token_url"] == fake_efi.url + "/oauth/token"
    assert (clean["token_auth"], clean["token_body"], clean["scopes"]) == ("basic", "json", [])
    assert clean["chave"] == EFI_CHAVE

    with pytest.raises(InvalidOptions, match="client_secret must not be stored"):
        EfiPixAdapter.validate_options(efi_options(fake_efi, client_secret="s3cr3t"))
    with pytest.raises(InvalidOptions, match="chave is required"):
        EfiPixAdapter.validate_options({k: v for k, v in efi_options(fake_efi).items() if k != "chave"})
    with pytest.raises(InvalidOptions, match="info_pagador"):
        EfiPixAdapter.validate_options(efi_options(fake_efi, info_pagador="x" * 141))
    with pytest.raises(InvalidOptions, match="unknown options: txid"):
        EfiPixAdapter.validate_options(efi_options(fake_efi, txid="x"))
    with pytest.raises(InvalidOptions, match="https"):
        EfiPixAdapter.validate_options(efi_options(fake_efi, base_url="http://pix.api.efipay.com.br"))
    with pytest.raises(InvalidOptions, match="without a path"):
        EfiPixAdapter.validate_options(efi_options(fake_efi, base_url=fake_efi.url + "/v2"))


def test_charges_are_never_offered_to_efi_and_refused_if_asked(
    fake_efi: FakeEfi, efi_acquirer: Acquirer, account: Account
) -> None:
    # Cash-out only: a flag the selectors filter on, so no charge's chain holds it.
    assert not EfiPixAdapter.supports_charge
    Acquirer.objects.filter(pk=efi_acquirer.pk).update(default_priority=1)
    assert cashin_chain(account, AMOUNT) == []
    charge_id = uuid.uuid4()
    request = ChargeRequest(
        charge_id=charge_id,
        txid=charge_id.hex,
        amount=AMOUNT,
        expires_in=1800,
        payer_name="Fulano",
        payer_document=CPF,
        merchant_name="Loja",
        merchant_city="SAO PAULO",
    )
    # The guard behind the selectors: a definitive no, and nothing sent to Efí.
    with pytest.raises(AcquirerDeclined, match="charges are not supported"):
        adapter_of(efi_acquirer).create_charge(request)
    assert fake_efi.calls == []


# --------------------------------------------------------------------------- create_payout


def test_a_payout_puts_the_documented_body_under_our_id_envio(fake_efi: FakeEfi, efi_acquirer: Acquirer) -> None:
    request = payout_request()

    result = adapter_of(efi_acquirer).create_payout(request)

    (put,) = fake_efi.calls_of("send")
    assert put.path == f"/v3/gn/pix/{request.idempotency_id}"
    assert put.body == {
        "valor": "12.34",
        "pagador": {"chave": EFI_CHAVE},
        "favorecido": {"chave": "fulano@example.com"},
    }
    send = fake_efi.sends[request.idempotency_id]
    assert result.status is PayoutStatus.PROCESSING
    assert result.provider_payout_id == result.e2e_id == send["endToEndId"]
    # mTLS on every call, the token request (Basic + JSON, checked by the fake) included.
    assert [c.operation for c in fake_efi.calls] == ["token", "send"]
    assert all(common_name(c.client_cert) == "pix-service" for c in fake_efi.calls)


def test_info_pagador_goes_in_pagador(fake_efi: FakeEfi, make_efi_acquirer: Callable[..., Acquirer]) -> None:
    acquirer = make_efi_acquirer(options=efi_options(fake_efi, info_pagador="Saque PixService"))
    adapter_of(acquirer).create_payout(payout_request())
    assert fake_efi.calls_of("send")[0].body["pagador"] == {"chave": EFI_CHAVE, "infoPagador": "Saque PixService"}


def test_the_token_is_fetched_once_and_shared(fake_efi: FakeEfi, efi_acquirer: Acquirer) -> None:
    for _ in range(3):
        # A new adapter each time, like each task: the token lives in Redis.
        request = payout_request()
        adapter_of(efi_acquirer).create_payout(request)
        adapter_of(efi_acquirer).get_payout_status(request.idempotency_id)
    assert fake_efi.token_requests == 1
    assert operations(fake_efi) == ["send", "status"] * 3


def test_sending_again_meets_efis_409_and_answers_from_the_lookup(fake_efi: FakeEfi, efi_acquirer: Acquirer) -> None:
    # Efí refuses a reused idEnvio (409 id_envio_duplicado) rather than
    # answering the first send again: that refusal is never "declined".
    fake_efi.outcome = "paid"
    request = payout_request()
    adapter_of(efi_acquirer).create_payout(request)

    again = adapter_of(efi_acquirer).create_payout(request)

    assert operations(fake_efi) == ["send", "send", "status"]
    assert list(fake_efi.sends) == [request.idempotency_id]
    assert again.status is PayoutStatus.PAID
    assert again.e2e_id == fake_efi.sends[request.idempotency_id]["endToEndId"]


@pytest.mark.parametrize("fault", [EfiFault.LOST_ANSWER, EfiFault.TIMEOUT])
def test_an_unclear_send_is_not_retried_and_the_lookup_finds_it(
    fake_efi: FakeEfi, make_efi_acquirer: Callable[..., Acquirer], fault: EfiFault
) -> None:
    acquirer = make_efi_acquirer(connect_timeout_ms=1000, read_timeout_ms=1000)
    warm_up(acquirer)
    fake_efi.delay = 2.0
    fake_efi.fail("send", fault)
    request = payout_request()

    expected = AcquirerTimeout if fault is EfiFault.TIMEOUT else AcquirerUnavailable
    with pytest.raises(expected):
        adapter_of(acquirer).create_payout(request)
    status = adapter_of(acquirer).get_payout_status(request.idempotency_id)

    assert operations(fake_efi) == ["send", "status"]  # one PUT: never sent twice
    assert status.status is PayoutStatus.PROCESSING
    assert status.e2e_id == fake_efi.sends[request.idempotency_id]["endToEndId"]


@pytest.mark.parametrize(
    ("fault", "error", "message", "calls"),
    [
        (EfiFault.DECLINED, AcquirerDeclined, "HTTP 422 pagamento_negado - Pagamento negado", ["send", "status"]),
        (EfiFault.INSUFFICIENT, AcquirerDeclined, "HTTP 400 saldo_insuficiente", ["send", "status"]),
        (EfiFault.UNAVAILABLE, AcquirerUnavailable, "HTTP 503 servico_indisponivel", ["send"]),
        (EfiFault.ERROR, AcquirerUnavailable, "HTTP 500 erro_aplicacao", ["send"]),
        (EfiFault.GARBAGE, InvalidResponse, "not JSON", ["send"]),
        (EfiFault.RESET, AcquirerUnavailable, "connection failed", ["send"]),
    ],
)
def test_efi_errors_map_to_our_error_classes(
    fake_efi: FakeEfi,
    efi_acquirer: Acquirer,
    fault: EfiFault,
    error: type[Exception],
    message: str,
    calls: list[str],
) -> None:
    fake_efi.fail("send", fault)
    with pytest.raises(error, match=message) as raised:
        adapter_of(efi_acquirer).create_payout(payout_request())
    # A refusal is confirmed by the lookup (Efí never got it) before it is one.
    assert operations(fake_efi) == calls
    assert isinstance(raised.value, AcquirerDeclined) == (error is AcquirerDeclined)
    assert fake_efi.sends == {}


def test_efis_409_is_never_a_refusal_even_when_its_lookup_lags(fake_efi: FakeEfi, efi_acquirer: Acquirer) -> None:
    # "idEnvio already used" means Efí has it; a 404 a moment later only means its record lags.
    fake_efi.fail("send", EfiFault.DUPLICATE)
    with pytest.raises(AcquirerUnavailable, match="id_envio_duplicado") as raised:
        adapter_of(efi_acquirer).create_payout(payout_request())
    assert not isinstance(raised.value, AcquirerDeclined)
    assert operations(fake_efi) == ["send", "status"]


def test_a_refusal_whose_lookup_fails_is_unclear_not_a_refusal(fake_efi: FakeEfi, efi_acquirer: Acquirer) -> None:
    fake_efi.fail("send", EfiFault.DECLINED)
    fake_efi.fail("status", EfiFault.UNAVAILABLE, EfiFault.UNAVAILABLE)  # the GET and its one retry
    with pytest.raises(AcquirerUnavailable, match=r"pagamento_negado.*status lookup failed") as raised:
        adapter_of(efi_acquirer).create_payout(payout_request())
    assert not isinstance(raised.value, AcquirerDeclined)


# --------------------------------------------------------------------------- get_payout_status


@pytest.mark.parametrize(
    ("outcome", "status"),
    [("processing", PayoutStatus.PROCESSING), ("paid", PayoutStatus.PAID), ("failed", PayoutStatus.FAILED)],
)
def test_efi_states_map_to_payout_statuses(
    fake_efi: FakeEfi, efi_acquirer: Acquirer, outcome: str, status: PayoutStatus
) -> None:
    fake_efi.outcome = outcome
    request = payout_request()
    adapter_of(efi_acquirer).create_payout(request)

    result = adapter_of(efi_acquirer).get_payout_status(request.idempotency_id)

    (lookup,) = fake_efi.calls_of("status")
    assert lookup.path == f"/v2/gn/pix/enviados/id-envio/{request.idempotency_id}"
    send = fake_efi.sends[request.idempotency_id]
    assert result.status is status
    assert result.e2e_id == send["endToEndId"]
    if status is PayoutStatus.PAID:
        assert result.paid_at == dt.datetime.fromisoformat(send["horario"]["liquidacao"])
    if status is PayoutStatus.FAILED:
        assert result.reason.startswith("AC03 - Número da agência")


def test_only_efis_documented_404_means_never_received(fake_efi: FakeEfi, efi_acquirer: Acquirer) -> None:
    assert adapter_of(efi_acquirer).get_payout_status(uuid.uuid4().hex).status is PayoutStatus.NOT_FOUND


@pytest.mark.parametrize(
    ("faults", "error", "message"),
    [
        ((EfiFault.NOT_FOUND_HTML,), InvalidResponse, "not Efí's PixEnviadoNaoEncontrado"),
        ((EfiFault.FORBIDDEN,), AcquirerUnavailable, "status lookup refused.*acesso_negado"),
        ((EfiFault.UNAVAILABLE, EfiFault.UNAVAILABLE), AcquirerUnavailable, "HTTP 503"),
        ((EfiFault.GARBAGE,), InvalidResponse, "not JSON"),
    ],
)
def test_a_lookup_without_a_definitive_answer_is_never_not_found_nor_declined(
    fake_efi: FakeEfi, efi_acquirer: Acquirer, faults: tuple[EfiFault, ...], error: type[Exception], message: str
) -> None:
    # "Declined" or "not found" here would let the chain send the payout elsewhere.
    fake_efi.fail("status", *faults)
    with pytest.raises(error, match=message) as raised:
        adapter_of(efi_acquirer).get_payout_status(uuid.uuid4().hex)
    assert not isinstance(raised.value, AcquirerDeclined)


def test_a_lookup_is_retried_once_after_a_5xx(fake_efi: FakeEfi, efi_acquirer: Acquirer) -> None:
    fake_efi.fail("status", EfiFault.UNAVAILABLE)
    assert adapter_of(efi_acquirer).get_payout_status(uuid.uuid4().hex).status is PayoutStatus.NOT_FOUND
    assert operations(fake_efi) == ["status", "status"]


# --------------------------------------------------------------------------- parse_notification


def token_headers(token: str = EFI_NOTIFY_TOKEN) -> dict[str, str]:
    return {"Content-Type": "application/json", NOTIFICATION_TOKEN_HEADER: token}


def test_a_callback_is_confirmed_by_the_lookup_and_received_pix_are_ignored(
    fake_efi: FakeEfi, efi_acquirer: Acquirer
) -> None:
    fake_efi.outcome = "paid"
    request = payout_request()
    adapter_of(efi_acquirer).create_payout(request)
    body = fake_efi.callback_body([request.idempotency_id])
    received = {"endToEndId": "E" + "1" * 31, "txid": "t" * 26, "valor": "1.00", "horario": "2024-01-01T00:00:00Z"}
    body["pix"].insert(0, received)  # a Pix received on the same key: not a payout

    (event,) = adapter_of(efi_acquirer).parse_notification(token_headers(), json.dumps(body).encode())

    send = fake_efi.sends[request.idempotency_id]
    assert (event.event, event.reference, event.e2e_id, event.amount) == (
        NotificationEvent.PAYOUT_PAID,
        request.idempotency_id,
        send["endToEndId"],
        AMOUNT,
    )
    assert operations(fake_efi) == ["send", "status"]


def test_a_callback_efi_does_not_confirm_yields_nothing_or_is_rejected(
    fake_efi: FakeEfi, efi_acquirer: Acquirer
) -> None:
    request = payout_request()
    adapter_of(efi_acquirer).create_payout(request)  # EM_PROCESSAMENTO at Efí
    body = fake_efi.callback_body([request.idempotency_id])
    body["pix"][0]["status"] = "REALIZADO"  # the body claims more than Efí says
    adapter = adapter_of(efi_acquirer)

    assert adapter.parse_notification(token_headers(), json.dumps(body).encode()) == []
    body["pix"][0]["gnExtras"]["idEnvio"] = uuid.uuid4().hex
    with pytest.raises(InvalidNotification, match="unknown to Efí"):
        adapter.parse_notification(token_headers(), json.dumps(body).encode())
    with pytest.raises(InvalidNotification, match="wrong or missing notification token"):
        adapter.parse_notification(token_headers("forged"), json.dumps(body).encode())
    assert adapter.parse_notification(token_headers(), b'{"evento": "teste"}') == []  # registration's test call


# --------------------------------------------------------------------------- end to end, with the worker

SEED = 20_000
WITHDRAWAL = 5000
LIQUID = 4850  # 5000 - (100 + 1 %)


@pytest.fixture
def account(db: Any) -> Account:
    account = AccountFactory(withdrawal_fee_fixed=100, withdrawal_fee_bps=100)
    with transaction.atomic():
        ledger_post(account_id=account.pk, amount=SEED, kind=LedgerEntry.Kind.CHARGE_PAID, reference="seed:efi")
    return account


def withdraw(account: Account, *chain: Acquirer) -> Withdrawal:
    acquirer_slots_set(account=account, purpose=AcquirerSlot.Purpose.CASHOUT, acquirers=list(chain))
    return withdrawal_request(account=account, amount=WITHDRAWAL, key_type="cpf", key_value=CPF)


def attempts(withdrawal: Withdrawal) -> list[tuple[str, str, str]]:
    rows = PayoutAttempt.objects.filter(withdrawal=withdrawal).order_by("id").select_related("acquirer")
    return [(a.acquirer.key, a.action, a.outcome) for a in rows]


def wait_attempts(withdrawal: Withdrawal, expected: list[tuple[str, str, str]]) -> None:
    """Until the worker recorded exactly these attempts and let the row go."""

    def done() -> bool:
        leased = Withdrawal.objects.filter(pk=withdrawal.pk, payout_leased_until__isnull=False).exists()
        return attempts(withdrawal) == expected and not leased

    try:
        wait_for(done)
    except AssertionError:
        raise AssertionError(f"attempts {attempts(withdrawal)}, expected {expected}") from None


def wait_status(withdrawal: Withdrawal, status: str) -> Withdrawal:
    def reached() -> bool:
        withdrawal.refresh_from_db()
        return withdrawal.status == status

    wait_for(reached)
    return withdrawal


def poll_now() -> None:
    """What beat's poll of stuck payouts does, without waiting two minutes."""
    assert payouts_poll(older_than=dt.timedelta(0)) >= 1


def assert_one_send(efi: FakeEfi, withdrawal: Withdrawal) -> None:
    (put,) = efi.calls_of("send")
    assert put.path == f"/v3/gn/pix/{withdrawal.idempotency_id}"
    assert put.body == {"valor": "48.50", "pagador": {"chave": EFI_CHAVE}, "favorecido": {"chave": CPF}}
    assert list(efi.sends) == [withdrawal.idempotency_id]


e2e = pytest.mark.django_db(transaction=True)


@e2e
def test_a_withdrawal_is_paid_through_efi(
    celery_worker_process: CeleryWorker, fake_efi: FakeEfi, efi_acquirer: Acquirer, account: Account
) -> None:
    fake_efi.outcome = "paid"  # settles right after answering EM_PROCESSAMENTO

    withdrawal = withdraw(account, efi_acquirer)
    wait_attempts(withdrawal, [("efi", "send", "processing")])
    poll_now()

    wait_status(withdrawal, WithdrawalStatus.PAID)
    assert attempts(withdrawal) == [("efi", "send", "processing"), ("efi", "status", "paid")]
    assert_one_send(fake_efi, withdrawal)
    send = fake_efi.sends[withdrawal.idempotency_id]
    assert (withdrawal.e2e_id, withdrawal.acquirer_id) == (send["endToEndId"], efi_acquirer.pk)
    assert withdrawal.paid_at == dt.datetime.fromisoformat(send["horario"]["liquidacao"])
    assert available_balance(account) == SEED - WITHDRAWAL == ledger_sum(account)
    statuses = WebhookEvent.objects.filter(record_id=withdrawal.pk).order_by("created_at")
    assert list(statuses.values_list("status", flat=True)) == [WithdrawalStatus.APPROVED, WithdrawalStatus.PAID]


@e2e
def test_a_send_efi_recorded_but_never_answered_is_asked_about_not_sent_again(
    celery_worker_process: CeleryWorker,
    fake_efi: FakeEfi,
    make_efi_acquirer: Callable[..., Acquirer],
    account: Account,
) -> None:
    # The classic double-send trap: Efí records the send, the answer comes
    # too late. (A lost 500 answer takes the same path: see the contract test.)
    efi = make_efi_acquirer(connect_timeout_ms=1000, read_timeout_ms=1000)
    warm_up(efi)
    fallback = AcquirerFactory(key="sbx_after_efi", options={"charge": "ok", "payout": "ok"})
    fake_efi.outcome = "paid"
    fake_efi.delay = 2.0
    fake_efi.fail("send", EfiFault.TIMEOUT)

    withdrawal = withdraw(account, efi, fallback)

    wait_status(withdrawal, WithdrawalStatus.PAID)
    assert attempts(withdrawal) == [("efi", "send", "timeout"), ("efi", "status", "paid")]
    assert_one_send(fake_efi, withdrawal)  # EXACTLY one send; the fallback never asked
    assert withdrawal.e2e_id == fake_efi.sends[withdrawal.idempotency_id]["endToEndId"]
    assert available_balance(account) == SEED - WITHDRAWAL == ledger_sum(account)


@e2e
def test_while_efi_cannot_say_the_payout_waits_and_goes_nowhere_else(
    celery_worker_process: CeleryWorker,
    fake_efi: FakeEfi,
    make_efi_acquirer: Callable[..., Acquirer],
    account: Account,
) -> None:
    efi = make_efi_acquirer(connect_timeout_ms=1000, read_timeout_ms=1000)
    warm_up(efi)
    fallback = AcquirerFactory(key="sbx_after_efi", options={"charge": "ok", "payout": "ok"})
    fake_efi.outcome = "paid"
    fake_efi.delay = 2.0
    fake_efi.fail("send", EfiFault.TIMEOUT)
    fake_efi.fail("status", EfiFault.UNAVAILABLE, EfiFault.UNAVAILABLE)  # the lookup and its retry

    withdrawal = withdraw(account, efi, fallback)
    # The unclear send and the failed lookup come first; Celery's own retry
    # of the task may already have asked again by the time we look, so only
    # the beginning of the history is pinned, and nothing went elsewhere.
    unclear = [("efi", "send", "timeout"), ("efi", "status", "unavailable")]
    wait_for(lambda: attempts(withdrawal)[:2] == unclear)
    assert [a for a in attempts(withdrawal) if a[0] != "efi"] == []
    # What beat does; the task's own retry may come first (and hold or settle it).
    payouts_poll(older_than=dt.timedelta(0))

    wait_status(withdrawal, WithdrawalStatus.PAID)
    assert [a for a in attempts(withdrawal) if a[0] != "efi"] == []
    assert attempts(withdrawal)[-1] == ("efi", "status", "paid")
    assert_one_send(fake_efi, withdrawal)


@e2e
def test_nao_realizado_moves_the_payout_to_the_next_acquirer(
    celery_worker_process: CeleryWorker, fake_efi: FakeEfi, efi_acquirer: Acquirer, account: Account
) -> None:
    fallback = AcquirerFactory(key="sbx_after_efi", options={"charge": "ok", "payout": "ok"})
    fake_efi.outcome = "failed"

    withdrawal = withdraw(account, efi_acquirer, fallback)
    wait_attempts(withdrawal, [("efi", "send", "processing")])
    poll_now()

    wait_status(withdrawal, WithdrawalStatus.PAID)
    assert attempts(withdrawal) == [
        ("efi", "send", "processing"),
        ("efi", "status", "failed"),
        ("sbx_after_efi", "send", "paid"),
    ]
    assert withdrawal.acquirer_id == fallback.pk
    assert_one_send(fake_efi, withdrawal)
    assert available_balance(account) == SEED - WITHDRAWAL == ledger_sum(account)


@e2e
def test_a_processing_payout_is_paid_by_a_confirmed_callback_and_forgeries_move_nothing(
    celery_worker_process: CeleryWorker,
    live_server: Any,
    fake_efi: FakeEfi,
    efi_acquirer: Acquirer,
    account: Account,
) -> None:
    base = f"{live_server.url}/api/acquirers/{efi_acquirer.key}/notifications"
    # What staff register at Efí (PUT /v2/webhook/{chave}); Efí appends /pix.
    fake_efi.webhook_url = f"{base}/{EFI_NOTIFY_TOKEN}"
    withdrawal = withdraw(account, efi_acquirer)
    wait_attempts(withdrawal, [("efi", "send", "processing")])
    id_envio = withdrawal.idempotency_id
    claim = fake_efi.callback_body([id_envio])
    claim["pix"][0] |= {"status": "REALIZADO", "horario": "2024-01-01T12:00:00.000Z"}

    # Forged: the URL's token is wrong.
    assert fake_efi.post_callback(claim, url=f"{base}/not-the-token") == 401
    # Authentic URL, but Efí still says EM_PROCESSAMENTO: the body is not believed.
    assert fake_efi.post_callback(claim) == 200
    # Authentic URL, a payout Efí never heard of.
    unknown = {"pix": [{**claim["pix"][0], "gnExtras": {"idEnvio": uuid.uuid4().hex}}]}
    assert fake_efi.post_callback(unknown) == 401
    withdrawal.refresh_from_db()
    assert (withdrawal.status, withdrawal.e2e_id) == (WithdrawalStatus.APPROVED, None)
    assert available_balance(account) == SEED - WITHDRAWAL
    assert len(fake_efi.calls_of("status")) == 2  # each authentic claim was looked up

    assert fake_efi.settle(id_envio, "REALIZADO", notify=True) == 200

    withdrawal.refresh_from_db()
    send = fake_efi.sends[id_envio]
    assert (withdrawal.status, withdrawal.e2e_id) == (WithdrawalStatus.PAID, send["endToEndId"])
    assert available_balance(account) == SEED - WITHDRAWAL == ledger_sum(account)
    assert_one_send(fake_efi, withdrawal)
    stored = list(InboundNotification.objects.order_by("id").values_list("status", flat=True))
    assert stored == ["rejected", "processed", "rejected", "processed"]


@e2e
def test_a_confirmed_nao_realizado_callback_fails_the_withdrawal_with_the_money_back(
    celery_worker_process: CeleryWorker,
    live_server: Any,
    fake_efi: FakeEfi,
    efi_acquirer: Acquirer,
    account: Account,
) -> None:
    fake_efi.webhook_url = f"{live_server.url}/api/acquirers/{efi_acquirer.key}/notifications/{EFI_NOTIFY_TOKEN}"
    withdrawal = withdraw(account, efi_acquirer)
    wait_attempts(withdrawal, [("efi", "send", "processing")])

    assert fake_efi.settle(withdrawal.idempotency_id, "NAO_REALIZADO", notify=True) == 200

    withdrawal.refresh_from_db()
    assert withdrawal.status == WithdrawalStatus.FAILED
    assert available_balance(account) == SEED == ledger_sum(account)
    assert_one_send(fake_efi, withdrawal)
