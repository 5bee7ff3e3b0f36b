"""The redébito of a refund the acquirer made after a chargeback (the payer
got the Pix back by the MED and by the devolução): against the API Pix fake
on loopback, from the check of the released refund to the second staff
member's approval, and what may happen to the charge after it.

One devolução is debited once: the redébito closes the charge (refunded),
so neither a resolution of the dispute nor another refund, by API, staff or
the acquirer's notice of the same devolução, debits it again. A charge
refunded after its chargeback (no refund debit taken) may still be
redebited, once; one refunded from paid already paid its devolução."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import transaction
from django.test import TestCase
from rest_framework.test import APIClient

from accounts.exceptions import ActionNotExecutable
from accounts.models import Account, LedgerEntry, MoneyActionRequest
from accounts.selectors import available_balance, ledger_sum
from accounts.services import ledger_post, money_action_request
from acquirers.adapters.base import Notification, NotificationEvent
from acquirers.models import Acquirer
from payments import refunds
from payments.events import charge_event_apply
from payments.models import Charge, ChargeRefund, ChargeStatus, ReconciliationItem
from payments.refunds import RefundOutcome, charge_refund_pursue, refund_id_for
from payments.services import charge_transition
from tests.acquirers.conftest import NOTIFY_TOKEN
from tests.acquirers.fake_psp import FakePsp
from tests.factories import AccountFactory
from tests.helpers import asked_and_approved, staff_user

pytestmark = pytest.mark.django_db
S = ChargeStatus
K = LedgerEntry.Kind
A = MoneyActionRequest.Action
LIQUID = 955  # 1000 - (30 + 1.5 %)
SEED = 1000
BODY = {
    "payment_method": "pix",
    "amount": 1000,
    "buyer": {"buyer_name": "Fulano", "buyer_document": "52998224725", "buyer_phone": "11999998888"},
}
CALLBACK = f"/api/acquirers/bacen/notifications/{NOTIFY_TOKEN}/pix"
WHY = "Extrato da adquirente conferido"


@pytest.fixture
def account(db: Any) -> Account:
    account = AccountFactory(cashin_fee_fixed=30, cashin_fee_bps=150, withdrawals_need_approval=True)
    with transaction.atomic():
        ledger_post(account_id=account.pk, amount=SEED, kind=K.CHARGE_PAID, reference=f"seed:{uuid.uuid4().hex}")
    return account


@pytest.fixture
def maker(db: Any) -> User:
    return staff_user("operations", "olivia")


@pytest.fixture
def checker(db: Any) -> User:
    return staff_user("finance", "fernanda")


def callback(fake_psp: FakePsp, e2e_id: str) -> Any:
    body = json.dumps(fake_psp.callback_body([e2e_id])).encode()
    return APIClient().post(CALLBACK, data=body, content_type="application/json")


def api_refund(api: APIClient, charge: Charge, key: str) -> Any:
    with TestCase.captureOnCommitCallbacks(execute=True):
        return api.post(f"/api/transactions/{charge.pk}/refund", None, format="json", headers={"Idempotency-Key": key})


@pytest.fixture
def handed(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The refunds handed to a worker after a commit (the test runs the task's service)."""
    ids: list[int] = []
    monkeypatch.setattr(refunds, "refund_pursue_later", lambda *, refund_id, countdown=0: ids.append(refund_id))
    return ids


@pytest.fixture
def repaid_twice(
    api: APIClient, bacen_acquirer: Acquirer, fake_psp: FakePsp, account: Account, handed: list[int]
) -> Charge:
    """A charge whose API refund the PSP was processing when the MED took the
    money (the chargeback released the reservation), and which the PSP then
    made all the same: the release check found it made (an item)."""
    fake_psp.refund_mode = "async"
    response = api.post("/api/transactions", BODY, format="json")
    assert response.status_code == 201, response.content
    charge = Charge.objects.get(pk=response.json()["data"]["id"])
    assert callback(fake_psp, fake_psp.pay(charge.txid)).status_code == 200
    assert api_refund(api, charge, "first").status_code == 202
    (refund_id,) = handed
    assert charge_refund_pursue(refund_id=refund_id) is RefundOutcome.PROCESSING
    charge_transition(charge_id=charge.pk, to_status=S.CHARGEBACK, source="acquirer")
    charge.refresh_from_db()
    fake_psp.settle_refund(charge.e2e_id or "", refund_id_for(charge.pk))
    assert charge_refund_pursue(refund_id=refund_id) is RefundOutcome.ENDED
    assert ChargeRefund.objects.get(pk=refund_id).release_check == "made"
    assert available_balance(account) == SEED == ledger_sum(account)  # paid, held, released, charged back
    return charge


def item_of(charge: Charge) -> ReconciliationItem:
    return ReconciliationItem.objects.get(kind="refunded_there_chargeback_here", target_id=str(charge.pk))


def redebit(item: ReconciliationItem, maker: User, checker: User) -> MoneyActionRequest:
    done: MoneyActionRequest = asked_and_approved(
        A.REDEBIT_REFUND_AFTER_CHARGEBACK, item.pk, maker=maker, checker=checker
    )
    return done


def ledger(account: Account) -> list[tuple[str, int]]:
    return [(e.kind, e.amount) for e in LedgerEntry.objects.filter(account=account).order_by("id")]


