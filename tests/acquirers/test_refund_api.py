"""Refunds by API (``POST /api/transactions/{id}/refund``): the amount is
reserved at the request, the acquirer (the fake API Pix PSP on loopback) is
asked after the commit by a task, and its answer finishes the refund:
returned (one net debit, the ``refunded`` event), not made (the reservation
back), or unknown (nothing released, asked again). Refusals change nothing
and call nobody. Balance equals the ledger throughout."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from celery.exceptions import Retry
from django.conf import settings
from django.contrib.messages import get_messages
from django.core.cache import cache
from django.db import transaction
from django.test import TestCase
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.models import Account, ApiCredential, LedgerEntry
from accounts.selectors import available_balance, ledger_sum
from accounts.services import ledger_post
from acquirers import capacity
from acquirers.models import Acquirer
from api.idempotency import KEY_REUSED
from payments import exceptions as err
from payments import refunds
from payments.devolucao_answers import DEVOLUCAO_GRACE
from payments.models import Charge, ChargeRefund, ChargeStatus
from payments.refunds import RefundOutcome, refund_id_for
from payments.services import charge_transition
from payments.tasks import pursue_refund, sweep_refunds
from tests import realworld
from tests.acquirers.conftest import NOTIFY_TOKEN, warm_up
from tests.acquirers.fake_psp import FakePsp, Fault
from tests.conftest import client_for
from tests.factories import AccountFactory, AcquirerFactory
from tests.helpers import admin_action
from webhooks.models import WebhookDelivery, WebhookEvent
from webhooks.services import endpoint_create
from withdrawals.models import Withdrawal
from withdrawals.services import withdrawal_request

LIQUID = 955  # 1000 - (30 + 1.5 %)
SEED = 1000
BODY = {
    "payment_method": "pix",
    "amount": 1000,
    "buyer": {"buyer_name": "Fulano", "buyer_document": "52998224725", "buyer_phone": "11999998888"},
}
CALLBACK = f"/api/acquirers/bacen/notifications/{NOTIFY_TOKEN}/pix"
CHARGES = reverse("admin:payments_charge_changelist")


@pytest.fixture
def account(db: Any) -> Account:
    # Withdrawals wait for staff: nothing is sent to a broker behind the test's back.
    account = AccountFactory(cashin_fee_fixed=30, cashin_fee_bps=150, withdrawals_need_approval=True)
    with transaction.atomic():
        ledger_post(
            account_id=account.pk, amount=SEED, kind=LedgerEntry.Kind.CHARGE_PAID, reference=f"seed:{uuid.uuid4().hex}"
        )
    return account


@pytest.fixture
def handed(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The refunds handed to a worker after a commit (the task is run by the test)."""
    ids: list[int] = []
    monkeypatch.setattr(refunds, "refund_pursue_later", lambda *, refund_id, countdown=0: ids.append(refund_id))
    return ids


def callback(fake_psp: FakePsp, e2e_id: str) -> Any:
    body = json.dumps(fake_psp.callback_body([e2e_id])).encode()
    return APIClient().post(CALLBACK, data=body, content_type="application/json")


def new_charge(api: APIClient) -> Charge:
    response = api.post("/api/transactions", BODY, format="json")
    assert response.status_code == 201, response.content
    return Charge.objects.get(pk=response.json()["data"]["id"])


def pay(charge: Charge, fake_psp: FakePsp) -> Charge:
    assert callback(fake_psp, fake_psp.pay(charge.txid)).status_code == 200
    charge.refresh_from_db()
    assert charge.status == ChargeStatus.PAID
    return charge


@pytest.fixture
def paid_charge(api: APIClient, bacen_acquirer: Acquirer, fake_psp: FakePsp, account: Account) -> Charge:
    charge = pay(new_charge(api), fake_psp)
    assert available_balance(account) == SEED + LIQUID == ledger_sum(account)
    return charge


def refund(api: APIClient, charge: Charge | str, body: Any = None, key: str | None = "k1") -> Any:
    headers = {"Idempotency-Key": key} if key else {}
    charge_id = charge.pk if isinstance(charge, Charge) else charge
    # What runs after the commit runs here too (the test's own transaction never commits).
    with TestCase.captureOnCommitCallbacks(execute=True):
        return api.post(f"/api/transactions/{charge_id}/refund", body, format="json", headers=headers)


