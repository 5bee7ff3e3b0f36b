"""The merchant's statement (issue 16): GET /api/statement and
GET /api/statement.csv — the account's ledger entries, newest first, each
with the balance after it and the record it is for."""

from __future__ import annotations

import datetime as dt
import itertools
import uuid
from typing import Any

import pytest
from django.db import transaction
from rest_framework.test import APIClient

from accounts.models import Account, AccountBalance, ApiCredential, LedgerEntry
from accounts.services import credential_issue, ledger_post
from payments.models import Charge, ChargeStatus, ChargeTransition
from payments.refunds import charge_refund_reserve
from payments.services import charge_transition
from tests import realworld
from tests.conftest import client_for
from tests.factories import AccountFactory, ChargeFactory
from tests.helpers import SAO_PAULO, VALIDATION, csv_rows, listing_data, listing_errors, local
from withdrawals.models import WithdrawalStatus
from withdrawals.services import withdrawal_request, withdrawal_transition

URL = "/api/statement"
CSV_URL = "/api/statement.csv"
# components: a due-date charge's credit by component (null on every other entry, as here).
ENTRY_FIELDS = {"id", "kind", "amount", "balance_after", "record", "components", "created_at"}
NO_PERMISSION = "Esta credencial não tem permissão para realizar esta operação."
PERIOD_REQUIRED = "Informe o período (created_at_start e created_at_end) para exportar o extrato."
PERIOD_TOO_LONG = "O período do extrato em CSV é de no máximo 31 dias."


@pytest.fixture
def cashout(account: Account) -> APIClient:
    return client_for(credential_issue(account=account, permission=ApiCredential.Permission.CASHOUT))


def post(
    account: Account, amount: int, kind: str = LedgerEntry.Kind.CHARGE_PAID, reference: str = "", **placed: Any
) -> LedgerEntry:
    """An entry through the real service; ``at`` (Sao Paulo wall time) places its created_at."""
    with transaction.atomic():
        entry = ledger_post(account_id=account.pk, amount=amount, kind=kind, reference=reference or uuid.uuid4().hex)
    assert entry is not None
    if (at := placed.get("at")) is not None:
        LedgerEntry.objects.filter(pk=entry.pk).update(created_at=at.replace(tzinfo=SAO_PAULO))
        entry.refresh_from_db()
    return entry


def paid_charge(account: Account, amount: int = 10_000) -> Charge:
    charge = ChargeFactory(account=account, amount=amount)
    assert charge_transition(charge_id=charge.pk, to_status=ChargeStatus.PAID, source=ChargeTransition.Source.SANDBOX)
    charge.refresh_from_db()
    return charge


def assert_chain(entries: list[dict[str, Any]]) -> None:
    """Newest first; oldest to newest each balance_after is the previous one plus its amount."""
    ids = [e["id"] for e in entries]
    assert ids == sorted(ids, reverse=True)
    oldest_first = entries[::-1]
    for before, entry in itertools.pairwise(oldest_first):
        assert entry["balance_after"] == before["balance_after"] + entry["amount"], (before, entry)


# --------------------------------------------------------------------------- listing


@pytest.mark.django_db
def test_the_statement_shows_every_movement_newest_first_with_its_record(
    account: Account, cashout: APIClient, no_enqueue: list[Any]
) -> None:
    charge = paid_charge(account)
    withdrawal = withdrawal_request(account=account, amount=2000, key_type="cpf", key_value="52998224725")
    withdrawal_transition(withdrawal_id=withdrawal.pk, to_status=WithdrawalStatus.FAILED, source="staff", actor="ops")
    refunded = paid_charge(account, amount=5000)
    assert charge_refund_reserve(charge_id=refunded.pk)
    post(account, 700, reference="ajuste manual 42")

    data = listing_data(cashout, URL)
    entries = data["entries"]
    assert data["pagination"] == {"current_page": 1, "last_page": 1, "per_page": 15, "total": 6}
    assert all(set(e) == ENTRY_FIELDS for e in entries)
    stored = list(LedgerEntry.objects.filter(account=account).order_by("-id"))
    assert [(e["id"], e["kind"], e["amount"], e["balance_after"], e["created_at"]) for e in entries] == [
        (s.pk, s.kind, s.amount, s.balance_after, local(s.created_at)) for s in stored
    ]
    assert [(e["kind"], e["record"]) for e in entries] == [
        (LedgerEntry.Kind.CHARGE_PAID, None),  # a reference that names no record
        (LedgerEntry.Kind.REFUND_HOLD, {"type": "transaction", "id": str(refunded.pk)}),  # refund:<id> names its charge
        (LedgerEntry.Kind.CHARGE_PAID, {"type": "transaction", "id": str(refunded.pk)}),
        (LedgerEntry.Kind.WITHDRAWAL_REVERSAL, {"type": "withdrawal", "id": str(withdrawal.pk)}),
        (LedgerEntry.Kind.WITHDRAWAL, {"type": "withdrawal", "id": str(withdrawal.pk)}),
        (LedgerEntry.Kind.CHARGE_PAID, {"type": "transaction", "id": str(charge.pk)}),
    ]
    assert_chain(entries)
    assert entries[0]["balance_after"] == AccountBalance.objects.get(account=account).available
    assert cashout.get(URL).json()["message"] == "Extrato consultado com sucesso."


