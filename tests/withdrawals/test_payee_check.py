"""The payee check (docs/api/payee-check.md): before a payout's first send
the key's owner is looked up in the sandbox's DICT; a match is paid, a
mismatch or an unknown key fails with the money back and nothing sent, an
unclear lookup defers the payout, never sends it unchecked.

The payout runs here are the engine's own (``withdrawal_process``), called in
the test's process with the broker hand-off recorded instead (``no_enqueue``):
each step is the test's, none the worker's."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from django.db import transaction
from django.urls import reverse
from rest_framework.test import APIClient

from accounts.models import Account, LedgerEntry
from accounts.selectors import available_balance, ledger_sum
from accounts.services import ledger_post
from acquirers import adapters, breaker, calls
from acquirers.adapters.base import PayoutRequest, PayoutResult
from acquirers.adapters.sandbox import SandboxAdapter
from acquirers.adapters.sandbox_keys import derived_cpf, register_key_owner
from acquirers.models import Acquirer, AcquirerSlot
from acquirers.services import acquirer_slots_set
from tests.factories import AccountFactory, AcquirerFactory
from tests.realworld import wait_for
from tests.withdrawals.conftest import Refused
from withdrawals import exceptions as err
from withdrawals import payees
from withdrawals.models import PayeeCheck, PayoutAttempt, Withdrawal, WithdrawalStatus
from withdrawals.payee_rules import matches, shown
from withdrawals.payees import payee_lookups_today
from withdrawals.payouts import ProcessOutcome, withdrawal_process
from withdrawals.services import withdrawal_approve, withdrawal_request

pytestmark = pytest.mark.django_db(transaction=True)

SEED = 20_000
AMOUNT = 5000
CPF = "52998224725"  # the payee the merchant expects
OTHER_CPF = "11144477735"
CNPJ = "11222333000181"
FAST = {"connect_timeout_ms": 100, "read_timeout_ms": 200}


@pytest.fixture
def account(db: Any) -> Account:
    account = AccountFactory(withdrawal_fee_fixed=100, withdrawal_fee_bps=100, document=CNPJ)
    with transaction.atomic():
        ledger_post(account_id=account.pk, amount=SEED, kind=LedgerEntry.Kind.CHARGE_PAID, reference="seed:payee")
    return account


def sandbox(account: Account, key: str | None = None, **options: str) -> Acquirer:
    acquirer = AcquirerFactory(
        key=key or f"sbx_{uuid.uuid4().hex[:8]}", options={"charge": "ok", "payout": "ok", **options}, **FAST
    )
    acquirer_slots_set(account=account, purpose=AcquirerSlot.Purpose.CASHOUT, acquirers=[acquirer])
    return acquirer


def new_key() -> str:
    """A key no earlier test looked up (answers are cached by key)."""
    return f"fornecedor.{uuid.uuid4().hex[:10]}@example.com"


def withdraw(account: Account, key: str, payee_document: str = CPF, key_type: str = "email") -> Withdrawal:
    return withdrawal_request(
        account=account, amount=AMOUNT, key_type=key_type, key_value=key, payee_document=payee_document
    )


def run(withdrawal: Withdrawal) -> Any:
    """The engine as the worker runs it: the first run approves, the next pays out."""
    outcome = withdrawal_process(withdrawal_id=withdrawal.pk)
    if outcome == WithdrawalStatus.APPROVED:
        outcome = withdrawal_process(withdrawal_id=withdrawal.pk)
    withdrawal.refresh_from_db()
    return outcome


def sends(withdrawal: Withdrawal) -> list[str]:
    return list(
        PayoutAttempt.objects.filter(withdrawal=withdrawal, action=PayoutAttempt.Action.SEND).values_list(
            "outcome", flat=True
        )
    )


def sandbox_requests(acquirer: Acquirer, withdrawal: Withdrawal) -> int:
    adapter = adapters.build(acquirer)
    assert isinstance(adapter, SandboxAdapter)
    return adapter.payout_requests(withdrawal.idempotency_id)


def assert_balanced(account: Account, expected: int) -> None:
    assert available_balance(account) == expected == ledger_sum(account)


# --------------------------------------------------------------------------- the match rule


@pytest.mark.parametrize(
    ("disclosed", "expected", "match"),
    [
        ("***982247**", CPF, True),  # the DICT's CPF: six middle digits
        (CPF, CPF, True),  # a PSP that discloses it in full
        ("***982248**", CPF, False),
        ("***98224**", CPF, False),  # not the same length
        ("***********", CPF, False),  # nothing shown: nothing confirmed
        (CNPJ, CNPJ, True),
        ("11222333000182", CNPJ, False),
        ("***982247**", CNPJ, False),  # a person's key, a company expected
    ],
)
def test_a_masked_document_matches_on_every_digit_it_shows(disclosed: str, expected: str, match: bool) -> None:
    assert matches(expected, disclosed) is match


def test_the_owner_document_is_shown_masked_as_the_dict_masks_it() -> None:
    assert shown(CPF) == "***.982.247-**"  # even when a PSP disclosed it in full
    assert shown("***982247**") == "***.982.247-**"
    assert shown(CNPJ) == "11.222.333/0001-81"


# --------------------------------------------------------------------------- payouts


def test_a_key_whose_owner_matches_is_paid_and_the_owner_shown(
    account: Account, api: APIClient, no_enqueue: list[Any]
) -> None:
    acquirer = sandbox(account)
    key = new_key()
    register_key_owner(acquirer.key, "email", key, name="Fulano de Tal", document=CPF)

    withdrawal = withdraw(account, key)
    assert run(withdrawal) == WithdrawalStatus.PAID

    assert withdrawal.status == WithdrawalStatus.PAID
    assert sends(withdrawal) == ["paid"]
    assert_balanced(account, SEED - AMOUNT)
    payee = api.get(f"/api/withdrawals/{withdrawal.pk}").json()["data"]["payee"]
    assert payee == {
        "expected_document": CPF,
        "check": "matched",
        "name": "Fulano de Tal",
        "document": "***.982.247-**",
        "ispb": "99999999",
        "bank": "Sandbox Pagamentos S.A.",
        "checked_at": payee["checked_at"],
    }
    assert payee["checked_at"]


def test_the_payee_document_goes_with_the_send(
    account: Account, no_enqueue: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    sandbox(account)
    key = new_key()
    sent: list[PayoutRequest] = []
    original = SandboxAdapter.create_payout

    def spy(self: SandboxAdapter, request: PayoutRequest) -> PayoutResult:
        sent.append(request)
        return original(self, request)

    monkeypatch.setattr(SandboxAdapter, "create_payout", spy)
    # The sandbox's rule: an e-mail key is owned by the CPF derived from it.
    withdrawal = withdraw(account, key, payee_document=derived_cpf("email", key))

    assert run(withdrawal) == WithdrawalStatus.PAID
    assert [r.payee_document for r in sent] == [derived_cpf("email", key)]


def test_a_mismatch_fails_with_the_money_back_and_nothing_sent(account: Account, no_enqueue: list[Any]) -> None:
    acquirer = sandbox(account)
    key = new_key()
    register_key_owner(acquirer.key, "email", key, name="Outra Pessoa", document=OTHER_CPF)

    withdrawal = withdraw(account, key)
    assert run(withdrawal) == WithdrawalStatus.FAILED

    assert withdrawal.failure_reason == err.PAYEE_MISMATCH
    assert (withdrawal.payee_check, withdrawal.payee_name) == (PayeeCheck.MISMATCH, "Outra Pessoa")
    assert withdrawal.payee_document_masked == "***.444.777-**"
    assert sends(withdrawal) == []
    assert sandbox_requests(acquirer, withdrawal) == 0
    assert_balanced(account, SEED)
    kinds = list(LedgerEntry.objects.filter(account=account).order_by("id").values_list("kind", "amount"))
    assert kinds[1:] == [(LedgerEntry.Kind.WITHDRAWAL, -AMOUNT), (LedgerEntry.Kind.WITHDRAWAL_REVERSAL, AMOUNT)]


def test_a_key_not_in_the_dict_fails_with_nothing_sent(account: Account, no_enqueue: list[Any]) -> None:
    acquirer = sandbox(account)
    withdrawal = withdraw(account, f"naoexiste.{uuid.uuid4().hex[:8]}@example.com")

    assert run(withdrawal) == WithdrawalStatus.FAILED
    assert (withdrawal.failure_reason, withdrawal.payee_check) == (err.PAYEE_KEY_NOT_FOUND, PayeeCheck.NOT_FOUND)
    assert sandbox_requests(acquirer, withdrawal) == 0
    assert_balanced(account, SEED)


@pytest.mark.parametrize("behaviour", ["timeout", "fail"])
def test_an_unclear_lookup_defers_the_payout_never_sends_it_unchecked(
    account: Account, no_enqueue: list[Any], settings: Any, behaviour: str
) -> None:
    acquirer = sandbox(account, key_lookup=behaviour)
    withdrawal = withdraw(account, new_key())
    assert withdrawal_process(withdrawal_id=withdrawal.pk) == WithdrawalStatus.APPROVED
    no_enqueue.clear()

    assert withdrawal_process(withdrawal_id=withdrawal.pk) == ProcessOutcome.DEFERRED

    withdrawal.refresh_from_db()
    assert withdrawal.status == WithdrawalStatus.APPROVED
    assert (withdrawal.payee_check, withdrawal.failure_reason) == ("", "")
    assert sends(withdrawal) == []
    assert sandbox_requests(acquirer, withdrawal) == 0
    assert [args[0] for args in no_enqueue] == [withdrawal.pk]  # tried again later
    assert_balanced(account, SEED - AMOUNT)

    # Nobody could answer for longer than the bound: failed, money back, still nothing sent.
    settings.PAYEE_CHECK_GIVE_UP_MINUTES = 0
    assert withdrawal_process(withdrawal_id=withdrawal.pk) == WithdrawalStatus.FAILED
    withdrawal.refresh_from_db()
    assert withdrawal.failure_reason == err.PAYEE_LOOKUP_GAVE_UP
    assert sandbox_requests(acquirer, withdrawal) == 0
    assert_balanced(account, SEED)


def test_a_cached_answer_makes_no_second_lookup_and_lookups_count_per_account(
    account: Account, no_enqueue: list[Any]
) -> None:
    acquirer = sandbox(account)
    key = new_key()
    register_key_owner(acquirer.key, "email", key, name="Fulano", document=CPF)
    other = AccountFactory(document=CNPJ)
    assert payee_lookups_today(account_id=account.pk) == payee_lookups_today(account_id=other.pk) == 0

    first, second = withdraw(account, key), withdraw(account, key)
    assert run(first) == run(second) == WithdrawalStatus.PAID

    # One lookup at the acquirer: the second check was answered from the cache.
    assert payee_lookups_today(account_id=account.pk) == 1
    assert payee_lookups_today(account_id=other.pk) == 0
    second.refresh_from_db()
    assert (second.payee_check, second.payee_name) == (PayeeCheck.MATCHED, "Fulano")


def test_a_withdrawal_without_a_check_is_never_looked_up(account: Account, no_enqueue: list[Any]) -> None:
    sandbox(account, key_lookup="fail")  # a lookup would defer it
    withdrawal = withdraw(account, new_key(), payee_document="")

    assert run(withdrawal) == WithdrawalStatus.PAID
    assert withdrawal.payee_check == ""
    assert payee_lookups_today(account_id=account.pk) == 0


# --------------------------------------------------------------------------- same ownership only


def test_same_ownership_pays_only_keys_of_the_account_holder(account: Account, no_enqueue: list[Any]) -> None:
    Account.objects.filter(pk=account.pk).update(payouts_same_ownership_only=True)
    account.refresh_from_db()
    acquirer = sandbox(account)
    own_key, foreign_key = new_key(), new_key()
    register_key_owner(acquirer.key, "email", own_key, name="Loja Ltda", document=CNPJ)
    register_key_owner(acquirer.key, "email", foreign_key, name="Terceiro", document=OTHER_CPF)

    own = withdraw(account, own_key, payee_document="")
    foreign = withdraw(account, foreign_key, payee_document="")
    assert run(own) == WithdrawalStatus.PAID
    assert run(foreign) == WithdrawalStatus.FAILED
    assert foreign.failure_reason == err.PAYEE_MISMATCH
    assert own.payee_document_masked == "11.222.333/0001-81"
    assert_balanced(account, SEED - AMOUNT)


def test_request_time_refusals_need_no_lookup(
    account: Account, api: APIClient, refused: Refused, no_enqueue: list[Any]
) -> None:
    sandbox(account)
    body = {"amount": AMOUNT, "key_type": "cpf", "key_value": OTHER_CPF, "payee_document": CPF}
    refused(api, account, body, 400, {"success": False, "message": err.KEY_NOT_PAYEE, "data": None})

    Account.objects.filter(pk=account.pk).update(payouts_same_ownership_only=True)
    for body in (
        {"amount": AMOUNT, "key_type": "cpf", "key_value": CPF},
        {"amount": AMOUNT, "key_type": "cnpj", "key_value": "11.444.777/0001-61"},
        {"amount": AMOUNT, "key_type": "email", "key_value": new_key(), "payee_document": CPF},
    ):
        refused(api, account, body, 400, {"success": False, "message": err.SAME_OWNERSHIP_ONLY, "data": None})
    assert payee_lookups_today(account_id=account.pk) == 0

    # The holder's own CNPJ key needs no lookup to be accepted.
    ok = api.post("/api/withdrawals", {"amount": AMOUNT, "key_type": "cnpj", "key_value": CNPJ}, format="json")
    assert ok.status_code == 201, ok.content


# --------------------------------------------------------------------------- the approval screen, with the worker


def test_staff_see_the_owner_before_approving_and_the_send_reuses_that_check(
    celery_worker_process: Any, account: Account, admin_client: Any
) -> None:
    Account.objects.filter(pk=account.pk).update(withdrawals_need_approval=True)
    account.refresh_from_db()
    acquirer = sandbox(account)
    key = new_key()
    register_key_owner(acquirer.key, "email", key, name="Fulano de Tal", document=CPF)

    withdrawal = withdraw(account, key)

    # Looked up by the worker while pending (withdrawals.tasks.look_up_payee): nothing decided yet.
    def looked_up() -> Withdrawal | None:
        withdrawal.refresh_from_db()
        return withdrawal if withdrawal.payee_check else None

    wait_for(looked_up)
    assert (withdrawal.status, withdrawal.payee_check) == (WithdrawalStatus.PENDING, PayeeCheck.MATCHED)
    page = admin_client.get(reverse("admin:withdrawals_withdrawal_change", args=[withdrawal.pk])).content.decode()
    assert "Fulano de Tal (***.982.247-**), Sandbox Pagamentos S.A.: confere com 529.982.247-25" in page
    queue = admin_client.get(reverse("admin:withdrawals_withdrawal_changelist"), {"queue": "awaiting"})
    assert "Confere: Fulano de Tal" in queue.content.decode()
    account_page = admin_client.get(reverse("admin:accounts_account_change", args=[account.pk])).content.decode()
    assert "Consultas de titular (DICT) hoje" in account_page

    withdrawal_approve(withdrawal_id=withdrawal.pk, source="staff", actor="checker")

    def paid() -> Withdrawal | None:
        withdrawal.refresh_from_db()
        return withdrawal if withdrawal.status == WithdrawalStatus.PAID else None

    wait_for(paid)
    assert sends(withdrawal) == ["paid"]
    assert payee_lookups_today(account_id=account.pk) == 1  # the check staff saw, not a second lookup
    assert_balanced(account, SEED - AMOUNT)


def test_a_lookup_that_probes_a_cooled_down_circuit_closes_it_for_payouts(
    account: Account, monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    settings.ACQUIRER_BREAKER_ENABLED = True
    settings.ACQUIRER_BREAKER_COOLDOWN = 30
    now = [time.time()]
    monkeypatch.setattr(breaker, "clock", lambda: now[0])
    monkeypatch.setattr(breaker, "_suspended_until", 0.0)
    acquirer = sandbox(account)
    for _ in range(settings.ACQUIRER_BREAKER_FAILURES):
        breaker.record(acquirer, outcome="unavailable", latency_ms=5)
    assert not calls.admit(acquirer, "payout").allowed
    now[0] += 31  # the cool-down is over: the next call is the probe

    # The lookup is that probe; its answer (an owner, or "no such key") is the acquirer's health.
    owner = payees.key_owner(account=account, key_type="email", key_value=new_key(), amount=AMOUNT)
    assert owner is not None
    assert owner["found"]

    health = breaker.snapshot(acquirer)
    assert health is not None
    assert health.state is breaker.State.CLOSED
    assert calls.admit(acquirer, "payout").allowed
