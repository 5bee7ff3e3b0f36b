"""Capabilities are flags the selectors filter on (``supports_charge``,
``supports_payout``, ``supports_refund``), not errors raised at call time: an
acquirer whose adapter cannot pay out (``bacen_pix``, cash-in only) is never
in a payout chain, one whose adapter cannot charge (``efi_pix``, cash-out
only) never in a charge's chain nor offered for selection. Nothing is asked of
them, so no attempt is recorded for them either.

The selectors read the adapter's name only: the acquirers here need no
working options (none of them is ever built)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

import pytest
from django.db import transaction
from rest_framework.test import APIClient

from accounts.models import Account, LedgerEntry
from accounts.services import ledger_post
from acquirers import adapters
from acquirers.adapters.apipix.bacen import BacenPixAdapter
from acquirers.adapters.apipix.efi import EfiPixAdapter
from acquirers.adapters.base import (
    AcquirerAdapter,
    AcquirerConfig,
    AcquirerDeclined,
    CapabilityNotSupported,
    ChargeRequest,
    Notification,
    PayoutRequest,
    PayoutStatus,
)
from acquirers.adapters.sandbox import SandboxAdapter
from acquirers.models import Acquirer, AcquirerSlot
from acquirers.selectors import available_acquirers, cashin_chain, payout_chain, selectable_acquirers
from acquirers.services import acquirer_grants_set, acquirer_slots_set
from payments.models import Charge, ChargeAttempt
from tests.conftest import client_for
from tests.factories import AccountFactory, AcquirerFactory
from withdrawals.models import PayoutAttempt, WithdrawalStatus
from withdrawals.payouts import withdrawal_process
from withdrawals.services import withdrawal_request

pytestmark = pytest.mark.django_db
AMOUNT = 5000
CPF = "52998224725"
CHARGE = {
    "payment_method": "pix",
    "amount": AMOUNT,
    "buyer": {"buyer_name": "Fulano", "buyer_document": CPF, "buyer_phone": "11999998888"},
}


@pytest.fixture
def cash_in_only(db: Any) -> Acquirer:
    return AcquirerFactory(key="cap_bacen", adapter="bacen_pix", options={})


@pytest.fixture
def cash_out_only(db: Any) -> Acquirer:
    return AcquirerFactory(key="cap_efi", adapter="efi_pix", options={})


@pytest.fixture
def both(db: Any) -> Acquirer:
    return AcquirerFactory(key="cap_sandbox", options={"charge": "ok", "payout": "ok"})


def fund(account: Account, amount: int = 20_000) -> None:
    with transaction.atomic():
        ledger_post(
            account_id=account.pk, amount=amount, kind=LedgerEntry.Kind.CHARGE_PAID, reference=f"seed:{uuid.uuid4()}"
        )


# --------------------------------------------------------------------------- the flags


def test_the_built_in_adapters_say_what_they_do() -> None:
    assert (BacenPixAdapter.supports_charge, BacenPixAdapter.supports_payout, BacenPixAdapter.supports_refund) == (
        True,
        False,
        True,
    )
    assert (EfiPixAdapter.supports_charge, EfiPixAdapter.supports_payout, EfiPixAdapter.supports_refund) == (
        False,
        True,
        False,
    )
    assert (SandboxAdapter.supports_charge, SandboxAdapter.supports_payout) == (True, True)
    assert "efi_pix" not in adapters.adapter_names(supporting="charge")
    assert "bacen_pix" not in adapters.adapter_names(supporting="payout")
    assert {"bacen_pix", "efi_pix", "sandbox"} <= set(adapters.adapter_names())


def test_an_adapter_claiming_what_it_does_not_implement_is_refused_at_registration() -> None:
    class Boasts(AcquirerAdapter):
        name = "test_cap_boasts"  # charges and payouts are on by default, and it has neither
        supports_refund = True

        def parse_notification(self, headers: Mapping[str, str], body: bytes) -> list[Notification]:
            return []

    with pytest.raises(
        TypeError, match="create_charge, create_payout, get_payout_status, refund_charge, refund_status"
    ):
        adapters.register(Boasts)
    assert "test_cap_boasts" not in adapters.adapter_names()


def test_the_guard_behind_the_selectors_is_a_definitive_no() -> None:
    """Should a call reach an adapter anyway, it is declined (the chain moves
    on, the breaker sees a working acquirer), never an outage that would keep
    a payout waiting; and an adapter that sends no payouts holds none."""
    config = AcquirerConfig(key="cap", options={}, connect_timeout=1, read_timeout=1)

    class CashOutOnly(AcquirerAdapter):
        name = "test_cap_cash_out_only"
        supports_charge = False

        def create_payout(self, request: PayoutRequest) -> Any:
            raise NotImplementedError

        def get_payout_status(self, idempotency_id: str) -> Any:
            raise NotImplementedError

        def parse_notification(self, headers: Mapping[str, str], body: bytes) -> list[Notification]:
            return []

    charge_id = uuid.uuid4()
    request = ChargeRequest(
        charge_id=charge_id,
        txid=charge_id.hex,
        amount=AMOUNT,
        expires_in=1800,
        payer_name="Fulano",
        payer_document=CPF,
        merchant_name="Loja",
        merchant_city="SAO PAULO",
    )
    with pytest.raises(CapabilityNotSupported, match="charges are not supported") as refused:
        CashOutOnly(config).create_charge(request)
    assert isinstance(refused.value, AcquirerDeclined)
    assert refused.value.error_class == "declined"

    # Not built from options: what it does not do needs none.
    bacen = BacenPixAdapter.__new__(BacenPixAdapter)
    payout = PayoutRequest(
        withdrawal_id=charge_id, idempotency_id=charge_id.hex, amount=AMOUNT, key_type="cpf", key_value=CPF
    )
    with pytest.raises(CapabilityNotSupported, match="payouts are not supported"):
        bacen.create_payout(payout)
    assert bacen.get_payout_status(charge_id.hex).status is PayoutStatus.NOT_FOUND


# --------------------------------------------------------------------------- payout chain


@pytest.mark.parametrize("configured", ["cashout", "cashin", "default"])
def test_an_acquirer_that_cannot_pay_out_is_never_in_the_payout_chain(
    account: Account, cash_in_only: Acquirer, both: Acquirer, configured: str
) -> None:
    if configured == "default":
        Acquirer.objects.filter(pk=cash_in_only.pk).update(default_priority=1)
        Acquirer.objects.filter(pk=both.pk).update(default_priority=2)
    else:
        acquirer_grants_set(account=account, acquirers=[cash_in_only, both])
        purpose = AcquirerSlot.Purpose.CASHOUT if configured == "cashout" else AcquirerSlot.Purpose.CASHIN
        acquirer_slots_set(account=account, purpose=purpose, acquirers=[cash_in_only, both])

    assert payout_chain(account, AMOUNT) == [both]


def test_a_payout_goes_past_a_cash_in_only_acquirer_without_asking_it(
    account: Account, cash_in_only: Acquirer, both: Acquirer
) -> None:
    acquirer_slots_set(account=account, purpose=AcquirerSlot.Purpose.CASHOUT, acquirers=[cash_in_only, both])
    fund(account)
    withdrawal = withdrawal_request(account=account, amount=AMOUNT, key_type="cpf", key_value=CPF)

    assert withdrawal_process(withdrawal_id=withdrawal.pk) == WithdrawalStatus.APPROVED
    assert withdrawal_process(withdrawal_id=withdrawal.pk) == WithdrawalStatus.PAID

    withdrawal.refresh_from_db()
    assert withdrawal.acquirer == both
    assert [(a.acquirer, a.action, a.outcome) for a in PayoutAttempt.objects.filter(withdrawal=withdrawal)] == [
        (both, PayoutAttempt.Action.SEND, "paid")
    ]


def test_with_only_cash_in_acquirers_a_payout_fails_and_nobody_is_asked(
    account: Account, cash_in_only: Acquirer
) -> None:
    acquirer_slots_set(account=account, purpose=AcquirerSlot.Purpose.CASHOUT, acquirers=[cash_in_only])
    fund(account)
    withdrawal = withdrawal_request(account=account, amount=AMOUNT, key_type="cpf", key_value=CPF)

    assert payout_chain(account, AMOUNT) == []
    withdrawal_process(withdrawal_id=withdrawal.pk)
    assert withdrawal_process(withdrawal_id=withdrawal.pk) == WithdrawalStatus.FAILED
    assert not PayoutAttempt.objects.filter(withdrawal=withdrawal).exists()


# --------------------------------------------------------------------------- cash-in chain


@pytest.mark.parametrize("configured", ["slots", "override", "default"])
def test_an_acquirer_that_cannot_charge_is_never_in_the_cash_in_chain(
    account: Account, cash_out_only: Acquirer, both: Acquirer, configured: str
) -> None:
    override = None
    if configured == "default":
        Acquirer.objects.filter(pk=cash_out_only.pk).update(default_priority=1)
        Acquirer.objects.filter(pk=both.pk).update(default_priority=2)
    elif configured == "slots":
        # Staff may still grant it and place it (grants are the account's, not a capability).
        acquirer_grants_set(account=account, acquirers=[cash_out_only, both])
        acquirer_slots_set(account=account, purpose=AcquirerSlot.Purpose.CASHIN, acquirers=[cash_out_only, both])
    else:
        override = [cash_out_only, both]

    assert cashin_chain(account, AMOUNT, override) == [both]


def test_an_acquirer_that_cannot_charge_is_neither_listed_nor_selectable(
    cash_out_only: Acquirer, both: Acquirer
) -> None:
    account = AccountFactory(can_select_pix_cash_in_acquirer=True)
    acquirer_grants_set(account=account, acquirers=[cash_out_only, both])
    assert list(available_acquirers(account)) == [both]
    assert list(selectable_acquirers(account)) == [both]


def test_a_charge_goes_past_a_cash_out_only_acquirer_without_asking_it(
    api: APIClient, cash_out_only: Acquirer, both: Acquirer
) -> None:
    Acquirer.objects.filter(pk=cash_out_only.pk).update(default_priority=1)
    Acquirer.objects.filter(pk=both.pk).update(default_priority=2)

    response = api.post("/api/transactions", CHARGE, format="json")

    assert response.status_code == 201, response.content
    charge = Charge.objects.get()
    assert charge.acquirer == both
    assert [(a.acquirer, a.position, a.outcome) for a in ChargeAttempt.objects.filter(charge=charge)] == [
        (both, 1, "ok")
    ]


def test_selecting_a_cash_out_only_acquirer_is_refused_like_an_unavailable_one(
    issue_credential: Any, cash_out_only: Acquirer, both: Acquirer
) -> None:
    account = AccountFactory(can_select_pix_cash_in_acquirer=True)
    acquirer_grants_set(account=account, acquirers=[cash_out_only, both])
    api = client_for(issue_credential(account))

    listed = api.get("/api/pix-cash-in/acquirers")
    refused = api.put("/api/pix-cash-in/acquirers", {"acquirer_key": cash_out_only.key}, format="json")

    assert listed.status_code == 200, listed.content
    assert [a["acquirer_key"] for a in listed.json()["data"]["acquirers"]] == [both.key]
    assert refused.status_code == 422
    assert not AcquirerSlot.objects.filter(account=account).exists()
