"""Payout batches with a real Celery worker and the sandbox acquirer, and
under real PostgreSQL concurrency: staff's one approval sends every item
and the batch ends once, with one ``payout_batch`` webhook; a refusal gives
every debit back; approval follows the single withdrawal's permission and
segregation of duties; a batch racing single withdrawals of the same
account never overdraws nor passes the day's limit; items finishing at the
same moment end their batch exactly once."""

from __future__ import annotations

import datetime as dt
import threading
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.db import close_old_connections, transaction
from django.urls import reverse

from accounts.credential_links import credential_issue_for_claim, credential_link_send
from accounts.exceptions import SegregationOfDuties
from accounts.models import Account, AccountBalance, LedgerEntry
from accounts.selectors import available_balance, ledger_sum
from accounts.services import credential_issue, ledger_post
from acquirers.adapters.sandbox_keys import register_key_owner
from acquirers.models import AcquirerSlot
from acquirers.services import acquirer_slots_set
from core.exceptions import AccessDenied, BusinessRuleError, ConflictError
from tests.conftest import client_for
from tests.factories import AccountFactory, AcquirerFactory
from tests.realworld import CeleryWorker, wait_for
from tests.withdrawals.conftest import snapshot
from webhooks.models import WebhookEvent
from webhooks.services import event_emit
from withdrawals import batches, services
from withdrawals.batches import payout_batch_approve, payout_batch_create, payout_batch_refuse, payout_batches_sweep
from withdrawals.models import PayoutBatch, Withdrawal, WithdrawalStatus, WithdrawalTransition
from withdrawals.services import withdrawal_request, withdrawal_transition

pytestmark = pytest.mark.django_db(transaction=True)

CPF = "52998224725"


def seed(account: Account, amount: int) -> None:
    with transaction.atomic():
        ledger_post(
            account_id=account.pk,
            amount=amount,
            kind=LedgerEntry.Kind.CHARGE_PAID,
            reference=f"seed:{uuid.uuid4().hex}",
        )


def items(*amounts: int) -> list[dict[str, Any]]:
    return [{"amount": a, "key_type": "cpf", "key_value": CPF, "external_id": f"i{n}"} for n, a in enumerate(amounts)]


def staff(username: str, *groups: str) -> User:
    user = User.objects.create_user(username=username, password="x", is_staff=True)
    user.groups.add(*Group.objects.filter(name__in=groups))
    return User.objects.get(pk=user.pk)


def batch_events(batch: PayoutBatch) -> list[WebhookEvent]:
    return list(WebhookEvent.objects.filter(record_id=batch.pk, event_type="payout_batch"))


@pytest.fixture
def needs_approval(db: Any) -> Account:
    account = AccountFactory(
        withdrawals_need_approval=True,
        email="financeiro@lote.example.com",
        withdrawal_fee_fixed=100,
        withdrawal_fee_bps=0,
    )
    seed(account, 100_000)
    acquirer = AcquirerFactory(key="batch_sandbox", options={"charge": "ok", "payout": "ok"})
    acquirer_slots_set(account=account, purpose=AcquirerSlot.Purpose.CASHOUT, acquirers=[acquirer])
    return account