def test_a_redebited_devolucao_is_never_debited_again(
    api: APIClient,
    repaid_twice: Charge,
    account: Account,
    fake_psp: FakePsp,
    bacen_acquirer: Acquirer,
    maker: User,
    checker: User,
) -> None:
    charge = repaid_twice
    item = item_of(charge)
    assert (item.returned_by_refund, item.returned_by_med) == (1000, None)

    approved = redebit(item, maker, checker)

    assert (approved.state, approved.amount, approved.target_id) == ("approved", LIQUID, str(item.pk))
    charge.refresh_from_db()
    assert charge.status == S.REFUNDED  # closed with its devolução's debit
    assert available_balance(account) == SEED - LIQUID == ledger_sum(account)
    after = ledger(account)
    assert after[-1] == (K.CHARGE_REFUND, -LIQUID)

    # The dispute resolved for the account: staff cannot ask it, the acquirer's word changes nothing.
    with pytest.raises(ActionNotExecutable):
        money_action_request(action=A.RESOLVE_CHARGEBACK, target_id=charge.pk, requested_by=maker, reason=WHY)
    resolved = Notification(event=NotificationEvent.CHARGE_CHARGEBACK_RESOLVED, reference=charge.txid)
    assert not charge_event_apply(acquirer=bacen_acquirer, notification=resolved, source="acquirer").changed
    # Refunded again, by API (the contract's envelope), by staff, or the PSP's notice of the devolução: nothing.
    again = api_refund(api, charge, "second")
    assert (again.status_code, again.json()) == (
        409,
        {"success": False, "message": "Só transações pagas podem ser estornadas; esta está estornada.", "data": None},
    )
    with pytest.raises(ActionNotExecutable):
        money_action_request(action=A.REFUND_CHARGE, target_id=charge.pk, requested_by=maker, reason=WHY)
    assert callback(fake_psp, charge.e2e_id or "").status_code == 200
    # Nor a second redébito.
    with pytest.raises(ActionNotExecutable, match="já foi debitado"):
        money_action_request(
            action=A.REDEBIT_REFUND_AFTER_CHARGEBACK, target_id=item.pk, requested_by=maker, reason=WHY
        )

    charge.refresh_from_db()
    assert charge.status == S.REFUNDED
    assert ledger(account) == after
    assert available_balance(account) == SEED - LIQUID == ledger_sum(account)
    assert len(fake_psp.calls_of("devolucao.put")) == 1


@pytest.mark.parametrize("how", ["med_completed", "acquirer_notice"])
def test_a_charge_refunded_after_its_chargeback_may_still_be_redebited_once(
    repaid_twice: Charge,
    account: Account,
    fake_psp: FakePsp,
    bacen_acquirer: Acquirer,
    maker: User,
    checker: User,
    how: str,
) -> None:
    """Chargeback → refunded debits nothing (the chargeback took the money):
    the devolução the PSP made is still the payer's second repayment."""
    charge = repaid_twice
    if how == "med_completed":
        charge_transition(charge_id=charge.pk, to_status=S.REFUNDED, source="acquirer")
    else:  # the PSP's callback for the Pix with its devolução DEVOLVIDO
        assert callback(fake_psp, charge.e2e_id or "").status_code == 200
    charge.refresh_from_db()
    assert charge.status == S.REFUNDED
    assert available_balance(account) == SEED == ledger_sum(account)

    approved = redebit(item_of(charge), maker, checker)

    assert (approved.state, approved.amount) == ("approved", LIQUID)
    assert available_balance(account) == SEED - LIQUID == ledger_sum(account)
    entry = LedgerEntry.objects.filter(account=account).latest("id")
    assert (entry.kind, entry.amount, entry.reference) == (
        K.CHARGE_REFUND,
        -LIQUID,
        f"charge:{charge.pk}:refund-redebit",
    )
    # Once per devolução (the charge's: D<charge>), whichever item asks.
    with pytest.raises(ActionNotExecutable, match="já foi debitado"):
        money_action_request(
            action=A.REDEBIT_REFUND_AFTER_CHARGEBACK, target_id=item_of(charge).pk, requested_by=maker, reason=WHY
        )
    assert available_balance(account) == SEED - LIQUID == ledger_sum(account)


def test_a_devolucao_the_refund_of_a_paid_charge_debited_is_not_redebited(
    api: APIClient, repaid_twice: Charge, account: Account, fake_psp: FakePsp, maker: User, checker: User
) -> None:
    """The dispute was resolved for the account before anyone asked for the
    redébito: the charge's own refund (the same devolução, answered done)
    debits it, and the item's redébito is refused."""
    charge = repaid_twice
    assert asked_and_approved(A.RESOLVE_CHARGEBACK, charge.pk, maker=maker, checker=checker).state == "approved"
    assert api_refund(api, charge, "second").status_code == 202
    refund = ChargeRefund.objects.filter(charge=charge).latest("id")
    assert charge_refund_pursue(refund_id=refund.pk) is RefundOutcome.REFUNDED  # the PSP: that devolução is done
    charge.refresh_from_db()
    assert charge.status == S.REFUNDED
    # Paid, charged back, resolved, refunded: the devolução debited once.
    assert available_balance(account) == SEED == ledger_sum(account)
    before = ledger(account)

    with pytest.raises(ActionNotExecutable, match="estornada depois de paga"):
        money_action_request(
            action=A.REDEBIT_REFUND_AFTER_CHARGEBACK, target_id=item_of(charge).pk, requested_by=maker, reason=WHY
        )

    assert ledger(account) == before
    assert available_balance(account) == SEED == ledger_sum(account)
