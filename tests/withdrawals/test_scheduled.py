"""Scheduled withdrawals (docs/api/scheduled-withdrawals.md): debited when
requested, pending until their America/Sao_Paulo day, sent that day by beat
through the payout engine, cancelable until sent; the daily limit counts them
on their day. With the real worker: nothing may send them early behind the
test's back."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.models import Account, AccountBalance, LedgerEntry
from accounts.selectors import available_balance, ledger_sum
from core import dispatch
from tests.factories import AccountFactory, AcquirerFactory
from tests.realworld import CeleryWorker, Receiver, wait_for
from tests.withdrawals.test_request import CPF, DAILY, client_of, error, fund
from webhooks.models import WebhookEvent
from webhooks.services import endpoint_create
from withdrawals import polling, schedule, services
from withdrawals.exceptions import SCHEDULED_CANCEL_REFUSED
from withdrawals.limits import SCHEDULE_MAX_DAYS, SCHEDULE_NOT_FUTURE, SCHEDULE_TOO_FAR, sao_paulo_today
from withdrawals.models import PayoutAttempt, Withdrawal, WithdrawalStatus, WithdrawalTransition
from withdrawals.payouts import ProcessOutcome, withdrawal_process
from withdrawals.selectors import SAO_PAULO, withdrawn_today

pytestmark = pytest.mark.django_db(transaction=True)

SEED = 100_000
AMOUNT = 5000
VALIDATION = "Erro de validação nos dados fornecidos"


@pytest.fixture
def worker(celery_worker_process: CeleryWorker) -> CeleryWorker:
    return celery_worker_process


@pytest.fixture
def account(db: Any) -> Account:
    account = AccountFactory(withdrawal_fee_fixed=0, withdrawal_fee_bps=0)
    fund(account, SEED)
    return account


@pytest.fixture
def api(account: Account) -> APIClient:
    return client_of(account)


def days(n: int) -> dt.date:
    return sao_paulo_today() + dt.timedelta(days=n)


def at_local(day: dt.date, hour: int = 0, minute: int = 10) -> dt.datetime:
    return dt.datetime(day.year, day.month, day.day, hour, minute, tzinfo=SAO_PAULO)


def schedule_via_api(api: APIClient, day: dt.date, amount: int = AMOUNT) -> Withdrawal:
    response = api.post(
        "/api/withdrawals", {"amount": amount, "key_value": CPF, "scheduled_for": day.isoformat()}, format="json"
    )
    assert response.status_code == 201, response.content
    assert response.json()["data"]["status"] == WithdrawalStatus.PENDING
    return Withdrawal.objects.get(pk=response.json()["data"]["id"])


def money(account: Account) -> tuple[int, list[tuple[str, int]]]:
    entries = LedgerEntry.objects.filter(account=account).order_by("id").values_list("kind", "amount")
    assert available_balance(account) == ledger_sum(account)
    return available_balance(account), list(entries)


def statuses_heard(withdrawal: Withdrawal) -> list[str]:
    rows = WebhookEvent.objects.filter(record_id=withdrawal.pk).order_by("created_at")
    return list(rows.values_list("status", flat=True))


def comes_due(withdrawal: Withdrawal) -> None:
    """Its day has come: the row as it stands on that day (scheduled for
    today, untouched since yesterday). The worker runs on the real clock."""
    Withdrawal.objects.filter(pk=withdrawal.pk).update(
        scheduled_for=sao_paulo_today(), updated_at=timezone.now() - dt.timedelta(days=1)
    )


# --------------------------------------------------------------------------- request


@pytest.mark.parametrize(
    ("offset", "message"),
    [(0, SCHEDULE_NOT_FUTURE), (-1, SCHEDULE_NOT_FUTURE), (SCHEDULE_MAX_DAYS + 1, SCHEDULE_TOO_FAR)],
    ids=["today", "yesterday", "too_far"],
)
def test_a_day_not_ahead_or_too_far_is_a_422_and_nothing_changes(
    account: Account, api: APIClient, offset: int, message: str
) -> None:
    before = money(account)
    response = api.post(
        "/api/withdrawals",
        {"amount": AMOUNT, "key_value": CPF, "scheduled_for": days(offset).isoformat()},
        format="json",
    )
    assert response.status_code == 422, response.content
    assert response.json() == {
        "success": False,
        "message": VALIDATION,
        "data": {"errors": {"scheduled_for": [message]}},
    }
    assert money(account) == before
    assert not Withdrawal.objects.exists()


def test_requested_it_is_debited_now_pending_and_never_sent_before_its_day(
    worker: CeleryWorker, account: Account, api: APIClient
) -> None:
    AcquirerFactory(key="sbx_sched", options={"charge": "ok", "payout": "ok"}, default_priority=1)
    withdrawal = schedule_via_api(api, days(SCHEDULE_MAX_DAYS))
    assert money(account) == (SEED - AMOUNT, [("charge_paid", SEED), ("withdrawal", -AMOUNT)])
    read = api.get(f"/api/withdrawals/{withdrawal.pk}").json()["data"]
    assert (read["status"], read["scheduled_for"]) == ("pending", days(SCHEDULE_MAX_DAYS).isoformat())

    # An immediate one goes through the same worker: it runs, and leaves the scheduled one alone.
    immediate = api.post("/api/withdrawals", {"amount": 1000, "key_value": CPF}, format="json").json()["data"]["id"]
    wait_for(lambda: Withdrawal.objects.get(pk=immediate).status == WithdrawalStatus.PAID)
    assert withdrawal_process(withdrawal_id=withdrawal.pk) == ProcessOutcome.SCHEDULED
    Withdrawal.objects.filter(pk=withdrawal.pk).update(updated_at=timezone.now() - dt.timedelta(hours=1))
    assert polling.payouts_poll(older_than=dt.timedelta(0)) == 0
    assert schedule.scheduled_payouts_release() == 0
    withdrawal.refresh_from_db()
    assert withdrawal.status == WithdrawalStatus.PENDING
    assert not PayoutAttempt.objects.filter(withdrawal=withdrawal).exists()
    assert money(account)[0] == SEED - AMOUNT - 1000


def test_beat_releases_the_days_due_ones_once(
    account: Account, api: APIClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent: list[Any] = []
    monkeypatch.setattr(dispatch, "enqueue", lambda task, *args, **kwargs: sent.append((task, args)))
    monkeypatch.setattr(services, "_enqueue_processing", lambda *args, **kwargs: None)
    tomorrow = schedule_via_api(api, days(1))
    later = schedule_via_api(api, days(2))
    Withdrawal.objects.update(updated_at=timezone.now() - dt.timedelta(minutes=5))

    assert schedule.scheduled_payouts_release(now=at_local(days(0), 23, 59)) == 0
    assert schedule.scheduled_payouts_release(now=at_local(days(1))) == 1
    assert sent == [("withdrawals.tasks.process_withdrawal", (str(tomorrow.pk),))]
    # Once it moved on its day (approved, sent) it is the poller's, not the release's.
    Withdrawal.objects.filter(pk=tomorrow.pk).update(updated_at=at_local(days(1), 0, 11))
    assert schedule.scheduled_payouts_release(now=at_local(days(1), 0, 20)) == 0
    assert len(sent) == 1  # nothing more: the later one waits for its own day
    # On its own day it goes (with tomorrow's, still pending here: an earlier day's is released again).
    assert schedule.scheduled_payouts_release(now=at_local(days(2))) == 2
    assert ("withdrawals.tasks.process_withdrawal", (str(later.pk),)) in sent[1:]


def test_on_its_day_it_is_sent_and_paid_through_the_sandbox(
    worker: CeleryWorker, account: Account, api: APIClient, receiver: Receiver
) -> None:
    acquirer = AcquirerFactory(key="sbx_day", options={"charge": "ok", "payout": "ok"}, default_priority=1)
    endpoint_create(account=account, url=receiver.url)
    withdrawal = schedule_via_api(api, days(1))
    comes_due(withdrawal)

    assert schedule.scheduled_payouts_release() == 1

    wait_for(lambda: Withdrawal.objects.get(pk=withdrawal.pk).status == WithdrawalStatus.PAID)
    withdrawal.refresh_from_db()
    assert withdrawal.acquirer_id == acquirer.pk
    assert withdrawal.e2e_id
    assert list(PayoutAttempt.objects.filter(withdrawal=withdrawal).values_list("action", "outcome")) == [
        ("send", "paid")
    ]
    assert statuses_heard(withdrawal) == ["approved", "paid"]
    # Debited once, when requested.
    assert money(account) == (SEED - AMOUNT, [("charge_paid", SEED), ("withdrawal", -AMOUNT)])


# --------------------------------------------------------------------------- cancel


def test_cancel_before_its_day_gives_the_money_back_with_a_webhook(
    worker: CeleryWorker, account: Account, api: APIClient, receiver: Receiver
) -> None:
    endpoint_create(account=account, url=receiver.url)
    withdrawal = schedule_via_api(api, days(3))

    response = api.post(f"/api/withdrawals/{withdrawal.pk}/cancel")

    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["success"], body["message"]) == (True, "Saque agendado cancelado.")
    assert (body["data"]["id"], body["data"]["status"]) == (str(withdrawal.pk), "canceled")
    assert money(account) == (
        SEED,
        [("charge_paid", SEED), ("withdrawal", -AMOUNT), ("withdrawal_reversal", AMOUNT)],
    )
    assert statuses_heard(withdrawal) == ["canceled"]
    [delivered] = receiver.wait_for_requests(1)
    assert json.loads(delivered.body)["data"]["status"] == "canceled"
    # Canceled twice: a 409, nothing moves.
    again = api.post(f"/api/withdrawals/{withdrawal.pk}/cancel")
    assert (again.status_code, again.json()) == (409, error(SCHEDULED_CANCEL_REFUSED))
    assert money(account)[0] == SEED


def test_cancel_of_anything_but_a_waiting_scheduled_one_is_a_409(
    account: Account, api: APIClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(services, "_enqueue_processing", lambda *args, **kwargs: None)
    immediate = services.withdrawal_request(account=account, amount=AMOUNT, key_type="cpf", key_value=CPF)
    sent = schedule_via_api(api, days(1))
    services.withdrawal_approve(withdrawal_id=sent.pk, source="staff")
    # A send on record (its day came and went, then the row says tomorrow again: never mind how).
    PayoutAttempt.objects.create(
        withdrawal=sent, acquirer=AcquirerFactory(key="sbx_409"), action="send", outcome="processing", latency_ms=1
    )
    before = money(account)

    for withdrawal in (immediate, sent):
        response = api.post(f"/api/withdrawals/{withdrawal.pk}/cancel")
        assert (response.status_code, response.json()) == (409, error(SCHEDULED_CANCEL_REFUSED))

    assert money(account) == before
    assert set(Withdrawal.objects.values_list("status", flat=True)) == {"pending", "approved"}


def test_another_accounts_withdrawal_is_a_404(account: Account, api: APIClient) -> None:
    other = AccountFactory()
    fund(other, SEED)
    theirs = schedule_via_api(client_of(other), days(1))
    response = api.post(f"/api/withdrawals/{theirs.pk}/cancel")
    assert (response.status_code, response.json()) == (404, error("Saque não encontrado."))
    assert api.post("/api/withdrawals/nope/cancel").status_code == 404
    theirs.refresh_from_db()
    assert theirs.status == WithdrawalStatus.PENDING


def test_approved_early_it_waits_for_its_day_and_may_still_be_canceled(
    worker: CeleryWorker, monkeypatch: pytest.MonkeyPatch
) -> None:
    account = AccountFactory(withdrawal_fee_fixed=0, withdrawal_fee_bps=0, withdrawals_need_approval=True)
    fund(account, SEED)
    api = client_of(account)
    AcquirerFactory(key="sbx_early", options={"charge": "ok", "payout": "ok"}, default_priority=1)
    withdrawal = schedule_via_api(api, days(2))

    assert services.withdrawal_approve(withdrawal_id=withdrawal.pk, source=WithdrawalTransition.Source.STAFF)
    assert withdrawal_process(withdrawal_id=withdrawal.pk) == ProcessOutcome.SCHEDULED
    withdrawal.refresh_from_db()
    assert withdrawal.status == WithdrawalStatus.APPROVED
    assert not PayoutAttempt.objects.filter(withdrawal=withdrawal).exists()

    response = api.post(f"/api/withdrawals/{withdrawal.pk}/cancel")
    assert response.status_code == 200, response.content
    assert response.json()["data"]["status"] == "canceled"
    assert money(account)[0] == SEED
    assert not PayoutAttempt.objects.filter(withdrawal=withdrawal).exists()


# --------------------------------------------------------------------------- the daily limit, on the day


def day_row(account: Account) -> tuple[dt.date | None, int]:
    row: tuple[dt.date | None, int] = AccountBalance.objects.values_list("withdrawn_day", "withdrawn_on_day").get(
        account=account
    )
    return row


def test_limits_count_on_the_scheduled_day(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(services, "_enqueue_processing", lambda *args, **kwargs: None)
    account = AccountFactory(withdrawal_fee_fixed=0, withdrawal_fee_bps=0, withdrawal_daily_limit=10_000)
    fund(account, SEED)
    api = client_of(account)
    assert api.post("/api/withdrawals", {"amount": 8000, "key_value": CPF}, format="json").status_code == 201

    # Tomorrow's limit is whole: today's 8000 do not count there.
    tomorrow = schedule_via_api(api, days(1), amount=10_000)
    over = api.post(
        "/api/withdrawals", {"amount": 1000, "key_value": CPF, "scheduled_for": days(1).isoformat()}, format="json"
    )
    assert (over.status_code, over.json()) == (400, error(DAILY))
    # Nor does tomorrow's count today; the row stays today's.
    assert day_row(account) == (days(0), 8000) == (days(0), withdrawn_today(account))
    balance = api.get("/api/withdrawals/balance").json()["data"]
    assert balance["daily_limit_remaining"] == 2000
    assert api.post("/api/withdrawals", {"amount": 2000, "key_value": CPF}, format="json").status_code == 201
    # On its day the day's sum has it, and has none of today's.
    assert withdrawn_today(account, now=at_local(days(1))) == 10_000

    # Canceled: tomorrow's limit is free again.
    assert api.post(f"/api/withdrawals/{tomorrow.pk}/cancel").status_code == 200
    assert withdrawn_today(account, now=at_local(days(1))) == 0
    schedule_via_api(api, days(1), amount=10_000)
    assert day_row(account) == (days(0), 10_000)
    assert available_balance(account) == ledger_sum(account) == SEED - 20_000


def test_on_its_day_the_rows_total_includes_it_and_a_failure_gives_it_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(services, "_enqueue_processing", lambda *args, **kwargs: None)
    account = AccountFactory(withdrawal_fee_fixed=0, withdrawal_fee_bps=0, withdrawal_daily_limit=10_000)
    fund(account, SEED)
    api = client_of(account)
    withdrawal = schedule_via_api(api, days(1), amount=6000)
    comes_due(withdrawal)  # today is its day now
    AccountBalance.objects.filter(account=account).update(withdrawn_day=days(-1), withdrawn_on_day=123)

    over = api.post("/api/withdrawals", {"amount": 4001, "key_value": CPF}, format="json")
    assert (over.status_code, over.json()) == (400, error(DAILY))
    assert api.post("/api/withdrawals", {"amount": 4000, "key_value": CPF}, format="json").status_code == 201
    assert day_row(account) == (days(0), 10_000) == (days(0), withdrawn_today(account))
    with transaction.atomic():
        services.withdrawal_transition(
            withdrawal_id=withdrawal.pk, to_status=WithdrawalStatus.FAILED, source="test", reason="recusado"
        )
    assert day_row(account) == (days(0), 4000) == (days(0), withdrawn_today(account))


# --------------------------------------------------------------------------- a scheduled payout racing a MED block


@pytest.mark.parametrize("round_", range(3))
def test_a_scheduled_payout_racing_a_med_block_keeps_the_ledger_exact(
    round_: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The block is taken while the scheduled request is made, then another
    one while its payout is sent on its day: each thread on its own
    PostgreSQL connection. Whatever the order, the ledger equals the
    balance, nothing is ever below zero, and the withdrawal is debited once."""
    from infractions.services import infraction_apply
    from tests.infractions.conftest import LIQUID, books, paid_charge_of, record
    from tests.realworld import run_concurrently

    monkeypatch.setattr(services, "_enqueue_processing", lambda *args, **kwargs: None)
    acquirer = AcquirerFactory(key=f"sbx_med{round_}", options={"charge": "ok", "payout": "ok"}, default_priority=1)
    account = AccountFactory(withdrawal_fee_fixed=0, withdrawal_fee_bps=0)
    first, second = paid_charge_of(account, acquirer), paid_charge_of(account, acquirer)

    def schedule_it() -> Withdrawal:
        return services.withdrawal_request(
            account=account, amount=LIQUID, key_type="cpf", key_value=CPF, scheduled_for=days(1)
        )

    requested, blocked = run_concurrently(
        [schedule_it, lambda: infraction_apply(acquirer=acquirer, record=record(first, external_id="inf-a"))]
    )
    assert not isinstance(blocked, Exception), blocked
    books(account)  # ledger == balance, held == the open blocks
    if not isinstance(requested, Withdrawal):
        assert requested.message == "Saldo insuficiente para realizar o saque."
        requested = schedule_it()  # the second charge's money is free
    comes_due(requested)

    processed, blocked_again = run_concurrently(
        [
            lambda: withdrawal_process(withdrawal_id=requested.pk),
            lambda: infraction_apply(acquirer=acquirer, record=record(second, external_id="inf-b")),
        ]
    )
    assert not isinstance(blocked_again, Exception), blocked_again
    withdrawal_process(withdrawal_id=requested.pk)  # approved first: this run sends
    requested.refresh_from_db()
    assert requested.status == WithdrawalStatus.PAID, processed
    books(account)
    assert not LedgerEntry.objects.filter(account=account, balance_after__lt=0).exists()
    assert LedgerEntry.objects.filter(account=account, kind="withdrawal").count() == 1
    assert available_balance(account) == ledger_sum(account)