def kinds(account: Account) -> list[tuple[str, int]]:
    # Past the seed and the charge's credit.
    return [(e.kind, e.amount) for e in LedgerEntry.objects.filter(account=account).order_by("id")][2:]


def devolucao_calls(fake_psp: FakePsp) -> int:
    return len(fake_psp.calls_of("devolucao.put")) + len(fake_psp.calls_of("devolucao.get"))


def state(account: Account, charge: Charge) -> tuple[Any, ...]:
    """Everything a refused request must leave alone."""
    charge.refresh_from_db()
    entries = list(LedgerEntry.objects.filter(account=account).order_by("id").values_list("id", flat=True))
    refunds_of = list(ChargeRefund.objects.filter(charge=charge).values_list("id", "status"))
    return available_balance(account), ledger_sum(account), entries, charge.status, refunds_of


# --------------------------------------------------------------------------- done


def test_a_refund_is_reserved_at_once_then_returned_with_one_net_debit_and_its_event(
    api: APIClient, paid_charge: Charge, account: Account, fake_psp: FakePsp, handed: list[int]
) -> None:
    endpoint = endpoint_create(account=account, url="https://loja.example.com/webhooks/pix").endpoint

    response = refund(api, paid_charge, {"reason": "Pedido cancelado"})

    assert response.status_code == 202, response.content
    body = response.json()
    (refund_row,) = ChargeRefund.objects.filter(charge=paid_charge)
    assert body["success"] is True
    assert body["message"] == "Estorno solicitado com sucesso."
    data = body["data"]
    assert {k: data[k] for k in ("id", "transaction_id", "amount", "liquid_amount", "status", "reason")} == {
        "id": refund_row.pk,
        "transaction_id": str(paid_charge.pk),
        "amount": 1000,
        "liquid_amount": LIQUID,
        "status": "processing",
        "reason": "Pedido cancelado",
    }
    assert data["created_at"]
    assert data["finished_at"] is None
    # Reserved at the request, before the acquirer is asked (after the commit).
    assert available_balance(account) == SEED == ledger_sum(account)
    assert kinds(account) == [(LedgerEntry.Kind.REFUND_HOLD, -LIQUID)]
    assert (refund_row.status, refund_row.source) == (ChargeRefund.Status.PROCESSING, ChargeRefund.Source.API)
    assert devolucao_calls(fake_psp) == 0
    assert handed == [refund_row.pk]
    paid_charge.refresh_from_db()
    assert paid_charge.status == ChargeStatus.PAID

    assert pursue_refund(refund_row.pk) == RefundOutcome.REFUNDED  # the worker's task

    paid_charge.refresh_from_db()
    assert paid_charge.status == ChargeStatus.REFUNDED
    # One refund's worth in all: the reservation gave way to the refund itself.
    assert available_balance(account) == SEED == ledger_sum(account)
    assert kinds(account) == [
        (LedgerEntry.Kind.REFUND_HOLD, -LIQUID),
        (LedgerEntry.Kind.REFUND_RELEASE, LIQUID),
        (LedgerEntry.Kind.CHARGE_REFUND, -LIQUID),
    ]
    (devolucao,) = fake_psp.pix[paid_charge.e2e_id or ""]["devolucoes"]
    assert (devolucao["id"], devolucao["valor"], devolucao["status"]) == (
        refund_id_for(paid_charge.pk),
        "10.00",
        "DEVOLVIDO",
    )
    event = WebhookEvent.objects.get(record_id=paid_charge.pk, status=ChargeStatus.REFUNDED)
    assert event.event_type == "transaction"
    assert WebhookDelivery.objects.filter(event=event, endpoint=endpoint).count() == 1
    shown = api.get(f"/api/transactions/{paid_charge.pk}/refund").json()["data"]
    assert (shown["status"], shown["failure_reason"]) == ("refunded", "")
    assert shown["finished_at"]

    # The task delivered twice (brokers deliver at least once): nothing moves.
    assert pursue_refund(refund_row.pk) == RefundOutcome.ENDED
    assert available_balance(account) == SEED == ledger_sum(account)
    assert len(fake_psp.calls_of("devolucao.put")) == 1


# --------------------------------------------------------------------------- not made


