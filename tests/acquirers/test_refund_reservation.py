"""A refund the PSP answers "processing" (a devolução ``EM_PROCESSAMENTO``)
reserves its amount at once: the merchant cannot withdraw it meanwhile; a
devolução the PSP did not make gives it back; one it made becomes the refund
without a second debit. Balance equals the ledger throughout.

One a chargeback released is asked about until the PSP's answer is final;
made, its redébito (a second staff member approves) debits that devolução
once: it closes the charge (refunded), so neither a resolution of the
dispute nor another refund, by API, staff or the PSP's notice of the same
devolução, debits it again. A charge refunded after its chargeback (no
refund debit taken) may still be redebited, once; one refunded from paid
already paid its devolução."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from typing import Any

import pytest
from celery.exceptions import Retry
from django.contrib.messages import get_messages
from django.core.cache import cache
from django.db import transaction
from django.test import Client, TestCase
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.exceptions import ActionNotExecutable
from accounts.models import Account, LedgerEntry, MoneyActionRequest
from accounts.selectors import available_balance, ledger_sum
from accounts.services import ledger_post, money_action_request
from acquirers.adapters.base import Notification, NotificationEvent
from acquirers.models import Acquirer
from core.exceptions import BusinessRuleError
from payments import refunds
from payments.devolucao_answers import DEVOLUCAO_GRACE
from payments.events import charge_event_apply
from payments.exceptions import RefundUndetermined
from payments.models import Charge, ChargeRefund, ChargeStatus
from payments.refunds import (
    RefundOutcome,
    charge_refund,
    charge_refund_pursue,
    charge_refund_reserve,
    refund_id_for,
)
from payments.services import charge_transition
from reconciliation.models import ReconciliationItem
from tests import realworld
from tests.acquirers.conftest import NOTIFY_TOKEN
from tests.acquirers.fake_psp import FakePsp, Fault
from tests.factories import AccountFactory
from tests.helpers import asked_and_approved, staff_user
from tests.helpers import staff_refund as approved_staff_refund
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
NO_BALANCE = {"success": False, "message": "Saldo insuficiente para realizar o saque.", "data": None}


@pytest.fixture
def account(db: Any) -> Account:
    # Withdrawals wait for staff: nothing is sent to a broker behind the test's back.
    account = AccountFactory(cashin_fee_fixed=30, cashin_fee_bps=150, withdrawals_need_approval=True)
    with transaction.atomic():
        ledger_post(
            account_id=account.pk, amount=SEED, kind=LedgerEntry.Kind.CHARGE_PAID, reference=f"seed:{uuid.uuid4().hex}"
        )
    return account


def callback(fake_psp: FakePsp, e2e_id: str) -> Any:
    body = json.dumps(fake_psp.callback_body([e2e_id])).encode()
    return APIClient().post(CALLBACK, data=body, content_type="application/json")


def paid(api: APIClient, fake_psp: FakePsp, account: Account) -> Charge:
    response = api.post("/api/transactions", BODY, format="json")
    assert response.status_code == 201, response.content
    charge = Charge.objects.get(pk=response.json()["data"]["id"])
    assert callback(fake_psp, fake_psp.pay(charge.txid)).status_code == 200
    charge.refresh_from_db()
    assert charge.status == ChargeStatus.PAID
    assert available_balance(account) == SEED + LIQUID == ledger_sum(account)
    return charge


@pytest.fixture
def paid_charge(api: APIClient, bacen_acquirer: Acquirer, fake_psp: FakePsp, account: Account) -> Charge:
    """Paid at the PSP, which returns money asynchronously (EM_PROCESSAMENTO first)."""
    fake_psp.refund_mode = "async"
    return paid(api, fake_psp, account)


@pytest.fixture
def one_ask_charge(api: APIClient, one_ask_acquirer: Acquirer, fake_psp: FakePsp, account: Account) -> Charge:
    """Paid at a PSP whose client makes one request per ask (returned at once when it answers)."""
    return paid(api, fake_psp, account)


def staff_refund(client: Client, charge: Charge) -> list[str]:
    # Through the confirmation page, as staff do (the reason is required), and
    # approved by a second staff member before the PSP is asked.
    response = approved_staff_refund(client, charge, reason="pedido do pagador")
    assert response.status_code == 200
    return [str(m) for m in get_messages(response.wsgi_request)]


def withdraw(api: APIClient, amount: int) -> Any:
    return api.post("/api/withdrawals", {"amount": amount, "key_value": "52998224725"}, format="json")


def kinds(account: Account) -> list[tuple[str, int]]:
    return [(e.kind, e.amount) for e in LedgerEntry.objects.filter(account=account).order_by("id")][2:]


def test_a_processing_refund_reserves_its_amount_at_once(
    admin_client: Client, api: APIClient, paid_charge: Charge, account: Account
) -> None:
    messages = staff_refund(admin_client, paid_charge)

    assert "1 devolução em processamento na adquirente" in messages[0]
    assert paid_charge.refunds.get().reason == "pedido do pagador"  # staff's reason kept with the refund
    paid_charge.refresh_from_db()
    assert paid_charge.status == ChargeStatus.PAID  # not refunded until the PSP says so
    assert available_balance(account) == SEED == ledger_sum(account)
    assert api.get("/api/withdrawals/balance").json()["data"]["available_balance"] == SEED
    assert kinds(account) == [(LedgerEntry.Kind.REFUND_HOLD, -LIQUID)]
    (refund,) = ChargeRefund.objects.filter(charge=paid_charge)
    assert (refund.status, refund.amount) == (ChargeRefund.Status.PROCESSING, LIQUID)

    # The reserved money cannot be withdrawn; the rest can.
    refused = withdraw(api, SEED + 1)
    assert (refused.status_code, refused.json()) == (400, NO_BALANCE)
    assert available_balance(account) == SEED == ledger_sum(account)
    assert withdraw(api, SEED).status_code == 201
    assert available_balance(account) == 0 == ledger_sum(account)

    # Asking again while it still processes reserves nothing more.
    staff_refund(admin_client, paid_charge)
    assert available_balance(account) == 0 == ledger_sum(account)
    assert ChargeRefund.objects.filter(charge=paid_charge).count() == 1


def test_a_devolucao_the_psp_did_not_make_releases_the_reservation(
    admin_client: Client, api: APIClient, paid_charge: Charge, account: Account, fake_psp: FakePsp
) -> None:
    staff_refund(admin_client, paid_charge)
    assert available_balance(account) == SEED
    fake_psp.settle_refund(paid_charge.e2e_id or "", refund_id_for(paid_charge.pk), status="NAO_REALIZADO")

    messages = staff_refund(admin_client, paid_charge)  # asking again learns the final state

    assert messages == [f"{paid_charge.pk}: Devolução não realizada pela adquirente: Conta do pagador encerrada"]
    paid_charge.refresh_from_db()
    assert paid_charge.status == ChargeStatus.PAID
    assert available_balance(account) == SEED + LIQUID == ledger_sum(account)
    assert kinds(account) == [(LedgerEntry.Kind.REFUND_HOLD, -LIQUID), (LedgerEntry.Kind.REFUND_RELEASE, LIQUID)]
    assert ChargeRefund.objects.get(charge=paid_charge).status == ChargeRefund.Status.FAILED
    # The money is the merchant's again.
    assert withdraw(api, SEED + LIQUID).status_code == 201
    # Asked once more: the same answer, nothing released twice.
    staff_refund(admin_client, paid_charge)
    assert available_balance(account) == 0 == ledger_sum(account)


@pytest.mark.parametrize("learned", ["callback", "asking_again"])
def test_a_devolucao_the_psp_made_debits_once(
    admin_client: Client, paid_charge: Charge, account: Account, fake_psp: FakePsp, learned: str
) -> None:
    staff_refund(admin_client, paid_charge)
    e2e_id = paid_charge.e2e_id or ""
    fake_psp.settle_refund(e2e_id, refund_id_for(paid_charge.pk))

    if learned == "callback":
        assert callback(fake_psp, e2e_id).json()["data"] == {"processed": 1}
    else:
        assert staff_refund(admin_client, paid_charge) == ["Estornar: 1 cobrança."]

    paid_charge.refresh_from_db()
    assert paid_charge.status == ChargeStatus.REFUNDED
    # One refund's worth in all: the reservation gave way to the refund itself.
    assert available_balance(account) == SEED == ledger_sum(account)
    assert kinds(account) == [
        (LedgerEntry.Kind.REFUND_HOLD, -LIQUID),
        (LedgerEntry.Kind.REFUND_RELEASE, LIQUID),
        (LedgerEntry.Kind.CHARGE_REFUND, -LIQUID),
    ]
    assert ChargeRefund.objects.get(charge=paid_charge).status == ChargeRefund.Status.DONE
    # The PSP repeats itself: nothing moves.
    assert callback(fake_psp, e2e_id).json()["data"] == {"processed": 0}
    assert available_balance(account) == SEED == ledger_sum(account)


def test_a_refund_without_a_definitive_answer_is_reserved_and_asked_about_again(
    admin_client: Client, api: APIClient, paid_charge: Charge, account: Account, fake_psp: FakePsp
) -> None:
    e2e_id = paid_charge.e2e_id or ""
    # The PSP makes the devolução and its answer is lost on the way; the
    # retries and the look-ups of its state fail too.
    fake_psp.fail("devolucao.put", Fault.LOST_ANSWER, *[Fault.UNAVAILABLE] * 5)
    fake_psp.fail("devolucao.get", *[Fault.UNAVAILABLE] * 5)

    messages = staff_refund(admin_client, paid_charge)

    assert len(messages) == 1
    assert "Sem resposta definitiva da adquirente para a devolução" in messages[0]
    assert "o valor fica reservado" in messages[0]
    assert [d["id"] for d in fake_psp.pix[e2e_id]["devolucoes"]] == [refund_id_for(paid_charge.pk)]  # made there
    paid_charge.refresh_from_db()
    assert paid_charge.status == ChargeStatus.PAID
    (refund,) = ChargeRefund.objects.filter(charge=paid_charge)
    assert (refund.status, refund.amount, refund.source) == (
        ChargeRefund.Status.PROCESSING,
        LIQUID,
        ChargeRefund.Source.STAFF,
    )
    # The money may be the payer's already: the merchant cannot withdraw it.
    assert available_balance(account) == SEED == ledger_sum(account)
    assert kinds(account) == [(LedgerEntry.Kind.REFUND_HOLD, -LIQUID)]
    assert withdraw(api, SEED + 1).json() == NO_BALANCE

    # What beat's sweep hands to a worker (every refund left processing):
    # asked again, the PSP answers, and the refund is debited once.
    with fake_psp.lock:
        fake_psp.faults.clear()
    fake_psp.settle_refund(e2e_id, refund_id_for(paid_charge.pk))
    assert charge_refund_pursue(refund_id=refund.pk) is RefundOutcome.REFUNDED
    paid_charge.refresh_from_db()
    assert paid_charge.status == ChargeStatus.REFUNDED
    assert available_balance(account) == SEED == ledger_sum(account)
    assert kinds(account) == [
        (LedgerEntry.Kind.REFUND_HOLD, -LIQUID),
        (LedgerEntry.Kind.REFUND_RELEASE, LIQUID),
        (LedgerEntry.Kind.CHARGE_REFUND, -LIQUID),
    ]
    assert ChargeRefund.objects.get(charge=paid_charge).status == ChargeRefund.Status.DONE


def test_staff_asking_again_after_an_unanswered_ask_keeps_the_reservation_and_the_pix_goes_back_once(
    admin_client: Client, api: APIClient, one_ask_charge: Charge, account: Account, fake_psp: FakePsp
) -> None:
    """The finding, for staff's refund: the PUT timed out while the PSP took
    the devolução; "Estornar" again was refused (the queued devolução takes
    the Pix's value) and the GET said 404 (not visible yet), which released
    the reservation: the merchant could withdraw the money the payer was
    getting back."""
    charge = one_ask_charge
    e2e_id, devolucao_id = charge.e2e_id or "", refund_id_for(charge.pk)
    fake_psp.delay = 2.0
    fake_psp.fail("devolucao.put", Fault.TIMEOUT)  # taken there, answered too late...
    (message,) = staff_refund(admin_client, charge)  # approved (reserved), then asked
    assert "Sem resposta definitiva da adquirente para a devolução" in message
    fake_psp.withhold_refund(e2e_id, devolucao_id)  # ...and not visible yet

    (message,) = staff_refund(admin_client, charge)  # "Estornar" again: refused, and not found

    assert "um pedido anterior ficou sem resposta" in message
    assert message.endswith("o valor fica reservado e a adquirente é consultada de novo até responder.")
    refund = ChargeRefund.objects.get(charge=charge)
    assert (refund.status, refund.source) == (ChargeRefund.Status.PROCESSING, ChargeRefund.Source.STAFF)
    assert kinds(account) == [(LedgerEntry.Kind.REFUND_HOLD, -LIQUID)]
    assert available_balance(account) == SEED == ledger_sum(account)
    assert withdraw(api, SEED + 1).json() == NO_BALANCE
    # What beat's sweep hands a worker reads it the same way.
    assert charge_refund_pursue(refund_id=refund.pk) is RefundOutcome.UNDETERMINED

    fake_psp.land_refund(e2e_id, devolucao_id)
    assert staff_refund(admin_client, charge) == ["Estornar: 1 cobrança."]

    charge.refresh_from_db()
    assert charge.status == ChargeStatus.REFUNDED
    devolucoes = fake_psp.pix[e2e_id]["devolucoes"]
    assert [(d["id"], d["valor"], d["status"]) for d in devolucoes] == [(devolucao_id, "10.00", "DEVOLVIDO")]
    assert kinds(account) == [
        (LedgerEntry.Kind.REFUND_HOLD, -LIQUID),
        (LedgerEntry.Kind.REFUND_RELEASE, LIQUID),
        (LedgerEntry.Kind.CHARGE_REFUND, -LIQUID),
    ]
    assert available_balance(account) == SEED == ledger_sum(account)


def test_a_staff_refund_refused_after_an_unanswered_ask_is_released_once_the_psp_confirms_none_past_the_grace(
    admin_client: Client, one_ask_charge: Charge, account: Account, fake_psp: FakePsp
) -> None:
    charge = one_ask_charge
    fake_psp.fail("devolucao.put", Fault.RESET, Fault.DECLINED, Fault.DECLINED)  # it never took one
    assert "Sem resposta definitiva" in staff_refund(admin_client, charge)[0]  # no answer
    assert "Sem resposta definitiva" in staff_refund(admin_client, charge)[0]  # refused: not final yet
    assert available_balance(account) == SEED == ledger_sum(account)
    ChargeRefund.objects.filter(charge=charge).update(
        unclear_at=timezone.now() - DEVOLUCAO_GRACE - dt.timedelta(minutes=1)
    )

    (message,) = staff_refund(admin_client, charge)

    assert message.startswith(f"{charge.pk}: Devolução não realizada pela adquirente: ")
    assert message.endswith("sem devolução na adquirente 24 h depois")
    assert ChargeRefund.objects.get(charge=charge).status == ChargeRefund.Status.FAILED
    assert kinds(account) == [(LedgerEntry.Kind.REFUND_HOLD, -LIQUID), (LedgerEntry.Kind.REFUND_RELEASE, LIQUID)]
    assert available_balance(account) == SEED + LIQUID == ledger_sum(account)


def test_a_refund_staff_reserve_after_an_unanswered_ask_is_not_released_by_the_refusal_that_follows(
    one_ask_charge: Charge, account: Account, fake_psp: FakePsp
) -> None:
    """Staff's refund of a charge with nothing reserved (the service, as the
    back office reaches it when a reservation ended meanwhile): the ask goes
    unanswered, so the reservation made after it starts the grace."""
    charge = one_ask_charge
    fake_psp.delay = 2.0
    fake_psp.fail("devolucao.put", Fault.TIMEOUT)
    with pytest.raises(RefundUndetermined):
        charge_refund(charge_id=charge.pk, actor="staff")
    fake_psp.withhold_refund(charge.e2e_id or "", refund_id_for(charge.pk))

    with pytest.raises(RefundUndetermined):
        charge_refund(charge_id=charge.pk, actor="staff")  # refused, not found: not final

    assert ChargeRefund.objects.get(charge=charge).status == ChargeRefund.Status.PROCESSING
    assert kinds(account) == [(LedgerEntry.Kind.REFUND_HOLD, -LIQUID)]
    assert available_balance(account) == SEED == ledger_sum(account)


def test_a_chargeback_during_a_processing_refund_takes_the_money_once(
    admin_client: Client, paid_charge: Charge, account: Account
) -> None:
    from payments.services import charge_transition

    staff_refund(admin_client, paid_charge)
    charge_transition(charge_id=paid_charge.pk, to_status=ChargeStatus.CHARGEBACK, source="staff")

    assert available_balance(account) == SEED == ledger_sum(account)
    assert kinds(account) == [
        (LedgerEntry.Kind.REFUND_HOLD, -LIQUID),
        (LedgerEntry.Kind.REFUND_RELEASE, LIQUID),
        (LedgerEntry.Kind.CHARGE_CHARGEBACK, -LIQUID),
    ]
    assert ChargeRefund.objects.get(charge=paid_charge).status == ChargeRefund.Status.RELEASED


@pytest.mark.parametrize("final", ["DEVOLVIDO", "NAO_REALIZADO"])
def test_a_refund_a_chargeback_released_is_asked_about_until_the_psp_answers_for_good(
    admin_client: Client,
    paid_charge: Charge,
    account: Account,
    fake_psp: FakePsp,
    monkeypatch: pytest.MonkeyPatch,
    final: str,
) -> None:
    """The chargeback gave the payer the money back (MED) while the PSP was
    still processing the devolução: if the PSP then makes it, the payer was
    repaid twice. Asked about (never asked for) until its answer is final;
    made, it is an item for staff; nothing is debited automatically."""
    from payments import refunds
    from payments.services import charge_transition
    from payments.tasks import pursue_refund
    from reconciliation.models import ReconciliationItem
    from reconciliation.run import acquirer_reconcile

    staff_refund(admin_client, paid_charge)
    charge_transition(charge_id=paid_charge.pk, to_status=ChargeStatus.CHARGEBACK, source="staff")
    refund = ChargeRefund.objects.get(charge=paid_charge)
    assert (refund.status, refund.release_check) == (ChargeRefund.Status.RELEASED, "pending")
    ledger = kinds(account)

    # Beat's sweep hands it to a worker like a refund still processing.
    handed: list[int] = []
    monkeypatch.setattr(refunds, "refund_pursue_later", lambda *, refund_id, countdown=0: handed.append(refund_id))
    ChargeRefund.objects.filter(pk=refund.pk).update(created_at=refund.created_at - dt.timedelta(minutes=3))
    cache.delete(f"refund-sweep:{refund.pk}")
    assert refunds.refunds_sweep() == 1
    assert handed == [refund.pk]

    with pytest.raises(Retry):
        pursue_refund(refund.pk)  # EM_PROCESSAMENTO there: asked again later, nothing decided
    refund.refresh_from_db()
    assert refund.release_check == "pending"
    assert not ReconciliationItem.objects.exists()

    e2e_id = paid_charge.e2e_id or ""
    fake_psp.settle_refund(e2e_id, refund_id_for(paid_charge.pk), status=final)
    assert charge_refund_pursue(refund_id=refund.pk) is RefundOutcome.ENDED

    refund.refresh_from_db()
    assert refund.release_check == ("made" if final == "DEVOLVIDO" else "not_made")
    assert refund.release_checked_at is not None
    assert kinds(account) == ledger  # no money moved here, either way
    assert available_balance(account) == SEED == ledger_sum(account)
    # Asked, never asked for: the only devolução request is staff's own.
    assert len(fake_psp.calls_of("devolucao.put")) == 1
    assert len(fake_psp.calls_of("devolucao.get")) == 2
    if final == "DEVOLVIDO":
        item = ReconciliationItem.objects.get()
        assert (item.kind, item.key, item.status) == ("refunded_there_chargeback_here", e2e_id, "open")
        assert (item.target_id, item.ours_status, item.theirs_status) == (str(paid_charge.pk), "chargeback", "refunded")
        assert item.theirs_raw["devolucao"]["status"] == "done"
        assert "MED e o estorno" in item.detail
        assert item.run is None  # found by the check, not by a day's run
        page = admin_client.get(reverse("admin:reconciliation_reconciliationitem_change", args=[item.pk]))
        assert page.status_code == 200
        assert "Devolvida na adquirente, contestada (MED) aqui" in page.content.decode()
    else:
        assert not ReconciliationItem.objects.exists()

    # Final: never asked again.
    assert charge_refund_pursue(refund_id=refund.pk) is RefundOutcome.ENDED
    assert len(fake_psp.calls_of("devolucao.get")) == 2
    cache.delete(f"refund-sweep:{refund.pk}")
    assert refunds.refunds_sweep() == 0

    # The day's reconciliation sees the same Pix returned there: the same item, not a second.
    run = acquirer_reconcile(acquirer_id=paid_charge.acquirer_id, day=timezone.localdate())
    assert ReconciliationItem.objects.count() == (1 if final == "DEVOLVIDO" else 0)
    if final == "DEVOLVIDO":
        assert ReconciliationItem.objects.get().run == run


def test_a_released_refund_the_psp_never_received_is_not_made_by_asking(
    paid_charge: Charge, account: Account, fake_psp: FakePsp
) -> None:
    """ "No such devolução" is believed only once the grace window since the
    refund was last asked for (its release) has passed: before, it is asked
    about again with the refund task's backoff."""
    from payments.refunds_released import NOT_FOUND_FINAL_AFTER
    from payments.services import charge_transition
    from payments.tasks import pursue_refund

    assert charge_refund_reserve(charge_id=paid_charge.pk)  # reserved; the PSP not asked yet
    charge_transition(charge_id=paid_charge.pk, to_status=ChargeStatus.CHARGEBACK, source="staff")
    refund = ChargeRefund.objects.get(charge=paid_charge)

    assert charge_refund_pursue(refund_id=refund.pk) is RefundOutcome.UNDETERMINED
    with pytest.raises(Retry):
        pursue_refund(refund.pk)  # asked again later, with the task's backoff
    refund.refresh_from_db()
    assert refund.release_check == "pending"

    released = timezone.now() - NOT_FOUND_FINAL_AFTER - dt.timedelta(seconds=1)
    ChargeRefund.objects.filter(pk=refund.pk).update(finished_at=released)
    assert charge_refund_pursue(refund_id=refund.pk) is RefundOutcome.ENDED

    refund.refresh_from_db()
    assert refund.release_check == "not_made"  # the PSP has no such devolução
    assert fake_psp.calls_of("devolucao.put") == []
    assert len(fake_psp.calls_of("devolucao.get")) == 3
    assert "devolucoes" not in fake_psp.pix[paid_charge.e2e_id or ""]
    assert available_balance(account) == SEED == ledger_sum(account)


