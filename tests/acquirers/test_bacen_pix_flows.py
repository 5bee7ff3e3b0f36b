"""Charges through ``bacen_pix`` and what the PSP tells us afterwards: the
``/pix`` callback (secret URL token, confirmed with ``GET /pix/{e2eid}``
before money moves), status polling, and refunds through a devolução."""

from __future__ import annotations

import datetime as dt
import json
import logging
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from accounts.models import Account, LedgerEntry
from accounts.selectors import available_balance, ledger_sum
from acquirers.adapters.base import NOTIFICATION_TOKEN_HEADER
from acquirers.inbound import REJECTED_BODY_KEPT_BYTES
from acquirers.models import Acquirer, InboundNotification
from payments.models import Charge, ChargeRefund, ChargeStatus
from payments.refunds import RefundOutcome, charge_refund_pursue, refund_id_for
from payments.status_polling import charges_status_poll
from tests.acquirers.conftest import NOTIFY_TOKEN, bacen_options
from tests.acquirers.fake_psp import FakePsp, Fault
from tests.helpers import staff_refund

pytestmark = pytest.mark.django_db
Status = InboundNotification.Status
AMOUNT = 1000
LIQUID = 955  # 1000 - (30 + 1.5%)
BODY = {
    "payment_method": "pix",
    "amount": AMOUNT,
    "buyer": {"buyer_name": "Fulano", "buyer_document": "52998224725", "buyer_phone": "11999998888"},
}
URL = f"/api/acquirers/bacen/notifications/{NOTIFY_TOKEN}/pix"
CHARGES = reverse("admin:payments_charge_changelist")


@pytest.fixture
def charge(api: APIClient, bacen_acquirer: Acquirer, fake_psp: FakePsp) -> Charge:
    response = api.post("/api/transactions", BODY, format="json")
    assert response.status_code == 201, response.content
    charge = Charge.objects.get(pk=response.json()["data"]["id"])
    assert charge.acquirer == bacen_acquirer
    assert charge.emv == fake_psp.cobs[charge.txid]["pixCopiaECola"]
    assert fake_psp.cobs[charge.txid]["calendario"]["expiracao"] == charge.account.charge_expiry_seconds
    return charge


def callback(body: Any, url: str = URL, **headers: Any) -> Any:
    """What the PSP POSTs to ``{webhookUrl}/pix``: no credentials of ours, the token in the URL."""
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return APIClient().post(url, data=raw, content_type="application/json", **headers)


def refresh(charge: Charge) -> Charge:
    charge.refresh_from_db()
    return charge


def inbound() -> InboundNotification:
    return InboundNotification.objects.latest("id")


# --------------------------------------------------------------------------- notifications


def test_a_confirmed_callback_pays_the_charge_and_credits_the_balance(
    charge: Charge, fake_psp: FakePsp, account: Account
) -> None:
    e2e_id = fake_psp.pay(charge.txid)
    body = fake_psp.callback_body([e2e_id])

    response = callback(body)

    assert response.status_code == 200, response.content
    assert response.json()["data"] == {"processed": 1}
    charge = refresh(charge)
    assert (charge.status, charge.e2e_id) == (ChargeStatus.PAID, e2e_id)
    assert charge.paid_at is not None
    assert available_balance(account) == LIQUID == ledger_sum(account)
    # Confirmed with the PSP before the money moved.
    assert [c.path for c in fake_psp.calls_of("pix.get")] == [f"/api/pix/{e2e_id}"]
    stored = inbound()
    assert (stored.status, stored.error) == (Status.PROCESSED, "")
    assert json.loads(stored.body) == body
    # The token is a secret of the URL: never stored.
    assert NOTIFY_TOKEN not in json.dumps(stored.headers)
    assert NOTIFICATION_TOKEN_HEADER.lower() not in {k.lower() for k in stored.headers}

    again = callback(body)  # the PSP retries: nothing more happens
    assert again.json()["data"] == {"processed": 0}
    assert available_balance(account) == LIQUID


