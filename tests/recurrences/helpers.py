"""Bodies and calls the recurrence API tests share."""

from __future__ import annotations

import datetime as dt
from typing import Any

from rest_framework.test import APIClient

from payments.due_payments import now_in_brazil

URL = "/api/recurrences"
CPF = "52998224725"
CNPJ = "11222333000181"
VALIDATION = "Erro de validação nos dados fornecidos"


def due_in(days: int) -> dt.date:
    return now_in_brazil() + dt.timedelta(days=days)


def body(**changes: Any) -> dict[str, Any]:
    """A valid QR-journey body: R$ 49,90 a month from 20 days ahead, retried within 7 days."""
    return {
        "debtor": {"document": CPF, "name": "Maria da Silva"},
        "contract": "ASSINATURA-0001",
        "description": "Plano mensal",
        "amount": 4990,
        "periodicity": "monthly",
        "first_due_date": due_in(20).isoformat(),
        "retry_policy": "3_in_7_days",
        "journey": "qr",
        **changes,
    }


def push_body(**changes: Any) -> dict[str, Any]:
    """A valid push-journey body with variable amounts up to R$ 500,00."""
    fields = body(
        journey="push",
        payer_bank={"ispb": "00000000", "branch": "0001", "account": "123456"},
        contract="CONTA-LUZ-1",
        retry_policy="none",
        max_amount=50000,
    )
    del fields["amount"]
    return {**fields, **changes}


def create(client: APIClient, **changes: Any) -> dict[str, Any]:
    response = client.post(URL, body(**changes), format="json")
    assert response.status_code == 201, response.json()
    data: dict[str, Any] = response.json()["data"]
    return data
