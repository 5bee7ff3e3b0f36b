"""Payout-only test adapters' common part: they take no charges and no
notifications, and pay with a fresh e2e id."""

from __future__ import annotations

from collections.abc import Mapping

from django.utils import timezone

from acquirers.adapters.base import (
    AcquirerAdapter,
    AcquirerUnavailable,
    ChargeRequest,
    ChargeResult,
    InvalidNotification,
    Notification,
    PayoutResult,
    PayoutStatus,
)
from acquirers.adapters.sandbox import new_e2e_id


class PayoutsOnly(AcquirerAdapter):
    def create_charge(self, request: ChargeRequest) -> ChargeResult:
        raise AcquirerUnavailable("payouts only")

    def parse_notification(self, headers: Mapping[str, str], body: bytes) -> list[Notification]:
        raise InvalidNotification("payouts only")


def paid(idempotency_id: str) -> PayoutResult:
    return PayoutResult(
        status=PayoutStatus.PAID, provider_payout_id=f"p_{idempotency_id}", e2e_id=new_e2e_id(), paid_at=timezone.now()
    )
