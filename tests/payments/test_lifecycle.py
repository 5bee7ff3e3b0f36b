"""The charge lifecycle of decisions §4: every allowed transition with its
ledger effect, every refused one changing nothing, repeated notifications as
no-ops, expiry, concurrency, and the sandbox drivers of decisions §8."""

from __future__ import annotations

import datetime as dt
import importlib
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.conf import settings
from django.db import transaction
from django.test import override_settings
from django.urls import Resolver404, clear_url_caches, resolve
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.models import Account, ApiCredential, LedgerEntry
from accounts.selectors import available_balance, ledger_sum
from accounts.services import IssuedCredential, ledger_post
from acquirers.models import Acquirer
from observability.views import api_not_found
from payments.cancel_pursuit import charge_cancel_pursue
from payments.exceptions import TransitionNotAllowed
from payments.models import Charge, ChargeStatus, ChargeTransition
from payments.services import TRANSITIONS, charge_transition, charges_expire
from payments.tasks import expire_charges
from tests import realworld
from tests.conftest import client_for
from tests.factories import AccountFactory, AcquirerFactory
from tests.helpers import local

AMOUNT = 1000
# Fees of the account below: 30 + round_half_up(1000 * 150 / 10000) = 45.
LIQUID = 955
BODY = {
    "payment_method": "pix",
    "amount": AMOUNT,
    "buyer": {"buyer_name": "Fulano", "buyer_document": "52998224725", "buyer_phone": "11999998888"},
}
NOT_FOUND = {"success": False, "message": "Transação não encontrada.", "data": None}

pytestmark = pytest.mark.django_db


@pytest.fixture
def account(db: Any) -> Account:
    # Non-zero fees, so that liquid_amount differs from amount in every assertion.
    return AccountFactory(cashin_fee_fixed=30, cashin_fee_bps=150)


@pytest.fixture
def acquirer(db: Any) -> Acquirer:
    return AcquirerFactory(key="sbx_lifecycle", default_priority=1)


def create_charge(api: APIClient) -> Charge:
    response = api.post("/api/transactions", BODY, format="json")
    assert response.status_code == 201, response.content
    charge = Charge.objects.get(pk=response.json()["data"]["id"])
    assert (charge.amount, charge.liquid_amount, charge.status) == (AMOUNT, LIQUID, ChargeStatus.PENDING)
    return charge


def make_charge(account: Account, acquirer: Acquirer, **fields: Any) -> Charge:
    """A charge row straight in the database, for tests that need many quickly."""
    values: dict[str, Any] = {
        "account": account,
        "amount": AMOUNT,
        "platform_tax": AMOUNT - LIQUID,
        "liquid_amount": LIQUID,
        "txid": uuid.uuid4().hex,
        "emv": "000201",
        "acquirer": acquirer,
        "buyer_name": "Fulano",
        "buyer_document": "52998224725",
        "buyer_phone": "11999998888",
        "expires_at": timezone.now() + dt.timedelta(hours=1),
    }
    values.update(fields)
    return Charge.objects.create(**values)


def move(charge: Charge, *statuses: str) -> None:
    for status in statuses:
        assert charge_transition(charge_id=charge.pk, to_status=status, source=ChargeTransition.Source.STAFF)


def record(charge: Charge) -> dict[str, Any]:
    """The Transaction record a client should read for ``charge``, as stored now."""
    charge.refresh_from_db()
    return {
        "id": str(charge.pk),
        "payment_method": "pix",
        "e2e_id": charge.e2e_id,
        "amount": charge.amount,
        "platform_tax": charge.platform_tax,
        "liquid_amount": charge.liquid_amount,
        "status": charge.status,
        "paid_at": local(charge.paid_at),
        "created_at": local(charge.created_at),
        "expires_at": local(charge.expires_at),
    }


def snapshot(charge: Charge) -> dict[str, Any]:
    """Everything a refused transition must leave alone."""
    charge.refresh_from_db()
    account = charge.account
    return {
        "status": charge.status,
        "version": charge.version,
        "paid_at": charge.paid_at,
        "e2e_id": charge.e2e_id,
        "balance": available_balance(account),
        "ledger": LedgerEntry.objects.filter(account=account).count(),
        "transitions": ChargeTransition.objects.filter(charge=charge).count(),
    }