def test_the_route_without_the_pix_suffix_works_too(charge: Charge, fake_psp: FakePsp) -> None:
    e2e_id = fake_psp.pay(charge.txid)
    response = callback(fake_psp.callback_body([e2e_id]), url=URL.removesuffix("/pix"))
    assert response.status_code == 200
    assert refresh(charge).status == ChargeStatus.PAID


@pytest.mark.parametrize(
    ("url", "headers"),
    [
        (URL.replace(NOTIFY_TOKEN, "wrong-token"), {}),
        (URL.replace(NOTIFY_TOKEN, NOTIFY_TOKEN[:-1]), {}),
        # A client cannot hand the adapter the token in a header: only the URL counts.
        ("/api/acquirers/bacen/notifications", {"HTTP_X_PIX_SERVICE_NOTIFICATION_TOKEN": NOTIFY_TOKEN}),
    ],
)
def test_a_callback_without_the_token_is_rejected_before_asking_the_psp(
    charge: Charge, fake_psp: FakePsp, account: Account, url: str, headers: dict[str, str]
) -> None:
    e2e_id = fake_psp.pay(charge.txid)

    response = callback(fake_psp.callback_body([e2e_id]), url=url, **headers)

    assert response.status_code == 401
    assert response.json()["message"] == "Notificação não autenticada."
    assert refresh(charge).status == ChargeStatus.PENDING
    assert available_balance(account) == 0
    assert fake_psp.calls_of("pix.get") == []
    assert (inbound().status, inbound().error) == (Status.REJECTED, "wrong or missing notification token")


def test_a_forged_callback_is_refused_on_its_token_before_it_is_stored_whole(charge: Charge, fake_psp: FakePsp) -> None:
    e2e_id = fake_psp.pay(charge.txid)
    body = json.dumps({**fake_psp.callback_body([e2e_id]), "padding": "x" * 200_000}).encode()

    response = callback(body, url=URL.replace(NOTIFY_TOKEN, "forged-token"))

    assert response.status_code == 401
    assert fake_psp.calls_of("pix.get") == []
    assert refresh(charge).status == ChargeStatus.PENDING
    assert len(inbound().body) == REJECTED_BODY_KEPT_BYTES
    assert inbound().status == Status.REJECTED


def test_a_callback_for_a_pix_the_psp_does_not_know_is_rejected(charge: Charge, fake_psp: FakePsp) -> None:
    forged = {"pix": [{"endToEndId": "E12345678202601011200abcdefghijk", "txid": charge.txid, "valor": "10.00",
                       "horario": "2026-01-01T12:00:00Z"}]}  # fmt: skip

    response = callback(forged)

    assert response.status_code == 401
    assert refresh(charge).status == ChargeStatus.PENDING
    assert inbound().status == Status.REJECTED
    assert "unknown to the acquirer" in inbound().error


def test_the_callbacks_own_figures_are_not_trusted(charge: Charge, fake_psp: FakePsp, account: Account) -> None:
    e2e_id = fake_psp.pay(charge.txid)
    body = fake_psp.callback_body([e2e_id])
    body["pix"][0]["valor"] = "9999.00"  # whatever the callback says, the PSP's GET /pix is what counts

    assert callback(body).status_code == 200
    assert available_balance(account) == LIQUID

    other = fake_psp.callback_body([e2e_id])
    other["pix"][0]["txid"] = "another0txid0that0is0not0this0one"
    assert callback(other).status_code == 401


def test_a_psp_that_cannot_confirm_now_gets_a_503_and_its_retry_pays(
    charge: Charge, fake_psp: FakePsp, account: Account
) -> None:
    e2e_id = fake_psp.pay(charge.txid)
    fake_psp.fail("pix.get", Fault.UNAVAILABLE, Fault.UNAVAILABLE)  # the call and its one retry

    response = callback(fake_psp.callback_body([e2e_id]))

    assert response.status_code == 503
    assert response.json() == {
        "success": False,
        "message": "Notificação não confirmada na adquirente. Tente novamente.",
        "data": None,
    }
    assert refresh(charge).status == ChargeStatus.PENDING
    assert available_balance(account) == 0
    assert inbound().status == Status.FAILED
    assert inbound().error.startswith("not confirmed with the acquirer")

    assert callback(fake_psp.callback_body([e2e_id])).status_code == 200
    assert refresh(charge).status == ChargeStatus.PAID
    assert available_balance(account) == LIQUID