@pytest.mark.django_db
@pytest.mark.parametrize(
    "reference",
    [
        "charge:nope:1",
        "charge:" + "0" * 36 + ":1",
        "withdrawal:",
        "refund:abc",
        "refund:99999999999999999999",
        "x" * 100,
    ],
)
def test_a_reference_of_no_known_format_shows_no_record(account: Account, cashout: APIClient, reference: str) -> None:
    post(account, 100, reference=reference)
    post(account, 100, reference=f"refund:{10**17}")  # the format, but no such refund
    assert [e["record"] for e in listing_data(cashout, URL)["entries"]] == [None, None]


@pytest.mark.django_db
def test_pages_follow_the_ledger_order(account: Account, cashout: APIClient) -> None:
    made = [post(account, 100 + i) for i in range(7)]
    first = listing_data(cashout, URL, per_page=3)
    third = listing_data(cashout, URL, per_page=3, page=3)
    assert [e["id"] for e in first["entries"]] == [m.pk for m in made[::-1][:3]]
    assert [e["id"] for e in third["entries"]] == [made[0].pk]
    assert third["pagination"] == {"current_page": 3, "last_page": 3, "per_page": 3, "total": 7}
    assert listing_data(cashout, URL, page=9)["entries"] == []


@pytest.mark.django_db
def test_the_period_is_inclusive_at_both_ends_in_sao_paulo_time(account: Account, cashout: APIClient) -> None:
    before = post(account, 100, at=dt.datetime(2025, 3, 9, 23, 59, 59, 999999))
    first = post(account, 200, at=dt.datetime(2025, 3, 10, 0, 0, 0))
    last = post(account, 300, at=dt.datetime(2025, 3, 10, 23, 59, 59, 999999))
    after = post(account, 400, at=dt.datetime(2025, 3, 11, 0, 0, 0))
    period = {"created_at_start": "2025-03-10 00:00:00", "created_at_end": "2025-03-10 23:59:59"}

    assert [e["id"] for e in listing_data(cashout, URL, **period)["entries"]] == [last.pk, first.pk]
    start_only = listing_data(cashout, URL, created_at_start="2025-03-10 00:00:00")["entries"]
    assert [e["id"] for e in start_only] == [after.pk, last.pk, first.pk]
    end_only = listing_data(cashout, URL, created_at_end="2025-03-10 00:00:00")["entries"]
    assert [e["id"] for e in end_only] == [first.pk, before.pk]
    assert listing_data(cashout, URL, **period)["entries"][1]["created_at"] == "2025-03-10 00:00:00"


@pytest.mark.django_db
def test_the_kind_filter(account: Account, cashout: APIClient, no_enqueue: list[Any]) -> None:
    post(account, 10_000)
    withdrawal = withdrawal_request(account=account, amount=2000, key_type="cpf", key_value="52998224725")
    entries = listing_data(cashout, URL, kind=LedgerEntry.Kind.WITHDRAWAL)["entries"]
    assert [(e["kind"], e["record"]["id"]) for e in entries] == [(LedgerEntry.Kind.WITHDRAWAL, str(withdrawal.pk))]
    assert listing_data(cashout, URL, kind=LedgerEntry.Kind.CHARGE_CHARGEBACK)["entries"] == []


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("params", "errors"),
    [
        ({"created_at_start": "2025-03-10T00:00:00"}, {"created_at_start": ["Use o formato AAAA-MM-DD HH:mm:ss."]}),
        ({"created_at_end": "2025-02-30 00:00:00"}, {"created_at_end": ["Use o formato AAAA-MM-DD HH:mm:ss."]}),
        ({"created_at_start": ""}, {"created_at_start": ["Este campo não pode ser em branco."]}),
        (
            {"kind": "saque"},
            {"kind": ["Faça uma escolha válida. saque não é uma das escolhas disponíveis."]},
        ),
        ({"page": "0", "per_page": "101"}, None),
    ],
)
def test_bad_filters_are_422s_like_the_other_listings(
    account: Account, cashout: APIClient, params: dict[str, str], errors: dict[str, list[str]] | None
) -> None:
    post(account, 100)
    got = listing_errors(cashout, URL, **params)
    if errors is not None:
        assert got == errors
    shared = {k: v for k, v in params.items() if k != "kind"}
    if shared:  # the same parameters, the same answer as the withdrawals listing
        assert got == listing_errors(cashout, "/api/withdrawals", **shared)
    assert LedgerEntry.objects.filter(account=account).count() == 1


