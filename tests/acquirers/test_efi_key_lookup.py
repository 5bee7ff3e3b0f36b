"""Efí's side of the payee check against the loopback fake
(``tests/acquirers/fake_efi.py``): the DICT lookup (its route and shape are
ASSUMED, acquirers.adapters.apipix.efi_keys), the payee's document on the
send (``favorecido.cpf``/``cnpj``, documented) and Efí's refusal of it, then
the payout engine through an ``efi_pix`` chain."""

from __future__ import annotations

import logging
import uuid
from typing import Any

import pytest
from django.db import transaction

from accounts.models import Account, LedgerEntry
from accounts.selectors import available_balance, ledger_sum
from accounts.services import ledger_post
from acquirers import adapters, breaker, calls
from acquirers.adapters.apipix.efi import EfiPixAdapter
from acquirers.adapters.base import (
    AcquirerDeclined,
    InvalidResponse,
    KeyOwner,
    PayeeRefused,
    PayoutRequest,
    RecordNotFound,
)
from acquirers.adapters.sandbox import SandboxAdapter
from acquirers.models import Acquirer, AcquirerSlot
from acquirers.services import acquirer_slots_set
from tests.acquirers.conftest import EFI_CHAVE
from tests.acquirers.fake_efi import EfiFault, FakeEfi
from tests.factories import AccountFactory, AcquirerFactory
from withdrawals import exceptions as err
from withdrawals import payees, services
from withdrawals.models import PayeeCheck, Withdrawal, WithdrawalStatus
from withdrawals.payouts import withdrawal_process
from withdrawals.services import withdrawal_request

pytestmark = pytest.mark.django_db
CPF = "52998224725"
OTHER_CPF = "11144477735"
CNPJ = "11444777000161"


def adapter_of(acquirer: Acquirer) -> EfiPixAdapter:
    adapter = adapters.build(acquirer)
    assert isinstance(adapter, EfiPixAdapter)
    return adapter


def new_key() -> str:
    return f"favorecido.{uuid.uuid4().hex[:10]}@example.com"


# --------------------------------------------------------------------------- the adapter


def test_the_lookup_answers_the_owner_as_the_dict_discloses_it(fake_efi: FakeEfi, efi_acquirer: Acquirer) -> None:
    key, company = new_key(), new_key()
    fake_efi.owners[key] = {"nome": "Fulano de Tal", "cpf": CPF}
    fake_efi.owners[company] = {"nome": "Empresa Ltda", "cnpj": CNPJ, "ispb": "00000000", "instituicao": "BCO X"}
    adapter = adapter_of(efi_acquirer)

    assert adapter.supports("key_lookup")
    assert adapter.lookup_key("email", key) == KeyOwner(
        name="Fulano de Tal", document="***982247**", ispb="60746948", bank_name="BCO BRADESCO S.A."
    )
    assert adapter.lookup_key("email", company) == KeyOwner(
        name="Empresa Ltda", document=CNPJ, ispb="00000000", bank_name="BCO X"
    )
    first = fake_efi.calls_of("key")[0]
    assert first.path == f"/v2/gn/chaves/{key.replace('@', '%40')}/infos"
    assert first.body is None


def test_only_efis_not_found_is_not_found(fake_efi: FakeEfi, efi_acquirer: Acquirer) -> None:
    adapter = adapter_of(efi_acquirer)
    with pytest.raises(RecordNotFound):
        adapter.lookup_key("email", new_key())
    # A 404 that is not Efí's (a proxy's page) says nothing of the key; nor does a refusal to look up.
    # Efí answered (its breaker is not fed a failure), but nothing about the key.
    fake_efi.fail("key", EfiFault.NOT_FOUND_HTML, EfiFault.FORBIDDEN)
    for _ in range(2):
        with pytest.raises(AcquirerDeclined) as raised:
            adapter.lookup_key("email", new_key())
        assert not isinstance(raised.value, RecordNotFound)


def payout_request(key: str, payee_document: str) -> PayoutRequest:
    withdrawal_id = uuid.uuid4()
    return PayoutRequest(
        withdrawal_id=withdrawal_id,
        idempotency_id=withdrawal_id.hex,
        amount=1234,
        key_type="email",
        key_value=key,
        payee_document=payee_document,
    )


def test_the_send_names_the_payee_document_and_efi_refuses_another_owner(
    fake_efi: FakeEfi, efi_acquirer: Acquirer
) -> None:
    key = new_key()
    fake_efi.owners[key] = {"nome": "Fulano de Tal", "cpf": CPF}
    adapter = adapter_of(efi_acquirer)

    adapter.create_payout(payout_request(key, CPF))
    (put,) = fake_efi.calls_of("send")
    assert put.body["favorecido"] == {"chave": key, "cpf": CPF}

    refused = payout_request(key, OTHER_CPF)
    with pytest.raises(PayeeRefused, match="favorecido_invalido"):
        adapter.create_payout(refused)
    assert refused.idempotency_id not in fake_efi.sends
    company = payout_request(new_key(), CNPJ)
    with pytest.raises(AcquirerDeclined):
        adapter.create_payout(company)
    assert fake_efi.calls_of("send")[-1].body["favorecido"]["cnpj"] == CNPJ


