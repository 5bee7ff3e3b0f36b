"""The additive fields of a withdrawal's record (docs/api/index.md), as tests expect them."""

from __future__ import annotations

from typing import Any

from tests.helpers import local
from withdrawals.exceptions import merchant_failure_reason
from withdrawals.models import Withdrawal

#: A withdrawal with no schedule, reference, failure, batch or payee check.
NO_ADDITIVE_FIELDS: dict[str, Any] = {
    "scheduled_for": None,
    "external_id": "",
    "failure_reason": "",
    "batch_id": None,
    "payee": None,
}


def additive_fields(withdrawal: Withdrawal) -> dict[str, Any]:
    """The record's fields beyond the contract's, from the row as it is."""
    payee = None
    if withdrawal.payee_document or withdrawal.payee_check:
        payee = {
            "expected_document": withdrawal.payee_document,
            "check": withdrawal.payee_check,
            "name": withdrawal.payee_name,
            "document": withdrawal.payee_document_masked,
            "ispb": withdrawal.payee_ispb,
            "bank": withdrawal.payee_bank,
            "checked_at": local(withdrawal.payee_checked_at),
        }
    return {
        "scheduled_for": withdrawal.scheduled_for.isoformat() if withdrawal.scheduled_for else None,
        "external_id": withdrawal.external_id,
        "failure_reason": merchant_failure_reason(withdrawal.status, withdrawal.failure_reason),
        "batch_id": str(withdrawal.batch_id) if withdrawal.batch_id else None,
        "payee": payee,
    }