def test_a_refund_the_acquirer_did_not_make_gives_the_reservation_back(
    api: APIClient, paid_charge: Charge, account: Account, fake_psp: FakePsp, handed: list[int]
) -> None:
    fake_psp.refund_mode = "async"
    assert refund(api, paid_charge).status_code == 202
    (refund_id,) = handed

    # EM_PROCESSAMENTO: still the payer's money, still reserved; asked again later.
    with pytest.raises(Retry):
        pursue_refund(refund_id)
    assert ChargeRefund.objects.get(pk=refund_id).status == ChargeRefund.Status.PROCESSING
    assert available_balance(account) == SEED == ledger_sum(account)

    fake_psp.settle_refund(paid_charge.e2e_id or "", refund_id_for(paid_charge.pk), status="NAO_REALIZADO")
    assert pursue_refund(refund_id) == RefundOutcome.FAILED

    paid_charge.refresh_from_db()
    assert paid_charge.status == ChargeStatus.PAID
    assert available_balance(account) == SEED + LIQUID == ledger_sum(account)
    assert kinds(account) == [(LedgerEntry.Kind.REFUND_HOLD, -LIQUID), (LedgerEntry.Kind.REFUND_RELEASE, LIQUID)]
    shown = api.get(f"/api/transactions/{paid_charge.pk}/refund").json()["data"]
    assert (shown["status"], shown["failure_reason"]) == ("failed", "Conta do pagador encerrada")
    assert not WebhookEvent.objects.filter(record_id=paid_charge.pk, status=ChargeStatus.REFUNDED).exists()
    # Asked once more: nothing released twice.
    assert pursue_refund(refund_id) == RefundOutcome.ENDED
    assert available_balance(account) == SEED + LIQUID == ledger_sum(account)

    # A new request would name the same devolução and get the same answer: refused, nothing changed.
    before, calls = state(account, paid_charge), devolucao_calls(fake_psp)
    again = refund(api, paid_charge, key="k2")
    assert (again.status_code, again.json()) == (
        409,
        {"success": False, "message": err.REFUND_ALREADY_FAILED, "data": None},
    )
    assert state(account, paid_charge) == before
    assert devolucao_calls(fake_psp) == calls


# --------------------------------------------------------------------------- unknown outcome


@pytest.mark.parametrize("fault", [Fault.TIMEOUT, Fault.RESET, Fault.UNAVAILABLE])
def test_an_unknown_outcome_keeps_the_reservation_and_is_asked_again_until_done(
    api: APIClient,
    make_bacen_acquirer: Callable[..., Acquirer],
    fake_psp: FakePsp,
    account: Account,
    handed: list[int],
    fault: Fault,
) -> None:
    acquirer = make_bacen_acquirer(default_priority=1, connect_timeout_ms=500, read_timeout_ms=1000)
    warm_up(acquirer)
    charge = pay(new_charge(api), fake_psp)
    assert refund(api, charge).status_code == 202
    (refund_id,) = handed
    fake_psp.fail("devolucao.put", *[fault] * 10)  # past the client's own retries within the deadline

    with pytest.raises(Retry):  # not a failure: the task asks again later
        pursue_refund(refund_id)

    charge.refresh_from_db()
    assert charge.status == ChargeStatus.PAID
    assert ChargeRefund.objects.get(pk=refund_id).status == ChargeRefund.Status.PROCESSING
    assert available_balance(account) == SEED == ledger_sum(account)
    assert kinds(account) == [(LedgerEntry.Kind.REFUND_HOLD, -LIQUID)]
    assert len(fake_psp.calls_of("devolucao.put")) >= 1

    with fake_psp.lock:
        fake_psp.faults.clear()  # the PSP is back
    assert pursue_refund(refund_id) == RefundOutcome.REFUNDED

    charge.refresh_from_db()
    assert charge.status == ChargeStatus.REFUNDED
    assert available_balance(account) == SEED == ledger_sum(account)
    assert kinds(account) == [
        (LedgerEntry.Kind.REFUND_HOLD, -LIQUID),
        (LedgerEntry.Kind.REFUND_RELEASE, LIQUID),
        (LedgerEntry.Kind.CHARGE_REFUND, -LIQUID),
    ]
    # Returned once, however many times it was asked.
    assert len(fake_psp.pix[charge.e2e_id or ""]["devolucoes"]) == 1


