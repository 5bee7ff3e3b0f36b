"""Failing an undetermined payout on staff's word (docs/api/withdrawals.md,
"Unclear payouts"): operations asks from *Pagamentos indeterminados* with the
acquirer's definitive answer as the reason; only another staff member with
``accounts.approve_undetermined_payout_failure`` (finance) carries it out,
through ``withdrawal_payout_resolve``, and only while nothing of ours may
still pay it. The payouts here became undetermined through the real engine."""

from __future__ import annotations

import datetime as dt
import threading
import uuid
from collections.abc import Callable
from typing import Any, ClassVar

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import Group, User
from django.db import connection, transaction
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from accounts.exceptions import ApprovalRefused
from accounts.models import Account, LedgerEntry, MoneyActionRequest
from accounts.selectors import available_balance, ledger_sum
from accounts.services import ledger_post, money_action_approve, money_action_request
from acquirers import adapters
from acquirers.adapters.base import (
    AcquirerUnavailable,
    PayoutRequest,
    PayoutResult,
    PayoutStatus,
)
from acquirers.models import Acquirer, AcquirerSlot
from acquirers.services import acquirer_slots_set
from tests.factories import AccountFactory, AcquirerFactory
from tests.helpers import admin_action, admin_messages
from tests.realworld import wait_for
from tests.withdrawals.payout_adapters import PayoutsOnly, paid
from withdrawals import exceptions as err
from withdrawals import services
from withdrawals.exceptions import PayoutUndetermined
from withdrawals.models import PayoutAttempt, UndeterminedPayout, Withdrawal, WithdrawalStatus, WithdrawalTransition
from withdrawals.payouts import withdrawal_payout_ask, withdrawal_process
from withdrawals.services import withdrawal_request

FAIL = MoneyActionRequest.Action.FAIL_UNDETERMINED_PAYOUT
QUEUE = reverse("admin:withdrawals_undeterminedpayout_changelist")
REQUESTS = reverse("admin:accounts_moneyactionrequest_changelist")
SEED = 20_000
AMOUNT = 5000  # the fee comes out of the transfer: total_debit == AMOUNT
ANSWER = "Adquirente, chamado 4471: idEnvio nunca recebido, não será pago"


@adapters.register
class Unsure(PayoutsOnly):
    """Takes a payout and hangs up without an answer; asked, it has never
    heard of it (``options["status"] = "paid"`` once it says it paid). With
    ``gate`` set, a send waits for it and then pays."""

    name = "test_unsure"
    sends: ClassVar[list[str]] = []
    gate: ClassVar[threading.Event | None] = None

    def create_payout(self, request: PayoutRequest) -> PayoutResult:
        self.sends.append(request.idempotency_id)
        if self.gate is None:
            raise AcquirerUnavailable("connection reset after the request was sent")
        assert self.gate.wait(timeout=20)
        return paid(request.idempotency_id)

    def get_payout_status(self, idempotency_id: str) -> PayoutResult:
        if self.options.get("status") == "paid":
            return paid(idempotency_id)
        return PayoutResult(status=PayoutStatus.NOT_FOUND)


# --------------------------------------------------------------------------- fixtures and helpers


@pytest.fixture
def unsure(db: Any) -> Acquirer:
    Unsure.sends = []
    Unsure.gate = None
    return AcquirerFactory(
        key="test_unsure_acq", adapter="test_unsure", options={}, connect_timeout_ms=100, read_timeout_ms=200
    )


@pytest.fixture
def account(db: Any, unsure: Acquirer, monkeypatch: pytest.MonkeyPatch) -> Account:
    # Runs are driven by the test itself, not by a worker.
    monkeypatch.setattr(services, "_enqueue_processing", lambda *args, **kwargs: None)
    account = AccountFactory(withdrawal_fee_fixed=100, withdrawal_fee_bps=100)
    with transaction.atomic():
        ledger_post(
            account_id=account.pk, amount=SEED, kind=LedgerEntry.Kind.CHARGE_PAID, reference=f"seed:{uuid.uuid4().hex}"
        )
    acquirer_slots_set(account=account, purpose=AcquirerSlot.Purpose.CASHOUT, acquirers=[unsure])
    return account


