"""The charge endpoints' OpenAPI examples (payments/apis.py,
payments/refund_apis.py): the request bodies Swagger UI's "Try it out"
sends, each valid as it stands against the demo of ``make run``
(demo/bootstrap.json), and what the demo answers to the first of each
(``tests/platform/test_docs_examples.py`` holds both to that)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiExample

from api.examples import CPF
from api.schema import enum_descriptions

#: postprocessing hook (config/settings: POSTPROCESSING_HOOKS).
describe_enums = enum_descriptions(
    {
        "ChargeStatusEnum": (
            "`pending`: waiting for the payer (until `expires_at`). `paid`: the acquirer confirmed the payment; the "
            "liquid amount is in the balance. `failed`: the acquirer reported it failed. `canceled`: expired unpaid, "
            "or canceled. `refunded`: returned to the payer. `chargeback`: contested by the payer (MED); what it "
            "credited is taken back from the balance while contested."
        ),
    }
)

BUYER = {
    "buyer_name": "Maria da Silva",
    "buyer_document": CPF,
    "buyer_phone": "11987654321",
}

CHARGE = [
    OpenApiExample(
        "Cobrança simples",
        summary="A charge on the account's chain",
        description="R$ 49,90 paid by PIX; the account's acquirer chain takes it.",
        value={"payment_method": "pix", "amount": 4990, "buyer": BUYER},
        request_only=True,
    ),
    OpenApiExample(
        "Com endereço, retorno e metadados",
        summary="Every optional field",
        value={
            "payment_method": "pix",
            "amount": 15000,
            "buyer": {
                **BUYER,
                "buyer_city": "São Paulo",
                "buyer_state": "SP",
                "buyer_zipcode": "01310100",
                "buyer_neighborhood": "Bela Vista",
                "buyer_number": "1578",
                "buyer_complement": "Conjunto 42",
            },
            "postback_url": "https://loja.example.com/pix/retorno",
            "metadata": {"pedido": "PED-2026-0001"},
        },
        request_only=True,
    ),
    OpenApiExample(
        "Escolhendo os adquirentes",
        summary="Override the chain for this charge (`acquirers`, 1 to 3)",
        value={
            "payment_method": "pix",
            "amount": 4990,
            "buyer": BUYER,
            "acquirers": [
                {"acquirer_key": "sandbox_beta", "priority": 1},
                {"acquirer_key": "sandbox_alpha", "priority": 2},
            ],
        },
        request_only=True,
    ),
    OpenApiExample(
        "Um adquirente só",
        summary="Override with a single acquirer (`acquirer_key`)",
        value={"payment_method": "pix", "amount": 4990, "buyer": BUYER, "acquirer_key": "sandbox_alpha"},
        request_only=True,
    ),
]

REFUND = [
    OpenApiExample(
        "Estorno com motivo",
        summary="Refund the whole charge, saying why",
        value={"reason": "Pedido cancelado pelo cliente"},
        request_only=True,
    ),
    OpenApiExample("Estorno sem motivo", summary="Refund the whole charge", value={}, request_only=True),
]

#: What the demo answers to the first charge example (a sandbox BR Code of
#: R$ 49,90, the demo's 1.99 % fee), for the 201's documentation.
CHARGE_CREATED = OpenApiExample(
    "Charge created",
    value={
        "success": True,
        "message": "Transação criada com sucesso.",
        "data": {
            "id": "5f3b82f4-a5f5-4e64-9514-2701a32d7fba",
            "amount": 4990,
            "platform_tax": 99,
            "liquid_amount": 4891,
            "pix": {
                "emv": "00020101021226780014br.gov.bcb.pix2556pix.sandbox.local/qr/v2/5f3b82f4a5f54e6495142701a32d7fba"
                "520400005303986540549.905802BR5914LOJA DEMO LTDA6009SAO PAULO62070503***63042AF3"
            },
        },
    },
    response_only=True,
    status_codes=["201"],
)

#: What the demo answers to the first refund example, on the demo's paid
#: charge of the first charge example (R$ 49,90, the demo's 1.99 % fee).
REFUND_REQUESTED = OpenApiExample(
    "Refund requested",
    value={
        "success": True,
        "message": "Estorno solicitado com sucesso.",
        "data": {
            "id": 17,
            "transaction_id": "5f3b82f4-a5f5-4e64-9514-2701a32d7fba",
            "amount": 4990,
            "liquid_amount": 4891,
            "status": "processing",
            "reason": "Pedido cancelado pelo cliente",
            "failure_reason": "",
            "created_at": "2026-11-25 20:14:03",
            "finished_at": None,
        },
    },
    response_only=True,
    status_codes=["202"],
)

# Rows of the transactions export's example file (its header is the export's).
TRANSACTIONS_CSV = [
    [
        "5f3b82f4-a5f5-4e64-9514-2701a32d7fba",
        "pix",
        "E18236120202611251958s0123456789",
        4990,
        99,
        4891,
        "paid",
        "2026-11-25 19:58:02",
        "2026-11-25 19:57:40",
        "2026-11-25 20:57:40",
    ],
    [
        "0b9c1a52-7d1e-4f43-9a57-3c2f5d8e6a10",
        "pix",
        "",
        1500,
        30,
        1470,
        "pending",
        "",
        "2026-11-25 19:50:12",
        "2026-11-25 20:50:12",
    ],
]
