"""Cancelled here means cancelled at the acquirer (issue 29, part 5), against
the fake API Pix PSP on loopback: staff's cancel and the expiry reach the
PSP (``PATCH /cob/{txid}``), through hangs and 500s, until it answers; a Pix
paid anyway is recorded once as a late payment, never refused, and returned
to the payer through one devolução."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from typing import Any

import pytest
from django.db import DatabaseError
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.models import Account, MoneyActionRequest
from accounts.selectors import available_balance, ledger_sum
from accounts.services import money_action_approve, money_action_request
from acquirers.models import Acquirer, InboundNotification
from observability import selectors
from observability.selectors import Figure
from payments import cancel_pursuit, cancellation
from payments.cancel_pursuit import charge_cancel_pursue
from payments.devolucao_answers import DEVOLUCAO_GRACE
from payments.late_payments import late_payment_return_pursue
from payments.models import Charge, ChargeCancellation, ChargeStatus, LatePayment, LatePaymentResolution
from payments.services import charges_expire
from tests import realworld
from tests.acquirers.conftest import NOTIFY_TOKEN
from tests.acquirers.fake_psp import FakePsp, Fault
from tests.helpers import admin_action

BODY = {
    "payment_method": "pix",
    "amount": 1000,
    "buyer": {"buyer_name": "Fulano", "buyer_document": "52998224725", "buyer_phone": "11999998888"},
}
URL = f"/api/acquirers/bacen/notifications/{NOTIFY_TOKEN}/pix"
CHARGES = reverse("admin:payments_charge_changelist")
REMOVED = "REMOVIDA_PELO_USUARIO_RECEBEDOR"


@pytest.fixture
def charge(api: APIClient, one_ask_acquirer: Acquirer, fake_psp: FakePsp) -> Charge:
    response = api.post("/api/transactions", BODY, format="json")
    assert response.status_code == 201, response.content
    charge = Charge.objects.get(pk=response.json()["data"]["id"])
    assert fake_psp.cobs[charge.txid]["status"] == "ATIVA"
    return charge


def staff_cancel(client: Client, charge: Charge) -> None:
    response = admin_action(client, CHARGES, "cancel", [charge.pk], reason="Pedido desistido pelo cliente")
    assert response.status_code == 200
    assert Charge.objects.get(pk=charge.pk).status == ChargeStatus.CANCELED


def callback(fake_psp: FakePsp, e2e_id: str) -> Any:
    body = json.dumps(fake_psp.callback_body([e2e_id])).encode()
    return APIClient().post(URL, data=body, content_type="application/json")


# --------------------------------------------------------------------------- the cancel reaches the PSP


@pytest.mark.django_db(transaction=True)
def test_staff_cancel_reaches_the_psp_through_a_500_and_a_hang(
    celery_worker_process: Any, charge: Charge, fake_psp: FakePsp, staff_client: Callable[[str], Client]
) -> None:
    """The finding: Cancelar left the code payable at the PSP. Now a worker
    asks, and asks again while the answer is unclear (a 500; then a PATCH the
    PSP carried out but answered too late), until the PSP says it is removed."""
    fake_psp.delay = 2.0  # past the 0.7 s read timeout
    fake_psp.fail("cob.patch", Fault.ERROR, Fault.TIMEOUT)

    staff_cancel(staff_client("operations"), charge)

    realworld.wait_for(
        lambda: ChargeCancellation.objects.get(pk=charge.pk).state == ChargeCancellation.State.DONE, timeout=60
    )
    assert fake_psp.cobs[charge.txid]["status"] == REMOVED
    assert len(fake_psp.calls_of("cob.patch")) == 3  # 500, too late, then "already removed"
    done = ChargeCancellation.objects.get(pk=charge.pk)
    assert (done.attempts, done.next_attempt_at) == (3, None)
    assert done.finished_at is not None


@pytest.mark.django_db
def test_an_unclear_answer_is_asked_again_with_backoff_and_nothing_else_changes(
    charge: Charge, fake_psp: FakePsp, staff_client: Callable[[str], Client]
) -> None:
    fake_psp.fail("cob.patch", Fault.GATEWAY_TIMEOUT, Fault.RESET)
    staff_cancel(staff_client("operations"), charge)

    first = charge_cancel_pursue(charge_id=charge.pk)
    after_first = ChargeCancellation.objects.get(pk=charge.pk)
    second = charge_cancel_pursue(charge_id=charge.pk)
    after_second = ChargeCancellation.objects.get(pk=charge.pk)

    assert (first, second) == (ChargeCancellation.State.PENDING, ChargeCancellation.State.PENDING)
    assert after_first.next_attempt_at is not None
    assert after_second.next_attempt_at is not None
    # The wait doubles: 2 s after the first unclear answer, 4 s after the second.
    assert (cancellation.retry_delay(1), cancellation.retry_delay(2)) == (2, 4)
    assert after_second.next_attempt_at > after_first.next_attempt_at
    assert fake_psp.cobs[charge.txid]["status"] == "ATIVA"
    assert Charge.objects.get(pk=charge.pk).status == ChargeStatus.CANCELED

    assert charge_cancel_pursue(charge_id=charge.pk) == ChargeCancellation.State.DONE
    assert fake_psp.cobs[charge.txid]["status"] == REMOVED
    assert charge_cancel_pursue(charge_id=charge.pk) == ChargeCancellation.State.DONE  # answered: not asked again
    assert len(fake_psp.calls_of("cob.patch")) == 3


@pytest.mark.django_db
def test_a_psp_that_never_answers_is_left_for_staff_on_the_overview_and_asked_again_on_demand(
    charge: Charge, fake_psp: FakePsp, staff_client: Callable[[str], Client], admin_client: Client
) -> None:
    fake_psp.fail("cob.patch", Fault.ERROR, Fault.ERROR)
    operations = staff_client("operations")
    staff_cancel(operations, charge)
    assert charge_cancel_pursue(charge_id=charge.pk) == ChargeCancellation.State.PENDING
    horizon = ChargeCancellation.objects.get(pk=charge.pk).give_up_at

    assert (
        charge_cancel_pursue(charge_id=charge.pk, now=horizon + dt.timedelta(seconds=1))
        == ChargeCancellation.State.GAVE_UP
    )

    gave_up = ChargeCancellation.objects.get(pk=charge.pk)
    assert (gave_up.next_attempt_at, "ErroInternoDoServidor" in gave_up.last_error) == (None, True)
    page = admin_client.get(reverse("admin:index")).content.decode()
    assert "Cancelamentos sem resposta da adquirente" in page
    assert "payments/chargecancellation/?state__exact=gave_up" in page

    listing = reverse("admin:payments_chargecancellation_changelist")
    response = operations.post(listing, {"action": "retry_cancel", "_selected_action": [str(charge.pk)]}, follow=True)
    assert response.status_code == 200
    assert ChargeCancellation.objects.get(pk=charge.pk).state == ChargeCancellation.State.PENDING
    assert charge_cancel_pursue(charge_id=charge.pk) == ChargeCancellation.State.DONE
    assert fake_psp.cobs[charge.txid]["status"] == REMOVED


@pytest.mark.django_db
def test_expiry_cancels_at_the_psp_too(charge: Charge, fake_psp: FakePsp) -> None:
    # Our expiry and the PSP's calendario.expiracao are set apart (a PSP may
    # ignore or cap it): the expiry asks the PSP like staff's cancel.
    Charge.objects.filter(pk=charge.pk).update(expires_at=timezone.now() - dt.timedelta(seconds=1))

    assert charges_expire() == 1

    assert charge_cancel_pursue(charge_id=charge.pk) == ChargeCancellation.State.DONE
    assert fake_psp.cobs[charge.txid]["status"] == REMOVED


# --------------------------------------------------------------------------- a Pix paid anyway


@pytest.mark.django_db
def test_a_pix_paid_after_the_cancel_is_recorded_once_with_its_evidence_never_refused(
    charge: Charge, fake_psp: FakePsp, account: Account, staff_client: Callable[[str], Client], admin_client: Client
) -> None:
    """The finding: the payer paid the still live code and the money was
    refused here, with no way to credit or return it."""
    staff_cancel(staff_client("operations"), charge)  # the ask has not reached the PSP yet
    e2e_id = fake_psp.pay(charge.txid)

    first, again = callback(fake_psp, e2e_id), callback(fake_psp, e2e_id)  # the PSP notifies twice

    assert (first.status_code, again.status_code) == (200, 200)
    assert InboundNotification.objects.filter(status=InboundNotification.Status.PROCESSED).count() == 2
    (late,) = LatePayment.objects.all()
    assert (late.charge_id, late.acquirer_id, late.e2e_id, late.amount) == (
        charge.pk,
        charge.acquirer_id,
        e2e_id,
        1000,
    )
    assert (late.platform_tax, late.liquid_amount, late.status) == (charge.platform_tax, charge.liquid_amount, "open")
    assert late.payer_info == "Pagamento de teste"
    assert (late.raw["endToEndId"], late.raw["txid"]) == (e2e_id, charge.txid)
    assert (late.charge_status, late.source) == (ChargeStatus.CANCELED, "acquirer")
    # Nothing credited by itself; the charge keeps the status the contract allows.
    assert available_balance(account) == 0 == ledger_sum(account)
    assert Charge.objects.get(pk=charge.pk).status == ChargeStatus.CANCELED

    assert selectors.attention().late_payments_open == Figure(1, 1000)
    page = admin_client.get(reverse("admin:index")).content.decode()
    assert "payments/latepayment/?status__exact=open" in page
    listing = admin_client.get(reverse("admin:payments_latepayment_changelist") + "?status__exact=open")
    assert (listing.status_code, listing.context["cl"].result_count) == (200, 1)
    detail = admin_client.get(reverse("admin:payments_latepayment_change", args=[late.pk])).content.decode()
    assert e2e_id in detail
    assert "Pagamento de teste" in detail


@pytest.mark.django_db
def test_a_cancel_that_finds_the_charge_paid_there_records_the_pix(
    charge: Charge, fake_psp: FakePsp, staff_client: Callable[[str], Client]
) -> None:
    staff_cancel(staff_client("operations"), charge)
    e2e_id = fake_psp.pay(charge.txid)  # before the ask; its callback lost

    assert charge_cancel_pursue(charge_id=charge.pk) == ChargeCancellation.State.PAID_THERE

    (late,) = LatePayment.objects.all()
    assert (late.e2e_id, late.amount, late.status) == (e2e_id, 1000, "open")
    assert [c.path for c in fake_psp.calls_of("cob.get")][-1] == f"/api/cob/{charge.txid}"


# --------------------------------------------------------------------------- returned to the payer


def return_approved(late: LatePayment, django_user_model: Any) -> LatePaymentResolution:
    """Staff order the Pix back to its payer (maker-checker); the ask is the test's to drive."""
    maker = django_user_model.objects.create_user(username="maker", is_staff=True)
    checker = django_user_model.objects.create_superuser(username="checker", password="x")
    pending = money_action_request(
        action=MoneyActionRequest.Action.RETURN_LATE_PAYMENT,
        target_id=late.pk,
        requested_by=maker,
        reason="O pagador pediu o dinheiro de volta",
    )
    assert money_action_approve(request_id=pending.pk, approver=checker).state == "approved"
    return LatePaymentResolution.objects.get(late_payment=late)


