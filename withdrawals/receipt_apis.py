"""The receipt (comprovante) of a paid withdrawal: JSON and PDF (docs/api/receipts.md)."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from api.base import AccountAPIView, error_response, not_found, ok, responses, success_envelope
from api.exports import FileDownloadApi
from withdrawals import exceptions as err
from withdrawals.apis import WITHDRAWAL_ID
from withdrawals.receipt_pdf import pdf_response
from withdrawals.receipts import withdrawal_receipt

RECEIPT_MESSAGE = "Comprovante consultado com sucesso."
NOT_PAID = (
    409,
    error_response(
        "The withdrawal was never paid (pending, approved, failed or canceled): there is no receipt.",
        err.RECEIPT_NOT_PAID,
    ),
)
RECEIPT_EXAMPLE = OpenApiExample(
    "Receipt",
    value={
        "success": True,
        "message": RECEIPT_MESSAGE,
        "data": {
            "id": "8d7c5b1e-3f0a-4c53-9a4e-2f6b1d0c9e71",
            "external_id": "NF-2026-0042",
            "status": "paid",
            "e2e_id": "E18236120202611271703s0a1b2c3d4e",
            "paid_at": "2026-11-27 14:03:09",
            "returned_at": None,
            "amount": 1500,
            "fee": 100,
            "total_debit": 1500,
            "liquid_amount": 1400,
            "payer": {"name": "Loja Demo Ltda", "document": "**.222.333/0001-**"},
            "payee": {
                "key_type": "cpf",
                "key": "***.982.247-**",
                "name": "",
                "document": "",
                "bank": "",
                "ispb": "",
            },
            "acquirer": "Sandbox Alpha Pagamentos S.A.",
            "authentication": "14e42dd0dcefe49becd68c930bd7da0c7b9a872e836caf5c031c7f92b46e6c55",
        },
    },
)


class ReceiptPayerSerializer(serializers.Serializer[Any]):
    name = serializers.CharField(help_text="The account's name.")
    document = serializers.CharField(
        help_text="The account's CPF/CNPJ, masked (`***.456.789-**`, `**.345.678/0001-**`)."
    )


class ReceiptPayeeSerializer(serializers.Serializer[Any]):
    key_type = serializers.CharField(
        help_text="The destination key's type (`cpf`, `cnpj`, `email`, `phone`, `random`)."
    )
    key = serializers.CharField(help_text="The destination key; masked when it is a CPF or CNPJ.")
    name = serializers.CharField(help_text='The key owner\'s name from the payee check ("" when not looked up).')
    document = serializers.CharField(help_text='The key owner\'s CPF/CNPJ from the payee check, masked ("": none).')
    bank = serializers.CharField(help_text='The key owner\'s bank from the payee check ("": none).')
    ispb = serializers.CharField(help_text='The ISPB of the key owner\'s bank ("": none).')


class ReceiptSerializer(serializers.Serializer[Any]):
    id = serializers.UUIDField(help_text="The withdrawal's id.")
    external_id = serializers.CharField(help_text='Your reference for the withdrawal ("": none).')
    status = serializers.ChoiceField(
        choices=["paid", "refunded"], help_text="`refunded`: paid, then returned by the destination (`returned_at`)."
    )
    e2e_id = serializers.CharField(help_text="The Pix end-to-end id.")
    # Rendered by the selector already (America/Sao_Paulo, as every API timestamp): DRF passes strings through.
    paid_at = serializers.DateTimeField(help_text="When it was paid.")
    returned_at = serializers.DateTimeField(
        allow_null=True, help_text="When the destination returned it (`refunded` only), else null."
    )
    amount = serializers.IntegerField(help_text="The withdrawal's amount, centavos.")
    fee = serializers.IntegerField(help_text="The withdrawal fee, centavos.")
    total_debit = serializers.IntegerField(help_text="What left the balance, centavos.")
    liquid_amount = serializers.IntegerField(help_text="What the Pix sent to the destination, centavos.")
    payer = ReceiptPayerSerializer()
    payee = ReceiptPayeeSerializer()
    acquirer = serializers.CharField(help_text="The acquirer that made the Pix (its display name).")
    authentication = serializers.CharField(
        help_text="SHA-256 (hex) of the receipt's other fields as canonical JSON (keys sorted, no spaces, UTF-8)."
    )


class WithdrawalReceiptApi(AccountAPIView):
    required_permission = "cashout"

    @extend_schema(
        tags=["withdrawals"],
        summary="Receipt of a paid withdrawal",
        description=(
            "The receipt (comprovante) of a paid withdrawal, or of one paid and then returned by the "
            "destination (`status` `refunded`): end-to-end id, when it was paid, amounts, payer and payee with "
            "masked documents, the acquirer that paid, and `authentication`, the SHA-256 of the other fields, "
            "to check a copy. Credential `cashout` or `all`. The same data as PDF: `GET .../receipt.pdf`."
        ),
        parameters=[WITHDRAWAL_ID],
        responses=responses(
            {
                200: OpenApiResponse(
                    success_envelope("WithdrawalReceiptResponse", ReceiptSerializer()),
                    description="The receipt.",
                    examples=[RECEIPT_EXAMPLE],
                )
            },
            (404, not_found(err.WITHDRAWAL_NOT_FOUND)),
            NOT_PAID,
        ),
    )
    def get(self, request: Request, withdrawal_id: str) -> Response:
        receipt = withdrawal_receipt(account=request.user, withdrawal_id=withdrawal_id)
        return ok(ReceiptSerializer(receipt).data, RECEIPT_MESSAGE)


class WithdrawalReceiptPdfApi(FileDownloadApi):
    required_permission = "cashout"

    @extend_schema(
        tags=["withdrawals"],
        summary="Receipt of a paid withdrawal as PDF",
        description=(
            "The receipt of `GET /api/withdrawals/{withdrawal_id}/receipt` as a one-page PDF with pt-BR labels, "
            "downloaded as `comprovante-<id>.pdf`. Errors are JSON envelopes, as everywhere."
        ),
        parameters=[WITHDRAWAL_ID],
        responses=responses(
            {(200, "application/pdf"): OpenApiResponse(OpenApiTypes.BINARY, description="The receipt, PDF.")},
            (404, not_found(err.WITHDRAWAL_NOT_FOUND)),
            NOT_PAID,
        ),
    )
    def get(self, request: Request, withdrawal_id: str) -> HttpResponse:
        receipt = withdrawal_receipt(account=request.user, withdrawal_id=withdrawal_id)
        return pdf_response(receipt)
