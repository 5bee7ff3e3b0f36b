"""What the due-date charge API tests share: a body that is valid today,
an account with credentials and a sandbox acquirer, and a paid charge."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

from rest_framework.test import APIClient

from accounts.models import Account
from accounts.services import credential_issue
from payments.due_payments import now_in_brazil
from payments.models import Charge, ChargeStatus, ChargeTransition
from payments.services import charge_transition
from tests.conftest import client_for

URL = "/api/due-charges"
CPF = "52998224725"
CNPJ = "11222333000181"
FINE = {"modalidade": 2, "valorPerc": "2.00"}
INTEREST = {"modalidade": 2, "valorPerc": "0.10"}


def due_in(days: int) -> dt.date:
    return now_in_brazil() + dt.timedelta(days=days)


def body(**changes: Any) -> dict[str, Any]:
    """A valid body: R$ 150,00 due in ten days, fine and interest after it."""
    return {
        "amount": 15000,
        "due_date": due_in(10).isoformat(),
        "days_after_due": 30,
        "debtor": {"name": "Maria da Silva", "document": CPF},
        "fine": FINE,
        "interest": INTEREST,
        "description": "Mensalidade",
        **changes,
    }


def client_of(account: Account) -> APIClient:
    return client_for(credential_issue(account=account, permission="all"))


def create(client: APIClient, **changes: Any) -> dict[str, Any]:
    response = client.post(URL, body(**changes), format="json")
    assert response.status_code == 201, response.json()
    data: dict[str, Any] = response.json()["data"]
    return data


def pay(charge_id: str | uuid.UUID, amount: int = 15000) -> Charge:
    """The acquirer's word that it was paid (as payments.events applies it)."""
    charge_transition(
        charge_id=charge_id,
        to_status=ChargeStatus.PAID,
        source=ChargeTransition.Source.ACQUIRER,
        e2e_id=f"E{uuid.uuid4().hex[:31]}",
        paid_amount=amount,
        components={"original": amount},
    )
    return Charge.objects.get(pk=charge_id)