def test_a_devolucao_the_psp_records_after_a_look_is_found_made(
    paid_charge: Charge, account: Account, fake_psp: FakePsp
) -> None:
    """An ask whose answer was unclear reaches the PSP after the chargeback,
    and after a first look found nothing: the look does not end it, the next
    one finds the devolução made."""
    from payments.services import charge_transition
    from reconciliation.models import ReconciliationItem

    assert charge_refund_reserve(charge_id=paid_charge.pk)
    charge_transition(charge_id=paid_charge.pk, to_status=ChargeStatus.CHARGEBACK, source="staff")
    refund = ChargeRefund.objects.get(charge=paid_charge)
    assert charge_refund_pursue(refund_id=refund.pk) is RefundOutcome.UNDETERMINED
    e2e_id = paid_charge.e2e_id or ""
    with fake_psp.lock:  # the PUT that timed out lands now, and settles
        horario = {"solicitacao": fake_psp.pix[e2e_id]["horario"], "liquidacao": fake_psp.pix[e2e_id]["horario"]}
        fake_psp.pix[e2e_id]["devolucoes"] = [
            {
                "id": refund_id_for(paid_charge.pk),
                "rtrId": "D12345678202611270000abcdefghijk",
                "valor": "10.00",
                "natureza": "ORIGINAL",
                "horario": horario,
                "status": "DEVOLVIDO",
            }
        ]

    assert charge_refund_pursue(refund_id=refund.pk) is RefundOutcome.ENDED

    refund.refresh_from_db()
    assert refund.release_check == "made"
    item = ReconciliationItem.objects.get()
    assert (item.kind, item.target_id, item.returned_by_refund) == (
        "refunded_there_chargeback_here",
        str(paid_charge.pk),
        1000,
    )
    assert available_balance(account) == SEED == ledger_sum(account)  # nothing debited automatically


