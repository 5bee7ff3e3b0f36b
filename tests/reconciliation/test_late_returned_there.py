"""A Pix paid after its charge was cancelled here (a late payment) that the
PSP says went back to the payer other than by a return of ours (a devolução
made there, a MED): never unnoticed, never credited after it, and the
account's balance never moved by it automatically. Against the fake API Pix
PSP on loopback, through each way the news comes: the daily reconciliation,
the PSP's callback, the cancel's read of a charge paid there, a MED notice."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.exceptions import ActionNotExecutable
from accounts.models import Account, MoneyActionRequest
from accounts.selectors import available_balance, ledger_sum
from accounts.services import money_action_approve, money_action_request
from acquirers.adapters.base import Notification, NotificationEvent
from acquirers.models import Acquirer, InboundNotification
from payments import cancellation
from payments.cancel_pursuit import charge_cancel_pursue
from payments.events import charge_event_apply
from payments.late_payments import late_payment_return_pursue
from payments.models import Charge, ChargeCancellation, ChargeStatus, LatePayment
from payments.services import charge_transition
from reconciliation.models import ReconciliationItem
from reconciliation.run import acquirer_reconcile
from tests.acquirers.conftest import NOTIFY_TOKEN
from tests.acquirers.fake_psp import FakePsp

pytestmark = pytest.mark.django_db
LIQUID = 955  # 1000 - (30 + 1.5%)
BODY = {
    "payment_method": "pix",
    "amount": 1000,
    "buyer": {"buyer_name": "Fulano", "buyer_document": "52998224725", "buyer_phone": "11999998888"},
}
URL = f"/api/acquirers/bacen/notifications/{NOTIFY_TOKEN}/pix"


@pytest.fixture(autouse=True)
def _cancel_driven_by_the_test(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cancellation, "cancel_pursue_later", lambda **kwargs: None)


@pytest.fixture
def maker(django_user_model: Any) -> User:
    user: User = django_user_model.objects.create_user(username="maker", is_staff=True)
    return user


@pytest.fixture
def checker(django_user_model: Any) -> User:
    user: User = django_user_model.objects.create_superuser(username="checker", password="x")
    return user


def late_paid(api: APIClient, fake_psp: FakePsp) -> tuple[Charge, LatePayment]:
    """Cancelled here; the payer paid the code still live at the PSP, and its callback recorded the late payment."""
    response = api.post("/api/transactions", BODY, format="json")
    assert response.status_code == 201, response.content
    charge = Charge.objects.get(pk=response.json()["data"]["id"])
    charge_transition(charge_id=charge.pk, to_status=ChargeStatus.CANCELED, source="staff", actor="op")
    e2e_id = fake_psp.pay(charge.txid)
    assert callback(fake_psp, e2e_id).status_code == 200
    return charge, LatePayment.objects.get(e2e_id=e2e_id)


def callback(fake_psp: FakePsp, e2e_id: str) -> Any:
    body = json.dumps(fake_psp.callback_body([e2e_id])).encode()
    return APIClient().post(URL, data=body, content_type="application/json")


def credited(late: LatePayment, maker: User, checker: User) -> None:
    pending = money_action_request(
        action=MoneyActionRequest.Action.CREDIT_LATE_PAYMENT, target_id=late.pk, requested_by=maker, reason="Ok"
    )
    assert money_action_approve(request_id=pending.pk, approver=checker).state == "approved"


def returned_there(fake_psp: FakePsp, e2e_id: str, valor: str, natureza: str = "MED_OPERACIONAL") -> None:
    """A devolução the PSP made out of band (a MED, or someone at the PSP)."""
    with fake_psp.lock:
        pix = fake_psp.pix[e2e_id]
        pix.setdefault("devolucoes", []).append(
            {
                "id": f"M{len(pix.get('devolucoes', []))}x",
                "rtrId": "D12345678202611270000abcdefghijk",
                "valor": valor,
                "natureza": natureza,
                "horario": {"solicitacao": pix["horario"], "liquidacao": pix["horario"]},
                "status": "DEVOLVIDO",
            }
        )


def reconcile(acquirer: Acquirer) -> None:
    acquirer_reconcile(acquirer_id=acquirer.pk, day=timezone.localdate())


def items() -> list[tuple[str, str, str]]:
    return sorted(ReconciliationItem.objects.values_list("kind", "key", "status"))


# --------------------------------------------------------------------------- the daily reconciliation


def test_a_credited_late_pix_returned_there_is_an_item_and_debits_nothing(
    api: APIClient, account: Account, bacen_acquirer: Acquirer, fake_psp: FakePsp, maker: User, checker: User
) -> None:
    """The finding: a returned record counted as matched because a late
    payment with its e2e id existed, even one credited to the merchant."""
    _, late = late_paid(api, fake_psp)
    credited(late, maker, checker)
    returned_there(fake_psp, late.e2e_id, "10.00")

    reconcile(bacen_acquirer)
    reconcile(bacen_acquirer)  # a rerun, the same item

    assert items() == [(ReconciliationItem.Kind.REFUND_DIFFERS, late.e2e_id, "open")]
    item = ReconciliationItem.objects.get()
    assert f"#{late.pk} creditado à conta" in item.detail
    assert "Nada debitado automaticamente" in item.detail
    late.refresh_from_db()
    assert (late.status, late.returned_there, late.returned_there_at is not None) == ("credited", 1000, True)
    assert late.returned_there_evidence["record"]["devolucoes"][0]["natureza"] == "MED_OPERACIONAL"
    assert available_balance(account) == ledger_sum(account) == LIQUID


def test_an_open_late_pix_partly_returned_there_is_an_item_and_its_credit_refused(
    api: APIClient, account: Account, bacen_acquirer: Acquirer, fake_psp: FakePsp, maker: User, checker: User
) -> None:
    """The finding: a paid record with part returned produced no item, and
    the late payment could be credited in full."""
    _, late = late_paid(api, fake_psp)
    asked_before = money_action_request(
        action=MoneyActionRequest.Action.CREDIT_LATE_PAYMENT, target_id=late.pk, requested_by=maker, reason="Creditar"
    )
    returned_there(fake_psp, late.e2e_id, "4.00", natureza="ORIGINAL")

    reconcile(bacen_acquirer)

    assert items() == sorted(
        [
            (ReconciliationItem.Kind.PAID_THERE_NOT_HERE, late.e2e_id, "healed"),
            (ReconciliationItem.Kind.PARTIAL_RETURN, late.e2e_id, "open"),
        ]
    )
    assert "R$ 4,00 de R$ 10,00" in ReconciliationItem.objects.get(kind=ReconciliationItem.Kind.PARTIAL_RETURN).detail
    late.refresh_from_db()
    assert (late.status, late.returned_there) == ("open", 400)
    # The request made before is refused at its approval; a new one when asked.
    decided = money_action_approve(request_id=asked_before.pk, approver=checker)
    assert decided.state == "failed"
    assert "voltaram ao pagador" in decided.outcome
    with pytest.raises(ActionNotExecutable, match="não há como creditá-lo"):
        money_action_request(
            action=MoneyActionRequest.Action.CREDIT_LATE_PAYMENT,
            target_id=late.pk,
            requested_by=maker,
            reason="De novo",
        )
    assert available_balance(account) == ledger_sum(account) == 0


def test_an_open_late_pix_returned_in_full_there_is_closed_as_returned(
    api: APIClient, account: Account, bacen_acquirer: Acquirer, fake_psp: FakePsp
) -> None:
    _, late = late_paid(api, fake_psp)
    returned_there(fake_psp, late.e2e_id, "10.00")

    reconcile(bacen_acquirer)

    late.refresh_from_db()
    assert (late.status, late.returned_there, late.resolved_at is not None) == ("returned", 1000, True)
    assert items() == [(ReconciliationItem.Kind.REFUND_DIFFERS, late.e2e_id, "healed")]
    assert "Encerrado como devolvido" in ReconciliationItem.objects.get().detail
    assert available_balance(account) == ledger_sum(account) == 0


def test_a_late_pix_returned_by_us_is_matched_with_no_item(
    api: APIClient, account: Account, bacen_acquirer: Acquirer, fake_psp: FakePsp, maker: User, checker: User
) -> None:
    _, late = late_paid(api, fake_psp)
    pending = money_action_request(
        action=MoneyActionRequest.Action.RETURN_LATE_PAYMENT, target_id=late.pk, requested_by=maker, reason="X"
    )
    assert money_action_approve(request_id=pending.pk, approver=checker).state == "approved"
    (resolution,) = late.resolutions.all()
    assert late_payment_return_pursue(resolution_id=resolution.pk) == "done"

    assert callback(fake_psp, late.e2e_id).status_code == 200  # the PSP's word on our devolução

    reconcile(bacen_acquirer)
    assert items() == []
    assert InboundNotification.objects.filter(status=InboundNotification.Status.FAILED).count() == 0
    late.refresh_from_db()
    assert (late.status, late.returned_there) == ("returned", 0)


# --------------------------------------------------------------------------- notifications and the cancel


def test_the_psps_callback_of_a_return_made_there_is_recorded_and_shown_never_refused(
    api: APIClient, account: Account, fake_psp: FakePsp, bacen_acquirer: Acquirer, maker: User, checker: User
) -> None:
    _, late = late_paid(api, fake_psp)
    credited(late, maker, checker)
    returned_there(fake_psp, late.e2e_id, "10.00")

    assert callback(fake_psp, late.e2e_id).status_code == 200

    last = InboundNotification.objects.order_by("-pk").first()
    assert last is not None
    assert (last.status, last.error) == (InboundNotification.Status.PROCESSED, "")
    assert items() == [(ReconciliationItem.Kind.REFUND_DIFFERS, late.e2e_id, "open")]
    late.refresh_from_db()
    assert (late.status, late.returned_there) == ("credited", 1000)
    assert available_balance(account) == ledger_sum(account) == LIQUID


def test_a_med_on_a_cancelled_charge_with_a_credited_late_pix_is_recorded_for_staff(
    api: APIClient, account: Account, fake_psp: FakePsp, bacen_acquirer: Acquirer, maker: User, checker: User
) -> None:
    """The finding: the MED notice on the cancelled charge was just refused."""
    charge, late = late_paid(api, fake_psp)
    credited(late, maker, checker)
    med = Notification(event=NotificationEvent.CHARGE_CHARGEBACK, reference=charge.txid, raw={"med": "fraude"})

    result = charge_event_apply(acquirer=bacen_acquirer, notification=med, source="acquirer")

    assert result.changed
    late.refresh_from_db()
    assert (late.status, late.returned_there, late.returned_there_evidence["record"]) == (
        "credited",
        1000,
        {"med": "fraude"},
    )
    assert items() == [(ReconciliationItem.Kind.REFUND_DIFFERS, late.e2e_id, "open")]
    assert Charge.objects.get(pk=charge.pk).status == ChargeStatus.CANCELED
    assert available_balance(account) == ledger_sum(account) == LIQUID  # nothing debited automatically


def test_a_cancel_that_finds_the_pix_paid_and_returned_there_records_both(
    api: APIClient, account: Account, fake_psp: FakePsp, bacen_acquirer: Acquirer
) -> None:
    response = api.post("/api/transactions", BODY, format="json")
    charge = Charge.objects.get(pk=response.json()["data"]["id"])
    charge_transition(charge_id=charge.pk, to_status=ChargeStatus.CANCELED, source="staff", actor="op")
    e2e_id = fake_psp.pay(charge.txid)  # its callback lost
    returned_there(fake_psp, e2e_id, "10.00")

    assert charge_cancel_pursue(charge_id=charge.pk) == ChargeCancellation.State.PAID_THERE

    late = LatePayment.objects.get()
    assert (late.e2e_id, late.status, late.returned_there) == (e2e_id, "returned", 1000)
    assert items() == [(ReconciliationItem.Kind.REFUND_DIFFERS, e2e_id, "healed")]
    assert available_balance(account) == ledger_sum(account) == 0
