"""Reading withdrawals: GET /withdrawals (filters, pagination, order,
isolation), GET /withdrawals/{id} and GET /withdrawals/balance
(decisions §2, §3, §5)."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import pytest
from django.db import transaction
from rest_framework.test import APIClient

from accounts.models import Account, ApiCredential, LedgerEntry
from accounts.services import credential_issue, ledger_post
from tests.conftest import client_for
from tests.factories import AccountFactory
from tests.helpers import listing_data, listing_errors, local
from tests.withdrawals.records import NO_ADDITIVE_FIELDS, additive_fields
from withdrawals.models import Withdrawal, WithdrawalStatus

URL = "/api/withdrawals"
BALANCE_URL = "/api/withdrawals/balance"
CONTRACT_FIELDS = {"id", "e2e_id", "amount", "liquid_amount", "pix_type", "pix_key", "status", "paid_at", "created_at"}
# Additive (docs/api/index.md): the schedule, the merchant's reference, why it failed, its batch, the payee check.
RECORD_FIELDS = CONTRACT_FIELDS | {"scheduled_for", "external_id", "failure_reason", "batch_id", "payee"}
NOT_FOUND = {"success": False, "message": "Saque não encontrado.", "data": None}
NO_PERMISSION = {
    "success": False,
    "message": "Esta credencial não tem permissão para realizar esta operação.",
    "data": None,
}
CPF = "52998224725"

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(account: Account) -> APIClient:
    return client_for(credential_issue(account=account, permission=ApiCredential.Permission.CASHOUT))


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> dt.datetime:
    return dt.datetime(year, month, day, hour, minute, second, tzinfo=dt.UTC)


def new_withdrawal(
    account: Account,
    amount: int = 5000,
    *,
    fee: int = 0,
    discount_fee: bool = True,
    status: str = WithdrawalStatus.PENDING,
    **fields: Any,
) -> Withdrawal:
    """A row consistent with ``withdrawal_fee_arithmetic``."""
    return Withdrawal(
        account=account,
        amount=amount,
        fee=fee,
        discount_fee=discount_fee,
        total_debit=amount if discount_fee else amount + fee,
        liquid_amount=amount - fee if discount_fee else amount,
        pix_key_type=fields.pop("pix_key_type", "cpf"),
        pix_key=fields.pop("pix_key", CPF),
        status=status,
        idempotency_id=uuid.uuid4().hex,
        **fields,
    )


def make_withdrawal(
    account: Account, amount: int = 5000, created_at: dt.datetime | None = None, **fields: Any
) -> Withdrawal:
    withdrawal = new_withdrawal(account, amount, **fields)
    withdrawal.save()
    if created_at is not None:
        Withdrawal.objects.filter(pk=withdrawal.pk).update(created_at=created_at)
        withdrawal.refresh_from_db()
    return withdrawal


def make_many(account: Account, count: int) -> list[Withdrawal]:
    """``count`` withdrawals one minute apart, the last one the newest."""
    rows = Withdrawal.objects.bulk_create(new_withdrawal(account, 1000 + i) for i in range(count))
    start = utc(2026, 1, 1, 12, 0, 0)
    for i, row in enumerate(rows):
        Withdrawal.objects.filter(pk=row.pk).update(created_at=start + dt.timedelta(minutes=i))
    return rows


def paid(account: Account, paid_at: dt.datetime, e2e_id: str | None = None, **fields: Any) -> Withdrawal:
    return make_withdrawal(
        account, status=WithdrawalStatus.PAID, paid_at=paid_at, e2e_id=e2e_id or f"E{uuid.uuid4().hex}"[:32], **fields
    )


def record(withdrawal: Withdrawal) -> dict[str, Any]:
    withdrawal.refresh_from_db()
    return {
        "id": str(withdrawal.pk),
        "e2e_id": withdrawal.e2e_id,
        "amount": withdrawal.amount,
        "liquid_amount": withdrawal.liquid_amount,
        "pix_type": withdrawal.pix_key_type,
        "pix_key": withdrawal.pix_key,
        "status": withdrawal.status,
        "paid_at": local(withdrawal.paid_at),
        "created_at": local(withdrawal.created_at),
        **additive_fields(withdrawal),
    }


def listing(api: APIClient, **params: Any) -> dict[str, Any]:
    return listing_data(api, URL, **params)


def ids(api: APIClient, **params: Any) -> list[str]:
    return [item["id"] for item in listing(api, **params)["withdrawals"]]


def invalid(api: APIClient, **params: Any) -> dict[str, list[str]]:
    return listing_errors(api, URL, **params)


# --------------------------------------------------------------------------- shape, order, pagination


def test_listing_shape(api: APIClient, account: Account) -> None:
    pending = make_withdrawal(account, 3000, fee=100, created_at=utc(2026, 1, 2, 15, 4, 5))
    done = paid(
        account,
        utc(2026, 1, 2, 16, 0, 1),
        e2e_id="E" + "7" * 31,
        created_at=utc(2026, 1, 2, 15, 30, 0),
        fee=250,
        discount_fee=False,
        pix_key_type="email",
        pix_key="fulano@example.com",
    )

    response = api.get(URL)

    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"success", "message", "data"}
    assert (body["success"], body["message"]) == (True, "Saques listados com sucesso.")
    assert set(body["data"]) == {"withdrawals", "pagination"}
    assert body["data"]["pagination"] == {"current_page": 1, "last_page": 1, "per_page": 15, "total": 2}
    items = body["data"]["withdrawals"]
    assert all(set(item) == RECORD_FIELDS for item in items)
    assert items == [
        {
            "id": str(done.pk),
            "e2e_id": "E" + "7" * 31,
            "amount": 5000,
            "liquid_amount": 5000,
            "pix_type": "email",
            "pix_key": "fulano@example.com",
            "status": "paid",
            "paid_at": "2026-01-02 13:00:01",
            "created_at": "2026-01-02 12:30:00",
            **NO_ADDITIVE_FIELDS,
        },
        {
            "id": str(pending.pk),
            "e2e_id": None,
            "amount": 3000,
            "liquid_amount": 2900,
            "pix_type": "cpf",
            "pix_key": CPF,
            "status": "pending",
            "paid_at": None,
            "created_at": "2026-01-02 12:04:05",
            **NO_ADDITIVE_FIELDS,
        },
    ]


def test_a_withdrawal_made_through_the_api_is_listed(api: APIClient, account: Account) -> None:
    with transaction.atomic():
        ledger_post(account_id=account.pk, amount=10_000, kind=LedgerEntry.Kind.CHARGE_PAID, reference="seed:list")
    created = api.post(URL, {"amount": 4000, "key_type": "phone", "key_value": "11987654321"}, format="json")
    assert created.status_code == 201
    item = listing(api)["withdrawals"][0]
    data = created.json()["data"]
    assert item == {
        "id": data["id"],
        "e2e_id": None,
        "amount": 4000,
        "liquid_amount": 4000,
        "pix_type": "phone",
        "pix_key": "+5511987654321",
        "status": "pending",
        "paid_at": None,
        "created_at": data["created_at"],
        **NO_ADDITIVE_FIELDS,
    }


def test_empty_listing(api: APIClient) -> None:
    assert listing(api) == {
        "withdrawals": [],
        "pagination": {"current_page": 1, "last_page": 1, "per_page": 15, "total": 0},
    }


def test_newest_first_then_id_descending(api: APIClient, account: Account) -> None:
    old = make_withdrawal(account, created_at=utc(2026, 1, 1, 10))
    new = make_withdrawal(account, created_at=utc(2026, 1, 2, 10))
    same_a = make_withdrawal(account, created_at=utc(2026, 1, 1, 12))
    same_b = make_withdrawal(account, created_at=utc(2026, 1, 1, 12))
    tied = sorted([str(same_a.pk), str(same_b.pk)], reverse=True)
    assert ids(api) == [str(new.pk), *tied, str(old.pk)]


def test_default_page_size_and_pages(api: APIClient, account: Account) -> None:
    rows = make_many(account, 17)
    newest_first = [str(w.pk) for w in reversed(rows)]

    first = listing(api)
    second = listing(api, page=2)

    assert [i["id"] for i in first["withdrawals"]] == newest_first[:15]
    assert first["pagination"] == {"current_page": 1, "last_page": 2, "per_page": 15, "total": 17}
    assert [i["id"] for i in second["withdrawals"]] == newest_first[15:]
    assert second["pagination"] == {"current_page": 2, "last_page": 2, "per_page": 15, "total": 17}
    small = listing(api, per_page=5, page=3)
    assert [i["id"] for i in small["withdrawals"]] == newest_first[10:15]
    assert small["pagination"] == {"current_page": 3, "last_page": 4, "per_page": 5, "total": 17}


@pytest.mark.parametrize("per_page", [1, 100])
def test_per_page_bounds_accepted(api: APIClient, account: Account, per_page: int) -> None:
    make_many(account, 3)
    data = listing(api, per_page=per_page)
    assert len(data["withdrawals"]) == min(per_page, 3)
    assert data["pagination"]["per_page"] == per_page


@pytest.mark.parametrize("per_page", ["0", "101", "-1", "abc", "1.5"])
def test_per_page_out_of_bounds_is_422(api: APIClient, per_page: str) -> None:
    assert set(invalid(api, per_page=per_page)) == {"per_page"}


@pytest.mark.parametrize("page", ["0", "-1", "abc", "1.5"])
def test_bad_page_is_422(api: APIClient, page: str) -> None:
    assert set(invalid(api, page=page)) == {"page"}


def test_page_past_the_end_is_empty_with_correct_pagination(api: APIClient, account: Account) -> None:
    make_many(account, 3)
    assert listing(api, page=5) == {
        "withdrawals": [],
        "pagination": {"current_page": 5, "last_page": 1, "per_page": 15, "total": 3},
    }
    assert listing(api, page=2, per_page=3)["pagination"] == {
        "current_page": 2,
        "last_page": 1,
        "per_page": 3,
        "total": 3,
    }


# --------------------------------------------------------------------------- filters


def test_filter_by_id_and_e2e_id(api: APIClient, account: Account) -> None:
    a = paid(account, utc(2026, 1, 1), e2e_id="E" + "1" * 31)
    b = paid(account, utc(2026, 1, 1), e2e_id="E" + "2" * 31)
    make_withdrawal(account)

    assert ids(api, id=str(a.pk)) == [str(a.pk)]
    assert ids(api, id=str(a.pk).upper()) == [str(a.pk)]
    assert ids(api, id=str(uuid.uuid4())) == []
    assert ids(api, e2e_id=b.e2e_id) == [str(b.pk)]
    assert ids(api, e2e_id="E" + "3" * 31) == []
    assert ids(api, id=str(a.pk), e2e_id=b.e2e_id) == []  # filters combine


def test_filter_by_amount_is_inclusive(api: APIClient, account: Account) -> None:
    for amount in (1000, 1500, 1999, 2000, 2500):
        make_withdrawal(account, amount)

    def amounts(**params: Any) -> list[int]:
        return sorted(item["amount"] for item in listing(api, **params)["withdrawals"])

    assert amounts(amount_min=1500) == [1500, 1999, 2000, 2500]
    assert amounts(amount_max=1999) == [1000, 1500, 1999]
    assert amounts(amount_min=1500, amount_max=2000) == [1500, 1999, 2000]
    assert amounts(amount_min=2000, amount_max=2000) == [2000]
    assert amounts(amount_min=2001, amount_max=2499) == []


def test_amount_filter_compares_the_requested_amount_not_the_liquid(api: APIClient, account: Account) -> None:
    withdrawal = make_withdrawal(account, 2000, fee=500)
    assert ids(api, amount_min=2000, amount_max=2000) == [str(withdrawal.pk)]
    assert ids(api, amount_max=1500) == []


def test_huge_amount_bounds_match_nothing_rather_than_fail(api: APIClient, account: Account) -> None:
    make_withdrawal(account, 2000)
    assert ids(api, amount_min=str(2**63)) == []
    assert len(ids(api, amount_max=str(10**30))) == 1


@pytest.mark.parametrize("status", WithdrawalStatus.values)
def test_filter_by_status(api: APIClient, account: Account, status: str) -> None:
    rows = {s: make_withdrawal(account, status=s) for s in WithdrawalStatus.values}
    assert ids(api, status=status) == [str(rows[status].pk)]
    assert listing(api)["pagination"]["total"] == len(WithdrawalStatus.values)


def test_statuses_are_the_six_of_the_spec() -> None:
    assert set(WithdrawalStatus.values) == {"pending", "approved", "paid", "failed", "canceled", "refunded"}


def test_created_at_filters_are_sao_paulo_time_and_inclusive(api: APIClient, account: Account) -> None:
    # 03:00:00 UTC is midnight in São Paulo (UTC-3).
    before_midnight = make_withdrawal(account, created_at=utc(2026, 1, 10, 2, 59, 59))
    at_midnight = make_withdrawal(account, created_at=utc(2026, 1, 10, 3, 0, 0))
    later = make_withdrawal(account, created_at=utc(2026, 1, 10, 15, 0, 0))

    assert record(at_midnight)["created_at"] == "2026-01-10 00:00:00"
    assert record(before_midnight)["created_at"] == "2026-01-09 23:59:59"
    assert ids(api, created_at_start="2026-01-10 00:00:00") == [str(later.pk), str(at_midnight.pk)]
    assert ids(api, created_at_end="2026-01-09 23:59:59") == [str(before_midnight.pk)]
    assert ids(api, created_at_start="2026-01-10 00:00:00", created_at_end="2026-01-10 00:00:00") == [
        str(at_midnight.pk)
    ]
    assert ids(api, created_at_start="2026-01-10 00:00:01", created_at_end="2026-01-10 11:59:59") == []
    assert ids(api, created_at_start="2026-01-10 12:00:00", created_at_end="2026-01-10 12:00:00") == [str(later.pk)]


def test_paid_at_filters_are_sao_paulo_time_and_inclusive(api: APIClient, account: Account) -> None:
    early = paid(account, utc(2026, 2, 1, 2, 59, 59))
    midnight = paid(account, utc(2026, 2, 1, 3, 0, 0))
    make_withdrawal(account)  # unpaid: never matches a paid_at bound

    assert record(midnight)["paid_at"] == "2026-02-01 00:00:00"
    assert ids(api, paid_at_start="2026-02-01 00:00:00") == [str(midnight.pk)]
    assert ids(api, paid_at_end="2026-01-31 23:59:59") == [str(early.pk)]
    assert set(ids(api, paid_at_start="2026-01-31 23:59:59", paid_at_end="2026-02-01 00:00:00")) == {
        str(midnight.pk),
        str(early.pk),
    }
    assert ids(api, paid_at_start="2026-02-01 00:00:01") == []


def test_end_bound_includes_the_whole_second_shown(api: APIClient, account: Account) -> None:
    withdrawal = paid(
        account,
        utc(2026, 1, 10, 4, 0, 0) + dt.timedelta(microseconds=250_000),
        created_at=utc(2026, 1, 10, 3, 0, 0) + dt.timedelta(microseconds=500_000),
    )
    shown = record(withdrawal)
    assert (shown["created_at"], shown["paid_at"]) == ("2026-01-10 00:00:00", "2026-01-10 01:00:00")

    assert ids(api, created_at_start=shown["created_at"], created_at_end=shown["created_at"]) == [str(withdrawal.pk)]
    assert ids(api, paid_at_start=shown["paid_at"], paid_at_end=shown["paid_at"]) == [str(withdrawal.pk)]


@pytest.mark.parametrize(
    ("param", "value"),
    [
        ("id", "not-a-uuid"),
        ("id", "123"),
        ("created_at_start", "01/01/2026 00:00:00"),
        ("created_at_end", "2026-01-01 25:00:00"),
        ("paid_at_start", "ontem"),
        ("paid_at_end", "2026-13-01 00:00:00"),
        ("status", "PAID"),
        ("status", "chargeback"),
        ("status", "nope"),
        ("amount_min", "abc"),
        ("amount_min", "10.5"),
        ("amount_max", "1e3"),
        ("e2e_id", "E" * 65),
    ],
)
def test_invalid_filter_is_422_under_its_name(api: APIClient, param: str, value: str) -> None:
    assert set(invalid(api, **{param: value})) == {param}


@pytest.mark.parametrize(
    ("param", "value"),
    [
        ("created_at_start", "2026-01-01"),
        ("created_at_end", "2026-01-01T00:00:00"),
        ("paid_at_start", "2026-01-01 00:00"),
        ("paid_at_end", "2026-01-01 00:00:00+05:00"),
        ("created_at_start", "2026-01-01 00:00:00.500"),
    ],
)
def test_only_the_documented_time_format_is_accepted(api: APIClient, param: str, value: str) -> None:
    assert set(invalid(api, **{param: value})) == {param}


def test_every_invalid_parameter_is_reported(api: APIClient) -> None:
    errors = invalid(api, id="x", status="nope", amount_max="abc", per_page="0", created_at_start="01/01/2026")
    assert set(errors) == {"id", "status", "amount_max", "per_page", "created_at_start"}


# --------------------------------------------------------------------------- isolation


def test_an_account_sees_only_its_own_withdrawals(api: APIClient, account: Account) -> None:
    mine = make_withdrawal(account)
    other_account = AccountFactory()
    theirs = paid(other_account, utc(2026, 1, 1), e2e_id="E" + "4" * 31)

    assert ids(api) == [str(mine.pk)]
    assert listing(api)["pagination"]["total"] == 1
    assert ids(api, id=str(theirs.pk)) == []
    assert ids(api, e2e_id=theirs.e2e_id) == []
    assert ids(client_for(credential_issue(account=other_account))) == [str(theirs.pk)]


# --------------------------------------------------------------------------- detail


def test_detail_is_the_record_in_sao_paulo_time(api: APIClient, account: Account) -> None:
    withdrawal = paid(
        account,
        utc(2026, 3, 5, 14, 9, 30),
        e2e_id="E" + "5" * 31,
        created_at=utc(2026, 3, 5, 14, 7, 9),
        fee=150,
        pix_key_type="random",
        pix_key="123e4567-e89b-12d3-a456-426614174000",
    )

    response = api.get(f"{URL}/{withdrawal.pk}")

    assert response.status_code == 200
    assert response.json() == {
        "success": True,
        "message": "Saque consultado com sucesso.",
        "data": {
            "id": str(withdrawal.pk),
            "e2e_id": "E" + "5" * 31,
            "amount": 5000,
            "liquid_amount": 4850,
            "pix_type": "random",
            "pix_key": "123e4567-e89b-12d3-a456-426614174000",
            "status": "paid",
            "paid_at": "2026-03-05 11:09:30",
            "created_at": "2026-03-05 11:07:09",
            **NO_ADDITIVE_FIELDS,
        },
    }


def test_detail_of_unknown_malformed_or_foreign_id_is_404(api: APIClient, account: Account) -> None:
    foreign = make_withdrawal(AccountFactory())
    for withdrawal_id in (uuid.uuid4(), "not-a-uuid", "123", foreign.pk, str(foreign.pk).upper(), "0" * 40):
        response = api.get(f"{URL}/{withdrawal_id}")
        assert response.status_code == 404, withdrawal_id
        assert response.json() == NOT_FOUND


def test_detail_accepts_the_id_in_any_case(api: APIClient, account: Account) -> None:
    withdrawal = make_withdrawal(account)
    response = api.get(f"{URL}/{str(withdrawal.pk).upper()}")
    assert response.status_code == 200
    assert response.json()["data"] == record(withdrawal)


# --------------------------------------------------------------------------- balance


def test_balance_shape(account: Account) -> None:
    Account.objects.filter(pk=account.pk).update(
        withdrawal_minimum=1500, withdrawal_per_request_limit=250_000, withdrawal_daily_limit=900_000
    )
    with transaction.atomic():
        ledger_post(account_id=account.pk, amount=43_210, kind=LedgerEntry.Kind.CHARGE_PAID, reference="seed:bal")
    make_withdrawal(account, 7000)
    client = client_for(credential_issue(account=account))

    response = client.get(BALANCE_URL)

    assert response.status_code == 200
    assert response.json() == {
        "success": True,
        "message": "Saldo consultado com sucesso.",
        "data": {
            "available_balance": 43_210,
            "blocked_balance": 0,
            "daily_limit_remaining": 900_000 - 7000,
            "minimum_withdrawal": 1500,
            "limits": {"per_request": 250_000, "per_day_total": 900_000},
        },
    }


def test_balance_of_a_new_account(api: APIClient) -> None:
    assert api.get(BALANCE_URL).json()["data"] == {
        "available_balance": 0,
        "blocked_balance": 0,
        "daily_limit_remaining": 2_000_000,
        "minimum_withdrawal": 1000,
        "limits": {"per_request": 500_000, "per_day_total": 2_000_000},
    }


def test_balance_is_not_read_as_a_withdrawal_id(api: APIClient) -> None:
    response = api.get(BALANCE_URL)
    assert response.status_code == 200
    assert response.json()["message"] == "Saldo consultado com sucesso."


# --------------------------------------------------------------------------- permissions and cost


def test_cashin_credential_cannot_read_withdrawals(account: Account) -> None:
    withdrawal = make_withdrawal(account)
    cashin = client_for(credential_issue(account=account, permission=ApiCredential.Permission.CASHIN))
    for path in (URL, f"{URL}/{withdrawal.pk}", BALANCE_URL, f"{URL}/{uuid.uuid4()}"):
        response = cashin.get(path)
        assert response.status_code == 403, path
        assert response.json() == NO_PERMISSION
    full = client_for(credential_issue(account=account, permission=ApiCredential.Permission.ALL))
    for path in (URL, f"{URL}/{withdrawal.pk}", BALANCE_URL):
        assert full.get(path).status_code == 200, path


@pytest.mark.parametrize("path", [URL, f"{URL}/{uuid.uuid4()}", BALANCE_URL])
def test_reading_needs_credentials(path: str) -> None:
    response = APIClient().get(path)
    assert response.status_code == 401
    assert response.json() == {
        "error": "Credenciais inválidas",
        "message": "Chave pública e chave privada são obrigatórias",
    }


@pytest.mark.parametrize("rows", [15, 40])
def test_listing_runs_in_a_bounded_number_of_queries(
    api: APIClient, account: Account, rows: int, django_assert_max_num_queries: Any
) -> None:
    made = make_many(account, rows)
    for withdrawal in made[:5]:
        Withdrawal.objects.filter(pk=withdrawal.pk).update(
            status=WithdrawalStatus.PAID, paid_at=utc(2026, 1, 2), e2e_id=None
        )
    api.get(URL)  # the credential's last_used_at write happens once, not per listing

    with django_assert_max_num_queries(6):
        data = listing(api, per_page=100)

    assert len(data["withdrawals"]) == rows


def test_detail_and_balance_run_in_a_bounded_number_of_queries(
    api: APIClient, account: Account, django_assert_max_num_queries: Any
) -> None:
    withdrawal = make_withdrawal(account)
    api.get(BALANCE_URL)
    with django_assert_max_num_queries(4):
        assert api.get(f"{URL}/{withdrawal.pk}").status_code == 200
    with django_assert_max_num_queries(6):
        assert api.get(BALANCE_URL).status_code == 200


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("put", URL),
        ("patch", URL),
        ("delete", URL),
        ("post", BALANCE_URL),
        ("delete", f"{URL}/{uuid.uuid4()}"),
        ("post", f"{URL}/{uuid.uuid4()}"),
    ],
)
def test_other_methods_are_405_in_the_envelope(api: APIClient, method: str, path: str) -> None:
    response = getattr(api, method)(path)
    assert response.status_code == 405
    assert response.json() == {"success": False, "message": "Método não permitido.", "data": None}