# --------------------------------------------------------------------------- the payout engine through Efí

SEED = 20_000
AMOUNT = 5000


@pytest.fixture
def account(db: Any) -> Account:
    account = AccountFactory(withdrawal_fee_fixed=100, withdrawal_fee_bps=100)
    with transaction.atomic():
        ledger_post(account_id=account.pk, amount=SEED, kind=LedgerEntry.Kind.CHARGE_PAID, reference="seed:efi-payee")
    return account


def pay_out(account: Account, efi_acquirer: Acquirer, key: str, monkeypatch: pytest.MonkeyPatch) -> Withdrawal:
    monkeypatch.setattr(services, "_enqueue_processing", lambda *args, **kwargs: None)
    acquirer_slots_set(account=account, purpose=AcquirerSlot.Purpose.CASHOUT, acquirers=[efi_acquirer])
    withdrawal = withdrawal_request(account=account, amount=AMOUNT, key_type="email", key_value=key, payee_document=CPF)
    assert withdrawal_process(withdrawal_id=withdrawal.pk) == WithdrawalStatus.APPROVED
    withdrawal_process(withdrawal_id=withdrawal.pk)
    withdrawal.refresh_from_db()
    return withdrawal


@pytest.mark.django_db(transaction=True)
def test_a_matching_owner_at_efi_is_sent_with_its_document(
    fake_efi: FakeEfi, efi_acquirer: Acquirer, account: Account, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = new_key()
    fake_efi.owners[key] = {"nome": "Fulano de Tal", "cpf": CPF}

    withdrawal = pay_out(account, efi_acquirer, key, monkeypatch)

    assert withdrawal.status == WithdrawalStatus.APPROVED  # EM_PROCESSAMENTO: paid later, as any Efí send
    assert (withdrawal.payee_check, withdrawal.payee_document_masked) == (PayeeCheck.MATCHED, "***.982.247-**")
    (put,) = fake_efi.calls_of("send")
    assert put.body == {"valor": "48.50", "pagador": {"chave": EFI_CHAVE}, "favorecido": {"chave": key, "cpf": CPF}}


@pytest.mark.django_db(transaction=True)
def test_another_owner_at_efi_fails_the_withdrawal_before_any_send(
    fake_efi: FakeEfi, efi_acquirer: Acquirer, account: Account, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = new_key()
    fake_efi.owners[key] = {"nome": "Outra Pessoa", "cpf": OTHER_CPF}

    withdrawal = pay_out(account, efi_acquirer, key, monkeypatch)

    assert (withdrawal.status, withdrawal.failure_reason) == (WithdrawalStatus.FAILED, err.PAYEE_MISMATCH)
    assert fake_efi.calls_of("send") == []
    assert available_balance(account) == SEED == ledger_sum(account)


# --------------------------------------------------------------------------- Efí's refusal on the send is final

DICT_TWIN_CPF = "11198224799"  # another person, whose DICT-masked CPF (***982247**) reads as CPF's


def checked_payout_through(efi_acquirer: Acquirer, account: Account, key: str) -> tuple[Withdrawal, SandboxAdapter]:
    """A payout under the payee check, its chain Efí then the sandbox (which checks no owner on a send)."""
    sandbox = AcquirerFactory(key=f"sbx_{uuid.uuid4().hex[:8]}", options={"charge": "ok", "payout": "ok"})
    acquirer_slots_set(account=account, purpose=AcquirerSlot.Purpose.CASHOUT, acquirers=[efi_acquirer, sandbox])
    withdrawal = withdrawal_request(account=account, amount=AMOUNT, key_type="email", key_value=key, payee_document=CPF)
    assert withdrawal_process(withdrawal_id=withdrawal.pk) == WithdrawalStatus.APPROVED
    adapter = adapters.build(sandbox)
    assert isinstance(adapter, SandboxAdapter)
    return withdrawal, adapter


@pytest.mark.django_db(transaction=True)
def test_efis_ownership_refusal_on_the_send_never_falls_back_to_an_acquirer_that_would_not_check(
    fake_efi: FakeEfi, efi_acquirer: Acquirer, account: Account, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The DICT's six digits match; Efí, checking the full CPF on the send, refuses it.
    key = new_key()
    fake_efi.owners[key] = {"nome": "Outra Pessoa", "cpf": DICT_TWIN_CPF}
    monkeypatch.setattr(services, "_enqueue_processing", lambda *args, **kwargs: None)
    withdrawal, sandbox = checked_payout_through(efi_acquirer, account, key)

    assert withdrawal_process(withdrawal_id=withdrawal.pk) == WithdrawalStatus.FAILED

    withdrawal.refresh_from_db()
    assert (withdrawal.status, withdrawal.failure_reason) == (WithdrawalStatus.FAILED, err.PAYEE_MISMATCH)
    assert withdrawal.payee_check == PayeeCheck.MATCHED  # what the DICT showed; Efí knew better
    assert len(fake_efi.calls_of("send")) == 1
    assert fake_efi.sends == {}
    assert sandbox.payout_requests(withdrawal.idempotency_id) == 0  # nothing sent elsewhere
    assert available_balance(account) == SEED == ledger_sum(account)
    # Run again (a redelivered task): it stays failed, nothing sent anywhere.
    assert withdrawal_process(withdrawal_id=withdrawal.pk) == WithdrawalStatus.FAILED
    assert sandbox.payout_requests(withdrawal.idempotency_id) == 0


@pytest.mark.django_db(transaction=True)
def test_any_other_refusal_of_a_checked_send_fails_it_without_falling_back(
    fake_efi: FakeEfi, efi_acquirer: Acquirer, account: Account, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = new_key()
    fake_efi.owners[key] = {"nome": "Fulano de Tal", "cpf": CPF}
    fake_efi.fail("send", EfiFault.DECLINED)
    monkeypatch.setattr(services, "_enqueue_processing", lambda *args, **kwargs: None)
    withdrawal, sandbox = checked_payout_through(efi_acquirer, account, key)

    assert withdrawal_process(withdrawal_id=withdrawal.pk) == WithdrawalStatus.FAILED

    withdrawal.refresh_from_db()
    assert withdrawal.failure_reason == err.PAYEE_CHECKED_SEND_REFUSED
    assert sandbox.payout_requests(withdrawal.idempotency_id) == 0
    assert available_balance(account) == SEED == ledger_sum(account)


# --------------------------------------------------------------------------- lookups and the breaker; no PII in logs


def test_a_refused_or_foreign_404_lookup_never_opens_the_circuit_for_payouts(
    fake_efi: FakeEfi, efi_acquirer: Acquirer, settings: Any
) -> None:
    settings.ACQUIRER_BREAKER_ENABLED = True
    faults = [EfiFault.FORBIDDEN, EfiFault.NOT_FOUND_HTML] * settings.ACQUIRER_BREAKER_FAILURES
    fake_efi.fail("key", *faults)
    for _ in faults:
        done = calls.call(efi_acquirer, "key_lookup", lambda adapter: adapter.lookup_key("email", new_key()))
        assert done.error is not None
        assert not isinstance(done.error, RecordNotFound)
    for _ in range(settings.ACQUIRER_BREAKER_FAILURES):
        done = calls.call(efi_acquirer, "key_lookup", lambda adapter: adapter.lookup_key("email", new_key()))
        assert isinstance(done.error, RecordNotFound)

    health = breaker.snapshot(efi_acquirer)
    assert health is not None
    assert health.state is breaker.State.CLOSED
    assert calls.admit(efi_acquirer, "payout").allowed


def test_a_failed_lookup_of_a_cpf_key_never_logs_nor_keeps_the_cpf(
    fake_efi: FakeEfi, efi_acquirer: Acquirer, account: Account, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    acquirer_slots_set(account=account, purpose=AcquirerSlot.Purpose.CASHOUT, acquirers=[efi_acquirer])
    key = f"{uuid.uuid4().int % 10**11:011d}"  # a CPF-shaped key nobody looked up before
    fake_efi.fail("key", EfiFault.NOT_FOUND_HTML, EfiFault.FORBIDDEN)
    for _ in range(2):
        assert payees.key_owner(account=account, key_type="cpf", key_value=key, amount=AMOUNT) is None
    assert caplog.records
    assert key not in caplog.text

    # Nor an owner's document the adapter could not read.
    fake_efi.owners[key] = {"nome": "Fulano", "cnpj": f"{CPF}!"}
    with pytest.raises(InvalidResponse) as raised:
        adapter_of(efi_acquirer).lookup_key("cpf", key)
    assert CPF not in str(raised.value)
    assert key not in str(raised.value)


@pytest.mark.django_db(transaction=True)
def test_a_run_that_died_after_the_refusal_leaves_the_next_run_nowhere_else_to_send(
    fake_efi: FakeEfi, efi_acquirer: Acquirer, account: Account, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = new_key()
    fake_efi.owners[key] = {"nome": "Outra Pessoa", "cpf": DICT_TWIN_CPF}
    monkeypatch.setattr(services, "_enqueue_processing", lambda *args, **kwargs: None)
    withdrawal, sandbox = checked_payout_through(efi_acquirer, account, key)

    def died(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("worker lost between the refusal and the failure")

    with monkeypatch.context() as patch:
        patch.setattr(payees, "payee_send_refused", died)
        with pytest.raises(RuntimeError):
            withdrawal_process(withdrawal_id=withdrawal.pk)

    assert withdrawal_process(withdrawal_id=withdrawal.pk) == WithdrawalStatus.FAILED
    withdrawal.refresh_from_db()
    assert withdrawal.failure_reason == err.PAYEE_MISMATCH
    assert sandbox.payout_requests(withdrawal.idempotency_id) == 0
    assert available_balance(account) == SEED == ledger_sum(account)