def balance_via_api(api: APIClient) -> int:
    response = api.get("/api/withdrawals/balance")
    assert response.status_code == 200
    balance: int = response.json()["data"]["available_balance"]
    return balance


def sandbox(api: APIClient, charge_id: Any, action: str) -> Any:
    return api.post(f"/api/sandbox/transactions/{charge_id}/{action}")


# --------------------------------------------------------------------------- the table, through the service

ALLOWED = [
    # (path to the "from" state, to, ledger kind or None, signed multiple of liquid_amount)
    ((), ChargeStatus.PAID, LedgerEntry.Kind.CHARGE_PAID, +1),
    ((), ChargeStatus.FAILED, None, 0),
    ((), ChargeStatus.CANCELED, None, 0),
    ((ChargeStatus.PAID,), ChargeStatus.REFUNDED, LedgerEntry.Kind.CHARGE_REFUND, -1),
    ((ChargeStatus.PAID,), ChargeStatus.CHARGEBACK, LedgerEntry.Kind.CHARGE_CHARGEBACK, -1),
    ((ChargeStatus.PAID, ChargeStatus.CHARGEBACK), ChargeStatus.PAID, LedgerEntry.Kind.CHARGEBACK_REVERSAL, +1),
    ((ChargeStatus.PAID, ChargeStatus.CHARGEBACK), ChargeStatus.REFUNDED, None, 0),
]


def test_the_table_is_exactly_decisions_4() -> None:
    expected = {
        ((path[-1] if path else ChargeStatus.PENDING), to): ((kind, sign) if kind else None)
        for path, to, kind, sign in ALLOWED
    }
    assert expected == TRANSITIONS


@pytest.mark.parametrize(("path", "to", "kind", "sign"), ALLOWED, ids=lambda v: str(v))
def test_allowed_transition_applies_its_ledger_effect(
    account: Account, acquirer: Acquirer, path: tuple[str, ...], to: str, kind: str | None, sign: int
) -> None:
    charge = make_charge(account, acquirer)
    move(charge, *path)
    before = snapshot(charge)
    from_status = before["status"]

    assert charge_transition(charge_id=charge.pk, to_status=to, source=ChargeTransition.Source.STAFF, actor="ops")

    after = snapshot(charge)
    assert after["status"] == to
    assert after["version"] == before["version"] + 1
    assert after["balance"] == before["balance"] + sign * LIQUID
    assert after["balance"] == ledger_sum(account)
    assert after["transitions"] == before["transitions"] + 1
    last = ChargeTransition.objects.filter(charge=charge).latest("id")
    assert (last.from_status, last.to_status, last.source, last.actor) == (from_status, to, "staff", "ops")
    new_entries = list(LedgerEntry.objects.filter(account=account).order_by("id")[before["ledger"] :])
    if kind is None:
        assert new_entries == []
    else:
        assert [(e.kind, e.amount, e.balance_after) for e in new_entries] == [(kind, sign * LIQUID, after["balance"])]
        assert new_entries[0].reference == f"charge:{charge.pk}:{after['version']}"


REFUSED = [
    ((ChargeStatus.PAID,), ChargeStatus.PENDING),
    ((ChargeStatus.PAID,), ChargeStatus.FAILED),
    ((ChargeStatus.PAID,), ChargeStatus.CANCELED),
    ((), ChargeStatus.REFUNDED),
    ((), ChargeStatus.CHARGEBACK),
    ((ChargeStatus.FAILED,), ChargeStatus.PAID),
    ((ChargeStatus.FAILED,), ChargeStatus.PENDING),
    ((ChargeStatus.FAILED,), ChargeStatus.CANCELED),
    ((ChargeStatus.FAILED,), ChargeStatus.REFUNDED),
    ((ChargeStatus.CANCELED,), ChargeStatus.PAID),
    ((ChargeStatus.CANCELED,), ChargeStatus.PENDING),
    ((ChargeStatus.CANCELED,), ChargeStatus.FAILED),
    ((ChargeStatus.CANCELED,), ChargeStatus.CHARGEBACK),
    ((ChargeStatus.PAID, ChargeStatus.REFUNDED), ChargeStatus.PAID),
    ((ChargeStatus.PAID, ChargeStatus.REFUNDED), ChargeStatus.PENDING),
    ((ChargeStatus.PAID, ChargeStatus.REFUNDED), ChargeStatus.FAILED),
    ((ChargeStatus.PAID, ChargeStatus.REFUNDED), ChargeStatus.CANCELED),
    ((ChargeStatus.PAID, ChargeStatus.REFUNDED), ChargeStatus.CHARGEBACK),
    ((ChargeStatus.PAID, ChargeStatus.CHARGEBACK), ChargeStatus.PENDING),
    ((ChargeStatus.PAID, ChargeStatus.CHARGEBACK), ChargeStatus.FAILED),
    ((ChargeStatus.PAID, ChargeStatus.CHARGEBACK), ChargeStatus.CANCELED),
]