@pytest.mark.django_db
def test_another_accounts_entries_are_never_shown(account: Account, cashout: APIClient) -> None:
    mine = post(account, 100, at=dt.datetime(2025, 3, 10, 12, 0, 0))
    other = AccountFactory()
    post(other, 999, at=dt.datetime(2025, 3, 10, 12, 0, 0))
    period = {"created_at_start": "2025-03-10 00:00:00", "created_at_end": "2025-03-10 23:59:59"}
    assert [e["id"] for e in listing_data(cashout, URL)["entries"]] == [mine.pk]
    assert [e["id"] for e in listing_data(cashout, URL, **period)["entries"]] == [mine.pk]
    assert [row[0] for row in csv_rows(cashout.get(CSV_URL, period))[1:]] == [str(mine.pk)]


@pytest.mark.django_db
@pytest.mark.parametrize("url", [URL, CSV_URL])
def test_credentials(account: Account, url: str) -> None:
    period = {"created_at_start": "2025-03-10 00:00:00", "created_at_end": "2025-03-10 23:59:59"}
    assert APIClient().get(url, period).status_code == 401
    issued = credential_issue(account=account, permission=ApiCredential.Permission.CASHOUT)
    wrong = APIClient()
    wrong.credentials(HTTP_X_PUBLIC_KEY=issued.credential.public_key, HTTP_X_SECRET_KEY="sk_wrong")
    assert wrong.get(url, period).status_code == 401
    cashin = client_for(credential_issue(account=account, permission=ApiCredential.Permission.CASHIN))
    refused = cashin.get(url, period)
    assert refused.status_code == 403
    assert refused.json() == {"success": False, "message": NO_PERMISSION, "data": None}
    for permission in (ApiCredential.Permission.CASHOUT, ApiCredential.Permission.ALL):
        assert client_for(credential_issue(account=account, permission=permission)).get(url, period).status_code == 200


# --------------------------------------------------------------------------- CSV


@pytest.mark.django_db
def test_the_csv_streams_the_statements_rows(account: Account, cashout: APIClient) -> None:
    charge = paid_charge(account)
    LedgerEntry.objects.filter(account=account).update(created_at=dt.datetime(2025, 3, 10, 9, 30, 5, tzinfo=SAO_PAULO))
    adjustment = post(account, 700, reference="ajuste", at=dt.datetime(2025, 3, 31, 23, 59, 59))
    post(account, 1, at=dt.datetime(2025, 4, 1, 0, 0, 0))  # outside
    paid = LedgerEntry.objects.get(account=account, kind=LedgerEntry.Kind.CHARGE_PAID, reference__startswith="charge:")

    response = cashout.get(
        CSV_URL, {"created_at_start": "2025-03-01 00:00:00", "created_at_end": "2025-03-31 23:59:59"}
    )
    assert response["Content-Disposition"] == 'attachment; filename="extrato-20250301-20250331.csv"'
    assert csv_rows(response) == [
        ["id", "kind", "amount", "balance_after", "record_type", "record_id", "created_at"],
        [str(adjustment.pk), "charge_paid", "700", str(paid.balance_after + 700), "", "", "2025-03-31 23:59:59"],
        [
            str(paid.pk),
            "charge_paid",
            str(paid.amount),
            str(paid.balance_after),
            "transaction",
            str(charge.pk),
            "2025-03-10 09:30:05",
        ],
    ]
    by_kind = cashout.get(
        CSV_URL,
        {"created_at_start": "2025-03-01 00:00:00", "created_at_end": "2025-04-01 00:00:00", "kind": "withdrawal"},
    )
    assert csv_rows(by_kind) == [["id", "kind", "amount", "balance_after", "record_type", "record_id", "created_at"]]