def undetermined(account: Account, *, past_window: bool = True, key: str = "52998224725") -> Withdrawal:
    """A withdrawal whose send went unanswered and that its acquirer says it
    never got: undetermined, its money still debited."""
    balance = available_balance(account)
    withdrawal = withdrawal_request(account=account, amount=AMOUNT, key_type="cpf", key_value=key)
    assert withdrawal_process(withdrawal_id=withdrawal.pk) == "approved"
    with pytest.raises(PayoutUndetermined):
        withdrawal_process(withdrawal_id=withdrawal.pk)
    if past_window:
        past = timezone.now() - services.payout_settle_window() - dt.timedelta(minutes=1)
        Withdrawal.objects.filter(pk=withdrawal.pk).update(payout_unclear_since=past)
    withdrawal.refresh_from_db()
    assert UndeterminedPayout.objects.filter(pk=withdrawal.pk).exists()
    assert withdrawal.total_debit == AMOUNT
    assert available_balance(account) == balance - AMOUNT
    return withdrawal


def staff(username: str, group: str) -> User:
    user = User.objects.create_user(username=username, password="x", is_staff=True)
    user.groups.add(Group.objects.get(name=group))
    return user


def state(withdrawal: Withdrawal) -> tuple[Any, ...]:
    withdrawal.refresh_from_db()
    return (
        withdrawal.status,
        withdrawal.payout_unclear_since,
        available_balance(withdrawal.account),
        LedgerEntry.objects.filter(account=withdrawal.account).count(),
        WithdrawalTransition.objects.filter(withdrawal=withdrawal).count(),
        PayoutAttempt.objects.filter(withdrawal=withdrawal).count(),
    )


def reversals(account: Account) -> list[int]:
    return list(
        LedgerEntry.objects.filter(account=account, kind=LedgerEntry.Kind.WITHDRAWAL_REVERSAL).values_list(
            "amount", flat=True
        )
    )


# --------------------------------------------------------------------------- asked, then approved by another


def test_operations_asks_finance_approves_and_the_debit_comes_back_once(
    staff_member: Callable[[str, str], Client], account: Account
) -> None:
    withdrawal = undetermined(account)
    maker = staff_member("operations", "olivia")
    before = state(withdrawal)

    confirm = admin_action(maker, QUEUE, "fail_undetermined", [withdrawal.pk])
    page = confirm.content.decode()
    assert "R$ 50,00" in page
    assert "outro membro da equipe precisa aprovar" in page
    asked = admin_action(maker, QUEUE, "fail_undetermined", [withdrawal.pk], reason=ANSWER)

    assert admin_messages(asked)[0].startswith("Falhar pagamento indeterminado (devolver o saldo): 1 pedido")
    pending = MoneyActionRequest.objects.get()
    assert (pending.action, pending.target_id, pending.amount, pending.reason, pending.state) == (
        FAIL,
        str(withdrawal.pk),
        AMOUNT,
        ANSWER,
        "pending",
    )
    assert state(withdrawal) == before  # asking moves nothing
    # Operations asks but may not approve.
    assert 'value="approve_requests"' not in maker.get(REQUESTS).content.decode()
    admin_action(maker, REQUESTS, "approve_requests", [pending.pk], reason="eu mesma")
    assert state(withdrawal) == before

    checker = staff_member("finance", "fernanda")
    done = admin_action(checker, REQUESTS, "approve_requests", [pending.pk], reason="chamado conferido")

    assert admin_messages(done) == ["1 pedido aprovado e executado."]
    pending.refresh_from_db()
    assert pending.state == "approved"
    assert pending.decided_by is not None
    assert pending.decided_by.get_username() == "fernanda"
    withdrawal.refresh_from_db()
    assert (withdrawal.status, withdrawal.payout_unclear_since) == (WithdrawalStatus.FAILED, None)
    assert available_balance(account) == SEED == ledger_sum(account)
    assert reversals(account) == [AMOUNT]
    transition = WithdrawalTransition.objects.filter(withdrawal=withdrawal).latest("id")
    assert (transition.from_status, transition.to_status, transition.source) == (
        WithdrawalStatus.APPROVED,
        WithdrawalStatus.FAILED,
        "staff",
    )
    assert transition.actor == f"fernanda (aprovou o pedido #{pending.pk} de olivia)"
    notice = PayoutAttempt.objects.filter(withdrawal=withdrawal).latest("id")
    assert (notice.acquirer.key, notice.action, notice.outcome) == ("test_unsure_acq", "notice", "failed")
    assert ANSWER in notice.error_message
    assert not UndeterminedPayout.objects.exists()
    # Both steps in the audit log of the withdrawal.
    logged = LogEntry.objects.filter(object_id=str(withdrawal.pk)).order_by("action_time")
    assert [(e.user.get_username(), e.change_message) for e in logged] == [
        (
            "olivia",
            f"Falhar pagamento indeterminado (devolver o saldo): pedido #{pending.pk} aguardando aprovação. "
            f"Motivo: {ANSWER}",
        ),
        (
            "fernanda",
            f"Aprovado pedido #{pending.pk} (Falhar pagamento indeterminado (devolver o saldo), R$ 50,00). "
            "Observação: chamado conferido",
        ),
    ]

    # Once only: approving again, or asking again, gives nothing more back.
    with pytest.raises(ApprovalRefused, match="já foi decidido"):
        money_action_approve(request_id=pending.pk, approver=staff("gabriel", "finance"))
    again = admin_action(maker, QUEUE, "fail_undetermined", [withdrawal.pk], reason=ANSWER)
    assert admin_messages(again) == [
        "Falhar pagamento indeterminado (devolver o saldo): nenhum registro selecionado está em um status que permita."
    ]
    assert MoneyActionRequest.objects.count() == 1
    assert available_balance(account) == SEED == ledger_sum(account)
    assert reversals(account) == [AMOUNT]