@pytest.mark.parametrize(("path", "to"), REFUSED, ids=lambda v: str(v))
def test_refused_transition_raises_and_changes_nothing(
    account: Account, acquirer: Acquirer, path: tuple[str, ...], to: str
) -> None:
    charge = make_charge(account, acquirer)
    move(charge, *path)
    before = snapshot(charge)

    with pytest.raises(TransitionNotAllowed) as raised:
        charge_transition(charge_id=charge.pk, to_status=to, source=ChargeTransition.Source.STAFF)

    assert raised.value.status_code == 409
    assert (
        raised.value.message
        == f"A transação não pode passar de {ChargeStatus(before['status']).label} para {ChargeStatus(to).label}."
    )
    assert snapshot(charge) == before
    assert available_balance(account) == ledger_sum(account)


@pytest.mark.parametrize("status", [ChargeStatus.PAID, ChargeStatus.FAILED, ChargeStatus.CANCELED])
def test_repeating_a_transition_is_a_no_op(account: Account, acquirer: Acquirer, status: str) -> None:
    charge = make_charge(account, acquirer)
    move(charge, status)
    before = snapshot(charge)

    assert charge_transition(charge_id=charge.pk, to_status=status, source="acquirer", e2e_id="E" + "9" * 31) is False

    assert snapshot(charge) == before


def test_chargeback_then_paid_then_chargeback_again_uses_distinct_references(
    account: Account, acquirer: Acquirer
) -> None:
    charge = make_charge(account, acquirer)
    move(
        charge,
        ChargeStatus.PAID,
        ChargeStatus.CHARGEBACK,
        ChargeStatus.PAID,
        ChargeStatus.CHARGEBACK,
        ChargeStatus.PAID,
    )

    entries = list(LedgerEntry.objects.filter(account=account).order_by("id"))
    assert [(e.kind, e.amount) for e in entries] == [
        (LedgerEntry.Kind.CHARGE_PAID, LIQUID),
        (LedgerEntry.Kind.CHARGE_CHARGEBACK, -LIQUID),
        (LedgerEntry.Kind.CHARGEBACK_REVERSAL, LIQUID),
        (LedgerEntry.Kind.CHARGE_CHARGEBACK, -LIQUID),
        (LedgerEntry.Kind.CHARGEBACK_REVERSAL, LIQUID),
    ]
    assert len({e.reference for e in entries}) == 5
    assert [e.balance_after for e in entries] == [LIQUID, 0, LIQUID, 0, LIQUID]
    assert available_balance(account) == LIQUID == ledger_sum(account)
    assert ChargeTransition.objects.filter(charge=charge).count() == 5


def withdraw_everything(account: Account) -> None:
    with transaction.atomic():
        ledger_post(
            account_id=account.pk,
            amount=-available_balance(account),
            kind=LedgerEntry.Kind.WITHDRAWAL,
            reference="w:all",
        )


@pytest.mark.parametrize("to", [ChargeStatus.REFUNDED, ChargeStatus.CHARGEBACK])
def test_refund_or_chargeback_after_withdrawal_takes_the_balance_negative(
    api: APIClient, account: Account, acquirer: Acquirer, to: str
) -> None:
    charge = create_charge(api)
    move(charge, ChargeStatus.PAID)
    withdraw_everything(account)
    assert balance_via_api(api) == 0

    move(charge, to)

    assert balance_via_api(api) == -LIQUID == ledger_sum(account)
    assert LedgerEntry.objects.filter(account=account).latest("id").balance_after == -LIQUID


def test_dispute_lost_after_withdrawal_moves_no_further_money(
    api: APIClient, account: Account, acquirer: Acquirer
) -> None:
    charge = create_charge(api)
    move(charge, ChargeStatus.PAID)
    withdraw_everything(account)
    move(charge, ChargeStatus.CHARGEBACK, ChargeStatus.REFUNDED)
    assert balance_via_api(api) == -LIQUID == ledger_sum(account)