def test_a_psp_drip_feeding_its_confirmation_is_cut_at_the_budget_and_retries_later(
    charge: Charge, fake_psp: FakePsp, account: Account, bacen_acquirer: Acquirer
) -> None:
    """The lookup that confirms a notification runs outside the guarded
    call (inside the PSP's own request) but is cut at the socket all the
    same: a PSP answering a byte at a time holds a web thread no longer
    than its budget."""
    e2e_id = fake_psp.pay(charge.txid)
    fake_psp.fail("pix.get", Fault.DRIP)
    budget = (bacen_acquirer.connect_timeout_ms + bacen_acquirer.read_timeout_ms) / 1000
    started = time.monotonic()

    response = callback(fake_psp.callback_body([e2e_id]))

    assert response.status_code == 503
    assert time.monotonic() - started <= budget + 1
    assert refresh(charge).status == ChargeStatus.PENDING
    assert available_balance(account) == 0
    assert inbound().status == Status.FAILED
    assert callback(fake_psp.callback_body([e2e_id])).status_code == 200
    assert refresh(charge).status == ChargeStatus.PAID


def test_a_payment_of_another_amount_is_kept_for_staff(charge: Charge, fake_psp: FakePsp, account: Account) -> None:
    e2e_id = fake_psp.pay(charge.txid, amount="1.00")

    response = callback(fake_psp.callback_body([e2e_id]))

    assert response.status_code == 200  # the PSP must stop retrying; staff take it from here
    assert response.json()["data"] == {"processed": 0}
    assert refresh(charge).status == ChargeStatus.PENDING
    assert available_balance(account) == 0
    assert inbound().status == Status.FAILED
    assert "Valor pago (100) difere do valor da cobrança (1000)" in inbound().error


def test_the_registration_test_call_is_accepted(bacen_acquirer: Acquirer, fake_psp: FakePsp) -> None:
    response = callback({"evento": "teste_webhook"})
    assert response.status_code == 200
    assert response.json()["data"] == {"processed": 0}
    assert fake_psp.calls == []


@pytest.mark.parametrize("body", [b"not json", b'{"pix": {"endToEndId": "x"}}', b'{"pix": [{"endToEndId": "../cob"}]}'])
def test_unreadable_callbacks_are_refused(bacen_acquirer: Acquirer, fake_psp: FakePsp, body: bytes) -> None:
    response = callback(body)
    assert response.status_code == 400
    assert inbound().status == Status.REJECTED
    assert fake_psp.calls == []


def test_an_acquirer_without_a_notification_token_refuses_every_callback(
    make_bacen_acquirer: Callable[..., Acquirer], fake_psp: FakePsp
) -> None:
    options = bacen_options(fake_psp)
    del options["notification_token_env"]
    make_bacen_acquirer(options=options)
    assert callback({"pix": []}).status_code == 401


def test_a_notification_token_variable_left_unset_is_a_503_kept_for_staff(
    make_bacen_acquirer: Callable[..., Acquirer],
    fake_psp: FakePsp,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.delenv("PIX_TEST_BACEN_UNSET_NOTIFY_TOKEN", raising=False)
    make_bacen_acquirer(options=bacen_options(fake_psp, notification_token_env="PIX_TEST_BACEN_UNSET_NOTIFY_TOKEN"))

    with caplog.at_level(logging.INFO):
        response = callback({"pix": []})

    assert response.status_code == 503
    assert response.json() == {
        "success": False,
        "message": "Notificação não confirmada na adquirente. Tente novamente.",
        "data": None,
    }
    assert inbound().status == Status.REJECTED
    assert "PIX_TEST_BACEN_UNSET_NOTIFY_TOKEN is not set" in inbound().error
    assert NOTIFY_TOKEN not in json.dumps(inbound().headers)
    # Django notes the 503's path (redacted by our handler), but there is no trace.
    assert [r.getMessage() for r in caplog.records if r.exc_info or r.levelno > logging.ERROR] == []
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR] == [f"Service Unavailable: {URL}"]
    assert fake_psp.calls == []


