"""The recurrence endpoints' OpenAPI examples (recurrences/apis.py): bodies
Swagger UI's "Try it out" sends, each valid as it stands against the demo
of ``make run`` (demo/bootstrap.json), and what the demo answers. Their
dates lie years ahead: an example must still be creatable the day someone
tries it."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiExample

from api.examples import CPF

DEBTOR = {"document": CPF, "name": "Maria da Silva"}

RECURRENCE = [
    OpenApiExample(
        "Mensalidade fixa por QR Code",
        summary="Fixed monthly amount, the payer scans the QR Code",
        description="R$ 49,90 every month from 2030-12-10, retried up to 3 times in 7 days when refused.",
        value={
            "debtor": DEBTOR,
            "contract": "ASSINATURA-0001",
            "description": "Plano mensal",
            "amount": 4990,
            "periodicity": "monthly",
            "first_due_date": "2030-12-10",
            "retry_policy": "3_in_7_days",
            "journey": "qr",
        },
        request_only=True,
    ),
    OpenApiExample(
        "Conta variável pelo banco do pagador",
        summary="Variable amounts up to a maximum, the request goes to the payer's bank",
        description="Each cycle's amount is set with PUT .../cycles/{index}/amount, at most R$ 500,00.",
        value={
            "debtor": DEBTOR,
            "contract": "CONTA-LUZ-778899",
            "description": "Conta de energia",
            "max_amount": 50000,
            "periodicity": "monthly",
            "first_due_date": "2030-12-15",
            "end_date": "2031-12-15",
            "retry_policy": "none",
            "journey": "push",
            "payer_bank": {"ispb": "00000000", "branch": "0001", "account": "123456"},
            "postback_url": "https://loja.example.com/pix/retorno",
            "metadata": {"cliente": "778899"},
        },
        request_only=True,
    ),
]

CYCLE_AMOUNT = [
    OpenApiExample(
        "Valor do ciclo",
        summary="This cycle charges R$ 187,35",
        value={"amount": 18735},
        request_only=True,
    )
]

_ID = "5b7e0c2a-9d41-4f6e-8a3b-2c1d0e9f8a7b"
#: What the demo answers to the first example, for the 201's documentation.
RECURRENCE_CREATED = OpenApiExample(
    "Recurrence created (QR journey)",
    value={
        "success": True,
        "message": "Recorrência criada com sucesso.",
        "data": {
            "id": _ID,
            "id_rec": "RR9999999920301125a1B2c3D4e5F",
            "status": "created",
            "journey": "qr",
            "contract": "ASSINATURA-0001",
            "description": "Plano mensal",
            "debtor": DEBTOR,
            "amount": 4990,
            "max_amount": None,
            "periodicity": "monthly",
            "first_due_date": "2030-12-10",
            "end_date": None,
            "retry_policy": "3_in_7_days",
            "qr_code": {
                "emv": "00020101021226790014br.gov.bcb.pix2557pix.sandbox.local/qr/v2/rec/RR9999999920301125a1B2c3D4e5F"
                "5204000053039865802BR5919PIX SERVICE SANDBOX6009SAO PAULO62070503***630448B1",
                "location": "pix.sandbox.local/qr/v2/rec/RR9999999920301125a1B2c3D4e5F",
            },
            "payer_bank": None,
            "push_status": None,
            "payer_ispb": None,
            "cancelled_by": None,
            "status_reason": None,
            "acquirer": "sandbox_alpha",
            "metadata": {},
            "approved_at": None,
            "ended_at": None,
            "created_at": "2030-11-25 10:12:40",
            "updated_at": "2030-11-25 10:12:40",
        },
    },
    response_only=True,
    status_codes=["201"],
)