def late_paid(charge: Charge, fake_psp: FakePsp, staff_client: Callable[[str], Client]) -> tuple[str, LatePayment]:
    staff_cancel(staff_client("operations"), charge)
    e2e_id = fake_psp.pay(charge.txid)
    assert callback(fake_psp, e2e_id).status_code == 200
    return e2e_id, LatePayment.objects.get()


@pytest.mark.django_db
def test_a_late_payment_returned_is_one_devolucao_even_after_an_unclear_answer(
    charge: Charge,
    fake_psp: FakePsp,
    account: Account,
    staff_client: Callable[[str], Client],
    django_user_model: Any,
) -> None:
    e2e_id, late = late_paid(charge, fake_psp, staff_client)
    resolution = return_approved(late, django_user_model)
    assert LatePayment.objects.get().status == "returning"

    fake_psp.delay = 2.0
    fake_psp.fail("devolucao.put", Fault.TIMEOUT)  # made there, answered too late
    assert late_payment_return_pursue(resolution_id=resolution.pk) == "processing"
    assert LatePayment.objects.get().status == "returning"
    assert late_payment_return_pursue(resolution_id=resolution.pk) == "done"
    assert late_payment_return_pursue(resolution_id=resolution.pk) == "done"  # ended: not asked again

    assert LatePayment.objects.get().status == "returned"
    devolucoes = fake_psp.pix[e2e_id]["devolucoes"]
    assert [(d["id"], d["valor"], d["status"]) for d in devolucoes] == [(resolution.refund_id, "10.00", "DEVOLVIDO")]
    assert len(fake_psp.calls_of("devolucao.put")) == 2
    # The money never was the account's: nothing moves on its balance.
    assert available_balance(account) == 0 == ledger_sum(account)


