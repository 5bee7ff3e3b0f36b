"""The withdrawal lifecycle of decisions §5: every allowed transition with its
ledger effect and its one webhook event, every refused one changing nothing,
repeated changes as no-ops, the sandbox return of decisions §8, payout
notifications from acquirers, and racing transitions."""

from __future__ import annotations

import datetime as dt
import functools
import json
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.models import Account, ApiCredential, LedgerEntry
from accounts.selectors import available_balance, ledger_sum
from accounts.services import IssuedCredential, ledger_post
from acquirers.adapters.sandbox_signing import signed_headers
from acquirers.models import Acquirer, InboundNotification
from tests import realworld
from tests.conftest import client_for
from tests.factories import AccountFactory, AcquirerFactory
from tests.helpers import local
from tests.withdrawals.records import additive_fields
from webhooks.models import WebhookDelivery, WebhookEndpoint, WebhookEvent
from webhooks.services import endpoint_create
from withdrawals.exceptions import SCHEDULED_CANCEL_REFUSED, WithdrawalTransitionNotAllowed
from withdrawals.models import PayoutAttempt, Withdrawal, WithdrawalStatus, WithdrawalTransition
from withdrawals.services import TRANSITIONS, withdrawal_request, withdrawal_transition

SEED = 20_000
AMOUNT = 5000
# The account's withdrawal fee: 100 + round_half_up(5000 * 100 / 10000) = 150.
FEE = 150
CPF = "52998224725"
E2E = "E99999999202601101200" + "AbCdEfGhIjK"
SECRET = "sandbox-notification-secret-0123"
NOT_FOUND = {"success": False, "message": "Saque não encontrado.", "data": None}

pytestmark = pytest.mark.django_db


@pytest.fixture
def account(db: Any) -> Account:
    # A non-zero fee, so total_debit, amount and liquid_amount differ.
    account = AccountFactory(withdrawal_fee_fixed=100, withdrawal_fee_bps=100)
    seed(account, SEED)
    return account


@pytest.fixture
def endpoint(account: Account) -> WebhookEndpoint:
    return endpoint_create(account=account, url="https://hooks.example.com/pix").endpoint


def seed(account: Account, amount: int) -> None:
    with transaction.atomic():
        ledger_post(
            account_id=account.pk,
            amount=amount,
            kind=LedgerEntry.Kind.CHARGE_PAID,
            reference=f"seed:{uuid.uuid4().hex}",
        )


def request(account: Account, *, discount_fee: bool = False) -> Withdrawal:
    return withdrawal_request(account=account, amount=AMOUNT, key_type="cpf", key_value=CPF, discount_fee=discount_fee)


def move(withdrawal: Withdrawal, *statuses: str) -> None:
    for status in statuses:
        assert withdrawal_transition(
            withdrawal_id=withdrawal.pk, to_status=status, source=WithdrawalTransition.Source.STAFF
        )


def record(withdrawal: Withdrawal) -> dict[str, Any]:
    """The Withdrawal record of the spec, as stored now."""
    withdrawal.refresh_from_db()
    return {
        "id": str(withdrawal.pk),
        "e2e_id": withdrawal.e2e_id,
        "amount": withdrawal.amount,
        "liquid_amount": withdrawal.liquid_amount,
        "pix_type": withdrawal.pix_key_type,
        "pix_key": withdrawal.pix_key,
        "status": withdrawal.status,
        "paid_at": local(withdrawal.paid_at),
        "created_at": local(withdrawal.created_at),
    }


def detail(withdrawal: Withdrawal) -> dict[str, Any]:
    """The record of the API's read (the webhook's, with the additive fields)."""
    return {**record(withdrawal), **additive_fields(withdrawal)}


def snapshot(withdrawal: Withdrawal) -> dict[str, Any]:
    """Everything a refused or repeated transition must leave alone."""
    withdrawal.refresh_from_db()
    account = withdrawal.account
    return {
        "status": withdrawal.status,
        "version": withdrawal.version,
        "e2e_id": withdrawal.e2e_id,
        "paid_at": withdrawal.paid_at,
        "approved_at": withdrawal.approved_at,
        "failure_reason": withdrawal.failure_reason,
        "balance": available_balance(account),
        "ledger": LedgerEntry.objects.filter(account=account).count(),
        "transitions": WithdrawalTransition.objects.filter(withdrawal=withdrawal).count(),
        "events": WebhookEvent.objects.filter(record_id=withdrawal.pk).count(),
        "deliveries": WebhookDelivery.objects.filter(event__record_id=withdrawal.pk).count(),
    }