def test_a_released_refund_of_a_charge_without_e2e_id_is_asked_about(db: Any, account: Account) -> None:
    """An acquirer that names a devolução without the Pix's e2e id (the
    sandbox) may have made it: it is asked, not taken as never asked for."""
    from acquirers import adapters
    from payments.refund_requests import refund_request_for
    from payments.services import charge_transition
    from reconciliation.models import ReconciliationItem
    from tests.factories import AcquirerFactory, ChargeFactory

    sandbox = AcquirerFactory(key=f"sbx_{uuid.uuid4().hex[:8]}", adapter="sandbox", options={"refund": "processing"})
    charge = ChargeFactory(
        account=account, acquirer=sandbox, status=ChargeStatus.PAID, e2e_id=None, paid_at=timezone.now()
    )
    assert charge_refund_reserve(charge_id=charge.pk)
    adapters.build(sandbox).refund_charge(refund_request_for(charge))  # asked: processing there
    charge_transition(charge_id=charge.pk, to_status=ChargeStatus.CHARGEBACK, source="staff")
    refund = ChargeRefund.objects.get(charge=charge)

    assert charge_refund_pursue(refund_id=refund.pk) is RefundOutcome.ENDED

    refund.refresh_from_db()
    assert refund.release_check == "made"
    assert ReconciliationItem.objects.get().target_id == str(charge.pk)