# --------------------------------------------------------------------------- back office


def test_the_back_office_lists_filters_and_cancels_scheduled_ones(
    admin_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from django.urls import reverse

    from tests.helpers import admin_action, admin_messages

    monkeypatch.setattr(services, "_enqueue_processing", lambda *args, **kwargs: None)
    account = AccountFactory(withdrawal_fee_fixed=0, withdrawal_fee_bps=0, withdrawals_need_approval=True)
    fund(account, SEED)
    api = client_of(account)
    waiting = schedule_via_api(api, days(5))
    immediate = services.withdrawal_request(account=account, amount=AMOUNT, key_type="cpf", key_value=CPF)
    for withdrawal in (waiting, immediate):
        services.withdrawal_approve(withdrawal_id=withdrawal.pk, source=WithdrawalTransition.Source.STAFF)
    changelist = reverse("admin:withdrawals_withdrawal_changelist")

    page = admin_client.get(changelist, {"scheduled": "waiting"}).content.decode()
    assert "Agendado para" in page
    assert "Aguardando o dia agendado" in page
    assert str(waiting.pk) in page
    assert str(immediate.pk) not in page
    by_date = admin_client.get(changelist, {"scheduled_for__gte": days(5).isoformat()}).content.decode()
    assert str(waiting.pk) in by_date
    assert str(immediate.pk) not in by_date

    response = admin_action(
        admin_client, changelist, "cancel_scheduled", [waiting.pk, immediate.pk], reason="fornecedor pediu"
    )

    assert response.status_code == 200
    assert "Cancelar agendamento aprovado (devolve o saldo): 1 saque." in admin_messages(response)
    waiting.refresh_from_db()
    immediate.refresh_from_db()
    assert (waiting.status, immediate.status) == (WithdrawalStatus.CANCELED, WithdrawalStatus.APPROVED)
    assert money(account)[0] == SEED - AMOUNT
