"""A Pix received for a charge cancelled here (issue 29, part 5): recorded
once, then credited or returned by maker-checker, one way only, even with
two approvers at once; the sandbox drivers play the payer."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.db import IntegrityError, transaction
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from accounts.exceptions import ApprovalRefused
from accounts.models import Account, LedgerEntry, MoneyActionRequest
from accounts.selectors import available_balance, ledger_sum
from accounts.services import money_action_approve, money_action_request
from acquirers import adapters
from acquirers.adapters.base import RefundResult, RefundStatus
from acquirers.adapters.sandbox import SandboxAdapter
from payments import cancellation
from payments.cancel_pursuit import charge_cancel_pursue
from payments.late_payments import late_payment_return_pursue
from payments.models import Charge, ChargeCancellation, ChargeStatus, LatePayment, LatePaymentResolution
from payments.services import charge_transition
from tests.factories import AcquirerFactory
from tests.helpers import admin_action, admin_messages, staff_login
from tests.realworld import run_concurrently

BODY = {
    "payment_method": "pix",
    "amount": 1000,
    "buyer": {"buyer_name": "Fulano", "buyer_document": "52998224725", "buyer_phone": "11999998888"},
}
LATE = reverse("admin:payments_latepayment_changelist")
REQUESTS = reverse("admin:accounts_moneyactionrequest_changelist")


@pytest.fixture(autouse=True)
def _cancel_not_reached_yet(monkeypatch: pytest.MonkeyPatch) -> None:
    """The ask to the acquirer is driven by each test (charge_cancel_pursue):
    a session worker must not withdraw the charge before the payer pays."""
    monkeypatch.setattr(cancellation, "cancel_pursue_later", lambda **kwargs: None)


def staff(username: str, group: str) -> User:
    user = User.objects.create_user(username=username, password="x", is_staff=True)
    user.groups.add(Group.objects.get(name=group))
    return user


def new_charge(api: APIClient) -> Charge:
    AcquirerFactory(key=f"s{uuid.uuid4().hex[:8]}", default_priority=1)
    response = api.post("/api/transactions", BODY, format="json")
    assert response.status_code == 201, response.content
    return Charge.objects.get(pk=response.json()["data"]["id"])


def pay(api: APIClient, charge: Charge) -> Any:
    return api.post(f"/api/sandbox/transactions/{charge.pk}/pay")


def canceled_and_paid(api: APIClient) -> tuple[Charge, LatePayment]:
    """Staff cancelled it; the payer paid before the cancel reached the acquirer."""
    charge = new_charge(api)
    charge_transition(charge_id=charge.pk, to_status=ChargeStatus.CANCELED, source="staff", actor="op")
    response = pay(api, charge)
    assert response.status_code == 200, response.content
    return charge, LatePayment.objects.get(charge=charge)


# --------------------------------------------------------------------------- the sandbox as the payer


@pytest.mark.django_db
def test_the_sandbox_payer_can_pay_until_the_cancel_reaches_it(api: APIClient, account: Account) -> None:
    charge = new_charge(api)
    charge_transition(charge_id=charge.pk, to_status=ChargeStatus.CANCELED, source="staff", actor="op")
    sandbox = adapters.build(charge.acquirer)
    assert isinstance(sandbox, SandboxAdapter)
    assert sandbox.charge_state(charge.txid) == "active"  # the finding: still payable there

    paid = pay(api, charge)

    assert paid.status_code == 200
    assert paid.json()["message"].startswith("Pagamento recebido após o cancelamento")
    assert paid.json()["data"]["status"] == "canceled"
    (late,) = LatePayment.objects.all()
    assert (late.amount, late.liquid_amount, late.source) == (1000, charge.liquid_amount, "sandbox")
    assert available_balance(account) == 0

    # The cancel finds it paid there: nothing more is recorded.
    assert charge_cancel_pursue(charge_id=charge.pk) == ChargeCancellation.State.PAID_THERE
    assert LatePayment.objects.count() == 1


@pytest.mark.django_db
def test_once_the_cancel_reached_the_sandbox_its_payer_cannot_pay(api: APIClient, account: Account) -> None:
    charge = new_charge(api)
    charge_transition(charge_id=charge.pk, to_status=ChargeStatus.CANCELED, source="staff", actor="op")
    assert charge_cancel_pursue(charge_id=charge.pk) == ChargeCancellation.State.DONE

    refused = pay(api, charge)

    assert refused.status_code == 409
    assert refused.json()["message"] == "A transação foi removida na adquirente: o pagador não consegue mais pagá-la."
    assert not LatePayment.objects.exists()
    assert available_balance(account) == 0


# --------------------------------------------------------------------------- credited by maker-checker


@pytest.mark.django_db
def test_a_late_payment_credited_by_a_second_staff_member(api: APIClient, account: Account) -> None:
    charge, late = canceled_and_paid(api)
    maker, checker = staff("maker", "operations"), staff("checker", "finance")
    maker_client, checker_client = staff_login(Client(), maker), staff_login(Client(), checker)

    asked = admin_action(maker_client, LATE, "request_late_credit", [late.pk], reason="Cliente confirmou o pedido")
    assert any("1 pedido de aprovação criado" in m for m in admin_messages(asked))
    pending = MoneyActionRequest.objects.get(action=MoneyActionRequest.Action.CREDIT_LATE_PAYMENT)
    assert (pending.amount, pending.account_id) == (charge.liquid_amount, account.pk)
    assert available_balance(account) == 0  # nothing before the approval

    with pytest.raises(ApprovalRefused):  # the requester cannot approve
        money_action_approve(request_id=pending.pk, approver=maker)
    with pytest.raises(IntegrityError), transaction.atomic():  # nor in the database
        MoneyActionRequest.objects.filter(pk=pending.pk).update(state="approved", decided_by=maker)
    assert available_balance(account) == 0

    decided = admin_action(checker_client, REQUESTS, "approve_requests", [pending.pk], reason="Conferido")
    assert any("1 pedido aprovado e executado" in m for m in admin_messages(decided))

    assert available_balance(account) == charge.liquid_amount == ledger_sum(account)
    (entry,) = LedgerEntry.objects.filter(account=account)
    assert (entry.kind, entry.amount, entry.reference) == (
        LedgerEntry.Kind.LATE_PAYMENT_CREDIT,
        charge.liquid_amount,
        f"late_payment:{late.pk}",
    )
    late.refresh_from_db()
    assert late.status == "credited"
    assert Charge.objects.get(pk=charge.pk).status == ChargeStatus.CANCELED  # the contract's status stays
    # The merchant's statement shows the credit under the charge that received the Pix.
    statement = api.get("/api/statement").json()["data"]
    (line,) = statement["entries"]
    assert line["record"] == {"type": "transaction", "id": str(charge.pk)}

    # No second credit: a new request is refused at once.
    with pytest.raises(Exception, match="creditado"):
        money_action_request(
            action=MoneyActionRequest.Action.CREDIT_LATE_PAYMENT,
            target_id=late.pk,
            requested_by=maker,
            reason="de novo",
        )
    assert available_balance(account) == charge.liquid_amount


@pytest.mark.django_db(transaction=True)
def test_two_approvers_at_once_resolve_it_exactly_once(api: APIClient, account: Account) -> None:
    """A credit and a return both asked; two staff members approve them at the
    same moment, each on its own PostgreSQL connection: one carries out."""
    _, late = canceled_and_paid(api)
    maker = staff("maker", "operations")
    first, second = staff("first", "finance"), staff("second", "finance")
    credit = money_action_request(
        action=MoneyActionRequest.Action.CREDIT_LATE_PAYMENT, target_id=late.pk, requested_by=maker, reason="Creditar"
    )
    give_back = money_action_request(
        action=MoneyActionRequest.Action.RETURN_LATE_PAYMENT, target_id=late.pk, requested_by=maker, reason="Devolver"
    )

    outcomes = run_concurrently(
        [
            lambda: money_action_approve(request_id=credit.pk, approver=first).state,
            lambda: money_action_approve(request_id=give_back.pk, approver=second).state,
        ]
    )

    assert sorted(outcomes) == ["approved", "failed"]
    (resolution,) = LatePaymentResolution.objects.all()
    late.refresh_from_db()
    if resolution.kind == "credit":
        assert (late.status, available_balance(account)) == ("credited", late.liquid_amount)
    else:
        # The return is asked after the approval commits; the session's worker
        # may have finished it already.
        assert (late.status in ("returning", "returned"), available_balance(account)) == (True, 0)
    assert ledger_sum(account) == available_balance(account)
    failed = MoneyActionRequest.objects.get(state="failed")
    assert "já está" in failed.outcome


@pytest.mark.django_db
def test_one_resolution_that_did_not_fail_per_late_payment_in_the_database(api: APIClient) -> None:
    _, late = canceled_and_paid(api)
    LatePaymentResolution.objects.create(late_payment=late, kind="return", status="processing", actor="a", reason="r")
    with pytest.raises(IntegrityError), transaction.atomic():
        LatePaymentResolution.objects.create(late_payment=late, kind="credit", status="done", actor="b", reason="r")


@pytest.mark.django_db
def test_a_return_the_acquirer_did_not_make_waits_for_a_decision_again(
    api: APIClient, account: Account, django_capture_on_commit_callbacks: Any
) -> None:
    charge, late = canceled_and_paid(api)
    charge.acquirer.options = {**charge.acquirer.options, "refund": "fail"}
    charge.acquirer.save()
    maker, checker = staff("maker", "operations"), staff("checker", "finance")
    pending = money_action_request(
        action=MoneyActionRequest.Action.RETURN_LATE_PAYMENT, target_id=late.pk, requested_by=maker, reason="Devolver"
    )
    with django_capture_on_commit_callbacks() as callbacks:
        assert money_action_approve(request_id=pending.pk, approver=checker).state == "approved"
    assert len(callbacks) == 1  # the ask, after the commit

    (resolution,) = LatePaymentResolution.objects.all()
    assert late_payment_return_pursue(resolution_id=resolution.pk) == "failed"
    late.refresh_from_db()
    assert (late.status, late.resolved_at) == ("open", None)
    assert available_balance(account) == 0
    # Staff may now credit it (a new resolution: the failed one does not count).
    again = money_action_request(
        action=MoneyActionRequest.Action.CREDIT_LATE_PAYMENT, target_id=late.pk, requested_by=maker, reason="Ok"
    )
    assert money_action_approve(request_id=again.pk, approver=checker).state == "approved"
    assert available_balance(account) == charge.liquid_amount


def test_staff_groups_can_ask_and_approve(db: Any) -> None:
    operations, finance = staff("op", "operations"), staff("fin", "finance")
    assert operations.has_perm("payments.request_late_payment_resolution")
    assert not operations.has_perm("accounts.approve_late_payment_resolution")
    assert finance.has_perm("accounts.approve_late_payment_resolution")


@pytest.mark.django_db
def test_a_devolucao_the_acquirer_does_not_know_is_never_taken_as_returned(
    api: APIClient, account: Account, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The finding: "not found" in answer to the ask was read as done, the
    late payment closed as returned with nothing returned."""
    _, late = canceled_and_paid(api)
    monkeypatch.setattr(
        SandboxAdapter, "refund_charge", lambda self, request: RefundResult(status=RefundStatus.NOT_FOUND)
    )
    maker, checker = staff("maker", "operations"), staff("checker", "finance")
    pending = money_action_request(
        action=MoneyActionRequest.Action.RETURN_LATE_PAYMENT, target_id=late.pk, requested_by=maker, reason="X"
    )
    assert money_action_approve(request_id=pending.pk, approver=checker).state == "approved"
    (resolution,) = LatePaymentResolution.objects.all()

    assert late_payment_return_pursue(resolution_id=resolution.pk) == "processing"

    late.refresh_from_db()
    resolution.refresh_from_db()
    assert late.status == "returning"
    assert (resolution.status, resolution.unclear_at is not None) == ("processing", True)
    assert available_balance(account) == 0