def test_a_refund_larger_than_the_balance_is_reserved_all_the_same(
    admin_client: Client, api: APIClient, paid_charge: Charge, account: Account
) -> None:
    """Decisions §4: a refund may take the balance below zero; its reservation too."""
    assert withdraw(api, SEED + LIQUID).status_code == 201

    staff_refund(admin_client, paid_charge)

    assert available_balance(account) == -LIQUID == ledger_sum(account)
    assert withdraw(api, 1000).json() == NO_BALANCE


@pytest.mark.django_db(transaction=True)
def test_withdrawals_racing_a_processing_refund_never_use_the_reserved_money(
    paid_charge: Charge, account: Account
) -> None:
    """A balance of 3455 with 955 being refunded. Six withdrawals of 1000 race
    the refund's reservation on their own connections: two fit beside the
    reservation (three would without it); a third only if all three were
    debited before the reservation was made (the refund may then take the
    balance below zero, as a refund always could)."""
    extra = 1500
    with transaction.atomic():
        ledger_post(
            account_id=account.pk, amount=extra, kind=LedgerEntry.Kind.CHARGE_PAID, reference=f"seed:{uuid.uuid4().hex}"
        )

    def one_withdrawal() -> Withdrawal:
        return withdrawal_request(account=account, amount=1000, key_type="cpf", key_value="52998224725")

    # What charge_refund does once the PSP answered EM_PROCESSAMENTO (the
    # HTTP call before it would only make the reservation come last).
    calls: list[Any] = [lambda: charge_refund_reserve(charge_id=paid_charge.pk)]
    calls += [one_withdrawal] * 6
    outcomes = realworld.run_concurrently(calls)

    assert outcomes[0] is True
    accepted = [o for o in outcomes[1:] if isinstance(o, Withdrawal)]
    refused = [o for o in outcomes[1:] if not isinstance(o, Withdrawal)]
    assert all(isinstance(o, BusinessRuleError) and o.message == NO_BALANCE["message"] for o in refused), refused
    entries = list(LedgerEntry.objects.filter(account=account).order_by("id"))
    (hold,) = [e for e in entries if e.kind == LedgerEntry.Kind.REFUND_HOLD]
    after_hold = [e for e in entries if e.kind == LedgerEntry.Kind.WITHDRAWAL and e.pk > hold.pk]
    assert len(accepted) in (2, 3)
    if len(accepted) == 3:
        assert after_hold == []
    # What was left beside the reservation covers every withdrawal after it.
    assert all(entry.balance_after >= 0 for entry in after_hold)
    assert available_balance(account) == SEED + extra - 1000 * len(accepted) == ledger_sum(account)


