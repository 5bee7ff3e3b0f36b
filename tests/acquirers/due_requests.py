"""A due-date charge (cobv) as the service asks an acquirer for it: 150.00
due 2026-12-10, payable 30 days after, a fresh txid each time."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Mapping
from typing import Any

from acquirers.adapters.base import DueChargeRequest


def due_request(valor: Mapping[str, Any] | None = None) -> DueChargeRequest:
    charge_id = uuid.uuid4()
    return DueChargeRequest(
        charge_id=charge_id,
        txid=charge_id.hex,
        due_date=dt.date(2026, 12, 10),
        validity_after_due=30,
        debtor_name="Fulano de Tal",
        debtor_document="52998224725",
        valor=valor or {"original": "150.00", "multa": {"modalidade": 2, "valorPerc": "2.00"}},
    )
