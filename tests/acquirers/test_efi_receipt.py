"""The receipt of a withdrawal Efí paid (its fake on loopback, mTLS and
all): the e2e id and time are Efí's, the acquirer is Efí's display name, and
the PDF reads back with them."""

from __future__ import annotations

import datetime as dt
import io
import uuid
from collections.abc import Callable

import pytest
from pypdf import PdfReader
from rest_framework.test import APIClient

from accounts.models import Account, LedgerEntry
from accounts.services import ledger_post
from acquirers.models import Acquirer, AcquirerSlot
from acquirers.services import acquirer_slots_set
from tests.acquirers.fake_efi import FakeEfi
from tests.helpers import local
from withdrawals.models import Withdrawal, WithdrawalStatus
from withdrawals.payouts import withdrawal_process
from withdrawals.services import withdrawal_request

pytestmark = pytest.mark.django_db


def test_the_receipt_of_a_payout_efi_made(
    fake_efi: FakeEfi, make_efi_acquirer: Callable[..., Acquirer], account: Account, api: APIClient
) -> None:
    efi: Acquirer = make_efi_acquirer(name="Efí", nominal="Efí S.A. Instituição de Pagamento")
    ledger_post(
        account_id=account.pk, amount=20_000, kind=LedgerEntry.Kind.CHARGE_PAID, reference=f"seed:{uuid.uuid4()}"
    )
    acquirer_slots_set(account=account, purpose=AcquirerSlot.Purpose.CASHOUT, acquirers=[efi])
    fake_efi.outcome = "paid"  # settles right after answering EM_PROCESSAMENTO
    withdrawal = withdrawal_request(account=account, amount=5000, key_type="cpf", key_value="52998224725")
    for _ in range(3):  # send (processing), then ask Efí where it stands, as the worker and beat do
        if withdrawal_process(withdrawal_id=withdrawal.pk) == WithdrawalStatus.PAID:
            break
    withdrawal.refresh_from_db()
    assert withdrawal.status == WithdrawalStatus.PAID
    send = fake_efi.sends[withdrawal.idempotency_id]

    data = api.get(f"/api/withdrawals/{withdrawal.pk}/receipt").json()["data"]

    assert data["e2e_id"] == send["endToEndId"]
    assert data["paid_at"] == local(dt.datetime.fromisoformat(send["horario"]["liquidacao"]))
    assert data["acquirer"] == "Efí S.A. Instituição de Pagamento"
    assert data["payee"]["key"] == "***.982.247-**"
    pdf = api.get(f"/api/withdrawals/{withdrawal.pk}/receipt.pdf")
    assert pdf.status_code == 200
    text = "\n".join(page.extract_text() for page in PdfReader(io.BytesIO(pdf.content)).pages)
    assert send["endToEndId"] in text
    assert "Efí S.A. Instituição de Pagamento" in text
    # A read: the withdrawal is as it was.
    assert Withdrawal.objects.get(pk=withdrawal.pk).version == withdrawal.version