def test_the_sandbox_says_where_a_refund_stands_without_making_one(db: Any) -> None:
    from acquirers import adapters
    from acquirers.adapters.base import RefundRequest, RefundStatus
    from tests.factories import AcquirerFactory

    sandbox = adapters.build(AcquirerFactory(key=f"sbx_{uuid.uuid4().hex[:8]}", adapter="sandbox", options={}))
    charge_id = uuid.uuid4()
    request = RefundRequest(
        charge_id=charge_id, txid="t" * 26, e2e_id="E" + "1" * 31, refund_id=refund_id_for(charge_id), amount=1000
    )

    assert sandbox.refund_status(request).status is RefundStatus.NOT_FOUND
    assert sandbox.refund_status(request).status is RefundStatus.NOT_FOUND  # asking made none

    sandbox.options["refund"] = "processing"
    assert sandbox.refund_charge(request).status is RefundStatus.PROCESSING
    assert sandbox.refund_status(request).status is RefundStatus.DONE  # settles on the next read, as on the next ask


# --------------------------------------------------------------------------- the redébito of a devolução

WHY = "Extrato da adquirente conferido"


def api_refund(api: APIClient, charge: Charge, key: str) -> Any:
    with TestCase.captureOnCommitCallbacks(execute=True):
        return api.post(f"/api/transactions/{charge.pk}/refund", None, format="json", headers={"Idempotency-Key": key})


