"""The receipt (comprovante) of a paid withdrawal: its data, read here;
rendered as PDF by :mod:`withdrawals.receipt_pdf` (docs/api/receipts.md).

A withdrawal has a receipt once it was paid: ``paid``, and ``refunded``
too (the destination returned the money later, but the Pix was made; the
receipt says so). Documents are masked as PSPs show them on receipts: a
CPF as ``***.456.789-**``, a CNPJ as ``**.345.678/0001-**``.

``authentication`` is the SHA-256 of the receipt's canonical JSON (every
other field, keys sorted, no spaces, UTF-8): anyone holding a copy can
recompute it, and the service answers the same receipt, hash included,
for as long as the withdrawal stays as it is (docs/api/receipts.md, "Checking a copy").
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from core.documents import mask_document
from core.selectors import get_by_uuid
from withdrawals.exceptions import WithdrawalNotFound, WithdrawalNotPaid
from withdrawals.models import PixKeyType, Withdrawal, WithdrawalStatus, WithdrawalTransition
from withdrawals.selectors import SAO_PAULO, withdrawals_of

#: Statuses whose withdrawal was paid at some point: they have a receipt.
RECEIPT_STATUSES = (WithdrawalStatus.PAID, WithdrawalStatus.REFUNDED)
#: Local (America/Sao_Paulo) times on the receipt, as the API writes its timestamps.
RECEIPT_TIME_FORMAT = "%Y-%m-%d %H:%M:%S"


def masked_key(key_type: str, key: str) -> str:
    """The destination key as the receipt shows it: a CPF or CNPJ key masked, any other in full."""
    if key_type in (PixKeyType.CPF, PixKeyType.CNPJ):
        return mask_document(key)
    return key


def receipt_hash(data: dict[str, Any]) -> str:
    """SHA-256 (hex) of ``data``'s canonical JSON, without its ``authentication``."""
    body = {name: value for name, value in data.items() if name != "authentication"}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _local(moment: Any) -> str | None:
    return moment.astimezone(SAO_PAULO).strftime(RECEIPT_TIME_FORMAT) if moment is not None else None


def _returned_at(withdrawal: Withdrawal) -> str | None:
    if withdrawal.status != WithdrawalStatus.REFUNDED:
        return None
    moment = (
        WithdrawalTransition.objects.filter(withdrawal=withdrawal, to_status=WithdrawalStatus.REFUNDED)
        .order_by("id")
        .values_list("created_at", flat=True)
        .first()
    )
    return _local(moment)


def receipt_of(withdrawal: Withdrawal) -> dict[str, Any]:
    """The receipt of ``withdrawal`` (its account and acquirer loaded or
    loadable); :class:`WithdrawalNotPaid` when it was never paid."""
    if withdrawal.status not in RECEIPT_STATUSES:
        raise WithdrawalNotPaid()
    account = withdrawal.account
    acquirer = withdrawal.acquirer
    data: dict[str, Any] = {
        "id": str(withdrawal.pk),
        "external_id": withdrawal.external_id,
        "status": withdrawal.status,
        "e2e_id": withdrawal.e2e_id or "",
        "paid_at": _local(withdrawal.paid_at),
        "returned_at": _returned_at(withdrawal),
        "amount": withdrawal.amount,
        "fee": withdrawal.fee,
        "total_debit": withdrawal.total_debit,
        "liquid_amount": withdrawal.liquid_amount,
        "payer": {"name": account.name, "document": mask_document(account.document)},
        "payee": {
            "key_type": withdrawal.pix_key_type,
            "key": masked_key(withdrawal.pix_key_type, withdrawal.pix_key),
            "name": withdrawal.payee_name,
            "document": mask_document(withdrawal.payee_document_masked),
            "bank": withdrawal.payee_bank,
            "ispb": withdrawal.payee_ispb,
        },
        "acquirer": (acquirer.nominal or acquirer.name) if acquirer is not None else "",
    }
    data["authentication"] = receipt_hash(data)
    return data


def withdrawal_receipt(*, account: Any, withdrawal_id: Any) -> dict[str, Any]:
    """The receipt of the account's withdrawal: :class:`WithdrawalNotFound`
    for unknown, malformed or another account's ids (before anything else),
    :class:`WithdrawalNotPaid` for one never paid."""
    withdrawal = get_by_uuid(
        withdrawals_of(account).select_related("account", "acquirer"), withdrawal_id, WithdrawalNotFound
    )
    return receipt_of(withdrawal)