def new_entries(account: Account, since: int) -> list[tuple[str, int, int, str]]:
    entries = LedgerEntry.objects.filter(account=account).order_by("id")[since:]
    return [(e.kind, e.amount, e.balance_after, e.reference) for e in entries]


# --------------------------------------------------------------------------- creation


@pytest.mark.parametrize(
    ("discount_fee", "total", "liquid"), [(True, AMOUNT, AMOUNT - FEE), (False, AMOUNT + FEE, AMOUNT)]
)
def test_creation_debits_the_total_and_emits_no_event(
    api: APIClient, account: Account, endpoint: WebhookEndpoint, discount_fee: bool, total: int, liquid: int
) -> None:
    response = api.post(
        "/api/withdrawals", {"amount": AMOUNT, "key_value": CPF, "discount_fee": discount_fee}, format="json"
    )

    assert response.status_code == 201, response.content
    withdrawal = Withdrawal.objects.get(pk=response.json()["data"]["id"])
    assert (withdrawal.status, withdrawal.total_debit, withdrawal.liquid_amount) == (
        WithdrawalStatus.PENDING,
        total,
        liquid,
    )
    assert new_entries(account, 1) == [
        (LedgerEntry.Kind.WITHDRAWAL, -total, SEED - total, f"withdrawal:{withdrawal.pk}")
    ]
    assert available_balance(account) == SEED - total == ledger_sum(account)
    assert not WebhookEvent.objects.exists()
    assert not WebhookDelivery.objects.exists()


# --------------------------------------------------------------------------- the table, through the service

ALLOWED = [
    # (path to the "from" state, to, ledger kind or None, which amount is credited)
    ((), WithdrawalStatus.APPROVED, None, None),
    ((), WithdrawalStatus.CANCELED, LedgerEntry.Kind.WITHDRAWAL_REVERSAL, "total_debit"),
    ((WithdrawalStatus.APPROVED,), WithdrawalStatus.PAID, None, None),
    ((), WithdrawalStatus.FAILED, LedgerEntry.Kind.WITHDRAWAL_REVERSAL, "total_debit"),
    ((WithdrawalStatus.APPROVED,), WithdrawalStatus.FAILED, LedgerEntry.Kind.WITHDRAWAL_REVERSAL, "total_debit"),
    (
        (WithdrawalStatus.APPROVED, WithdrawalStatus.PAID),
        WithdrawalStatus.REFUNDED,
        LedgerEntry.Kind.WITHDRAWAL_RETURN,
        "liquid_amount",
    ),
]


def test_the_table_is_exactly_decisions_5() -> None:
    expected = {
        ((path[-1] if path else WithdrawalStatus.PENDING), to): ((kind, field) if kind else None)
        for path, to, kind, field in ALLOWED
    }
    # Approved → canceled: only a scheduled withdrawal approved before its day, never sent
    # (tests/withdrawals/test_scheduled.py); any other approved one is refused, as below.
    expected[(WithdrawalStatus.APPROVED, WithdrawalStatus.CANCELED)] = (
        LedgerEntry.Kind.WITHDRAWAL_REVERSAL,
        "total_debit",
    )
    assert expected == TRANSITIONS