@pytest.mark.django_db
def test_a_refusal_after_an_unanswered_ask_is_not_final_and_the_pix_goes_back_once(
    charge: Charge,
    fake_psp: FakePsp,
    account: Account,
    staff_client: Callable[[str], Client],
    django_user_model: Any,
) -> None:
    """The finding: the first PUT timed out while the PSP processed it; the
    retry was refused and the GET said 404 (not visible yet), so the return
    failed, the late payment reopened, and staff could credit it or return
    it again while the first devolução landed: the money out twice."""
    e2e_id, late = late_paid(charge, fake_psp, staff_client)
    resolution = return_approved(late, django_user_model)

    fake_psp.delay = 2.0
    fake_psp.fail("devolucao.put", Fault.TIMEOUT)  # taken there, answered too late...
    assert late_payment_return_pursue(resolution_id=resolution.pk) == "processing"
    fake_psp.withhold_refund(e2e_id, resolution.refund_id)  # ...and not visible yet

    # Asked again: refused (the queued one takes the Pix's value) and not
    # found. After an unanswered ask that is no "not made": asked again.
    assert late_payment_return_pursue(resolution_id=resolution.pk) == "processing"
    assert late_payment_return_pursue(resolution_id=resolution.pk) == "processing"
    assert len(fake_psp.calls_of("devolucao.get")) == 2  # the adapter's read after each refusal: 404
    assert LatePayment.objects.get().status == "returning"  # never reopened: nothing to credit or return again
    asked = LatePaymentResolution.objects.get()
    assert (asked.status, asked.attempts, asked.unclear_at is not None) == ("processing", 3, True)
    assert "pedido anterior ficou sem resposta" in asked.last_error

    fake_psp.land_refund(e2e_id, resolution.refund_id)
    assert late_payment_return_pursue(resolution_id=resolution.pk) == "done"

    assert LatePayment.objects.get().status == "returned"
    devolucoes = fake_psp.pix[e2e_id]["devolucoes"]
    assert [(d["id"], d["valor"], d["status"]) for d in devolucoes] == [(resolution.refund_id, "10.00", "DEVOLVIDO")]
    assert LatePaymentResolution.objects.count() == 1
    assert available_balance(account) == 0 == ledger_sum(account)