@pytest.fixture
def repaid_twice(api: APIClient, paid_charge: Charge, fake_psp: FakePsp, monkeypatch: pytest.MonkeyPatch) -> Charge:
    """The merchant's refund (API) was processing at the PSP when the MED took
    the money (the chargeback released the reservation), and the PSP made it
    all the same: the release check found it made (an item)."""
    handed: list[int] = []
    monkeypatch.setattr(refunds, "refund_pursue_later", lambda *, refund_id, countdown=0: handed.append(refund_id))
    assert api_refund(api, paid_charge, "first").status_code == 202
    (refund_id,) = handed
    assert charge_refund_pursue(refund_id=refund_id) is RefundOutcome.PROCESSING
    charge_transition(charge_id=paid_charge.pk, to_status=ChargeStatus.CHARGEBACK, source="acquirer")
    fake_psp.settle_refund(paid_charge.e2e_id or "", refund_id_for(paid_charge.pk))
    assert charge_refund_pursue(refund_id=refund_id) is RefundOutcome.ENDED
    assert ChargeRefund.objects.get(pk=refund_id).release_check == "made"
    assert (
        available_balance(paid_charge.account) == SEED == ledger_sum(paid_charge.account)
    )  # held, released, charged back
    return paid_charge


@pytest.fixture
def two_staff(db: Any) -> tuple[Any, Any]:
    """Who asks (operations) and who approves (finance)."""
    return staff_user("operations", "olivia"), staff_user("finance", "fernanda")