@pytest.mark.parametrize("discount_fee", [True, False], ids=["discount_fee", "fee_on_top"])
@pytest.mark.parametrize(("path", "to", "kind", "field"), ALLOWED, ids=lambda v: str(v))
def test_allowed_transition_applies_its_ledger_effect_and_one_event(
    account: Account,
    endpoint: WebhookEndpoint,
    path: tuple[str, ...],
    to: str,
    kind: str | None,
    field: str | None,
    discount_fee: bool,
) -> None:
    withdrawal = request(account, discount_fee=discount_fee)
    move(withdrawal, *path)
    before = snapshot(withdrawal)
    from_status = before["status"]

    assert withdrawal_transition(
        withdrawal_id=withdrawal.pk, to_status=to, source=WithdrawalTransition.Source.STAFF, actor="ops"
    )

    after = snapshot(withdrawal)
    credit = getattr(withdrawal, field) if field else 0
    assert after["status"] == to
    assert after["version"] == before["version"] + 1
    assert after["balance"] == before["balance"] + credit == ledger_sum(account)
    if kind is None:
        assert new_entries(account, before["ledger"]) == []
    else:
        reference = f"withdrawal:{withdrawal.pk}:{after['version']}"
        assert new_entries(account, before["ledger"]) == [(kind, credit, after["balance"], reference)]
    last = WithdrawalTransition.objects.filter(withdrawal=withdrawal).latest("id")
    assert (last.from_status, last.to_status, last.source, last.actor) == (from_status, to, "staff", "ops")
    assert after["transitions"] == before["transitions"] + 1
    # Exactly one event, carrying the record as it is now, with one delivery per active endpoint.
    assert after["events"] == before["events"] + 1
    event = WebhookEvent.objects.filter(record_id=withdrawal.pk).latest("created_at")
    assert (event.event_type, event.status, event.account_id) == ("withdrawal", to, account.pk)
    assert event.data == record(withdrawal)
    assert event.body() == {"id": str(event.id), "event_type": "withdrawal", "data": record(withdrawal)}
    delivery = WebhookDelivery.objects.get(event=event)
    assert (delivery.endpoint, delivery.url) == (endpoint, endpoint.url)


def test_total_credited_back_differs_from_liquid_returned(account: Account) -> None:
    """With the fee on top, cancel/fail give back amount + fee; a return only the amount sent."""
    failed, canceled, returned = request(account), request(account), request(account)
    assert available_balance(account) == SEED - 3 * (AMOUNT + FEE)
    move(failed, WithdrawalStatus.APPROVED, WithdrawalStatus.FAILED)
    move(canceled, WithdrawalStatus.CANCELED)
    move(returned, WithdrawalStatus.APPROVED, WithdrawalStatus.PAID, WithdrawalStatus.REFUNDED)
    assert available_balance(account) == SEED - FEE == ledger_sum(account)
    credits = LedgerEntry.objects.filter(account=account, amount__gt=0).exclude(kind=LedgerEntry.Kind.CHARGE_PAID)
    assert sorted((e.kind, e.amount) for e in credits) == [
        (LedgerEntry.Kind.WITHDRAWAL_RETURN, AMOUNT),
        (LedgerEntry.Kind.WITHDRAWAL_REVERSAL, AMOUNT + FEE),
        (LedgerEntry.Kind.WITHDRAWAL_REVERSAL, AMOUNT + FEE),
    ]


def test_approval_and_payment_set_their_timestamps_and_the_e2e_id(account: Account) -> None:
    withdrawal = request(account)
    started = timezone.now()
    move(withdrawal, WithdrawalStatus.APPROVED)
    withdrawal.refresh_from_db()
    assert withdrawal.approved_at is not None
    assert started <= withdrawal.approved_at <= timezone.now()
    assert (withdrawal.paid_at, withdrawal.e2e_id) == (None, None)

    paid_at = timezone.now().replace(microsecond=0) - dt.timedelta(minutes=3)
    withdrawal_transition(
        withdrawal_id=withdrawal.pk, to_status=WithdrawalStatus.PAID, source="acquirer", e2e_id=E2E, paid_at=paid_at
    )

    withdrawal.refresh_from_db()
    assert (withdrawal.status, withdrawal.e2e_id, withdrawal.paid_at) == (WithdrawalStatus.PAID, E2E, paid_at)
    event = WebhookEvent.objects.get(record_id=withdrawal.pk, status=WithdrawalStatus.PAID)
    assert (event.data["e2e_id"], event.data["paid_at"]) == (E2E, local(paid_at))

    # Refunded keeps what the payment set.
    move(withdrawal, WithdrawalStatus.REFUNDED)
    withdrawal.refresh_from_db()
    assert (withdrawal.e2e_id, withdrawal.paid_at) == (E2E, paid_at)


def test_paid_without_a_time_uses_now(account: Account) -> None:
    withdrawal = request(account)
    move(withdrawal, WithdrawalStatus.APPROVED)
    started = timezone.now()
    withdrawal_transition(withdrawal_id=withdrawal.pk, to_status=WithdrawalStatus.PAID, source="acquirer", e2e_id=E2E)
    withdrawal.refresh_from_db()
    assert withdrawal.paid_at is not None
    assert started <= withdrawal.paid_at <= timezone.now()