@pytest.mark.django_db
def test_a_refusal_after_an_unanswered_ask_fails_the_return_once_the_psp_confirms_none_past_the_grace(
    charge: Charge,
    fake_psp: FakePsp,
    account: Account,
    staff_client: Callable[[str], Client],
    django_user_model: Any,
) -> None:
    _, late = late_paid(charge, fake_psp, staff_client)
    resolution = return_approved(late, django_user_model)
    fake_psp.fail("devolucao.put", Fault.RESET, Fault.DECLINED, Fault.DECLINED)  # it never took one

    assert late_payment_return_pursue(resolution_id=resolution.pk) == "processing"  # no answer
    assert late_payment_return_pursue(resolution_id=resolution.pk) == "processing"  # refused: not final yet
    LatePaymentResolution.objects.filter(pk=resolution.pk).update(
        unclear_at=timezone.now() - DEVOLUCAO_GRACE - dt.timedelta(minutes=1)
    )
    gets = len(fake_psp.calls_of("devolucao.get"))
    assert late_payment_return_pursue(resolution_id=resolution.pk) == "failed"  # refused, and none there

    # Past the grace the PSP's read (GET, never a PUT) confirmed there is none.
    assert len(fake_psp.calls_of("devolucao.get")) == gets + 2  # the adapter's read after the refusal, then ours
    assert len(fake_psp.calls_of("devolucao.put")) == 3
    failed = LatePaymentResolution.objects.get()
    assert "sem devolução na adquirente 24 h depois" in failed.failure_reason
    assert (LatePayment.objects.get().status, fake_psp.pix[late.e2e_id].get("devolucoes")) == ("open", None)
    assert available_balance(account) == 0 == ledger_sum(account)