def test_the_requester_cannot_approve_their_own_request(account: Account, admin_client: Client) -> None:
    withdrawal = undetermined(account)
    second = undetermined(account, key="11144477735")
    admin_action(admin_client, QUEUE, "fail_undetermined", [withdrawal.pk], reason=ANSWER)
    pending = MoneyActionRequest.objects.get(action=FAIL)
    # Someone who asks and also holds the approval permission.
    operator = staff("olivia", "operations")
    operator.groups.add(Group.objects.get(name="finance"))
    operator = User.objects.get(pk=operator.pk)  # drop the cached permissions
    own = money_action_request(action=FAIL, target_id=second.pk, requested_by=operator, reason=ANSWER)
    before = (state(withdrawal), state(second))

    # Not even a superuser.
    response = admin_action(admin_client, REQUESTS, "approve_requests", [pending.pk], reason="aprovo")
    with pytest.raises(ApprovalRefused, match="foi feito por você"):
        money_action_approve(request_id=own.pk, approver=operator)

    assert admin_messages(response) == [f"O pedido #{pending.pk} foi feito por você: outra pessoa precisa decidi-lo."]
    assert (state(withdrawal), state(second)) == before
    assert list(MoneyActionRequest.objects.values_list("state", flat=True)) == ["pending", "pending"]
    assert reversals(account) == []


def test_support_and_operations_cannot_approve(staff_member: Callable[[str, str], Client], account: Account) -> None:
    withdrawal = undetermined(account)
    pending = money_action_request(
        action=FAIL, target_id=withdrawal.pk, requested_by=staff("olivia", "operations"), reason=ANSWER
    )
    before = state(withdrawal)

    for other in (staff("otavio", "operations"), staff("sofia", "support")):
        with pytest.raises(ApprovalRefused, match="Sem permissão"):
            money_action_approve(request_id=pending.pk, approver=other)
    # Support does not even see the action, and cannot ask.
    support = staff_member("support", "sara")
    queue = support.get(QUEUE)
    assert queue.status_code == 200
    assert 'value="fail_undetermined"' not in queue.content.decode()
    assert 'value="fail_undetermined"' in staff_member("operations", "otto").get(QUEUE).content.decode()
    admin_action(support, QUEUE, "fail_undetermined", [withdrawal.pk], reason=ANSWER)
    admin_action(support, REQUESTS, "approve_requests", [pending.pk], reason="x")

    assert state(withdrawal) == before
    pending.refresh_from_db()
    assert pending.state == "pending"
    assert MoneyActionRequest.objects.count() == 1