def test_failure_keeps_the_reason(account: Account) -> None:
    withdrawal = request(account)
    move(withdrawal, WithdrawalStatus.APPROVED)
    withdrawal_transition(
        withdrawal_id=withdrawal.pk, to_status=WithdrawalStatus.FAILED, source="acquirer", reason="conta fechada"
    )
    withdrawal.refresh_from_db()
    assert withdrawal.failure_reason == "conta fechada"


STATES: dict[str, tuple[str, ...]] = {
    WithdrawalStatus.PENDING: (),
    WithdrawalStatus.APPROVED: (WithdrawalStatus.APPROVED,),
    WithdrawalStatus.PAID: (WithdrawalStatus.APPROVED, WithdrawalStatus.PAID),
    WithdrawalStatus.FAILED: (WithdrawalStatus.FAILED,),
    WithdrawalStatus.CANCELED: (WithdrawalStatus.CANCELED,),
    WithdrawalStatus.REFUNDED: (WithdrawalStatus.APPROVED, WithdrawalStatus.PAID, WithdrawalStatus.REFUNDED),
}
REFUSED = [
    (frm, to)
    for frm in STATES
    for to in WithdrawalStatus
    if to != frm and (frm, to) not in {((p[-1] if p else WithdrawalStatus.PENDING), t) for p, t, _, _ in ALLOWED}
]


def test_every_other_transition_is_refused() -> None:
    # 6 statuses, 5 targets each, 6 allowed: 24 refused, among them the obvious ones.
    assert len(REFUSED) == 24
    for pair in [
        (WithdrawalStatus.PAID, WithdrawalStatus.FAILED),
        (WithdrawalStatus.CANCELED, WithdrawalStatus.APPROVED),
        (WithdrawalStatus.REFUNDED, WithdrawalStatus.PAID),
        (WithdrawalStatus.FAILED, WithdrawalStatus.PAID),
        (WithdrawalStatus.PENDING, WithdrawalStatus.PAID),
        (WithdrawalStatus.PENDING, WithdrawalStatus.REFUNDED),
        (WithdrawalStatus.APPROVED, WithdrawalStatus.CANCELED),
        (WithdrawalStatus.APPROVED, WithdrawalStatus.PENDING),
    ]:
        assert pair in REFUSED


@pytest.mark.parametrize(("frm", "to"), REFUSED, ids=lambda v: str(v))
def test_refused_transition_raises_and_changes_nothing(
    account: Account, endpoint: WebhookEndpoint, frm: str, to: str
) -> None:
    withdrawal = request(account)
    move(withdrawal, *STATES[frm])
    before = snapshot(withdrawal)

    with pytest.raises(WithdrawalTransitionNotAllowed) as raised:
        withdrawal_transition(withdrawal_id=withdrawal.pk, to_status=to, source="staff", e2e_id=E2E, reason="x")

    assert raised.value.status_code == 409
    expected = f"O saque não pode passar de {WithdrawalStatus(frm).label} para {WithdrawalStatus(to).label}."
    if (frm, to) == (WithdrawalStatus.APPROVED, WithdrawalStatus.CANCELED):
        expected = SCHEDULED_CANCEL_REFUSED  # not scheduled for a later day
    assert raised.value.message == expected
    assert snapshot(withdrawal) == before
    assert available_balance(account) == ledger_sum(account)


@pytest.mark.parametrize("status", list(WithdrawalStatus), ids=str)
def test_repeating_a_transition_is_a_no_op(account: Account, endpoint: WebhookEndpoint, status: str) -> None:
    withdrawal = request(account)
    move(withdrawal, *STATES[status])
    before = snapshot(withdrawal)

    assert withdrawal_transition(withdrawal_id=withdrawal.pk, to_status=status, source="acquirer", e2e_id=E2E) is False

    assert snapshot(withdrawal) == before


# --------------------------------------------------------------------------- sandbox return (decisions §8)


def sandbox_return(api: APIClient, withdrawal_id: Any) -> Any:
    return api.post(f"/api/sandbox/withdrawals/{withdrawal_id}/return")


def sent_by(withdrawal: Withdrawal, adapter: str = "sandbox") -> Withdrawal:
    """As the payout chain leaves it: the withdrawal names the acquirer it went through."""
    acquirer = AcquirerFactory(key=f"payout_{adapter}", adapter=adapter, options={})
    Withdrawal.objects.filter(pk=withdrawal.pk).update(acquirer=acquirer)
    withdrawal.refresh_from_db()
    return withdrawal