def test_paid_sets_paid_at_and_e2e_id_and_dispute_resolution_keeps_them(account: Account, acquirer: Acquirer) -> None:
    charge = make_charge(account, acquirer)
    paid_at = timezone.now().replace(microsecond=0) - dt.timedelta(minutes=5)
    charge_transition(
        charge_id=charge.pk, to_status=ChargeStatus.PAID, source="acquirer", e2e_id="E" + "1" * 31, paid_at=paid_at
    )
    charge.refresh_from_db()
    assert (charge.paid_at, charge.e2e_id) == (paid_at, "E" + "1" * 31)

    move(charge, ChargeStatus.CHARGEBACK)
    charge_transition(
        charge_id=charge.pk,
        to_status=ChargeStatus.PAID,
        source="acquirer",
        e2e_id="E" + "2" * 31,
        paid_at=timezone.now(),
    )
    charge.refresh_from_db()
    assert charge.status == ChargeStatus.PAID
    assert (charge.paid_at, charge.e2e_id) == (paid_at, "E" + "1" * 31)


# --------------------------------------------------------------------------- the sandbox drivers


def test_sandbox_pay_credits_and_answers_the_record(api: APIClient, account: Account, acquirer: Acquirer) -> None:
    charge = create_charge(api)
    started = timezone.now()

    response = sandbox(api, charge.pk, "pay")

    assert response.status_code == 200
    charge.refresh_from_db()
    assert response.json() == {"success": True, "message": "Transação atualizada.", "data": record(charge)}
    assert charge.status == ChargeStatus.PAID
    assert charge.e2e_id is not None
    assert len(charge.e2e_id) == 32
    assert charge.e2e_id.startswith("E")
    assert charge.paid_at is not None
    assert started <= charge.paid_at <= timezone.now()
    assert balance_via_api(api) == LIQUID == ledger_sum(account)
    assert ChargeTransition.objects.get(charge=charge).source == "sandbox"
    # The record a client reads afterwards is the same.
    # The read carries the copy-and-paste code too (issue 30); the sandbox's answer does not.
    assert api.get(f"/api/transactions/{charge.pk}").json()["data"] == {**record(charge), "pix": {"emv": charge.emv}}


SANDBOX_ALLOWED = [
    # (path, action, resulting status, balance change in liquid_amounts)
    ((), "pay", ChargeStatus.PAID, +1),
    ((), "fail", ChargeStatus.FAILED, 0),
    ((ChargeStatus.PAID,), "refund", ChargeStatus.REFUNDED, -1),
    ((ChargeStatus.PAID,), "chargeback", ChargeStatus.CHARGEBACK, -1),
    ((ChargeStatus.PAID, ChargeStatus.CHARGEBACK), "refund", ChargeStatus.REFUNDED, 0),
]


@pytest.mark.parametrize(("path", "action", "status", "sign"), SANDBOX_ALLOWED, ids=lambda v: str(v))
def test_sandbox_drivers(
    api: APIClient, account: Account, acquirer: Acquirer, path: tuple[str, ...], action: str, status: str, sign: int
) -> None:
    charge = create_charge(api)
    move(charge, *path)
    before = snapshot(charge)

    response = sandbox(api, charge.pk, action)

    assert response.status_code == 200
    assert response.json() == {"success": True, "message": "Transação atualizada.", "data": record(charge)}
    assert response.json()["data"]["status"] == status
    after = snapshot(charge)
    assert after["balance"] == before["balance"] + sign * LIQUID == ledger_sum(account)
    assert after["ledger"] == before["ledger"] + (1 if sign else 0)
    assert after["transitions"] == before["transitions"] + 1