def test_one_approval_sends_every_item_and_the_batch_ends_once(
    needs_approval: Account, celery_worker_process: CeleryWorker
) -> None:
    batch = payout_batch_create(account=needs_approval, items=items(5000, 3000, 2000))
    assert batch.status == PayoutBatch.Status.AWAITING_APPROVAL
    nobody = staff("nobody")
    with pytest.raises(AccessDenied):
        payout_batch_approve(batch_id=batch.pk, staff=nobody)
    insider = staff("olivia", "operations")
    credential_link_send(
        credential_id=credential_issue_for_claim(account=needs_approval, permission="all").pk, sent_by=insider
    )
    before = snapshot(needs_approval)
    with pytest.raises(SegregationOfDuties):
        payout_batch_approve(batch_id=batch.pk, staff=insider)
    assert snapshot(needs_approval) == before
    batch.refresh_from_db()
    assert batch.status == PayoutBatch.Status.AWAITING_APPROVAL
    # Nothing sent while it waits: the items stay pending.
    assert set(Withdrawal.objects.filter(batch=batch).values_list("status", flat=True)) == {"pending"}

    checker = staff("carla", "operations")
    assert payout_batch_approve(batch_id=batch.pk, staff=checker) == 3

    def ended() -> PayoutBatch | None:
        batch.refresh_from_db()
        return batch if batch.status == PayoutBatch.Status.COMPLETED else None

    wait_for(ended, timeout=30)
    assert batch.decided_by == "carla"
    assert batch.completed_at is not None
    assert set(Withdrawal.objects.filter(batch=batch).values_list("status", flat=True)) == {"paid"}
    for withdrawal in Withdrawal.objects.filter(batch=batch):
        statuses = WebhookEvent.objects.filter(record_id=withdrawal.pk).values_list("status", flat=True)
        assert list(statuses.order_by("created_at")) == ["approved", "paid"]
    [event] = batch_events(batch)
    assert event.status == "completed"
    assert event.data["counts"]["paid"] == 3
    assert event.data["amounts"]["paid"] == 10_000
    assert available_balance(needs_approval) == ledger_sum(needs_approval) == 100_000 - 10_000
    # What the merchant reads: the progress and the results file.
    api = client_for(credential_issue(account=needs_approval))
    read = api.get(f"/api/withdrawals/batches/{batch.pk}").json()["data"]
    assert (read["status"], read["counts"]["paid"], read["amounts"]["paid"]) == ("completed", 3, 10_000)
    assert read == event.data
    csv = api.get(f"/api/withdrawals/batches/{batch.pk}/items.csv").content.decode("utf-8-sig").splitlines()
    rows = [line.split(";") for line in csv[1:]]
    assert [(r[0], r[1], r[8]) for r in rows] == [("0", "i0", "paid"), ("1", "i1", "paid"), ("2", "i2", "paid")]
    assert all(r[9].startswith("E") and r[11] for r in rows)  # e2e id and paid_at
    # Deciding again changes nothing; refusing now is a conflict.
    assert payout_batch_approve(batch_id=batch.pk, staff=checker) == 0
    with pytest.raises(ConflictError):
        payout_batch_refuse(batch_id=batch.pk, staff=checker)
    assert len(batch_events(batch)) == 1


def test_a_refused_batch_gives_every_debit_back(needs_approval: Account) -> None:
    before = available_balance(needs_approval)
    batch = payout_batch_create(account=needs_approval, items=items(5000, 3000))
    assert available_balance(needs_approval) == before - 8000
    assert payout_batch_refuse(batch_id=batch.pk, staff=staff("carla", "operations")) == 2
    batch.refresh_from_db()
    assert batch.status == PayoutBatch.Status.CANCELED
    assert batch.completed_at is not None
    assert set(Withdrawal.objects.filter(batch=batch).values_list("status", flat=True)) == {"canceled"}
    assert available_balance(needs_approval) == ledger_sum(needs_approval) == before
    assert AccountBalance.objects.get(account=needs_approval).withdrawn_on_day == 0
    [event] = batch_events(batch)
    assert event.status == "canceled"
    assert event.data["counts"]["canceled"] == 2


def test_a_batch_racing_single_withdrawals_never_overdraws_nor_passes_the_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(batches, "_enqueue_items", lambda ids: None)
    monkeypatch.setattr("withdrawals.services._enqueue_processing", lambda *a, **k: None)
    account = AccountFactory(withdrawal_fee_fixed=0, withdrawal_fee_bps=0, withdrawal_daily_limit=60_000)
    seed(account, 50_000)
    outcomes: list[str] = []
    barrier = threading.Barrier(6)  # with the test's own connection, within the pool (8)

    def run(work: Any) -> None:
        barrier.wait()
        try:
            work()
            outcomes.append("ok")
        except BusinessRuleError as refused:
            outcomes.append(refused.message)
        finally:
            close_old_connections()

    works: list[Callable[[], object]] = [lambda: payout_batch_create(account=account, items=items(*[5000] * 6))] * 2
    works += [lambda: withdrawal_request(account=account, amount=10_000, key_type="cpf", key_value=CPF)] * 4
    threads = [threading.Thread(target=run, args=(w,)) for w in works]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    debited = sum(Withdrawal.objects.filter(account=account).values_list("total_debit", flat=True))
    assert outcomes.count("ok") >= 1
    assert debited <= 50_000
    assert available_balance(account) == ledger_sum(account) == 50_000 - debited >= 0
    refusals = {o for o in outcomes if o != "ok"}
    assert refusals <= {"Saldo insuficiente para realizar o saque.", "O valor excede o limite diário de saques."}
    day_total = AccountBalance.objects.get(account=account).withdrawn_on_day
    assert day_total == sum(Withdrawal.objects.filter(account=account).values_list("amount", flat=True)) <= 60_000
    # Every batch whole or absent.
    for batch in PayoutBatch.objects.filter(account=account):
        assert batch.items.count() == 6