def test_a_reason_that_does_not_say_what_the_acquirer_answered_is_refused_when_asked(account: Account) -> None:
    withdrawal = undetermined(account)

    with pytest.raises(ApprovalRefused) as refused:
        money_action_request(
            action=FAIL, target_id=withdrawal.pk, requested_by=staff("olivia", "operations"), reason="ok"
        )

    assert refused.value.message == err.RESOLVE_REASON_REQUIRED
    assert not MoneyActionRequest.objects.exists()


# --------------------------------------------------------------------------- the payout moved on since the request


def test_a_payout_the_acquirer_settled_meanwhile_fails_the_request_and_nothing_comes_back(
    account: Account, unsure: Acquirer
) -> None:
    withdrawal = undetermined(account)
    pending = money_action_request(
        action=FAIL, target_id=withdrawal.pk, requested_by=staff("olivia", "operations"), reason=ANSWER
    )
    # Asked again, the acquirer now says it paid.
    Acquirer.objects.filter(pk=unsure.pk).update(options={"status": "paid"})
    assert withdrawal_payout_ask(withdrawal_id=withdrawal.pk) == WithdrawalStatus.PAID
    before = state(withdrawal)

    decided = money_action_approve(request_id=pending.pk, approver=staff("fernanda", "finance"))

    assert (decided.state, decided.outcome) == ("failed", err.RESOLVE_NOT_UNDETERMINED)
    assert state(withdrawal)[0] == WithdrawalStatus.PAID
    assert state(withdrawal) == before
    assert reversals(account) == []
    assert available_balance(account) == SEED - AMOUNT == ledger_sum(account)


@pytest.mark.django_db(transaction=True)
def test_approval_while_a_send_is_in_flight_fails_the_request_and_nothing_moves(account: Account) -> None:
    # Within the settle window: the acquirer says it never got the payout, so
    # the next run sends it again, to it alone, under the same id.
    withdrawal = undetermined(account, past_window=False)
    pending = money_action_request(
        action=FAIL, target_id=withdrawal.pk, requested_by=staff("olivia", "operations"), reason=ANSWER
    )
    Unsure.gate = threading.Event()
    results: list[str] = []

    def run() -> None:
        try:
            results.append(withdrawal_process(withdrawal_id=withdrawal.pk))
        except Exception as exc:  # noqa: BLE001 - reported through the results
            results.append(repr(exc))
        finally:
            connection.close()

    resend = threading.Thread(target=run)
    resend.start()
    try:
        wait_for(lambda: len(Unsure.sends) == 2, timeout=10)
        before = state(withdrawal)

        decided = money_action_approve(request_id=pending.pk, approver=staff("fernanda", "finance"))

        assert (decided.state, decided.outcome) == ("failed", err.PAYOUT_IN_FLIGHT)
        assert state(withdrawal) == before
        assert reversals(account) == []
    finally:
        Unsure.gate.set()
        resend.join(timeout=20)

    # That send paid: giving the debit back would have paid the withdrawal twice.
    assert results == [WithdrawalStatus.PAID]
    withdrawal.refresh_from_db()
    assert withdrawal.status == WithdrawalStatus.PAID
    assert Unsure.sends == [withdrawal.idempotency_id, withdrawal.idempotency_id]
    assert reversals(account) == []
    assert available_balance(account) == SEED - AMOUNT == ledger_sum(account)


def test_the_queue_shows_each_payouts_calls_and_late_answers_in_queries_not_per_row(
    account: Account, admin_client: Client
) -> None:
    from django.test.utils import CaptureQueriesContext

    first = undetermined(account)
    send = PayoutAttempt.objects.filter(withdrawal=first, action="send").first()
    assert send is not None
    PayoutAttempt.objects.filter(pk=send.pk).update(
        late_outcome="paid", late_detail="e2e_id=E123", late_at=timezone.now()
    )
    with CaptureQueriesContext(connection) as one:
        page = admin_client.get(QUEUE)
    assert page.status_code == 200
    assert "paid e2e_id=E123" in page.content.decode()
    assert page.context["cl"].result_list[0].attempts_made == PayoutAttempt.objects.filter(withdrawal=first).count()

    undetermined(account, key="11144477735")
    undetermined(account, key="39053344705")
    with CaptureQueriesContext(connection) as three:
        assert admin_client.get(QUEUE).status_code == 200
    assert len(three) == len(one)