def create_via_api(api: APIClient, **fields: Any) -> Withdrawal:
    response = api.post("/api/withdrawals", {"amount": AMOUNT, "key_value": CPF, **fields}, format="json")
    assert response.status_code == 201, response.content
    return Withdrawal.objects.get(pk=response.json()["data"]["id"])


@pytest.mark.parametrize("discount_fee", [True, False], ids=["discount_fee", "fee_on_top"])
def test_sandbox_return_of_a_paid_withdrawal_credits_the_liquid_amount(
    api: APIClient, account: Account, discount_fee: bool
) -> None:
    withdrawal = sent_by(create_via_api(api, discount_fee=discount_fee))
    withdrawal_transition(withdrawal_id=withdrawal.pk, to_status=WithdrawalStatus.APPROVED, source="system")
    withdrawal_transition(withdrawal_id=withdrawal.pk, to_status=WithdrawalStatus.PAID, source="acquirer", e2e_id=E2E)
    before = snapshot(withdrawal)

    response = sandbox_return(api, withdrawal.pk)

    assert response.status_code == 200, response.content
    assert response.json() == {"success": True, "message": "Saque atualizado.", "data": detail(withdrawal)}
    assert response.json()["data"]["status"] == WithdrawalStatus.REFUNDED
    assert response.json()["data"]["e2e_id"] == E2E
    after = snapshot(withdrawal)
    assert after["balance"] == before["balance"] + withdrawal.liquid_amount == ledger_sum(account)
    assert after["events"] == before["events"] + 1
    assert WithdrawalTransition.objects.filter(withdrawal=withdrawal).latest("id").source == "sandbox"
    assert api.get(f"/api/withdrawals/{withdrawal.pk}").json()["data"] == detail(withdrawal)

    # A second return is a no-op: same record, no second credit.
    again = sandbox_return(api, withdrawal.pk)
    assert again.status_code == 200
    assert again.json()["data"] == detail(withdrawal)
    assert snapshot(withdrawal) == after


@pytest.mark.parametrize(
    "status", [WithdrawalStatus.PENDING, WithdrawalStatus.APPROVED, WithdrawalStatus.FAILED, WithdrawalStatus.CANCELED]
)
def test_sandbox_return_of_an_unpaid_withdrawal_is_409(api: APIClient, account: Account, status: str) -> None:
    withdrawal = sent_by(create_via_api(api))
    move(withdrawal, *STATES[status])
    before = snapshot(withdrawal)

    response = sandbox_return(api, withdrawal.pk)

    assert response.status_code == 409
    assert response.json() == {
        "success": False,
        "message": f"O saque não pode passar de {WithdrawalStatus(status).label} para Devolvido.",
        "data": None,
    }
    assert snapshot(withdrawal) == before


def test_sandbox_return_of_unknown_malformed_or_foreign_withdrawal_is_404(
    api: APIClient, account: Account, issue_credential: Callable[..., IssuedCredential]
) -> None:
    other = AccountFactory()
    seed(other, SEED)
    foreign = sent_by(create_via_api(client_for(issue_credential(other))))
    move(foreign, WithdrawalStatus.APPROVED, WithdrawalStatus.PAID)
    before = snapshot(foreign)

    for withdrawal_id in (uuid.uuid4(), "not-a-uuid", foreign.pk):
        response = sandbox_return(api, withdrawal_id)
        assert response.status_code == 404, withdrawal_id
        assert response.json() == NOT_FOUND

    assert snapshot(foreign) == before


@pytest.mark.parametrize("permission", [ApiCredential.Permission.CASHOUT, ApiCredential.Permission.ALL])
def test_sandbox_return_accepts_the_withdrawals_permission(
    account: Account, issue_credential: Callable[..., IssuedCredential], permission: str
) -> None:
    withdrawal = sent_by(request(account))
    move(withdrawal, WithdrawalStatus.APPROVED, WithdrawalStatus.PAID)
    response = sandbox_return(client_for(issue_credential(account, permission)), withdrawal.pk)
    assert response.status_code == 200
    assert response.json()["data"]["status"] == WithdrawalStatus.REFUNDED