# A Pix for a failed or canceled charge is not refused but kept as a late
# payment (tests/payments/test_late_payments.py).
SANDBOX_REFUSED = [
    ((), "refund"),
    ((), "chargeback"),
    ((ChargeStatus.PAID,), "fail"),
    ((ChargeStatus.FAILED,), "refund"),
    ((ChargeStatus.CANCELED,), "chargeback"),
    ((ChargeStatus.PAID, ChargeStatus.REFUNDED), "fail"),
    ((ChargeStatus.PAID, ChargeStatus.REFUNDED), "chargeback"),
    ((ChargeStatus.PAID, ChargeStatus.CHARGEBACK), "fail"),
    # A late confirmation never undoes a chargeback or a refund: asked of the
    # sandbox, it is a refusal like any other (one answer, 409, everywhere).
    ((ChargeStatus.PAID, ChargeStatus.CHARGEBACK), "pay"),
    ((ChargeStatus.PAID, ChargeStatus.REFUNDED), "pay"),
    ((ChargeStatus.PAID, ChargeStatus.CHARGEBACK, ChargeStatus.REFUNDED), "pay"),
]
ACTION_TARGET = {
    "pay": ChargeStatus.PAID,
    "fail": ChargeStatus.FAILED,
    "refund": ChargeStatus.REFUNDED,
    "chargeback": ChargeStatus.CHARGEBACK,
}


@pytest.mark.parametrize(("path", "action"), SANDBOX_REFUSED, ids=lambda v: str(v))
def test_sandbox_refused_transition_is_409_and_changes_nothing(
    api: APIClient, account: Account, acquirer: Acquirer, path: tuple[str, ...], action: str
) -> None:
    charge = create_charge(api)
    move(charge, *path)
    before = snapshot(charge)

    response = sandbox(api, charge.pk, action)

    assert response.status_code == 409
    frm, to = ChargeStatus(before["status"]).label, ChargeStatus(ACTION_TARGET[action]).label
    assert response.json() == {
        "success": False,
        "message": f"A transação não pode passar de {frm} para {to}.",
        "data": None,
    }
    assert snapshot(charge) == before


@pytest.mark.parametrize(
    ("setup", "action"),
    [
        (("pay",), "pay"),
        (("fail",), "fail"),
        (("pay", "refund"), "refund"),
        (("pay", "chargeback"), "chargeback"),
        (("pay", "chargeback", "refund"), "refund"),
    ],
    ids=lambda v: str(v),
)
def test_sandbox_repeated_change_is_a_no_op(
    api: APIClient, account: Account, acquirer: Acquirer, setup: tuple[str, ...], action: str
) -> None:
    charge = create_charge(api)
    for step in setup:
        assert sandbox(api, charge.pk, step).status_code == 200
    before = snapshot(charge)

    response = sandbox(api, charge.pk, action)

    assert response.status_code == 200
    assert response.json()["data"] == record(charge)
    assert snapshot(charge) == before


def test_sandbox_pay_twice_credits_once(api: APIClient, account: Account, acquirer: Acquirer) -> None:
    charge = create_charge(api)
    first = sandbox(api, charge.pk, "pay").json()["data"]
    second = sandbox(api, charge.pk, "pay").json()["data"]
    assert first == second  # same e2e_id, same paid_at
    assert balance_via_api(api) == LIQUID
    assert LedgerEntry.objects.filter(account=account).count() == 1


@pytest.mark.parametrize("action", ["pay", "fail", "refund", "chargeback"])
def test_sandbox_unknown_or_malformed_id_is_404(api: APIClient, account: Account, action: str) -> None:
    for charge_id in (uuid.uuid4(), "not-a-uuid"):
        response = sandbox(api, charge_id, action)
        assert response.status_code == 404
        assert response.json() == NOT_FOUND


@pytest.mark.parametrize("action", ["pay", "fail"])
def test_sandbox_on_another_accounts_charge_is_404_and_changes_nothing(
    api: APIClient, acquirer: Acquirer, issue_credential: Callable[..., IssuedCredential], action: str
) -> None:
    other = AccountFactory(cashin_fee_fixed=30, cashin_fee_bps=150)
    charge = create_charge(client_for(issue_credential(other)))
    before = snapshot(charge)

    response = sandbox(api, charge.pk, action)

    assert response.status_code == 404
    assert response.json() == NOT_FOUND
    assert snapshot(charge) == before


@pytest.mark.parametrize("permission", [ApiCredential.Permission.CASHIN, ApiCredential.Permission.ALL])
def test_sandbox_accepts_the_charges_permission(
    account: Account, acquirer: Acquirer, issue_credential: Callable[..., IssuedCredential], permission: str
) -> None:
    charge = make_charge(account, acquirer)
    response = sandbox(client_for(issue_credential(account, permission)), charge.pk, "pay")
    assert response.status_code == 200
    assert response.json()["data"]["status"] == "paid"