def test_beat_hands_refunds_left_processing_to_a_worker_again(
    api: APIClient, paid_charge: Charge, fake_psp: FakePsp, handed: list[int]
) -> None:
    assert refund(api, paid_charge).status_code == 202
    (refund_id,) = handed
    asked_at = ChargeRefund.objects.get(pk=refund_id).created_at
    ChargeRefund.objects.filter(pk=refund_id).update(created_at=asked_at - dt.timedelta(minutes=3))
    cache.delete(f"refund-sweep:{refund_id}")
    beat = {entry["task"]: entry["schedule"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    assert beat["payments.tasks.sweep_refunds"] == 60.0
    assert sweep_refunds() == 1
    assert handed == [refund_id, refund_id]
    assert refunds.refunds_sweep() == 0  # not again within SWEEP_EVERY

    # Nor while its own task has a retry scheduled.
    cache.delete(f"refund-sweep:{refund_id}")
    fake_psp.refund_mode = "async"
    with pytest.raises(Retry):
        pursue_refund(refund_id)  # EM_PROCESSAMENTO: asked again later
    assert refunds.refunds_sweep() == 0


def test_the_sweep_counts_refunds_handed_out_not_looked_at(
    api: APIClient, paid_charge: Charge, fake_psp: FakePsp, handed: list[int]
) -> None:
    second = pay(new_charge(api), fake_psp)
    assert refund(api, paid_charge).status_code == 202
    assert refund(api, second, key="k2").status_code == 202
    older, newer = handed
    ChargeRefund.objects.update(created_at=timezone.now() - dt.timedelta(minutes=3))
    cache.delete(f"refund-sweep:{newer}")
    cache.set(f"refund-sweep:{older}", "1", 600)  # the older one's task is retrying

    # One hand-out allowed: it goes to the newer refund, not to the one already in hand.
    assert refunds.refunds_sweep(limit=1) == 1
    assert handed == [older, newer, newer]


# --------------------------------------------------------------------------- a refusal after an unanswered ask


@pytest.fixture
def asked_once(api: APIClient, one_ask_acquirer: Acquirer, fake_psp: FakePsp, handed: list[int]) -> tuple[Charge, int]:
    """A paid charge whose refund was asked by API (reserved; its task is the
    test's to run), at a PSP whose client makes one request per ask."""
    charge = pay(new_charge(api), fake_psp)
    assert refund(api, charge).status_code == 202
    return charge, handed[0]


def test_a_refusal_after_an_unanswered_ask_keeps_the_reservation_and_the_pix_goes_back_once(
    api: APIClient, asked_once: tuple[Charge, int], account: Account, fake_psp: FakePsp, handed: list[int]
) -> None:
    """The finding: the first PUT timed out while the PSP took the devolução;
    the retry was refused (the queued devolução takes the Pix's value) and
    the GET said 404 (not visible yet), so the reservation was released: the
    merchant had the money back while the devolução landed and the payer got
    it too."""
    charge, refund_id = asked_once
    e2e_id, devolucao_id = charge.e2e_id or "", refund_id_for(charge.pk)
    fake_psp.delay = 2.0
    fake_psp.fail("devolucao.put", Fault.TIMEOUT)  # taken there, answered too late...
    with pytest.raises(Retry):
        pursue_refund(refund_id)
    fake_psp.withhold_refund(e2e_id, devolucao_id)  # ...and not visible yet

    # Asked again (the task's backoff): refused and not found. After an
    # unanswered ask that is no "not made": the amount stays reserved.
    for _ in range(2):
        with pytest.raises(Retry):
            pursue_refund(refund_id)
    assert len(fake_psp.calls_of("devolucao.get")) == 2  # the adapter's read after each refusal: 404
    pending = ChargeRefund.objects.get(pk=refund_id)
    assert (pending.status, pending.failure_reason, pending.unclear_at is not None) == (
        ChargeRefund.Status.PROCESSING,
        "",
        True,
    )
    assert available_balance(account) == SEED == ledger_sum(account)
    assert kinds(account) == [(LedgerEntry.Kind.REFUND_HOLD, -LIQUID)]
    assert api.get(f"/api/transactions/{charge.pk}/refund").json()["data"]["status"] == "processing"
    # Beat's sweep keeps asking too.
    ChargeRefund.objects.filter(pk=refund_id).update(created_at=timezone.now() - dt.timedelta(minutes=3))
    cache.delete(f"refund-sweep:{refund_id}")
    assert refunds.refunds_sweep() == 1
    assert handed == [refund_id, refund_id]

    fake_psp.land_refund(e2e_id, devolucao_id)
    assert pursue_refund(refund_id) == RefundOutcome.REFUNDED

    charge.refresh_from_db()
    assert charge.status == ChargeStatus.REFUNDED
    devolucoes = fake_psp.pix[e2e_id]["devolucoes"]
    assert [(d["id"], d["valor"], d["status"]) for d in devolucoes] == [(devolucao_id, "10.00", "DEVOLVIDO")]
    assert len(fake_psp.calls_of("devolucao.put")) == 4
    # One debit in all: the reservation gave way to the refund's own.
    assert kinds(account) == [
        (LedgerEntry.Kind.REFUND_HOLD, -LIQUID),
        (LedgerEntry.Kind.REFUND_RELEASE, LIQUID),
        (LedgerEntry.Kind.CHARGE_REFUND, -LIQUID),
    ]
    assert available_balance(account) == SEED == ledger_sum(account)
    assert api.get(f"/api/transactions/{charge.pk}/refund").json()["data"]["status"] == "refunded"


def test_a_refusal_after_an_unanswered_ask_releases_the_reservation_once_the_psp_confirms_none_past_the_grace(
    api: APIClient, asked_once: tuple[Charge, int], account: Account, fake_psp: FakePsp
) -> None:
    charge, refund_id = asked_once
    fake_psp.fail("devolucao.put", Fault.RESET, Fault.DECLINED, Fault.DECLINED)  # it never took one
    with pytest.raises(Retry):
        pursue_refund(refund_id)  # no answer
    with pytest.raises(Retry):
        pursue_refund(refund_id)  # refused: not final yet
    assert available_balance(account) == SEED == ledger_sum(account)

    ChargeRefund.objects.filter(pk=refund_id).update(
        unclear_at=timezone.now() - DEVOLUCAO_GRACE - dt.timedelta(minutes=1)
    )
    gets = len(fake_psp.calls_of("devolucao.get"))
    assert pursue_refund(refund_id) == RefundOutcome.FAILED  # refused, and none there

    # Past the grace the PSP's read (a GET, never a PUT) confirmed there is none.
    assert len(fake_psp.calls_of("devolucao.get")) == gets + 2  # the adapter's read after the refusal, then ours
    assert len(fake_psp.calls_of("devolucao.put")) == 3
    assert "devolucoes" not in fake_psp.pix[charge.e2e_id or ""]
    shown = api.get(f"/api/transactions/{charge.pk}/refund").json()["data"]
    assert shown["status"] == "failed"
    assert "sem devolução na adquirente 24 h depois" in shown["failure_reason"]
    assert kinds(account) == [(LedgerEntry.Kind.REFUND_HOLD, -LIQUID), (LedgerEntry.Kind.REFUND_RELEASE, LIQUID)]
    assert available_balance(account) == SEED + LIQUID == ledger_sum(account)
    # Released once: asked again, it has ended.
    assert pursue_refund(refund_id) == RefundOutcome.ENDED
    assert kinds(account) == [(LedgerEntry.Kind.REFUND_HOLD, -LIQUID), (LedgerEntry.Kind.REFUND_RELEASE, LIQUID)]


def test_an_ask_that_never_left_starts_no_grace_and_a_refusal_after_it_is_final(
    asked_once: tuple[Charge, int], account: Account, fake_psp: FakePsp, settings: Any
) -> None:
    charge, refund_id = asked_once
    settings.ACQUIRER_MAX_IN_FLIGHT = 1
    with capacity.cap(charge.acquirer).slot() as taken:  # the acquirer's one slot is in use
        assert taken
        with pytest.raises(Retry):
            pursue_refund(refund_id)  # busy: not asked
    assert fake_psp.calls_of("devolucao.put") == []
    assert ChargeRefund.objects.get(pk=refund_id).unclear_at is None

    fake_psp.fail("devolucao.put", Fault.DECLINED)
    assert pursue_refund(refund_id) == RefundOutcome.FAILED

    assert kinds(account) == [(LedgerEntry.Kind.REFUND_HOLD, -LIQUID), (LedgerEntry.Kind.REFUND_RELEASE, LIQUID)]
    assert available_balance(account) == SEED + LIQUID == ledger_sum(account)


# --------------------------------------------------------------------------- refusals


def _pending(charge: Charge) -> None:
    """Created, not paid."""


def _failed(charge: Charge) -> None:
    charge_transition(charge_id=charge.pk, to_status=ChargeStatus.FAILED, source="acquirer")


def _refunded(charge: Charge) -> None:
    charge_transition(charge_id=charge.pk, to_status=ChargeStatus.PAID, source="acquirer", e2e_id="E" + "1" * 31)
    charge_transition(charge_id=charge.pk, to_status=ChargeStatus.REFUNDED, source="acquirer")


def _chargeback(charge: Charge) -> None:
    charge_transition(charge_id=charge.pk, to_status=ChargeStatus.PAID, source="acquirer", e2e_id="E" + "2" * 31)
    charge_transition(charge_id=charge.pk, to_status=ChargeStatus.CHARGEBACK, source="acquirer")


@pytest.mark.parametrize(
    ("make", "label"),
    [(_pending, "pendente"), (_failed, "falhou"), (_refunded, "estornada"), (_chargeback, "contestada")],
)
def test_a_charge_that_is_not_paid_is_refused_and_nothing_changes(
    api: APIClient,
    bacen_acquirer: Acquirer,
    fake_psp: FakePsp,
    account: Account,
    handed: list[int],
    make: Callable[[Charge], None],
    label: str,
) -> None:
    charge = new_charge(api)
    make(charge)
    before = state(account, charge)

    response = refund(api, charge)

    assert (response.status_code, response.json()) == (
        409,
        {"success": False, "message": f"Só transações pagas podem ser estornadas; esta está {label}.", "data": None},
    )
    assert state(account, charge) == before
    assert devolucao_calls(fake_psp) == 0
    assert handed == []


def test_a_second_request_while_one_is_in_progress_is_refused(
    api: APIClient, paid_charge: Charge, account: Account, fake_psp: FakePsp, handed: list[int]
) -> None:
    assert refund(api, paid_charge, key="k1").status_code == 202
    before = state(account, paid_charge)

    response = refund(api, paid_charge, key="k2")

    assert (response.status_code, response.json()["message"]) == (409, err.REFUND_IN_PROGRESS)
    assert state(account, paid_charge) == before
    assert devolucao_calls(fake_psp) == 0
    assert len(handed) == 1


def test_a_refund_the_balance_does_not_cover_is_refused_and_nothing_changes(
    api: APIClient, paid_charge: Charge, account: Account, fake_psp: FakePsp, handed: list[int]
) -> None:
    withdrawal = api.post("/api/withdrawals", {"amount": SEED + 100, "key_value": "52998224725"}, format="json")
    assert withdrawal.status_code == 201, withdrawal.content
    assert available_balance(account) < LIQUID
    before = state(account, paid_charge)

    response = refund(api, paid_charge)

    assert (response.status_code, response.json()) == (
        400,
        {"success": False, "message": "Saldo insuficiente para realizar o estorno.", "data": None},
    )
    assert state(account, paid_charge) == before
    assert devolucao_calls(fake_psp) == 0
    assert handed == []


def test_unknown_and_other_accounts_charges_are_404_as_a_read_is(
    api: APIClient, paid_charge: Charge, issue_credential: Callable[..., Any], handed: list[int]
) -> None:
    other = client_for(issue_credential(AccountFactory()))
    not_found = {"success": False, "message": "Transação não encontrada.", "data": None}
    for client, charge_id in ((other, str(paid_charge.pk)), (api, str(uuid.uuid4())), (api, "not-a-uuid")):
        read = client.get(f"/api/transactions/{charge_id}")
        response = refund(client, charge_id)
        assert (read.status_code, read.json()) == (response.status_code, response.json()) == (404, not_found)
    assert not ChargeRefund.objects.exists()
    assert handed == []


def test_a_cashout_only_credential_may_not_refund(
    paid_charge: Charge, account: Account, issue_credential: Callable[..., Any], handed: list[int]
) -> None:
    cashout = client_for(issue_credential(account, ApiCredential.Permission.CASHOUT))
    before = state(account, paid_charge)

    response = refund(cashout, paid_charge)

    assert (response.status_code, response.json()["message"]) == (
        403,
        "Esta credencial não tem permissão para realizar esta operação.",
    )
    assert cashout.get(f"/api/transactions/{paid_charge.pk}").status_code == 403  # as other cash-in endpoints
    assert state(account, paid_charge) == before
    assert handed == []


def test_a_reason_too_long_is_a_field_error(
    api: APIClient, paid_charge: Charge, account: Account, handed: list[int]
) -> None:
    before = state(account, paid_charge)
    response = refund(api, paid_charge, {"reason": "x" * 141})
    assert response.status_code == 422
    assert list(response.json()["data"]["errors"]) == ["reason"]
    assert state(account, paid_charge) == before
    assert handed == []


# --------------------------------------------------------------------------- idempotency


def test_the_same_key_replays_the_answer_and_another_body_is_refused(
    api: APIClient, paid_charge: Charge, account: Account, handed: list[int]
) -> None:
    first = refund(api, paid_charge, {"reason": "a"}, key="same")
    again = refund(api, paid_charge, {"reason": "a"}, key="same")

    assert first.status_code == again.status_code == 202
    assert again.json() == first.json()
    assert again["Idempotent-Replayed"] == "true"
    assert ChargeRefund.objects.filter(charge=paid_charge).count() == 1
    assert available_balance(account) == SEED == ledger_sum(account)
    assert len(handed) == 1

    other = refund(api, paid_charge, {"reason": "b"}, key="same")
    assert (other.status_code, other.json()["data"]["errors"]) == (422, {"idempotency_key": [KEY_REUSED]})
    assert available_balance(account) == SEED == ledger_sum(account)


def test_a_key_is_per_charge(
    api: APIClient, paid_charge: Charge, fake_psp: FakePsp, account: Account, handed: list[int]
) -> None:
    second = pay(new_charge(api), fake_psp)
    assert refund(api, paid_charge, key="same").status_code == 202
    response = refund(api, second, key="same")
    assert response.status_code == 202
    assert response.json()["data"]["transaction_id"] == str(second.pk)
    assert available_balance(account) == SEED + LIQUID - LIQUID == ledger_sum(account)


# --------------------------------------------------------------------------- concurrency


@pytest.mark.django_db(transaction=True)
def test_two_requests_at_once_reserve_once(
    paid_charge: Charge, account: Account, issue_credential: Callable[..., Any], handed: list[int]
) -> None:
    credential = issue_credential(account)

    def ask(key: str) -> Callable[[], Any]:
        return lambda: refund(client_for(credential), paid_charge, key=key)

    outcomes = realworld.run_concurrently([ask("a"), ask("b"), ask("c")])

    statuses = sorted(o.status_code for o in outcomes)
    assert statuses == [202, 409, 409], outcomes
    assert ChargeRefund.objects.filter(charge=paid_charge).count() == 1
    assert available_balance(account) == SEED == ledger_sum(account)
    assert len(handed) == 1


@pytest.mark.django_db(transaction=True)
def test_a_refund_racing_a_withdrawal_never_overdraws(
    paid_charge: Charge, account: Account, issue_credential: Callable[..., Any], handed: list[int]
) -> None:
    """SEED + LIQUID = 1955 available: the refund (955) or a withdrawal of
    1500, not both. Whichever locks the balance first wins; the other is a
    400 that changes nothing."""
    credential = issue_credential(account)

    def ask_refund() -> Any:
        return refund(client_for(credential), paid_charge)

    def withdraw() -> Withdrawal:
        return withdrawal_request(account=account, amount=1500, key_type="cpf", key_value="52998224725")

    outcomes = realworld.run_concurrently([ask_refund, withdraw])

    refunded = outcomes[0].status_code == 202
    withdrew = isinstance(outcomes[1], Withdrawal)
    assert refunded != withdrew, outcomes
    if not refunded:
        assert outcomes[0].json()["message"] == err.REFUND_INSUFFICIENT_BALANCE
    assert available_balance(account) == ledger_sum(account) >= 0
    assert all(e.balance_after >= 0 for e in LedgerEntry.objects.filter(account=account))
    debited = outcomes[1].total_debit if withdrew else 0
    expected = SEED + LIQUID - (LIQUID if refunded else 0) - debited
    assert available_balance(account) == expected
    assert ChargeRefund.objects.filter(charge=paid_charge).count() == int(refunded)


@pytest.mark.parametrize(
    ("raw", "status"),
    [(b"[]", 400), (b'"x"', 400), (b"null", 400), (b"{", 400), (b'{"reason": 5}', 422), (b"", 202)],
)
def test_bodies_are_an_object_or_nothing(
    api: APIClient, paid_charge: Charge, account: Account, handed: list[int], raw: bytes, status: int
) -> None:
    before = state(account, paid_charge)
    with TestCase.captureOnCommitCallbacks(execute=True):
        response = api.generic("POST", f"/api/transactions/{paid_charge.pk}/refund", raw.decode(), "application/json")
    assert response.status_code == status, response.content
    assert response.json()["success"] is (status == 202)
    if status != 202:
        assert state(account, paid_charge) == before
        assert handed == []


# --------------------------------------------------------------------------- end to end


@pytest.mark.django_db(transaction=True)
def test_a_real_worker_returns_the_money_and_the_merchant_receives_the_refunded_event(
    celery_worker_process: Any, api: APIClient, account: Account, receiver: Any
) -> None:
    """Nothing run by hand: the request's commit hands the refund to a real
    Celery worker, which asks the (sandbox) acquirer, refunds the charge and
    delivers the ``transaction`` event to the merchant's endpoint over HTTP."""
    AcquirerFactory(key="alpha", default_priority=1)  # the sandbox acquirer
    endpoint_create(account=account, url=receiver.url)
    charge = new_charge(api)
    assert api.post(f"/api/sandbox/transactions/{charge.pk}/pay").status_code == 200
    receiver.wait_for_requests(1)  # the paid event

    response = refund(api, charge)

    assert response.status_code == 202, response.content
    realworld.wait_for(lambda: Charge.objects.get(pk=charge.pk).status == ChargeStatus.REFUNDED)
    bodies = [json.loads(r.body) for r in receiver.wait_for_requests(2)]
    assert [(b["event_type"], b["data"]["status"]) for b in bodies] == [
        ("transaction", "paid"),
        ("transaction", "refunded"),
    ]
    assert bodies[1]["data"]["id"] == str(charge.pk)
    assert available_balance(account) == SEED == ledger_sum(account)
    shown = api.get(f"/api/transactions/{charge.pk}/refund").json()["data"]
    assert shown["status"] == "refunded"


def test_staff_asking_again_finishes_a_refund_asked_by_api_with_one_debit(
    admin_client: Any, api: APIClient, paid_charge: Charge, account: Account, fake_psp: FakePsp, handed: list[int]
) -> None:
    """One refund, whoever asks: staff's "Estornar" names the same devolução
    and, once the PSP returned the money, ends the API's refund (its
    reservation gives way to the refund's debit)."""
    fake_psp.refund_mode = "async"
    assert refund(api, paid_charge).status_code == 202
    with pytest.raises(Retry):
        pursue_refund(handed[0])  # EM_PROCESSAMENTO
    fake_psp.settle_refund(paid_charge.e2e_id or "", refund_id_for(paid_charge.pk))

    done = admin_action(admin_client, CHARGES, "refund", [paid_charge.pk], reason="pedido do pagador")

    assert [str(m) for m in get_messages(done.wsgi_request)] == ["Estornar: 1 cobrança."]
    paid_charge.refresh_from_db()
    assert paid_charge.status == ChargeStatus.REFUNDED
    assert available_balance(account) == SEED == ledger_sum(account)
    assert kinds(account) == [
        (LedgerEntry.Kind.REFUND_HOLD, -LIQUID),
        (LedgerEntry.Kind.REFUND_RELEASE, LIQUID),
        (LedgerEntry.Kind.CHARGE_REFUND, -LIQUID),
    ]
    assert ChargeRefund.objects.get(charge=paid_charge).status == ChargeRefund.Status.DONE
    assert len(fake_psp.pix[paid_charge.e2e_id or ""]["devolucoes"]) == 1
    assert pursue_refund(handed[0]) == RefundOutcome.ENDED
