"""What a sandbox acquirer sends to ``POST /acquirers/{key}/notifications``
(raw JSON signed with the shared secret), and what the tests of the callback
(tests/acquirers) and of the charge events it carries (tests/payments) read
back."""

from __future__ import annotations

import json
from typing import Any

from rest_framework.test import APIClient

from accounts.models import LedgerEntry
from accounts.selectors import available_balance
from acquirers.adapters.sandbox_signing import SIGNATURE_HEADER, signed_headers
from acquirers.models import Acquirer, InboundNotification
from payments.models import Charge, ChargeTransition
from tests.factories import AcquirerFactory

Status = InboundNotification.Status
SECRET = "sandbox-notification-secret-0123"
OTHER_SECRET = "another-sandbox-secret-456789"
KEY = "sbx_notify"
URL = f"/api/acquirers/{KEY}/notifications"
AMOUNT = 1000
LIQUID = 955  # 1000 - (30 + 1.5%): the account of these tests pays those fees
E2E = "E99999999202601101200" + "AbCdEfGhIjK"
CHARGE_BODY = {
    "payment_method": "pix",
    "amount": AMOUNT,
    "buyer": {"buyer_name": "Fulano", "buyer_document": "52998224725", "buyer_phone": "11999998888"},
}
ACCEPTED = {"success": True, "message": "Notificação recebida."}
REJECTED = {"success": False, "message": "Notificação não autenticada.", "data": None}


def sandbox_acquirer() -> Acquirer:
    """The account's first acquirer, signing its notifications with :data:`SECRET`."""
    return AcquirerFactory(
        key=KEY, default_priority=1, options={"charge": "ok", "payout": "ok", "notification_secret": SECRET}
    )


def create_charge(api: APIClient) -> Charge:
    response = api.post("/api/transactions", CHARGE_BODY, format="json")
    assert response.status_code == 201, response.content
    charge = Charge.objects.get(pk=response.json()["data"]["id"])
    assert charge.liquid_amount == LIQUID
    return charge


def event(name: str, charge: Charge, **extra: Any) -> dict[str, Any]:
    return {"event": name, "reference": charge.txid, **extra}


def notify(
    body: Any,
    *,
    secret: str = SECRET,
    url: str = URL,
    signature: str | None = None,
    timestamp: int | None = None,
    **headers: Any,
) -> Any:
    """What an acquirer sends: raw JSON bytes signed with the shared secret
    and the time (now unless told), no client credentials."""
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    signed = signed_headers(secret, raw, timestamp)
    if signature is not None:
        signed[SIGNATURE_HEADER] = signature
    return APIClient().post(url, data=raw, content_type="application/json", headers=signed, **headers)


def accepted(response: Any, processed: int) -> None:
    assert response.status_code == 200, response.content
    assert response.json() == {**ACCEPTED, "data": {"processed": processed}}


def last_inbound() -> InboundNotification:
    return InboundNotification.objects.latest("id")


def state(charge: Charge) -> dict[str, Any]:
    charge.refresh_from_db()
    return {
        "status": charge.status,
        "version": charge.version,
        "paid_at": charge.paid_at,
        "e2e_id": charge.e2e_id,
        "balance": available_balance(charge.account),
        "ledger": LedgerEntry.objects.filter(account=charge.account).count(),
        "transitions": ChargeTransition.objects.filter(charge=charge).count(),
    }
