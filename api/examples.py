"""Request body examples of the API docs (issue 15): what Swagger UI's "Try
it out" sends by default, so each one is valid as it stands against the demo
account of ``make run`` (demo/bootstrap.json: its acquirers ``sandbox_alpha``,
``sandbox_beta`` and ``sandbox_gamma``). A valid CPF, phone and CEP, one form
of acquirer override at a time. ``tests/platform/test_docs_examples.py``
sends every one of them and expects success."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiExample

#: A CPF whose check digits are right (the classic documentation example).
CPF = "52998224725"

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

WITHDRAWAL = [
    OpenApiExample(
        "Saque para CPF",
        summary="R$ 15,00 to a CPF key, the fee taken from the amount",
        value={"amount": 1500, "key_type": "cpf", "key_value": CPF, "discount_fee": True},
        request_only=True,
    ),
    OpenApiExample(
        "Saque para e-mail",
        summary="To an e-mail key, the fee on top of the amount",
        value={"amount": 2500, "key_type": "email", "key_value": "financeiro@loja.example.com", "discount_fee": False},
        request_only=True,
    ),
]

ACQUIRER_SELECTION = [
    OpenApiExample(
        "Cadeia completa",
        summary="The account's chain, up to three acquirers by priority",
        value={
            "acquirers": [
                {"acquirer_key": "sandbox_alpha", "priority": 1},
                {"acquirer_key": "sandbox_beta", "priority": 2},
            ]
        },
        request_only=True,
    ),
    OpenApiExample(
        "Um adquirente numa posição",
        summary="Put one acquirer at one priority",
        value={"acquirer_key": "sandbox_gamma", "priority": 3},
        request_only=True,
    ),
]

WEBHOOK_ENDPOINT = [
    OpenApiExample(
        "Endpoint",
        summary="Where signed events are sent (https)",
        value={"url": "https://loja.example.com/webhooks/pix", "description": "Loja: pedidos"},
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

#: What the demo answers to the first withdrawal example (R$ 15,00, the demo's
#: R$ 1,00 fee taken from it), for the 201's documentation.
WITHDRAWAL_CREATED = OpenApiExample(
    "Withdrawal requested",
    value={
        "success": True,
        "message": "Saque solicitado com sucesso.",
        "data": {
            "id": "9627b23b-ae9f-496a-8a9e-6821cc3b5572",
            "amount": 1500,
            "liquid_amount": 1400,
            "pix_key_type": "cpf",
            "pix_key": CPF,
            "status": "pending",
            "created_at": "2026-11-25 20:02:25",
        },
    },
    response_only=True,
    status_codes=["201"],
)

#: A statement page: a charge paid, a withdrawal requested, the withdrawal
#: failed (its total back), newest first; each balance_after is the one
#: before it plus its amount.
STATEMENT = OpenApiExample(
    "Statement page",
    value={
        "success": True,
        "message": "Extrato consultado com sucesso.",
        "data": {
            "entries": [
                {
                    "id": 3,
                    "kind": "withdrawal_reversal",
                    "amount": 1500,
                    "balance_after": 4891,
                    "record": {"type": "withdrawal", "id": "9627b23b-ae9f-496a-8a9e-6821cc3b5572"},
                    "created_at": "2026-11-25 20:05:41",
                },
                {
                    "id": 2,
                    "kind": "withdrawal",
                    "amount": -1500,
                    "balance_after": 3391,
                    "record": {"type": "withdrawal", "id": "9627b23b-ae9f-496a-8a9e-6821cc3b5572"},
                    "created_at": "2026-11-25 20:02:25",
                },
                {
                    "id": 1,
                    "kind": "charge_paid",
                    "amount": 4891,
                    "balance_after": 4891,
                    "record": {"type": "transaction", "id": "5f3b82f4-a5f5-4e64-9514-2701a32d7fba"},
                    "created_at": "2026-11-25 19:58:02",
                },
            ],
            "pagination": {"current_page": 1, "last_page": 1, "per_page": 15, "total": 3},
        },
    },
    response_only=True,
    status_codes=["200"],
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


# Rows of the CSV exports' example files (their headers are the exports').
STATEMENT_CSV = [
    [3, "withdrawal_reversal", 1500, 4891, "withdrawal", "9627b23b-ae9f-496a-8a9e-6821cc3b5572", "2026-11-25 20:05:41"],
    [2, "withdrawal", -1500, 3391, "withdrawal", "9627b23b-ae9f-496a-8a9e-6821cc3b5572", "2026-11-25 20:02:25"],
    [1, "charge_paid", 4891, 4891, "transaction", "5f3b82f4-a5f5-4e64-9514-2701a32d7fba", "2026-11-25 19:58:02"],
]
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
WITHDRAWALS_CSV = [
    [
        "9627b23b-ae9f-496a-8a9e-6821cc3b5572",
        "E18236120202611252005s9876543210",
        1500,
        1400,
        "cpf",
        "52998224725",
        "paid",
        "2026-11-25 20:05:41",
        "2026-11-25 20:02:25",
    ],
]

#: GET /api/settlements?date_start=2026-11-24&date_end=2026-11-26: the charge
#: and the failed withdrawal of STATEMENT (fees: 99 on the charge, 100 on the
#: withdrawal, given back with it), on the demo account's fees.
SETTLEMENT = OpenApiExample(
    "Three days",
    value={
        "success": True,
        "message": "Fechamento consultado com sucesso.",
        "data": {
            "date_start": "2026-11-24",
            "date_end": "2026-11-26",
            "opening_balance": 0,
            "closing_balance": 4891,
            "totals": {"credits": 6391, "debits": 1500, "fees": 99, "entries": 3},
            "days": [
                {"date": "2026-11-24", "credits": 0, "debits": 0, "fees": 0, "entries": 0, "closing_balance": 0},
                {
                    "date": "2026-11-25",
                    "credits": 6391,
                    "debits": 1500,
                    "fees": 99,
                    "entries": 3,
                    "closing_balance": 4891,
                },
                {"date": "2026-11-26", "credits": 0, "debits": 0, "fees": 0, "entries": 0, "closing_balance": 4891},
            ],
        },
    },
    response_only=True,
    status_codes=["200"],
)