def test_sandbox_return_refuses_a_cashin_credential_and_changes_nothing(
    account: Account, issue_credential: Callable[..., IssuedCredential]
) -> None:
    withdrawal = sent_by(request(account))
    move(withdrawal, WithdrawalStatus.APPROVED, WithdrawalStatus.PAID)
    before = snapshot(withdrawal)

    response = sandbox_return(client_for(issue_credential(account, ApiCredential.Permission.CASHIN)), withdrawal.pk)

    assert response.status_code == 403
    assert response.json() == {
        "success": False,
        "message": "Esta credencial não tem permissão para realizar esta operação.",
        "data": None,
    }
    assert snapshot(withdrawal) == before


@pytest.mark.parametrize("adapter", ["efi_pix", "bacen_pix", None], ids=["efi_pix", "bacen_pix", "never_sent"])
def test_sandbox_return_of_a_withdrawal_not_sent_by_the_sandbox_is_404(
    api: APIClient, account: Account, adapter: str | None
) -> None:
    withdrawal = request(account)
    if adapter:
        sent_by(withdrawal, adapter)
    move(withdrawal, WithdrawalStatus.APPROVED, WithdrawalStatus.PAID)
    before = snapshot(withdrawal)

    response = sandbox_return(api, withdrawal.pk)

    # Only the acquirer that paid can say the money came back; the answer is an unknown id's.
    assert response.status_code == 404
    assert response.json() == NOT_FOUND
    assert snapshot(withdrawal) == before


def test_sandbox_return_needs_credentials(account: Account) -> None:
    withdrawal = sent_by(request(account))
    move(withdrawal, WithdrawalStatus.APPROVED, WithdrawalStatus.PAID)
    response = APIClient().post(f"/api/sandbox/withdrawals/{withdrawal.pk}/return")
    assert response.status_code == 401
    assert snapshot(withdrawal)["status"] == WithdrawalStatus.PAID


# --------------------------------------------------------------------------- acquirer notifications


@pytest.fixture
def acquirer(db: Any) -> Acquirer:
    return AcquirerFactory(key="sbx_payout_notify", options={"payout": "ok", "notification_secret": SECRET})


@pytest.fixture
def stranger(db: Any) -> Acquirer:
    """An acquirer that knows how to sign but was never sent this payout."""
    return AcquirerFactory(key="sbx_stranger", options={"payout": "ok", "notification_secret": SECRET})


def sent_through(withdrawal: Withdrawal, acquirer: Acquirer, *statuses: str) -> Withdrawal:
    """An approved withdrawal whose payout went to ``acquirer`` and is still processing there."""
    move(withdrawal, WithdrawalStatus.APPROVED)
    PayoutAttempt.objects.create(
        withdrawal=withdrawal, acquirer=acquirer, action="send", outcome="processing", latency_ms=12
    )
    Withdrawal.objects.filter(pk=withdrawal.pk).update(acquirer=acquirer)
    move(withdrawal, *statuses)
    return withdrawal


def notify(acquirer: Acquirer, *events: dict[str, Any]) -> Any:
    raw = json.dumps(list(events) if len(events) > 1 else events[0]).encode()
    return APIClient().post(
        f"/api/acquirers/{acquirer.key}/notifications",
        data=raw,
        content_type="application/json",
        headers=signed_headers(SECRET, raw),
    )


def accepted(response: Any, processed: int) -> None:
    assert response.status_code == 200, response.content
    assert response.json() == {"success": True, "message": "Notificação recebida.", "data": {"processed": processed}}


def test_payout_paid_notification_pays(account: Account, acquirer: Acquirer) -> None:
    withdrawal = sent_through(request(account), acquirer)
    before = snapshot(withdrawal)
    occurred = timezone.now().replace(microsecond=0) - dt.timedelta(seconds=30)

    response = notify(
        acquirer,
        {
            "event": "payout.paid",
            "reference": withdrawal.idempotency_id,
            "e2e_id": E2E,
            "occurred_at": occurred.isoformat(),
        },
    )

    accepted(response, 1)
    after = snapshot(withdrawal)
    assert (after["status"], after["e2e_id"], after["paid_at"]) == (WithdrawalStatus.PAID, E2E, occurred)
    assert after["balance"] == before["balance"]
    assert after["ledger"] == before["ledger"]
    assert after["events"] == before["events"] + 1
    assert WithdrawalTransition.objects.filter(withdrawal=withdrawal).latest("id").source == "acquirer"
    assert InboundNotification.objects.get().status == InboundNotification.Status.PROCESSED

    # The same news again changes nothing.
    accepted(notify(acquirer, {"event": "payout.paid", "reference": withdrawal.idempotency_id, "e2e_id": E2E}), 0)
    assert snapshot(withdrawal) == after


