"""The receipt (comprovante) of a paid withdrawal: the JSON a merchant reads,
the PDF read back as text, who may have it (the owner only, once paid), the
back office's download, and the authentication hash that checks a copy."""

from __future__ import annotations

import hashlib
import io
import json
import uuid
from dataclasses import dataclass
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse
from pypdf import PdfReader
from rest_framework.test import APIClient

from accounts.models import Account, ApiCredential, LedgerEntry
from accounts.services import credential_issue, ledger_post
from acquirers.models import Acquirer
from core.documents import mask_document
from tests.conftest import client_for
from tests.factories import AccountFactory, AcquirerFactory
from tests.helpers import local, staff_login
from tests.withdrawals.conftest import snapshot
from withdrawals.models import PayeeCheck, Withdrawal, WithdrawalStatus
from withdrawals.payouts import withdrawal_process
from withdrawals.receipt_apis import RECEIPT_EXAMPLE
from withdrawals.receipts import receipt_hash, receipt_of
from withdrawals.selectors import SAO_PAULO
from withdrawals.services import withdrawal_request

pytestmark = pytest.mark.django_db

NOT_PAID = "O saque ainda não foi pago: não há comprovante."
NOT_FOUND = "Saque não encontrado."
AMOUNT = 123_456  # R$ 1.234,56, sent in full: the fee is debited on top
FEE = 1335  # 100 + 1 % of 123456, rounded half up


@dataclass
class Book:
    account: Account
    api: APIClient
    acquirer: Acquirer
    paid: Withdrawal
    pending: Withdrawal


def seed(account: Account, amount: int = 500_000) -> None:
    ledger_post(
        account_id=account.pk, amount=amount, kind=LedgerEntry.Kind.CHARGE_PAID, reference=f"seed:{uuid.uuid4().hex}"
    )


def paid_withdrawal(account: Account, **extra: Any) -> Withdrawal:
    withdrawal = withdrawal_request(
        account=account, amount=AMOUNT, key_type="cpf", key_value="52998224725", discount_fee=False, **extra
    )
    assert withdrawal_process(withdrawal_id=withdrawal.pk) == WithdrawalStatus.APPROVED
    assert withdrawal_process(withdrawal_id=withdrawal.pk) == WithdrawalStatus.PAID
    withdrawal.refresh_from_db()
    return withdrawal


@pytest.fixture
def book(db: Any) -> Book:
    account = AccountFactory(
        name="Padaria Pão Quente Ltda", document="11222333000181", withdrawal_fee_fixed=100, withdrawal_fee_bps=100
    )
    seed(account)
    acquirer = AcquirerFactory(
        key="alpha", name="Alpha", nominal="Alpha Instituição de Pagamento S.A.", default_priority=1
    )
    paid = paid_withdrawal(account, external_id="NF-2026-0042")
    # What the payee check found of the key's owner (withdrawals.payees writes these).
    Withdrawal.objects.filter(pk=paid.pk).update(
        payee_document="52998224725",
        payee_check=PayeeCheck.MATCHED,
        payee_name="JOSÉ DA SILVA",
        payee_document_masked="***982247**",
        payee_ispb="12345678",
        payee_bank="Banco Exemplo S.A.",
    )
    paid.refresh_from_db()
    pending = withdrawal_request(account=account, amount=5000, key_type="email", key_value="fulano@example.com")
    return Book(account, client_for(credential_issue(account=account)), acquirer, paid, pending)


def receipt_json(api: APIClient, withdrawal_id: Any) -> Any:
    return api.get(f"/api/withdrawals/{withdrawal_id}/receipt")


def pdf_text(content: bytes) -> str:
    return "\n".join(page.extract_text() for page in PdfReader(io.BytesIO(content)).pages)


def canonical_hash(data: dict[str, Any]) -> str:
    """The documented algorithm (docs/api/receipts.md), written out again as a client would."""
    body = {k: v for k, v in data.items() if k != "authentication"}
    return hashlib.sha256(
        json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    ).hexdigest()