@pytest.mark.parametrize("action", ["pay", "fail"])
def test_sandbox_refuses_a_cashout_credential_and_changes_nothing(
    account: Account, acquirer: Acquirer, issue_credential: Callable[..., IssuedCredential], action: str
) -> None:
    charge = make_charge(account, acquirer)
    before = snapshot(charge)

    response = sandbox(client_for(issue_credential(account, ApiCredential.Permission.CASHOUT)), charge.pk, action)

    assert response.status_code == 403
    assert response.json() == {
        "success": False,
        "message": "Esta credencial não tem permissão para realizar esta operação.",
        "data": None,
    }
    assert snapshot(charge) == before


@pytest.mark.parametrize(
    ("path", "action"),
    [((), "pay"), ((), "fail"), ((ChargeStatus.PAID,), "refund"), ((ChargeStatus.PAID,), "chargeback")],
    ids=lambda v: str(v),
)
def test_sandbox_cannot_touch_a_charge_held_by_a_real_acquirer(
    api: APIClient, account: Account, path: tuple[str, ...], action: str
) -> None:
    real = AcquirerFactory(key="real_psp", adapter="bacen_pix", options={})
    charge = make_charge(account, real)
    move(charge, *path)
    before = snapshot(charge)

    response = sandbox(api, charge.pk, action)

    # The same answer as an unknown id: nothing tells a client the charge exists.
    assert response.status_code == 404
    assert response.json() == NOT_FOUND
    assert snapshot(charge) == before


def test_sandbox_needs_credentials(account: Account, acquirer: Acquirer) -> None:
    charge = make_charge(account, acquirer)
    response = APIClient().post(f"/api/sandbox/transactions/{charge.pk}/pay")
    assert response.status_code == 401
    assert snapshot(charge)["status"] == ChargeStatus.PENDING


@pytest.fixture
def restore_urls() -> Iterator[None]:
    yield
    import config.urls
    import payments.urls

    importlib.reload(payments.urls)
    importlib.reload(config.urls)
    clear_url_caches()


def test_sandbox_route_exists_only_with_pix_sandbox(
    api: APIClient, account: Account, acquirer: Acquirer, restore_urls: None
) -> None:
    import config.urls
    import payments.urls

    charge = make_charge(account, acquirer)
    route = f"/api/sandbox/transactions/{charge.pk}/pay"
    assert settings.PIX_SANDBOX is True
    assert resolve(route).url_name == "sandbox-transaction"
    assert resolve(route.replace("/api", ""), urlconf="payments.urls").url_name == "sandbox-transaction"

    with override_settings(PIX_SANDBOX=False):
        importlib.reload(payments.urls)
        importlib.reload(config.urls)
        clear_url_caches()
        assert "sandbox-transaction" not in {getattr(p, "name", None) for p in payments.urls.urlpatterns}
        with pytest.raises(Resolver404):
            resolve(route, urlconf="payments.urls")
        # Under /api only the catch-all answers now, in the error envelope.
        assert resolve(route).func is api_not_found
        response = api.post(route)
        assert response.status_code == 404
        assert response.json() == {"success": False, "message": "Recurso não encontrado.", "data": None}

    assert snapshot(charge)["status"] == ChargeStatus.PENDING
    # The other charge routes do not depend on the flag.
    assert resolve(f"/api/transactions/{charge.pk}").url_name == "transaction-detail"


# --------------------------------------------------------------------------- expiry


def test_charges_expire_cancels_only_pending_charges_past_their_expiry(account: Account, acquirer: Acquirer) -> None:
    now = timezone.now()
    due = make_charge(account, acquirer)
    exactly_due = make_charge(account, acquirer)
    not_yet = make_charge(account, acquirer)
    paid = make_charge(account, acquirer)
    failed = make_charge(account, acquirer)
    move(paid, ChargeStatus.PAID)
    move(failed, ChargeStatus.FAILED)
    Charge.objects.filter(pk__in=[due.pk, paid.pk, failed.pk]).update(expires_at=now - dt.timedelta(seconds=1))
    Charge.objects.filter(pk=exactly_due.pk).update(expires_at=now)
    Charge.objects.filter(pk=not_yet.pk).update(expires_at=now + dt.timedelta(seconds=1))
    balance = available_balance(account)
    entries = LedgerEntry.objects.count()

    assert charges_expire(now=now) == 2

    statuses = dict(Charge.objects.values_list("pk", "status"))
    assert statuses == {
        due.pk: ChargeStatus.CANCELED,
        exactly_due.pk: ChargeStatus.CANCELED,
        not_yet.pk: ChargeStatus.PENDING,
        paid.pk: ChargeStatus.PAID,
        failed.pk: ChargeStatus.FAILED,
    }
    assert ChargeTransition.objects.get(charge=due).source == "expiry"
    assert available_balance(account) == balance
    assert LedgerEntry.objects.count() == entries

    # Idempotent: a second sweep (another beat, a retried task) changes nothing.
    assert charges_expire(now=now) == 0
    assert ChargeTransition.objects.filter(charge__in=[due, exactly_due]).count() == 2