def item_of(charge: Charge) -> ReconciliationItem:
    return ReconciliationItem.objects.get(kind="refunded_there_chargeback_here", target_id=str(charge.pk))


def refused(action: str, target_id: Any, maker: Any, match: str | None = None) -> None:
    with pytest.raises(ActionNotExecutable, match=match):
        money_action_request(action=action, target_id=target_id, requested_by=maker, reason=WHY)


def test_a_redebited_devolucao_is_never_debited_again(
    api: APIClient,
    repaid_twice: Charge,
    account: Account,
    fake_psp: FakePsp,
    bacen_acquirer: Acquirer,
    two_staff: tuple[Any, Any],
) -> None:
    charge, (maker, checker) = repaid_twice, two_staff
    item = item_of(charge)
    assert (item.returned_by_refund, item.returned_by_med) == (1000, None)

    approved = asked_and_approved(
        MoneyActionRequest.Action.REDEBIT_REFUND_AFTER_CHARGEBACK, item.pk, maker=maker, checker=checker
    )

    assert (approved.state, approved.amount, approved.target_id) == ("approved", LIQUID, str(item.pk))
    charge.refresh_from_db()
    assert charge.status == ChargeStatus.REFUNDED  # closed with its devolução's debit
    assert available_balance(account) == SEED - LIQUID == ledger_sum(account)
    after = kinds(account)
    assert after[-1] == (LedgerEntry.Kind.CHARGE_REFUND, -LIQUID)

    # The dispute resolved for the account: staff cannot ask it, the acquirer's word changes nothing.
    refused(MoneyActionRequest.Action.RESOLVE_CHARGEBACK, charge.pk, maker)
    resolved = Notification(event=NotificationEvent.CHARGE_CHARGEBACK_RESOLVED, reference=charge.txid)
    assert not charge_event_apply(acquirer=bacen_acquirer, notification=resolved, source="acquirer").changed
    # Refunded again, by API (the contract's envelope), by staff, or the PSP's notice of the devolução: nothing.
    again = api_refund(api, charge, "second")
    assert (again.status_code, again.json()) == (
        409,
        {"success": False, "message": "Só transações pagas podem ser estornadas; esta está estornada.", "data": None},
    )
    refused(MoneyActionRequest.Action.REFUND_CHARGE, charge.pk, maker)
    assert callback(fake_psp, charge.e2e_id or "").status_code == 200
    refused(
        MoneyActionRequest.Action.REDEBIT_REFUND_AFTER_CHARGEBACK, item.pk, maker, "já foi debitado"
    )  # nor a second redébito

    charge.refresh_from_db()
    assert charge.status == ChargeStatus.REFUNDED
    assert kinds(account) == after
    assert available_balance(account) == SEED - LIQUID == ledger_sum(account)
    assert len(fake_psp.calls_of("devolucao.put")) == 1