def test_the_receipt_json_has_every_field(book: Book) -> None:
    response = receipt_json(book.api, book.paid.pk)

    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["success"] is True
    assert body["message"] == "Comprovante consultado com sucesso."
    data = body["data"]
    assert data == {
        "id": str(book.paid.pk),
        "external_id": "NF-2026-0042",
        "status": "paid",
        "e2e_id": book.paid.e2e_id,
        "paid_at": local(book.paid.paid_at),
        "returned_at": None,
        "amount": AMOUNT,
        "fee": FEE,
        "total_debit": AMOUNT + FEE,
        "liquid_amount": AMOUNT,
        "payer": {"name": "Padaria Pão Quente Ltda", "document": "**.222.333/0001-**"},
        "payee": {
            "key_type": "cpf",
            "key": "***.982.247-**",
            "name": "JOSÉ DA SILVA",
            "document": "***.982.247-**",
            "bank": "Banco Exemplo S.A.",
            "ispb": "12345678",
        },
        "acquirer": "Alpha Instituição de Pagamento S.A.",
        "authentication": data["authentication"],
    }
    assert book.paid.e2e_id
    # A copy checks out: the hash is the documented one over the other fields.
    assert data["authentication"] == canonical_hash(data)
    # Nothing of the full documents leaks.
    assert "52998224725" not in response.content.decode()
    assert "11222333000181" not in response.content.decode()


def test_the_pdf_reads_back_with_the_receipts_facts(book: Book) -> None:
    data = receipt_json(book.api, book.paid.pk).json()["data"]

    response = book.api.get(f"/api/withdrawals/{book.paid.pk}/receipt.pdf", HTTP_ACCEPT="application/pdf")

    assert response.status_code == 200
    assert response["Content-Type"] == "application/pdf"
    assert response["Content-Disposition"] == f'attachment; filename="comprovante-{book.paid.pk}.pdf"'
    assert response.content.startswith(b"%PDF-")
    text = pdf_text(response.content)
    assert book.paid.e2e_id is not None
    assert book.paid.paid_at is not None
    paid_at = book.paid.paid_at.astimezone(SAO_PAULO)
    for fact in (
        "Comprovante de transferência Pix",
        book.paid.e2e_id,
        # Each amount beside its label (the extractor keeps a line's cells together).
        "Valor enviado R$ 1.234,56",
        "Valor do saque R$ 1.234,56",
        "Tarifa R$ 13,35",
        "Total debitado R$ 1.247,91",
        "**.222.333/0001-**",  # the payer's CNPJ, masked
        "***.982.247-**",  # the key and its owner's CPF, masked
        "Padaria Pão Quente Ltda",
        "JOSÉ DA SILVA",
        "Banco Exemplo S.A.",
        "Alpha Instituição de Pagamento S.A.",
        str(book.paid.pk),
        "NF-2026-0042",
        data["authentication"],
        f"{paid_at:%d/%m/%Y} às {paid_at:%H:%M:%S} (horário de Brasília)",  # the time paid, Sao Paulo
    ):
        assert fact in text, fact
    assert "52998224725" not in text
    assert "Devolvido" not in text


def test_a_returned_withdrawal_still_has_its_receipt_and_says_it_came_back(book: Book) -> None:
    returned = book.api.post(f"/api/sandbox/withdrawals/{book.paid.pk}/return")
    assert returned.status_code == 200, returned.json()

    data = receipt_json(book.api, book.paid.pk).json()["data"]
    assert data["status"] == "refunded"
    assert data["returned_at"] is not None
    assert data["e2e_id"] == book.paid.e2e_id
    text = pdf_text(book.api.get(f"/api/withdrawals/{book.paid.pk}/receipt.pdf").content)
    assert "devolvido pelo recebedor" in text
    assert "Devolvido pelo recebedor" in text


@pytest.mark.parametrize("suffix", ["receipt", "receipt.pdf"])
def test_a_withdrawal_not_paid_has_no_receipt_409(book: Book, suffix: str) -> None:
    failed = withdrawal_request(account=book.account, amount=5000, key_type="email", key_value="b@example.com")
    Withdrawal.objects.filter(pk=failed.pk).update(status=WithdrawalStatus.FAILED)
    before = snapshot(book.account)
    for withdrawal in (book.pending, failed):
        accept = "application/pdf" if suffix.endswith(".pdf") else "application/json"
        response = book.api.get(f"/api/withdrawals/{withdrawal.pk}/{suffix}", HTTP_ACCEPT=accept)
        assert response.status_code == 409
        assert response["Content-Type"] == "application/json"
        assert response.json() == {"success": False, "message": NOT_PAID, "data": None}
    assert snapshot(book.account) == before