def test_expire_task_uses_the_current_time_and_is_scheduled(
    api: APIClient, account: Account, acquirer: Acquirer
) -> None:
    charge = create_charge(api)
    # The account's expiry (default 3600 s) is what the charge got.
    assert abs((charge.expires_at - charge.created_at) - dt.timedelta(seconds=3600)) < dt.timedelta(seconds=5)
    assert expire_charges() == 0
    Charge.objects.filter(pk=charge.pk).update(expires_at=timezone.now() - dt.timedelta(seconds=1))

    assert expire_charges() == 1
    assert expire_charges() == 0

    assert api.get(f"/api/transactions/{charge.pk}").json()["data"]["status"] == "canceled"
    # The expiry asks the acquirer too; once it has, the payer cannot pay.
    assert charge_cancel_pursue(charge_id=charge.pk) == "done"
    assert sandbox(api, charge.pk, "pay").status_code == 409  # too late to pay
    tasks = {entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    assert "payments.tasks.expire_charges" in tasks


def test_account_expiry_setting_is_used(api: APIClient, account: Account, acquirer: Acquirer) -> None:
    Account.objects.filter(pk=account.pk).update(charge_expiry_seconds=120)
    charge = create_charge(api)
    assert abs((charge.expires_at - charge.created_at) - dt.timedelta(seconds=120)) < dt.timedelta(seconds=5)


# --------------------------------------------------------------------------- concurrency


def run_concurrently(*calls: Callable[[], Any]) -> tuple[list[Any], list[BaseException]]:
    """Results and errors of the calls, run together on their own connections."""
    outcomes = realworld.run_concurrently(list(calls), timeout=30)
    return (
        [o for o in outcomes if not isinstance(o, BaseException)],
        [o for o in outcomes if isinstance(o, BaseException)],
    )


@pytest.mark.django_db(transaction=True)
def test_concurrent_payment_confirmations_credit_once() -> None:
    account = AccountFactory(cashin_fee_fixed=30, cashin_fee_bps=150)
    charge = make_charge(account, AcquirerFactory(key="sbx_concurrent"))

    def pay() -> bool:
        return charge_transition(charge_id=charge.pk, to_status=ChargeStatus.PAID, source="acquirer")

    results, errors = run_concurrently(pay, pay, pay, pay)

    assert errors == []
    assert sorted(results) == [False, False, False, True]
    assert LedgerEntry.objects.filter(account=account).count() == 1
    assert available_balance(account) == LIQUID == ledger_sum(account)
    assert ChargeTransition.objects.filter(charge=charge).count() == 1


@pytest.mark.django_db(transaction=True)
def test_concurrent_refund_and_chargeback_debit_once() -> None:
    account = AccountFactory(cashin_fee_fixed=30, cashin_fee_bps=150)
    charge = make_charge(account, AcquirerFactory(key="sbx_concurrent"))
    move(charge, ChargeStatus.PAID)

    def to(status: str) -> Callable[[], bool]:
        return lambda: charge_transition(charge_id=charge.pk, to_status=status, source="acquirer")

    results, errors = run_concurrently(to(ChargeStatus.REFUNDED), to(ChargeStatus.CHARGEBACK))

    charge.refresh_from_db()
    if charge.status == ChargeStatus.REFUNDED and not errors:
        # chargeback first, then the lost dispute's refund (no money of its own).
        assert results == [True, True]
    else:
        # refund first: a refunded charge cannot be charged back.
        assert charge.status == ChargeStatus.REFUNDED
        assert results == [True]
        assert [type(e) for e in errors] == [TransitionNotAllowed]
    entries = LedgerEntry.objects.filter(account=account)
    assert entries.filter(amount__lt=0).count() == 1
    assert available_balance(account) == 0 == ledger_sum(account)
