"""The infraction endpoints' OpenAPI examples (infractions/apis.py): the
defence bodies Swagger UI's "Try it out" sends (valid as they stand;
``tests/platform/test_docs_examples.py`` sends them to an infraction of the
demo account) and a record as the API answers it."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiExample

from api.schema import enum_descriptions

#: postprocessing hook (config/settings: POSTPROCESSING_HOOKS).
describe_enums = enum_descriptions(
    {
        "InfractionStatusEnum": (
            "`open`: the payer's bank reported a fraud claim (MED) on this Pix; the acquirer may have blocked its "
            "money, and a defence may be sent until `defense_deadline`. `in_defense`: the acquirer is analysing "
            "(a defence was sent, or it took the case). `accepted`: the claim stood: `returned_amount` went back "
            "to the payer and `debited_amount` was debited from the balance. `rejected`: the claim failed, the "
            "block was released. `canceled`: withdrawn by the payer's bank, the block was released."
        ),
    }
)

#: A tiny but real PDF (what the demo accepts: the bytes must be of the declared type).
SAMPLE_PDF_BASE64 = (
    "JVBERi0xLjQKJeLjz9MKMSAwIG9iajw8L1R5cGUvQ2F0YWxvZz4+ZW5kb2JqCnRyYWlsZXI8PC9Sb290IDEgMCBSPj4KJSVFT0YK"
)

DEFENSE = [
    OpenApiExample(
        "Defesa com comprovante",
        summary="The merchant's account of the sale, with a delivery receipt",
        value={
            "text": (
                "Venda do pedido PED-2026-0001 entregue em 25/11/2026 no endereço do comprador, "
                "que assinou o recebimento (comprovante anexo)."
            ),
            "attachments": [
                {
                    "name": "comprovante-entrega.pdf",
                    "content_type": "application/pdf",
                    "content_base64": SAMPLE_PDF_BASE64,
                }
            ],
        },
        request_only=True,
    ),
    OpenApiExample(
        "Defesa só com texto",
        summary="No attachments",
        value={"text": "Serviço prestado ao comprador em 25/11/2026; o pagador é o titular da conta do pedido."},
        request_only=True,
    ),
]

INFRACTION = {
    "id": "3f9d6c1e-2b7a-4c55-9e0f-8a1b2c3d4e5f",
    "transaction_id": "5f3b82f4-a5f5-4e64-9514-2701a32d7fba",
    "e2e_id": "E18236120202611251958s0123456789",
    "status": "open",
    "reason": "Fraude: o pagador não reconhece a transação",
    "amount": 4990,
    "blocked_amount": 4891,
    "returned_amount": 0,
    "debited_amount": 0,
    "defense_deadline": "2026-12-02 19:58:02",
    "defense": None,
    "opened_at": "2026-11-25 20:10:00",
    "closed_at": None,
}

LISTING = OpenApiExample(
    "Infractions page",
    value={
        "success": True,
        "message": "Infrações listadas com sucesso.",
        "data": {
            "infractions": [INFRACTION],
            "pagination": {"current_page": 1, "last_page": 1, "per_page": 15, "total": 1},
        },
    },
    response_only=True,
)

DEFENDED = OpenApiExample(
    "Defence recorded",
    value={
        "success": True,
        "message": "Defesa registrada. Ela será enviada à adquirente.",
        "data": {
            **INFRACTION,
            "defense": {
                "submitted_at": "2026-11-26 10:00:00",
                "sent_at": None,
                "error": "",
                "text": DEFENSE[0].value["text"],
                "attachments": [{"name": "comprovante-entrega.pdf", "content_type": "application/pdf", "size": 75}],
            },
        },
    },
    response_only=True,
    status_codes=["201"],
)