@pytest.mark.parametrize("suffix", ["receipt", "receipt.pdf"])
def test_another_accounts_or_an_unknown_withdrawal_is_a_404(book: Book, suffix: str) -> None:
    other = AccountFactory(withdrawal_fee_fixed=100, withdrawal_fee_bps=100)
    seed(other)
    theirs = paid_withdrawal(other)
    for withdrawal_id in (theirs.pk, uuid.uuid4(), "not-an-id"):
        response = book.api.get(f"/api/withdrawals/{withdrawal_id}/{suffix}")
        assert response.status_code == 404
        assert response.json() == {"success": False, "message": NOT_FOUND, "data": None}


def test_a_cashin_credential_may_not_read_receipts(book: Book) -> None:
    cashin = client_for(credential_issue(account=book.account, permission=ApiCredential.Permission.CASHIN))
    assert receipt_json(cashin, book.paid.pk).status_code == 403
    assert cashin.get(f"/api/withdrawals/{book.paid.pk}/receipt.pdf").status_code == 403


def test_the_hash_changes_when_any_field_changes_and_not_otherwise(book: Book) -> None:
    first = receipt_of(Withdrawal.objects.get(pk=book.paid.pk))
    assert receipt_of(Withdrawal.objects.get(pk=book.paid.pk)) == first  # stable: asked twice, same receipt
    assert receipt_hash(first) == first["authentication"]
    for field, value in (
        ("amount", AMOUNT + 1),
        ("e2e_id", "E00000000000000000000000000000000"),
        ("external_id", "NF-2026-0043"),
        ("payer", {**first["payer"], "name": "Outra Loja"}),
        ("payee", {**first["payee"], "key": "***.111.222-**"}),
    ):
        assert receipt_hash({**first, field: value}) != first["authentication"], field
    # Through the record: a changed external_id is a new authentication.
    Withdrawal.objects.filter(pk=book.paid.pk).update(external_id="NF-2026-0043")
    assert receipt_of(Withdrawal.objects.get(pk=book.paid.pk))["authentication"] != first["authentication"]


# --------------------------------------------------------------------------- back office


def test_staff_download_the_receipt_from_the_withdrawal_page(admin_client: Client, book: Book) -> None:
    change = reverse("admin:withdrawals_withdrawal_change", args=[book.paid.pk])
    url = reverse("admin:withdrawals_withdrawal_receipt", args=[book.paid.pk])

    page = admin_client.get(change)

    assert page.status_code == 200
    assert f'href="{url}"' in page.content.decode()
    response = admin_client.get(url)
    assert response.status_code == 200
    assert response["Content-Type"] == "application/pdf"
    assert response["Content-Disposition"] == f'attachment; filename="comprovante-{book.paid.pk}.pdf"'
    assert str(book.paid.e2e_id) in pdf_text(response.content)
    # The same receipt as the API's.
    api_pdf = book.api.get(f"/api/withdrawals/{book.paid.pk}/receipt.pdf")
    assert pdf_text(api_pdf.content) == pdf_text(response.content)


def test_a_pending_withdrawals_page_offers_no_receipt(admin_client: Client, book: Book) -> None:
    page = admin_client.get(reverse("admin:withdrawals_withdrawal_change", args=[book.pending.pk]))
    url = reverse("admin:withdrawals_withdrawal_receipt", args=[book.pending.pk])

    assert page.status_code == 200
    assert "Disponível quando o saque for pago." in page.content.decode()
    assert url not in page.content.decode()
    assert admin_client.get(url).status_code == 404


def test_staff_who_may_not_view_withdrawals_get_no_receipt(book: Book) -> None:
    user = get_user_model().objects.create_user(username="sem-permissao", password="x", is_staff=True)
    client = staff_login(Client(), user)

    response = client.get(reverse("admin:withdrawals_withdrawal_receipt", args=[book.paid.pk]))

    assert response.status_code == 403


@pytest.mark.parametrize(
    ("value", "masked"),
    [
        ("52998224725", "***.982.247-**"),
        ("529.982.247-25", "***.982.247-**"),
        ("***982247**", "***.982.247-**"),  # as the DICT masks it
        ("11222333000181", "**.222.333/0001-**"),
        ("12ABC34501DE35", "**.ABC.345/01DE-**"),  # an alphanumeric CNPJ
        ("", ""),
    ],
)
def test_documents_are_masked_as_on_psps_receipts(value: str, masked: str) -> None:
    assert mask_document(value) == masked


def test_the_documented_example_checks_out() -> None:
    data = RECEIPT_EXAMPLE.value["data"]
    assert receipt_hash(data) == data["authentication"] == canonical_hash(data)