# --------------------------------------------------------------------------- polling


def test_reconciliation_pays_a_charge_whose_callback_was_lost(
    charge: Charge, fake_psp: FakePsp, account: Account
) -> None:
    e2e_id = fake_psp.pay(charge.txid)  # no callback

    assert charges_status_poll(older_than=dt.timedelta(0)) == 1

    charge = refresh(charge)
    assert (charge.status, charge.e2e_id) == (ChargeStatus.PAID, e2e_id)
    assert available_balance(account) == LIQUID
    # Each charge is polled at most once per interval, whichever process runs it.
    assert charges_status_poll(older_than=dt.timedelta(0)) == 0
    assert len(fake_psp.calls_of("cob.get")) == 1


def test_reconciliation_fails_a_charge_the_psp_removed(charge: Charge, fake_psp: FakePsp) -> None:
    fake_psp.cobs[charge.txid]["status"] = "REMOVIDA_PELO_PSP"

    assert charges_status_poll(older_than=dt.timedelta(0)) == 1
    assert refresh(charge).status == ChargeStatus.FAILED


def test_reconciliation_stops_asking_an_acquirer_that_failed(api: APIClient, charge: Charge, fake_psp: FakePsp) -> None:
    second = api.post("/api/transactions", BODY, format="json").json()["data"]["id"]
    fake_psp.fail("cob.get", Fault.UNAVAILABLE, Fault.UNAVAILABLE)

    assert charges_status_poll(older_than=dt.timedelta(0)) == 0

    assert len(fake_psp.calls_of("cob.get")) == 2  # the first charge's call and its retry; not the second charge
    assert refresh(charge).status == Charge.objects.get(pk=second).status == ChargeStatus.PENDING


def test_reconciliation_leaves_recent_and_active_charges(charge: Charge, fake_psp: FakePsp) -> None:
    assert charges_status_poll() == 0  # too recent: its callback may still come
    assert fake_psp.calls_of("cob.get") == []
    assert charges_status_poll(older_than=dt.timedelta(0)) == 0
    assert refresh(charge).status == ChargeStatus.PENDING


def test_the_status_poll_goes_on_past_a_charge_whose_pix_another_charge_holds(
    api: APIClient, charge: Charge, fake_psp: FakePsp, account: Account
) -> None:
    """The oldest pending charge comes first: one the database refuses must
    not stop the poll of every charge after it, run after run."""
    held = fake_psp.pay(charge.txid)
    holder = api.post("/api/transactions", BODY, format="json").json()["data"]["id"]
    Charge.objects.filter(pk=holder).update(status=ChargeStatus.PAID, e2e_id=held)  # paid here with that Pix already
    genuine = Charge.objects.get(pk=api.post("/api/transactions", BODY, format="json").json()["data"]["id"])
    fake_psp.pay(genuine.txid)

    assert charges_status_poll(older_than=dt.timedelta(0)) == 1

    assert (refresh(charge).status, refresh(genuine).status) == (ChargeStatus.PENDING, ChargeStatus.PAID)
    assert available_balance(account) == ledger_sum(account) == LIQUID


# --------------------------------------------------------------------------- refunds


def paid(charge: Charge, fake_psp: FakePsp) -> str:
    e2e_id = fake_psp.pay(charge.txid)
    assert callback(fake_psp.callback_body([e2e_id])).status_code == 200
    assert refresh(charge).status == ChargeStatus.PAID
    return e2e_id