def test_payout_failed_notification_gives_the_money_back(account: Account, acquirer: Acquirer) -> None:
    withdrawal = sent_through(request(account), acquirer)

    accepted(notify(acquirer, {"event": "payout.failed", "reference": withdrawal.idempotency_id}), 1)

    withdrawal.refresh_from_db()
    assert withdrawal.status == WithdrawalStatus.FAILED
    assert withdrawal.failure_reason == "refused by the acquirer"
    assert available_balance(account) == SEED == ledger_sum(account)
    assert LedgerEntry.objects.filter(account=account).latest("id").kind == LedgerEntry.Kind.WITHDRAWAL_REVERSAL
    assert list(WebhookEvent.objects.filter(record_id=withdrawal.pk).values_list("status", flat=True)) == [
        WithdrawalStatus.FAILED,
        WithdrawalStatus.APPROVED,
    ]


def test_payout_returned_notification_refunds_the_liquid_amount(account: Account, acquirer: Acquirer) -> None:
    withdrawal = sent_through(request(account), acquirer)
    accepted(notify(acquirer, {"event": "payout.paid", "reference": withdrawal.idempotency_id, "e2e_id": E2E}), 1)
    assert available_balance(account) == SEED - AMOUNT - FEE

    accepted(notify(acquirer, {"event": "payout.returned", "reference": withdrawal.idempotency_id}), 1)

    withdrawal.refresh_from_db()
    assert (withdrawal.status, withdrawal.e2e_id) == (WithdrawalStatus.REFUNDED, E2E)
    assert available_balance(account) == SEED - FEE == ledger_sum(account)
    # A late confirmation does not undo the return.
    accepted(notify(acquirer, {"event": "payout.paid", "reference": withdrawal.idempotency_id, "e2e_id": E2E}), 0)
    withdrawal.refresh_from_db()
    assert withdrawal.status == WithdrawalStatus.REFUNDED


def test_payout_notification_from_an_acquirer_never_used_changes_nothing(
    account: Account, acquirer: Acquirer, stranger: Acquirer
) -> None:
    withdrawal = sent_through(request(account), acquirer)
    before = snapshot(withdrawal)

    for event in ("payout.paid", "payout.failed"):
        accepted(notify(stranger, {"event": event, "reference": withdrawal.idempotency_id, "e2e_id": E2E}), 0)
        inbound = InboundNotification.objects.latest("id")
        assert inbound.acquirer == stranger
        assert inbound.status == InboundNotification.Status.FAILED
        assert "Saque não encontrado." in inbound.error

    assert snapshot(withdrawal) == before


def test_payout_notification_for_an_unknown_reference_changes_nothing(account: Account, acquirer: Acquirer) -> None:
    withdrawal = sent_through(request(account), acquirer)
    before = snapshot(withdrawal)
    accepted(notify(acquirer, {"event": "payout.paid", "reference": uuid.uuid4().hex, "e2e_id": E2E}), 0)
    assert InboundNotification.objects.get().status == InboundNotification.Status.FAILED
    assert snapshot(withdrawal) == before


@pytest.mark.parametrize(
    ("statuses", "event"),
    [
        ((WithdrawalStatus.FAILED,), "payout.paid"),  # too late: the money is already back in the balance
        ((WithdrawalStatus.PAID,), "payout.failed"),
        ((), "payout.returned"),  # approved, never paid
    ],
    ids=str,
)
def test_payout_notification_refused_by_the_table_is_stored_and_changes_nothing(
    account: Account, acquirer: Acquirer, statuses: tuple[str, ...], event: str
) -> None:
    withdrawal = sent_through(request(account), acquirer, *statuses)
    before = snapshot(withdrawal)

    accepted(notify(acquirer, {"event": event, "reference": withdrawal.idempotency_id, "e2e_id": E2E}), 0)

    inbound = InboundNotification.objects.get()
    assert inbound.status == InboundNotification.Status.FAILED
    assert "O saque não pode passar de" in inbound.error
    assert snapshot(withdrawal) == before