@pytest.mark.django_db
def test_the_csv_answers_any_accept_header(account: Account, cashout: APIClient) -> None:
    period = {"created_at_start": "2025-03-01 00:00:00", "created_at_end": "2025-03-02 00:00:00"}
    assert csv_rows(cashout.get(CSV_URL, period, HTTP_ACCEPT="text/csv"))[0][0] == "id"
    refused = cashout.get(CSV_URL, {}, HTTP_ACCEPT="text/csv")
    assert refused.status_code == 422
    assert refused["Content-Type"] == "application/json"


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("params", "errors"),
    [
        ({}, {"created_at_start": [PERIOD_REQUIRED], "created_at_end": [PERIOD_REQUIRED]}),
        ({"created_at_start": "2025-03-01 00:00:00"}, {"created_at_end": [PERIOD_REQUIRED]}),
        ({"created_at_end": "2025-03-01 00:00:00", "kind": "withdrawal"}, {"created_at_start": [PERIOD_REQUIRED]}),
        (
            {"created_at_start": "2025-03-01 00:00:00", "created_at_end": "2025-04-01 00:00:01"},
            {"created_at_end": [PERIOD_TOO_LONG]},
        ),
        (
            {"created_at_start": "2025-03-01 00:00:00", "created_at_end": "2025-03-01"},
            {"created_at_end": ["Use o formato AAAA-MM-DD HH:mm:ss."]},
        ),
        (
            {"created_at_start": "2025-03-01 00:00:00", "created_at_end": "2025-03-02 00:00:00", "kind": "x"},
            {"kind": ["Faça uma escolha válida. x não é uma das escolhas disponíveis."]},
        ),
    ],
)
def test_the_csv_needs_a_period_of_at_most_31_days(
    account: Account, cashout: APIClient, params: dict[str, str], errors: dict[str, list[str]]
) -> None:
    response = cashout.get(CSV_URL, params)
    assert response.status_code == 422
    assert response.json() == {"success": False, "message": VALIDATION, "data": {"errors": errors}}


@pytest.mark.django_db
def test_a_period_of_exactly_31_days_is_exported(account: Account, cashout: APIClient) -> None:
    entry = post(account, 100, at=dt.datetime(2025, 4, 1, 0, 0, 0))
    rows = csv_rows(
        cashout.get(CSV_URL, {"created_at_start": "2025-03-01 00:00:00", "created_at_end": "2025-04-01 00:00:00"})
    )
    assert [row[0] for row in rows[1:]] == [str(entry.pk)]


# --------------------------------------------------------------------------- concurrency


@pytest.mark.django_db(transaction=True)
def test_balance_after_is_exact_under_concurrency(account: Account, no_enqueue: list[Any]) -> None:
    """Credits, debits and withdrawals of one account posted by 12 threads at
    once, each on its own connection through the real services: the
    statement's chain holds entry by entry and ends at the balance row."""
    post(account, 50_000)

    def credit(n: int) -> Any:
        return lambda: post(account, 1000 + n)

    def withdraw() -> Any:
        return withdrawal_request(account=account, amount=1500, key_type="cpf", key_value="52998224725")

    calls = [credit(n) for n in range(8)] + [withdraw] * 4
    outcomes = realworld.run_concurrently(calls)
    assert not [o for o in outcomes if isinstance(o, BaseException)], outcomes

    api = client_for(credential_issue(account=account, permission=ApiCredential.Permission.ALL))
    entries = listing_data(api, URL, per_page=100)["entries"]
    assert len(entries) == 13
    assert_chain(entries)
    assert entries[-1]["balance_after"] == 50_000
    balance = AccountBalance.objects.get(account=account).available
    assert entries[0]["balance_after"] == balance == 50_000 + sum(1000 + n for n in range(8)) - 4 * 1500


# --------------------------------------------------------------------------- documentation


def test_the_statement_is_documented_like_the_listings(schema: dict[str, Any]) -> None:
    listing = schema["paths"]["/api/statement"]["get"]
    assert listing["tags"] == ["balance"]
    assert "`cashout` or `all`" in listing["description"]
    assert {p["name"] for p in listing["parameters"]} >= {
        "created_at_start", "created_at_end", "kind", "page", "per_page"
    }  # fmt: skip
    ok = listing["responses"]["200"]["content"]["application/json"]
    [example] = ok["examples"].values()
    assert_chain(example["value"]["data"]["entries"])
    assert set(listing["responses"]) >= {"200", "401", "403", "422"}
    entry = schema["components"]["schemas"]["StatementEntry"]
    assert set(entry["properties"]) == ENTRY_FIELDS
    assert set(schema["components"]["schemas"]["LedgerKindEnum"]["enum"]) == set(LedgerEntry.Kind.values)
    assert "refund_hold" in schema["components"]["schemas"]["LedgerKindEnum"]["description"]

    export = schema["paths"]["/api/statement.csv"]["get"]
    assert export["tags"] == ["balance"]
    assert "text/csv" in export["responses"]["200"]["content"]
    required = {p["name"] for p in export["parameters"] if p.get("required")}
    assert required == {"created_at_start", "created_at_end"}