@pytest.mark.django_db
def test_an_explicit_not_made_after_an_unanswered_ask_is_final(
    charge: Charge, fake_psp: FakePsp, staff_client: Callable[[str], Client], django_user_model: Any
) -> None:
    e2e_id, late = late_paid(charge, fake_psp, staff_client)
    resolution = return_approved(late, django_user_model)
    fake_psp.refund_mode = "async"
    fake_psp.delay = 2.0
    fake_psp.fail("devolucao.put", Fault.TIMEOUT)
    assert late_payment_return_pursue(resolution_id=resolution.pk) == "processing"
    fake_psp.settle_refund(e2e_id, resolution.refund_id, status="NAO_REALIZADO")

    assert late_payment_return_pursue(resolution_id=resolution.pk) == "failed"
    assert LatePayment.objects.get().status == "open"


# --------------------------------------------------------------------------- an answer that cannot be recorded


@pytest.mark.django_db
def test_a_paid_there_whose_pix_cannot_be_recorded_is_asked_again_then_given_up_never_forever(
    charge: Charge, fake_psp: FakePsp, staff_client: Callable[[str], Client], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The finding: an error recording the Pix escaped, the cancellation
    stayed pending past its horizon, and the sweep asked again forever."""
    staff_cancel(staff_client("operations"), charge)
    fake_psp.pay(charge.txid)

    def broken(**kwargs: Any) -> Any:
        raise DatabaseError("could not serialize access")

    # Looked up by the ask when it runs: the pursuit applies the Pix through it.
    monkeypatch.setattr(cancel_pursuit, "charge_event_apply", broken)
    assert charge_cancel_pursue(charge_id=charge.pk) == ChargeCancellation.State.PENDING
    pending = ChargeCancellation.objects.get(pk=charge.pk)
    assert (pending.attempts, pending.next_attempt_at is not None) == (1, True)
    assert "registro do Pix falhou: DatabaseError" in pending.last_error

    assert (
        charge_cancel_pursue(charge_id=charge.pk, now=pending.give_up_at + dt.timedelta(seconds=1))
        == ChargeCancellation.State.GAVE_UP
    )
    assert LatePayment.objects.count() == 0  # nothing half recorded


@pytest.mark.django_db
def test_the_sweep_leaves_a_cancellation_past_its_horizon_to_staff(
    charge: Charge, staff_client: Callable[[str], Client], monkeypatch: pytest.MonkeyPatch
) -> None:
    handed: list[Any] = []
    monkeypatch.setattr(cancellation, "cancel_pursue_later", lambda **kwargs: handed.append(kwargs))
    staff_cancel(staff_client("operations"), charge)
    past = timezone.now() - dt.timedelta(minutes=10)
    ChargeCancellation.objects.filter(pk=charge.pk).update(next_attempt_at=past, give_up_at=past)

    assert cancellation.cancellations_sweep() == 0

    assert handed == []
    gave_up = ChargeCancellation.objects.get(pk=charge.pk)
    assert (gave_up.state, gave_up.next_attempt_at) == (ChargeCancellation.State.GAVE_UP, None)
