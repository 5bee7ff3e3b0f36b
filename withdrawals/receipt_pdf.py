"""The receipt of a paid withdrawal as a one-page PDF (fpdf2), pt-BR labels.

Text is written with the PDF core font Helvetica in WinAnsi (Latin-1), so
the accents of Portuguese are real text a reader can search and copy, and
any text extractor reads it back (tests/withdrawals/test_receipts.py does,
with pypdf). A character outside Latin-1 (a name from the DICT may carry
one) is shown as ``?`` rather than failing the receipt.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.http import HttpResponse
from fpdf import FPDF
from fpdf.enums import XPos, YPos

from core.money import brl
from withdrawals.models import PixKeyType, WithdrawalStatus
from withdrawals.selectors import SAO_PAULO

FONT = "Helvetica"
LABEL_WIDTH = 55
LINE = 7
RETURNED = "Este Pix foi pago e depois devolvido pelo recebedor: o valor enviado voltou ao saldo da conta em {when}."


def _latin1(text: str) -> str:
    return text.encode("latin-1", "replace").decode("latin-1")


class _Receipt(FPDF):
    def heading(self, text: str) -> None:
        self.ln(3)
        self.set_font(FONT, "B", 11)
        self.set_fill_color(235, 240, 245)
        self.cell(0, LINE + 1, _latin1(text), fill=True, new_x=XPos.LMARGIN, new_y=YPos.NEXT)
        self.ln(1)

    def row(self, label: str, value: str) -> None:
        if not value:
            return
        self.set_font(FONT, "", 10)
        self.set_text_color(90, 90, 90)
        self.cell(LABEL_WIDTH, LINE, _latin1(label))
        self.set_text_color(0, 0, 0)
        self.set_font(FONT, "B", 10)
        self.multi_cell(0, LINE, _latin1(value), new_x=XPos.LMARGIN, new_y=YPos.NEXT)


def _key_type_label(key_type: str) -> str:
    return PixKeyType(key_type).label if key_type in PixKeyType.values else key_type


def receipt_pdf(receipt: dict[str, Any]) -> bytes:
    """``receipt`` (:func:`withdrawals.receipts.receipt_of`) as PDF bytes."""
    pdf = _Receipt(format="A4")
    pdf.set_title(_latin1(f"Comprovante de Pix {receipt['e2e_id']}"))
    pdf.set_author("PIX Service")
    if receipt["paid_at"]:
        # The document's date is the payment's: the same receipt renders to the same text.
        paid = dt.datetime.strptime(receipt["paid_at"], "%Y-%m-%d %H:%M:%S").replace(tzinfo=SAO_PAULO)
        pdf.set_creation_date(paid)
    pdf.set_margins(20, 20, 20)
    pdf.add_page()

    pdf.set_font(FONT, "B", 16)
    pdf.cell(0, 10, _latin1("Comprovante de transferência Pix"), new_x=XPos.LMARGIN, new_y=YPos.NEXT)
    pdf.set_font(FONT, "", 10)
    pdf.set_text_color(90, 90, 90)
    pdf.cell(0, LINE, _latin1("Saque enviado via Pix"), new_x=XPos.LMARGIN, new_y=YPos.NEXT)
    pdf.set_text_color(0, 0, 0)

    if receipt["status"] == WithdrawalStatus.REFUNDED:
        pdf.ln(2)
        pdf.set_font(FONT, "B", 10)
        pdf.set_text_color(160, 60, 0)
        pdf.multi_cell(
            0,
            LINE,
            _latin1(RETURNED.format(when=_brazilian(receipt["returned_at"]))),
            new_x=XPos.LMARGIN,
            new_y=YPos.NEXT,
        )
        pdf.set_text_color(0, 0, 0)

    pdf.heading("Transferência")
    pdf.row("Valor enviado", brl(receipt["liquid_amount"]))
    pdf.row("Valor do saque", brl(receipt["amount"]))
    pdf.row("Tarifa", brl(receipt["fee"]))
    pdf.row("Total debitado", brl(receipt["total_debit"]))
    pdf.row("Data e hora do pagamento", _brazilian(receipt["paid_at"]))
    pdf.row("ID da transação (E2E)", receipt["e2e_id"])
    pdf.row("Situação", "Devolvido pelo recebedor" if receipt["status"] == WithdrawalStatus.REFUNDED else "Pago")

    pdf.heading("Quem pagou")
    pdf.row("Nome", receipt["payer"]["name"])
    pdf.row("CPF/CNPJ", receipt["payer"]["document"])

    payee = receipt["payee"]
    pdf.heading("Quem recebeu")
    pdf.row("Nome", payee["name"])
    pdf.row("CPF/CNPJ", payee["document"])
    pdf.row("Instituição", payee["bank"])
    pdf.row("ISPB", payee["ispb"])
    pdf.row("Tipo de chave", _key_type_label(payee["key_type"]))
    pdf.row("Chave Pix", payee["key"])

    pdf.heading("Dados do saque")
    pdf.row("Instituição pagadora", receipt["acquirer"])
    pdf.row("ID do saque", receipt["id"])
    pdf.row("Sua referência", receipt["external_id"])

    pdf.ln(4)
    pdf.set_font(FONT, "", 8)
    pdf.set_text_color(90, 90, 90)
    pdf.multi_cell(
        0,
        5,
        _latin1(
            "Autenticação (SHA-256 dos dados do comprovante; GET /api/withdrawals/{id}/receipt devolve os "
            "mesmos dados e a mesma autenticação):"
        ),
        new_x=XPos.LMARGIN,
        new_y=YPos.NEXT,
    )
    pdf.set_font("Courier", "", 8)
    pdf.cell(0, 5, receipt["authentication"], new_x=XPos.LMARGIN, new_y=YPos.NEXT)
    return bytes(pdf.output())


def _brazilian(local: str | None) -> str:
    """``2026-11-27 14:03:09`` → ``27/11/2026 às 14:03:09 (horário de Brasília)``."""
    if not local:
        return ""
    moment = dt.datetime.strptime(local, "%Y-%m-%d %H:%M:%S")
    return f"{moment:%d/%m/%Y} às {moment:%H:%M:%S} (horário de Brasília)"


def pdf_response(receipt: dict[str, Any]) -> HttpResponse:
    """The receipt's PDF as a download, ``comprovante-<id>.pdf`` (the API's and the back office's)."""
    response = HttpResponse(receipt_pdf(receipt), content_type="application/pdf")
    response["Content-Disposition"] = f'attachment; filename="comprovante-{receipt["id"]}.pdf"'
    response["Cache-Control"] = "private, no-store"
    return response