def refund(client: Client, charge: Charge) -> list[str]:
    # Submitted from the confirmation page, with its reason, and approved by a
    # second staff member before the PSP is asked.
    response = staff_refund(client, charge, reason="Pedido do pagador")
    assert response.status_code == 200
    return [str(m) for m in get_messages(response.wsgi_request)]


def test_staff_refund_returns_the_pix_and_debits_the_account(
    admin_client: Client, charge: Charge, fake_psp: FakePsp, account: Account
) -> None:
    e2e_id = paid(charge, fake_psp)

    messages = refund(admin_client, charge)

    assert messages == ["Estornar: 1 cobrança."]
    assert refresh(charge).status == ChargeStatus.REFUNDED
    assert available_balance(account) == 0 == ledger_sum(account)
    assert LedgerEntry.objects.filter(account=account, kind=LedgerEntry.Kind.CHARGE_REFUND).count() == 1
    (devolucao,) = fake_psp.pix[e2e_id]["devolucoes"]
    assert (devolucao["id"], devolucao["valor"], devolucao["status"]) == (
        refund_id_for(charge.pk),
        "10.00",
        "DEVOLVIDO",
    )


def test_a_devolucao_in_processing_completes_through_the_callback(
    admin_client: Client, charge: Charge, fake_psp: FakePsp, account: Account
) -> None:
    fake_psp.refund_mode = "async"
    e2e_id = paid(charge, fake_psp)

    messages = refund(admin_client, charge)

    assert "1 devolução em processamento na adquirente" in messages[0]
    assert refresh(charge).status == ChargeStatus.PAID
    assert available_balance(account) == 0 == ledger_sum(account)  # reserved (test_refund_reservation.py)

    fake_psp.settle_refund(e2e_id, refund_id_for(charge.pk))
    response = callback(fake_psp.callback_body([e2e_id]))

    assert response.json()["data"] == {"processed": 1}
    assert refresh(charge).status == ChargeStatus.REFUNDED
    assert available_balance(account) == 0 == ledger_sum(account)


def test_a_devolucao_the_psp_did_not_make_leaves_the_charge_paid(
    admin_client: Client, charge: Charge, fake_psp: FakePsp, account: Account
) -> None:
    fake_psp.refund_mode = "async"
    e2e_id = paid(charge, fake_psp)
    refund(admin_client, charge)
    fake_psp.settle_refund(e2e_id, refund_id_for(charge.pk), status="NAO_REALIZADO")

    assert callback(fake_psp.callback_body([e2e_id])).json()["data"] == {"processed": 0}
    messages = refund(admin_client, charge)  # asking again reports the final state

    assert messages == [f"{charge.pk}: Devolução não realizada pela adquirente: Conta do pagador encerrada"]
    assert refresh(charge).status == ChargeStatus.PAID
    assert available_balance(account) == LIQUID


def test_a_refund_while_the_psp_is_down_is_reserved_until_it_answers(
    admin_client: Client, charge: Charge, fake_psp: FakePsp, account: Account
) -> None:
    paid(charge, fake_psp)
    fake_psp.fail("devolucao.put", Fault.UNAVAILABLE, Fault.UNAVAILABLE)

    (message,) = refund(admin_client, charge)

    # A 503 does not say the devolução was not made: its amount is reserved
    # and the refund stays processing, for beat's sweep to ask again.
    assert message.startswith(f"{charge.pk}: Sem resposta definitiva da adquirente para a devolução")
    assert refresh(charge).status == ChargeStatus.PAID
    assert available_balance(account) == 0 == ledger_sum(account)
    assert list(charge.refunds.values_list("status", flat=True)) == [ChargeRefund.Status.PROCESSING]

    # Asked again (what the sweep's worker does), the PSP makes it.
    assert charge_refund_pursue(refund_id=charge.refunds.get().pk) is RefundOutcome.REFUNDED
    assert refresh(charge).status == ChargeStatus.REFUNDED
    assert available_balance(account) == 0 == ledger_sum(account)