def test_items_finishing_together_end_their_batch_exactly_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(batches, "_enqueue_items", lambda ids: None)
    monkeypatch.setattr("withdrawals.services._enqueue_processing", lambda *a, **k: None)
    account = AccountFactory(withdrawal_fee_fixed=0, withdrawal_fee_bps=0)
    seed(account, 100_000)
    # Six: the threads and the test's own connection fit the pool (DB_POOL_MAX_SIZE, 8).
    batch = payout_batch_create(account=account, items=items(*[1000] * 6))
    ids = list(Withdrawal.objects.filter(batch=batch).values_list("pk", flat=True))
    for pk in ids:
        withdrawal_transition(withdrawal_id=pk, to_status=WithdrawalStatus.APPROVED, source="system")
    barrier = threading.Barrier(len(ids))
    changed = threading.Barrier(len(ids), timeout=20)
    emit = event_emit

    def emit_when_all_changed(**kwargs: Any) -> Any:
        # Every item's transaction has changed its row, uncommitted, before
        # any looks at its batch: all of them overlap.
        changed.wait()
        return emit(**kwargs)

    monkeypatch.setattr(services, "event_emit", emit_when_all_changed)

    def finish(n: int, pk: uuid.UUID) -> None:
        barrier.wait()
        try:
            # Paid: no ledger effect, so no balance lock orders them; only the batch's can.
            to_status = WithdrawalStatus.PAID
            withdrawal_transition(
                withdrawal_id=pk, to_status=to_status, source=WithdrawalTransition.Source.SYSTEM, e2e_id=f"E{pk.hex}"
            )
        finally:
            close_old_connections()

    threads = [threading.Thread(target=finish, args=(n, pk)) for n, pk in enumerate(ids)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    batch.refresh_from_db()
    assert batch.status == PayoutBatch.Status.COMPLETED
    [event] = batch_events(batch)
    assert event.data["counts"]["paid"] == 6
    assert available_balance(account) == ledger_sum(account) == 100_000 - 6000


def test_the_sweep_finishes_a_decision_cut_midway(monkeypatch: pytest.MonkeyPatch, needs_approval: Account) -> None:
    monkeypatch.setattr("withdrawals.services._enqueue_processing", lambda *a, **k: None)
    batch = payout_batch_create(account=needs_approval, items=items(5000, 3000))
    # Staff's approval recorded, then the process died before moving the items.
    PayoutBatch.objects.filter(pk=batch.pk).update(
        status=PayoutBatch.Status.PROCESSING, decided_by="carla", decided_at=batch.created_at
    )
    assert payout_batches_sweep(older_than=dt.timedelta(0)) == 1
    assert set(Withdrawal.objects.filter(batch=batch).values_list("status", flat=True)) == {"approved"}
    actors = set(WithdrawalTransition.objects.filter(withdrawal__batch=batch).values_list("source", "actor"))
    assert actors == {("system", "carla")}


def cancel_first(item: Withdrawal, monkeypatch: pytest.MonkeyPatch) -> None:
    """Staff cancel ``item`` on its own (a single withdrawal's action) right
    after a decision listed the batch's pending items, before it moves them."""
    real = services.withdrawal_transition
    done: list[bool] = []

    def racing(**kwargs: Any) -> bool:
        if not done and Withdrawal.objects.filter(pk=kwargs["withdrawal_id"], batch_id=item.batch_id).exists():
            done.append(True)
            real(withdrawal_id=item.pk, to_status=WithdrawalStatus.CANCELED, source="staff", actor="ana")
        return real(**kwargs)

    monkeypatch.setattr(batches, "withdrawal_transition", racing)


def test_an_item_canceled_on_its_own_meanwhile_does_not_stop_the_approval(
    monkeypatch: pytest.MonkeyPatch, needs_approval: Account, celery_worker_process: CeleryWorker
) -> None:
    batch = payout_batch_create(account=needs_approval, items=items(5000, 3000, 2000))
    second = Withdrawal.objects.get(batch=batch, batch_index=1)
    cancel_first(second, monkeypatch)
    assert payout_batch_approve(batch_id=batch.pk, staff=staff("carla", "operations")) == 2

    def ended() -> PayoutBatch | None:
        batch.refresh_from_db()
        return batch if batch.status == PayoutBatch.Status.COMPLETED else None

    wait_for(ended, timeout=30)
    statuses = dict(Withdrawal.objects.filter(batch=batch).values_list("batch_index", "status"))
    assert statuses == {0: "paid", 1: "canceled", 2: "paid"}
    # The cancel stands: its debit came back; the batch ended once.
    assert available_balance(needs_approval) == ledger_sum(needs_approval) == 100_000 - 7000
    [event] = batch_events(batch)
    assert (event.data["counts"]["paid"], event.data["counts"]["canceled"]) == (2, 1)


def test_the_sweep_goes_on_past_a_batch_whose_item_was_canceled_meanwhile(
    monkeypatch: pytest.MonkeyPatch, needs_approval: Account
) -> None:
    monkeypatch.setattr("withdrawals.services._enqueue_processing", lambda *a, **k: None)
    first = payout_batch_create(account=needs_approval, items=items(5000, 3000))
    second = payout_batch_create(account=needs_approval, items=items(2000))
    for batch in (first, second):  # approvals cut midway
        PayoutBatch.objects.filter(pk=batch.pk).update(
            status=PayoutBatch.Status.PROCESSING, decided_by="carla", decided_at=batch.created_at
        )
    cancel_first(Withdrawal.objects.get(batch=first, batch_index=1), monkeypatch)
    assert payout_batches_sweep(older_than=dt.timedelta(0)) == 2
    moved = Withdrawal.objects.filter(batch__in=(first, second))
    statuses = set(moved.values_list("batch_id", "batch_index", "status"))
    assert statuses == {(first.pk, 0, "approved"), (first.pk, 1, "canceled"), (second.pk, 0, "approved")}
    assert available_balance(needs_approval) == ledger_sum(needs_approval) == 100_000 - 5000 - 2000


def test_items_awaiting_approval_are_looked_up_for_the_approving_staff(
    needs_approval: Account, celery_worker_process: CeleryWorker, admin_client: Any
) -> None:
    """As a single withdrawal awaiting approval: each item expecting a
    document has its key's owner looked up by the worker, shown on the
    batch's page; nothing decided, the items stay pending."""
    owner_key, stranger_key = (f"fornecedor.{uuid.uuid4().hex[:10]}@example.com" for _ in range(2))
    register_key_owner("batch_sandbox", "email", owner_key, name="Fulano de Tal", document=CPF)
    register_key_owner("batch_sandbox", "email", stranger_key, name="Beltrano Silva", document="11144477735")
    batch = payout_batch_create(
        account=needs_approval,
        items=[
            {"amount": 2000, "key_type": "email", "key_value": owner_key, "payee_document": CPF},
            {"amount": 2000, "key_type": "email", "key_value": stranger_key, "payee_document": CPF},
            {"amount": 2000, "key_type": "cpf", "key_value": CPF},  # no document expected: not looked up
        ],
    )

    def looked_up() -> dict[int | None, tuple[str, str]] | None:
        found = {
            index: (check, name)
            for index, check, name in Withdrawal.objects.filter(batch=batch).values_list(
                "batch_index", "payee_check", "payee_name"
            )
        }
        return found if found[0][0] and found[1][0] else None

    found = wait_for(looked_up)
    assert found == {0: ("matched", "Fulano de Tal"), 1: ("mismatch", "Beltrano Silva"), 2: ("", "")}
    assert set(Withdrawal.objects.filter(batch=batch).values_list("status", flat=True)) == {"pending"}
    page = admin_client.get(reverse("admin:withdrawals_payoutbatch_change", args=[batch.pk])).content.decode()
    assert "Titular no DICT" in page
    assert "Confere: Fulano de Tal" in page
    assert "Não confere: Beltrano Silva" in page
