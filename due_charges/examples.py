"""The due-date charge endpoints' OpenAPI examples (due_charges/apis.py):
bodies Swagger UI's "Try it out" sends, each valid as it stands against
the demo of ``make run`` (demo/bootstrap.json), and what the demo answers.
Their due dates lie years ahead: an example must still be payable the day
someone tries it."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiExample

from api.examples import CPF

DEBTOR = {"name": "Maria da Silva", "document": CPF}
FINE = {"modalidade": 2, "valorPerc": "2.00"}
INTEREST = {"modalidade": 2, "valorPerc": "1.00"}
DISCOUNT = {"modalidade": 1, "descontoDataFixa": [{"data": "2030-12-05", "valorPerc": "5.00"}]}

DUE_CHARGE = [
    OpenApiExample(
        "Mensalidade com multa e juros",
        summary="Due on a date, payable 30 days after with fine and interest",
        description="R$ 150,00 due on 2030-12-10; 2 % fine and 1 % a month of interest after it.",
        value={
            "amount": 15000,
            "due_date": "2030-12-10",
            "days_after_due": 30,
            "debtor": DEBTOR,
            "fine": FINE,
            "interest": INTEREST,
            "description": "Mensalidade de dezembro",
        },
        request_only=True,
    ),
    OpenApiExample(
        "Com desconto, endereço, retorno e metadados",
        summary="Every optional field",
        value={
            "amount": 15000,
            "due_date": "2030-12-10",
            "days_after_due": 60,
            "debtor": {
                **DEBTOR,
                "email": "maria@example.com",
                "street": "Avenida Paulista, 1578",
                "city": "São Paulo",
                "state": "SP",
                "zip_code": "01310100",
            },
            "fine": FINE,
            "interest": INTEREST,
            "discount": DISCOUNT,
            "description": "Aluguel de dezembro",
            "postback_url": "https://loja.example.com/pix/retorno",
            "metadata": {"contrato": "CT-2030-0042"},
        },
        request_only=True,
    ),
    OpenApiExample(
        "Um adquirente só",
        summary="Override with a single acquirer (`acquirer_key`)",
        value={"amount": 15000, "due_date": "2030-12-10", "debtor": DEBTOR, "acquirer_key": "sandbox_alpha"},
        request_only=True,
    ),
]

_ID = "8d2c6f0e-3b1a-4c5d-9e7f-1a2b3c4d5e6f"
#: What the demo answers to the first example (the demo's 1.99 % fee), for the 201's documentation.
DUE_CHARGE_CREATED = OpenApiExample(
    "Due-date charge created",
    value={
        "success": True,
        "message": "Cobrança com vencimento criada com sucesso.",
        "data": {
            "id": _ID,
            "txid": _ID.replace("-", ""),
            "status": "pending",
            "amount": 15000,
            "due_date": "2030-12-10",
            "days_after_due": 30,
            "last_payable_date": "2031-01-09",
            "fine": FINE,
            "interest": INTEREST,
            "rebate": None,
            "discount": None,
            "amount_due_today": {
                "date": "2030-11-25",
                "amount": 15000,
                "components": {"original": 15000, "multa": 0, "juros": 0, "abatimento": 0, "desconto": 0},
            },
            "paid_amount": None,
            "paid_components": {},
            "platform_tax": 299,
            "liquid_amount": 14701,
            "e2e_id": None,
            "paid_at": None,
            "pix": {
                "emv": "00020101021226780014br.gov.bcb.pix2556pix.sandbox.local/qr/v2/8d2c6f0e3b1a4c5d9e7f1a2b3c4d5e6f"
                "5204000053039865802BR5914LOJA DEMO LTDA6009SAO PAULO62070503***6304A1B2"
            },
            "debtor": {
                "name": "Maria da Silva",
                "document": CPF,
                "email": "",
                "street": "",
                "city": "",
                "state": "",
                "zip_code": "",
            },
            "description": "Mensalidade de dezembro",
            "metadata": {},
            "acquirer": "sandbox_alpha",
            "created_at": "2030-11-25 10:12:40",
        },
    },
    response_only=True,
    status_codes=["201"],
)

# Rows of the export's example file (its header is the export's).
DUE_CHARGES_CSV = [
    [
        _ID,
        _ID.replace("-", ""),
        "paid",
        15000,
        "2030-12-10",
        "2031-01-09",
        15345,
        305,
        15040,
        "E18236120203012151958s0123456789",
        "2030-12-15 19:58:02",
        "Maria da Silva",
        CPF,
        "Mensalidade de dezembro",
        "2030-11-25 10:12:40",
    ],
]
