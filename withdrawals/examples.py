"""The withdrawal, balance, statement and settlement endpoints' OpenAPI
examples (withdrawals/apis.py): the request bodies Swagger UI's "Try it
out" sends, each valid as it stands against the demo of ``make run``
(demo/bootstrap.json, whose paid sandbox charge gives the balance they
draw on), and what the demo answers (``tests/platform/test_docs_examples.py``)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiExample

from api.examples import CPF
from api.schema import enum_descriptions

#: postprocessing hook (config/settings: POSTPROCESSING_HOOKS). The ledger's
#: kinds are the accounts app's, but the statement that shows them is here.
describe_enums = enum_descriptions(
    {
        "WithdrawalStatusEnum": (
            "`pending`: amount and fee debited from the balance, waiting for approval or to be sent. `approved`: "
            "being sent to the acquirer. `paid`: the acquirer confirmed the transfer. `failed`: not paid; amount "
            "and fee are back in the balance. `canceled`: canceled before sending; amount and fee are back. "
            "`refunded`: the receiving side returned it; the amount sent is back in the balance."
        ),
        "PixKeyTypeEnum": (
            "`cpf` (11 digits), `cnpj` (14 digits), `email`, `phone` (+55 and the number), `random` (EVP, a UUID)."
        ),
        "LedgerKindEnum": (
            "Credits: `charge_paid` (a charge's liquid amount), `chargeback_reversal` (a contested charge resolved "
            "for the account), `withdrawal_reversal` (a failed or canceled withdrawal's total back), "
            "`withdrawal_return` (a paid withdrawal returned by the destination), `refund_release` (a refund "
            "that was not made: its reservation back). Debits: `charge_refund` (a charge refunded to the payer), "
            "`charge_chargeback` (a charge contested by the payer), `withdrawal` (a withdrawal's total), "
            "`refund_hold` (a refund the acquirer is processing: its amount reserved)."
        ),
    }
)

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
    OpenApiExample(
        "Saque com conferencia do titular",
        summary="Sent only if the key belongs to this CPF (payee check)",
        # The sandbox's DICT owner of this key (acquirers.adapters.sandbox_keys.derived_cpf): it matches.
        value={
            "amount": 3000,
            "key_type": "email",
            "key_value": "fornecedor@loja.example.com",
            "payee_document": "793.570.811-86",
        },
        request_only=True,
    ),
]

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
                    "components": None,
                    "created_at": "2026-11-25 20:05:41",
                },
                {
                    "id": 2,
                    "kind": "withdrawal",
                    "amount": -1500,
                    "balance_after": 3391,
                    "record": {"type": "withdrawal", "id": "9627b23b-ae9f-496a-8a9e-6821cc3b5572"},
                    "components": None,
                    "created_at": "2026-11-25 20:02:25",
                },
                {
                    "id": 1,
                    "kind": "charge_paid",
                    "amount": 4891,
                    "balance_after": 4891,
                    "record": {"type": "transaction", "id": "5f3b82f4-a5f5-4e64-9514-2701a32d7fba"},
                    "components": None,
                    "created_at": "2026-11-25 19:58:02",
                },
            ],
            "pagination": {"current_page": 1, "last_page": 1, "per_page": 15, "total": 3},
        },
    },
    response_only=True,
    status_codes=["200"],
)

# Rows of the CSV exports' example files (their headers are the exports').
STATEMENT_CSV = [
    [3, "withdrawal_reversal", 1500, 4891, "withdrawal", "9627b23b-ae9f-496a-8a9e-6821cc3b5572", "2026-11-25 20:05:41"],
    [2, "withdrawal", -1500, 3391, "withdrawal", "9627b23b-ae9f-496a-8a9e-6821cc3b5572", "2026-11-25 20:02:25"],
    [1, "charge_paid", 4891, 4891, "transaction", "5f3b82f4-a5f5-4e64-9514-2701a32d7fba", "2026-11-25 19:58:02"],
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
            "totals": {
                "credits": 6391,
                "debits": 1500,
                "fees": 99,
                "entries": 3,
                "med_blocked": 0,
                "med_released": 0,
                "med_returned": 0,
            },
            "days": [
                {
                    "date": "2026-11-24",
                    "credits": 0,
                    "debits": 0,
                    "fees": 0,
                    "entries": 0,
                    "closing_balance": 0,
                    "med_blocked": 0,
                    "med_released": 0,
                    "med_returned": 0,
                },
                {
                    "date": "2026-11-25",
                    "credits": 6391,
                    "debits": 1500,
                    "fees": 99,
                    "entries": 3,
                    "closing_balance": 4891,
                    "med_blocked": 0,
                    "med_released": 0,
                    "med_returned": 0,
                },
                {
                    "date": "2026-11-26",
                    "credits": 0,
                    "debits": 0,
                    "fees": 0,
                    "entries": 0,
                    "closing_balance": 4891,
                    "med_blocked": 0,
                    "med_released": 0,
                    "med_returned": 0,
                },
            ],
        },
    },
    response_only=True,
    status_codes=["200"],
)