def test_one_refused_event_does_not_cost_the_others(account: Account, acquirer: Acquirer) -> None:
    first = sent_through(request(account), acquirer)
    second = sent_through(request(account), acquirer)
    paid_elsewhere = E2E[:-1] + "Z"

    response = notify(
        acquirer,
        {"event": "payout.paid", "reference": first.idempotency_id, "e2e_id": paid_elsewhere},
        # The same e2e id for another withdrawal: the database refuses it.
        {"event": "payout.paid", "reference": second.idempotency_id, "e2e_id": paid_elsewhere},
    )

    accepted(response, 1)
    first.refresh_from_db()
    second.refresh_from_db()
    assert (first.status, second.status) == (WithdrawalStatus.PAID, WithdrawalStatus.APPROVED)
    assert second.e2e_id is None
    assert InboundNotification.objects.get().status == InboundNotification.Status.FAILED
    assert available_balance(account) == ledger_sum(account)


@pytest.mark.parametrize("event", ["payout.failed", "payout.returned"])
def test_news_from_an_acquirer_the_chain_moved_past_changes_nothing(
    account: Account, acquirer: Acquirer, stranger: Acquirer, event: str
) -> None:
    withdrawal = request(account)
    move(withdrawal, WithdrawalStatus.APPROVED)
    # What _pay_out leaves: the first acquirer refused, the second took it.
    PayoutAttempt.objects.create(
        withdrawal=withdrawal, acquirer=acquirer, action="send", outcome="declined", latency_ms=5
    )
    PayoutAttempt.objects.create(
        withdrawal=withdrawal, acquirer=stranger, action="send", outcome="processing", latency_ms=5
    )
    Withdrawal.objects.filter(pk=withdrawal.pk).update(acquirer=stranger)
    if event == "payout.returned":
        accepted(notify(stranger, {"event": "payout.paid", "reference": withdrawal.idempotency_id, "e2e_id": E2E}), 1)
    before = snapshot(withdrawal)

    # The refusing acquirer's late (or mistaken) news about a payout it never made.
    notify(acquirer, {"event": event, "reference": withdrawal.idempotency_id})

    assert snapshot(withdrawal) == before
    assert available_balance(account) == SEED - AMOUNT - FEE


# --------------------------------------------------------------------------- races


def race(withdrawal_id: Any, *targets: str) -> list[Any]:
    """Each target's outcome: the transition's result, or the exception's class."""
    # Unique per withdrawal (the column is); both sides of a race carry the same one.
    e2e_id = E2E[:-11] + uuid.uuid4().hex[:11]
    outcomes = realworld.run_concurrently(
        [
            functools.partial(
                withdrawal_transition, withdrawal_id=withdrawal_id, to_status=to, source="acquirer", e2e_id=e2e_id
            )
            for to in targets
        ],
        timeout=30,
    )
    return [type(o) if isinstance(o, Exception) else o for o in outcomes]


RACES = [
    # (from, the two targets, statuses either may end in)
    (WithdrawalStatus.APPROVED, (WithdrawalStatus.PAID, WithdrawalStatus.FAILED)),
    (WithdrawalStatus.PENDING, (WithdrawalStatus.APPROVED, WithdrawalStatus.CANCELED)),
    (WithdrawalStatus.APPROVED, (WithdrawalStatus.PAID, WithdrawalStatus.PAID)),
    (WithdrawalStatus.PAID, (WithdrawalStatus.REFUNDED, WithdrawalStatus.REFUNDED)),
]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("frm", "targets"), RACES, ids=str)
def test_racing_transitions_apply_exactly_one(
    account: Account, no_enqueue: list[Any], frm: str, targets: tuple[str, str]
) -> None:
    for _ in range(3):
        withdrawal = request(account)
        move(withdrawal, *STATES[frm])
        before = snapshot(withdrawal)

        results = race(withdrawal.pk, *targets)

        winners = [to for to, result in zip(targets, results, strict=True) if result is True]
        losers = [result for result in results if result is not True]
        assert len(winners) == 1, results
        expected_loser = False if targets[0] == targets[1] else WithdrawalTransitionNotAllowed
        assert losers == [expected_loser]
        after = snapshot(withdrawal)
        assert after["status"] == winners[0]
        assert after["version"] == before["version"] + 1
        assert after["transitions"] == before["transitions"] + 1
        assert after["events"] == before["events"] + 1
        effect = TRANSITIONS[(frm, winners[0])]
        credit = getattr(withdrawal, effect[1]) if effect else 0
        assert after["balance"] == before["balance"] + credit
        assert after["ledger"] == before["ledger"] + (1 if effect else 0)
        assert available_balance(account) == ledger_sum(account)
