"""``PIX_SANDBOX`` off: the sandbox adapter does not exist. Nothing offers
it, nothing saves it, and an acquirer row still naming it is never called
(decisions §8; issue 11: nothing mints money)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.test import Client, override_settings
from django.urls import reverse
from rest_framework.test import APIClient

from accounts.models import Account
from acquirers import adapters
from acquirers.adapters.base import AcquirerUnavailable, ChargeRequest, InvalidOptions, UnknownAdapter
from acquirers.adapters.sandbox import SandboxAdapter
from acquirers.chain import run_charge_chain
from acquirers.models import Acquirer
from acquirers.selectors import cashin_chain, payout_chain
from payments.models import Charge, ChargeAttempt
from provisioning.bootstrap import BootstrapInvalid, bootstrap_apply
from tests.factories import AcquirerFactory

pytestmark = pytest.mark.django_db
BODY = {
    "payment_method": "pix",
    "amount": 1000,
    "buyer": {"buyer_name": "Fulano", "buyer_document": "52998224725", "buyer_phone": "11999998888"},
}
sandbox_off = override_settings(PIX_SANDBOX=False)
CHARGE_ID = uuid.UUID("6f1c1a4e-8a8e-4a43-9d5e-0d7c1b7a7c11")


@pytest.fixture
def sandbox_acquirer(db: Any) -> Acquirer:
    return AcquirerFactory(key="sbx_switch", default_priority=1)


def test_the_registry_has_the_sandbox_only_while_it_is_on(sandbox_acquirer: Acquirer) -> None:
    assert "sandbox" in adapters.adapter_names()
    assert isinstance(adapters.build(sandbox_acquirer), SandboxAdapter)

    with sandbox_off:
        assert "sandbox" not in adapters.adapter_names()
        assert {"bacen_pix", "efi_pix"} <= set(adapters.adapter_names())
        with pytest.raises(UnknownAdapter, match="unknown adapter 'sandbox'") as raised:
            adapters.build(sandbox_acquirer)
        # Refused when saved, unavailable when called: like an adapter never written.
        assert isinstance(raised.value, InvalidOptions)
        assert isinstance(raised.value, AcquirerUnavailable)
        with pytest.raises(InvalidOptions, match="unknown adapter 'sandbox'"):
            adapters.validate_options("sandbox", {"charge": "ok"})
        with pytest.raises(UnknownAdapter):
            adapters.build(AcquirerFactory(key="never_written", adapter="no_such_adapter"))


def test_a_sandbox_acquirer_is_never_called_while_it_is_off(
    api: APIClient, account: Account, sandbox_acquirer: Acquirer
) -> None:
    with sandbox_off:
        # A payout never goes to it; a charge's chain records it as unavailable.
        assert payout_chain(account, 1000) == []
        assert cashin_chain(account, 1000) == [sandbox_acquirer]

        response = api.post("/api/transactions", BODY, format="json")

    assert response.status_code == 400
    assert response.json() == {
        "success": False,
        "message": "Erro ao processar o pagamento. Tente novamente mais tarde.",
        "data": None,
    }
    assert not Charge.objects.exists()
    (attempt,) = ChargeAttempt.objects.all()
    # Failed while building the adapter: the sandbox was never asked anything.
    assert (attempt.acquirer, attempt.outcome, attempt.error_class) == (
        sandbox_acquirer,
        "unavailable",
        "UnknownAdapter",
    )
    # On again, the same row works: nothing about it was changed.
    assert api.post("/api/transactions", BODY, format="json").status_code == 201


def test_the_chain_records_a_sandbox_acquirer_it_is_handed_as_unavailable(sandbox_acquirer: Acquirer) -> None:
    request = ChargeRequest(
        charge_id=CHARGE_ID,
        txid=CHARGE_ID.hex,
        amount=1000,
        expires_in=3600,
        payer_name="Fulano",
        payer_document="52998224725",
        merchant_name="Loja",
        merchant_city="SAO PAULO",
    )
    with sandbox_off:
        outcome = run_charge_chain([sandbox_acquirer], request)
    assert outcome.acquirer is None
    ((attempt),) = outcome.attempts
    assert (attempt.outcome, attempt.error_class) == ("unavailable", "UnknownAdapter")


ADD_FORM = {
    "key": "sbx_new",
    "name": "Sandbox New",
    "nominal": "",
    "adapter": "sandbox",
    "options": '{"charge": "ok"}',
    "enabled": "on",
    "max_ticket": "3.000,00",
    "conversion_percent_override": "90",
    "connect_timeout_ms": "3000",
    "read_timeout_ms": "10000",
}


def test_admin_offers_the_sandbox_only_while_it_is_on(admin_client: Client) -> None:
    url = reverse("admin:acquirers_acquirer_add")
    assert '<option value="sandbox"' in admin_client.get(url).content.decode()

    with sandbox_off:
        page = admin_client.get(url).content.decode()
        response = admin_client.post(url, ADD_FORM)

    assert '<option value="sandbox"' not in page
    assert '<option value="bacen_pix"' in page
    assert response.status_code == 200  # the form again, with its error
    assert not Acquirer.objects.filter(key="sbx_new").exists()


def test_bootstrap_refuses_a_sandbox_acquirer_while_it_is_off(db: Any) -> None:
    data = {"acquirers": [{"key": "sbx_boot", "name": "Sbx", "adapter": "sandbox", "options": {"charge": "ok"}}]}
    with sandbox_off, pytest.raises(BootstrapInvalid) as raised:
        bootstrap_apply(data=data)
    ((path, (message,)),) = raised.value.errors.items()
    assert path == "acquirers[0].adapter"
    assert message.startswith('Adapter desconhecido "sandbox"; use um de: bacen_pix, efi_pix')
    assert not Acquirer.objects.filter(key="sbx_boot").exists()