@pytest.mark.parametrize("how", ["med_completed", "acquirer_notice"])
def test_a_charge_refunded_after_its_chargeback_may_still_be_redebited_once(
    repaid_twice: Charge, account: Account, fake_psp: FakePsp, two_staff: tuple[Any, Any], how: str
) -> None:
    """Chargeback → refunded debits nothing (the chargeback took the money):
    the devolução the PSP made is still the payer's second repayment."""
    charge, (maker, checker) = repaid_twice, two_staff
    if how == "med_completed":
        charge_transition(charge_id=charge.pk, to_status=ChargeStatus.REFUNDED, source="acquirer")
    else:  # the PSP's callback for the Pix with its devolução DEVOLVIDO
        assert callback(fake_psp, charge.e2e_id or "").status_code == 200
    charge.refresh_from_db()
    assert charge.status == ChargeStatus.REFUNDED
    assert available_balance(account) == SEED == ledger_sum(account)

    approved = asked_and_approved(
        MoneyActionRequest.Action.REDEBIT_REFUND_AFTER_CHARGEBACK, item_of(charge).pk, maker=maker, checker=checker
    )

    assert (approved.state, approved.amount) == ("approved", LIQUID)
    assert available_balance(account) == SEED - LIQUID == ledger_sum(account)
    entry = LedgerEntry.objects.filter(account=account).latest("id")
    assert (entry.kind, entry.amount, entry.reference) == (
        LedgerEntry.Kind.CHARGE_REFUND,
        -LIQUID,
        f"charge:{charge.pk}:refund-redebit",
    )
    # Once per devolução (the charge's: D<charge>), whichever item asks.
    refused(MoneyActionRequest.Action.REDEBIT_REFUND_AFTER_CHARGEBACK, item_of(charge).pk, maker, "já foi debitado")
    assert available_balance(account) == SEED - LIQUID == ledger_sum(account)


def test_a_devolucao_the_refund_of_a_paid_charge_debited_is_not_redebited(
    api: APIClient, repaid_twice: Charge, account: Account, two_staff: tuple[Any, Any]
) -> None:
    """The dispute was resolved for the account before anyone asked for the
    redébito: the charge's own refund (the same devolução, answered done)
    debits it, and the item's redébito is refused."""
    charge, (maker, checker) = repaid_twice, two_staff
    assert (
        asked_and_approved(MoneyActionRequest.Action.RESOLVE_CHARGEBACK, charge.pk, maker=maker, checker=checker).state
        == "approved"
    )
    assert api_refund(api, charge, "second").status_code == 202
    refund = ChargeRefund.objects.filter(charge=charge).latest("id")
    assert charge_refund_pursue(refund_id=refund.pk) is RefundOutcome.REFUNDED  # the PSP: that devolução is done
    charge.refresh_from_db()
    assert charge.status == ChargeStatus.REFUNDED
    # Paid, charged back, resolved, refunded: the devolução debited once.
    assert available_balance(account) == SEED == ledger_sum(account)
    before = kinds(account)

    refused(
        MoneyActionRequest.Action.REDEBIT_REFUND_AFTER_CHARGEBACK, item_of(charge).pk, maker, "estornada depois de paga"
    )

    assert kinds(account) == before
    assert available_balance(account) == SEED == ledger_sum(account)
