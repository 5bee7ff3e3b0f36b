"""Reading charges: GET /transactions (filters, pagination, order, isolation),
GET /transactions/{id} and its QR code (decisions §3, §4)."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable
from typing import Any
from unittest.mock import ANY

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.models import Account, ApiCredential
from accounts.services import IssuedCredential
from acquirers.models import Acquirer
from payments.models import Charge, ChargeStatus
from payments.services import charge_transition
from tests.conftest import client_for
from tests.factories import AccountFactory, AcquirerFactory
from tests.helpers import listing_data, listing_errors, local

URL = "/api/transactions"
RECORD_FIELDS = {
    "id",
    "payment_method",
    "e2e_id",
    "amount",
    "platform_tax",
    "liquid_amount",
    "status",
    "paid_at",
    "created_at",
    "expires_at",
    "pix",
}
BODY = {
    "payment_method": "pix",
    "amount": 1000,
    "buyer": {"buyer_name": "Fulano", "buyer_document": "52998224725", "buyer_phone": "11999998888"},
}
NOT_FOUND = {"success": False, "message": "Transação não encontrada.", "data": None}
NO_PERMISSION = {
    "success": False,
    "message": "Esta credencial não tem permissão para realizar esta operação.",
    "data": None,
}

pytestmark = pytest.mark.django_db


@pytest.fixture
def acquirer(db: Any) -> Acquirer:
    return AcquirerFactory(key="sbx_listing", default_priority=1)


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> dt.datetime:
    return dt.datetime(year, month, day, hour, minute, second, tzinfo=dt.UTC)


def new_charge(account: Account, acquirer: Acquirer, amount: int = 1000, **fields: Any) -> Charge:
    return Charge(
        account=account,
        amount=amount,
        platform_tax=0,
        liquid_amount=amount,
        txid=uuid.uuid4().hex,
        emv="000201",
        acquirer=acquirer,
        buyer_name="Fulano",
        buyer_document="52998224725",
        buyer_phone="11999998888",
        expires_at=timezone.now() + dt.timedelta(hours=1),
        **fields,
    )


def make_charge(
    account: Account, acquirer: Acquirer, amount: int = 1000, created_at: dt.datetime | None = None, **fields: Any
) -> Charge:
    charge = new_charge(account, acquirer, amount, **fields)
    charge.save()
    if created_at is not None:
        Charge.objects.filter(pk=charge.pk).update(created_at=created_at)
        charge.refresh_from_db()
    return charge


def make_many(account: Account, acquirer: Acquirer, count: int) -> list[Charge]:
    """``count`` charges one minute apart, the last one the newest."""
    charges = Charge.objects.bulk_create(new_charge(account, acquirer, 100 + i) for i in range(count))
    start = utc(2026, 1, 1, 12, 0, 0)
    for i, charge in enumerate(charges):
        Charge.objects.filter(pk=charge.pk).update(created_at=start + dt.timedelta(minutes=i))
    return charges


def pay(charge: Charge, paid_at: dt.datetime, e2e_id: str | None = None) -> Charge:
    charge_transition(
        charge_id=charge.pk, to_status=ChargeStatus.PAID, source="acquirer", paid_at=paid_at, e2e_id=e2e_id
    )
    charge.refresh_from_db()
    return charge


def record(charge: Charge) -> dict[str, Any]:
    charge.refresh_from_db()
    return {
        "id": str(charge.pk),
        "payment_method": charge.payment_method,
        "e2e_id": charge.e2e_id,
        "amount": charge.amount,
        "platform_tax": charge.platform_tax,
        "liquid_amount": charge.liquid_amount,
        "status": charge.status,
        "paid_at": local(charge.paid_at),
        "created_at": local(charge.created_at),
        "expires_at": local(charge.expires_at),
        "pix": {"emv": charge.emv},
    }


def listing(api: APIClient, **params: Any) -> dict[str, Any]:
    return listing_data(api, URL, **params)


def ids(api: APIClient, **params: Any) -> list[str]:
    return [item["id"] for item in listing(api, **params)["transactions"]]


def invalid(api: APIClient, **params: Any) -> dict[str, list[str]]:
    return listing_errors(api, URL, **params)


# --------------------------------------------------------------------------- shape, order, pagination


def test_listing_shape(api: APIClient, account: Account, acquirer: Acquirer) -> None:
    created = [api.post(URL, BODY, format="json") for _ in range(2)]
    assert [r.status_code for r in created] == [201, 201]
    charge = Charge.objects.get(pk=created[0].json()["data"]["id"])
    pay(charge, timezone.now(), e2e_id="E" + "7" * 31)

    response = api.get(URL)

    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"success", "message", "data"}
    assert (body["success"], body["message"]) == (True, "Transações listadas com sucesso.")
    assert set(body["data"]) == {"transactions", "pagination"}
    assert body["data"]["pagination"] == {"current_page": 1, "last_page": 1, "per_page": 15, "total": 2}
    items = body["data"]["transactions"]
    assert all(set(item) == RECORD_FIELDS for item in items)
    assert {item["id"] for item in items} == {r.json()["data"]["id"] for r in created}
    assert record(charge) in items
    paid = next(item for item in items if item["id"] == str(charge.pk))
    assert paid["status"] == "paid"
    assert paid["e2e_id"] == "E" + "7" * 31
    pending = next(item for item in items if item["id"] != str(charge.pk))
    assert (pending["status"], pending["e2e_id"], pending["paid_at"]) == ("pending", None, None)


def test_empty_listing(api: APIClient) -> None:
    assert listing(api) == {
        "transactions": [],
        "pagination": {"current_page": 1, "last_page": 1, "per_page": 15, "total": 0},
    }


def test_newest_first_then_id_descending(api: APIClient, account: Account, acquirer: Acquirer) -> None:
    old = make_charge(account, acquirer, created_at=utc(2026, 1, 1, 10))
    new = make_charge(account, acquirer, created_at=utc(2026, 1, 2, 10))
    same_a = make_charge(account, acquirer, created_at=utc(2026, 1, 1, 12))
    same_b = make_charge(account, acquirer, created_at=utc(2026, 1, 1, 12))
    tied = sorted([str(same_a.pk), str(same_b.pk)], reverse=True)
    assert ids(api) == [str(new.pk), *tied, str(old.pk)]


def test_default_page_size_and_pages(api: APIClient, account: Account, acquirer: Acquirer) -> None:
    charges = make_many(account, acquirer, 17)
    newest_first = [str(c.pk) for c in reversed(charges)]

    first = listing(api)
    second = listing(api, page=2)

    assert [i["id"] for i in first["transactions"]] == newest_first[:15]
    assert first["pagination"] == {"current_page": 1, "last_page": 2, "per_page": 15, "total": 17}
    assert [i["id"] for i in second["transactions"]] == newest_first[15:]
    assert second["pagination"] == {"current_page": 2, "last_page": 2, "per_page": 15, "total": 17}
    small = listing(api, per_page=5, page=3)
    assert [i["id"] for i in small["transactions"]] == newest_first[10:15]
    assert small["pagination"] == {"current_page": 3, "last_page": 4, "per_page": 5, "total": 17}


@pytest.mark.parametrize("per_page", [1, 100])
def test_per_page_bounds_accepted(api: APIClient, account: Account, acquirer: Acquirer, per_page: int) -> None:
    make_many(account, acquirer, 3)
    data = listing(api, per_page=per_page)
    assert len(data["transactions"]) == min(per_page, 3)
    assert data["pagination"]["per_page"] == per_page


@pytest.mark.parametrize("per_page", ["0", "101", "-1", "abc", "1.5"])
def test_per_page_out_of_bounds_is_422(api: APIClient, per_page: str) -> None:
    assert set(invalid(api, per_page=per_page)) == {"per_page"}


@pytest.mark.parametrize("page", ["0", "-1", "abc"])
def test_bad_page_is_422(api: APIClient, page: str) -> None:
    assert set(invalid(api, page=page)) == {"page"}


def test_page_past_the_end_is_empty_with_correct_pagination(
    api: APIClient, account: Account, acquirer: Acquirer
) -> None:
    make_many(account, acquirer, 3)
    assert listing(api, page=5) == {
        "transactions": [],
        "pagination": {"current_page": 5, "last_page": 1, "per_page": 15, "total": 3},
    }
    assert listing(api, page=2, per_page=3)["pagination"] == {
        "current_page": 2,
        "last_page": 1,
        "per_page": 3,
        "total": 3,
    }


# --------------------------------------------------------------------------- filters


def test_filter_by_id_and_e2e_id(api: APIClient, account: Account, acquirer: Acquirer) -> None:
    a = pay(make_charge(account, acquirer), timezone.now(), e2e_id="E" + "1" * 31)
    b = pay(make_charge(account, acquirer), timezone.now(), e2e_id="E" + "2" * 31)
    make_charge(account, acquirer)

    assert ids(api, id=str(a.pk)) == [str(a.pk)]
    assert ids(api, id=str(uuid.uuid4())) == []
    assert ids(api, e2e_id=b.e2e_id) == [str(b.pk)]
    assert ids(api, e2e_id="E" + "3" * 31) == []
    assert ids(api, id=str(a.pk), e2e_id=b.e2e_id) == []  # filters combine


def test_filter_by_amount_is_inclusive(api: APIClient, account: Account, acquirer: Acquirer) -> None:
    by_amount = {amount: make_charge(account, acquirer, amount) for amount in (100, 500, 999, 1000, 1500)}

    def amounts(**params: Any) -> list[int]:
        return sorted(item["amount"] for item in listing(api, **params)["transactions"])

    assert amounts(amount_min=500) == [500, 999, 1000, 1500]
    assert amounts(amount_max=999) == [100, 500, 999]
    assert amounts(amount_min=500, amount_max=1000) == [500, 999, 1000]
    assert amounts(amount_min=1000, amount_max=1000) == [1000]
    assert amounts(amount_min=1001, amount_max=1499) == []
    assert len(by_amount) == 5


def test_filter_by_status(api: APIClient, account: Account, acquirer: Acquirer) -> None:
    charges = {status: make_charge(account, acquirer) for status in ChargeStatus.values}
    charge_transition(charge_id=charges[ChargeStatus.PAID].pk, to_status=ChargeStatus.PAID, source="staff")
    charge_transition(charge_id=charges[ChargeStatus.FAILED].pk, to_status=ChargeStatus.FAILED, source="staff")
    charge_transition(charge_id=charges[ChargeStatus.CANCELED].pk, to_status=ChargeStatus.CANCELED, source="staff")
    for final in (ChargeStatus.REFUNDED, ChargeStatus.CHARGEBACK):
        for step in (ChargeStatus.PAID, final):
            charge_transition(charge_id=charges[final].pk, to_status=step, source="staff")

    for status, charge in charges.items():
        assert ids(api, status=status) == [str(charge.pk)], status


def test_created_at_filters_are_sao_paulo_time_and_inclusive(
    api: APIClient, account: Account, acquirer: Acquirer
) -> None:
    # 03:00:00 UTC is midnight in São Paulo (UTC-3).
    before_midnight = make_charge(account, acquirer, created_at=utc(2026, 1, 10, 2, 59, 59))
    at_midnight = make_charge(account, acquirer, created_at=utc(2026, 1, 10, 3, 0, 0))
    later = make_charge(account, acquirer, created_at=utc(2026, 1, 10, 15, 0, 0))

    assert record(at_midnight)["created_at"] == "2026-01-10 00:00:00"
    assert record(before_midnight)["created_at"] == "2026-01-09 23:59:59"
    assert ids(api, created_at_start="2026-01-10 00:00:00") == [str(later.pk), str(at_midnight.pk)]
    assert ids(api, created_at_end="2026-01-09 23:59:59") == [str(before_midnight.pk)]
    assert ids(api, created_at_start="2026-01-10 00:00:00", created_at_end="2026-01-10 00:00:00") == [
        str(at_midnight.pk)
    ]
    assert ids(api, created_at_start="2026-01-10 00:00:01", created_at_end="2026-01-10 11:59:59") == []
    assert ids(api, created_at_start="2026-01-10 12:00:00", created_at_end="2026-01-10 12:00:00") == [str(later.pk)]


def test_paid_at_filters_are_sao_paulo_time_and_inclusive(api: APIClient, account: Account, acquirer: Acquirer) -> None:
    early = pay(make_charge(account, acquirer), utc(2026, 2, 1, 2, 59, 59))
    midnight = pay(make_charge(account, acquirer), utc(2026, 2, 1, 3, 0, 0))
    make_charge(account, acquirer)  # unpaid: never matches a paid_at bound

    assert record(midnight)["paid_at"] == "2026-02-01 00:00:00"
    assert ids(api, paid_at_start="2026-02-01 00:00:00") == [str(midnight.pk)]
    assert ids(api, paid_at_end="2026-01-31 23:59:59") == [str(early.pk)]
    assert ids(api, paid_at_start="2026-01-31 23:59:59", paid_at_end="2026-02-01 00:00:00") == [
        str(midnight.pk),
        str(early.pk),
    ]
    assert ids(api, paid_at_start="2026-02-01 00:00:01") == []


def test_end_bound_includes_the_whole_second_shown(api: APIClient, account: Account, acquirer: Acquirer) -> None:
    charge = make_charge(account, acquirer, created_at=utc(2026, 1, 10, 3, 0, 0) + dt.timedelta(microseconds=500_000))
    pay(charge, utc(2026, 1, 10, 4, 0, 0) + dt.timedelta(microseconds=250_000))
    shown = record(charge)
    assert (shown["created_at"], shown["paid_at"]) == ("2026-01-10 00:00:00", "2026-01-10 01:00:00")

    assert ids(api, created_at_start=shown["created_at"], created_at_end=shown["created_at"]) == [str(charge.pk)]
    assert ids(api, paid_at_start=shown["paid_at"], paid_at_end=shown["paid_at"]) == [str(charge.pk)]


@pytest.mark.parametrize(
    ("param", "value"),
    [
        ("id", "not-a-uuid"),
        ("id", "123"),
        ("created_at_start", "01/01/2026 00:00:00"),
        ("created_at_end", "2026-01-01 25:00:00"),
        ("paid_at_start", "ontem"),
        ("paid_at_end", "2026-13-01 00:00:00"),
        ("status", "approved"),
        ("status", "PAID"),
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


def test_an_account_sees_only_its_own_charges(
    api: APIClient, account: Account, acquirer: Acquirer, issue_credential: Callable[..., IssuedCredential]
) -> None:
    mine = make_charge(account, acquirer)
    other_account = AccountFactory()
    theirs = pay(make_charge(other_account, acquirer), timezone.now(), e2e_id="E" + "4" * 31)

    assert ids(api) == [str(mine.pk)]
    assert listing(api)["pagination"]["total"] == 1
    assert ids(api, id=str(theirs.pk)) == []
    assert ids(api, e2e_id=theirs.e2e_id) == []
    assert ids(client_for(issue_credential(other_account))) == [str(theirs.pk)]


# --------------------------------------------------------------------------- detail


def test_detail_is_the_record_in_sao_paulo_time(api: APIClient, account: Account, acquirer: Acquirer) -> None:
    created = api.post(URL, BODY, format="json")
    assert created.status_code == 201
    charge = Charge.objects.get(pk=created.json()["data"]["id"])
    Charge.objects.filter(pk=charge.pk).update(created_at=utc(2026, 3, 5, 14, 7, 9))
    pay(charge, utc(2026, 3, 5, 14, 9, 30), e2e_id="E" + "5" * 31)

    response = api.get(f"{URL}/{charge.pk}")

    assert response.status_code == 200
    assert response.json() == {
        "success": True,
        "message": "Transação consultada com sucesso.",
        "data": {
            "id": str(charge.pk),
            "payment_method": "pix",
            "e2e_id": "E" + "5" * 31,
            "amount": 1000,
            "platform_tax": charge.platform_tax,
            "liquid_amount": 1000 - charge.platform_tax,
            "status": "paid",
            "paid_at": "2026-03-05 11:09:30",
            "created_at": "2026-03-05 11:07:09",
            "expires_at": local(charge.expires_at),
            "pix": {"emv": charge.emv},
        },
    }


def test_detail_and_listing_give_the_pix_code_of_the_creation_again(
    api: APIClient, account: Account, acquirer: Acquirer
) -> None:
    created = api.post(URL, BODY, format="json")
    assert created.status_code == 201
    pix = created.json()["data"]["pix"]
    assert pix["emv"].startswith("000201")

    detail = api.get(f"{URL}/{created.json()['data']['id']}").json()["data"]
    [item] = listing(api)["transactions"]

    assert detail["pix"] == pix
    assert item["pix"] == pix


def test_detail_of_unknown_malformed_or_foreign_id_is_404(api: APIClient, account: Account, acquirer: Acquirer) -> None:
    foreign = make_charge(AccountFactory(), acquirer)
    for charge_id in (uuid.uuid4(), "not-a-uuid", foreign.pk, str(foreign.pk).upper()):
        response = api.get(f"{URL}/{charge_id}")
        assert response.status_code == 404, charge_id
        assert response.json() == NOT_FOUND


def test_detail_accepts_the_id_in_any_case(api: APIClient, account: Account, acquirer: Acquirer) -> None:
    charge = make_charge(account, acquirer)
    response = api.get(f"{URL}/{str(charge.pk).upper()}")
    assert response.status_code == 200
    assert response.json()["data"] == record(charge)


# --------------------------------------------------------------------------- QR code


@pytest.fixture
def charge(api: APIClient, acquirer: Acquirer) -> Charge:
    created = api.post(URL, BODY, format="json")
    assert created.status_code == 201
    return Charge.objects.get(pk=created.json()["data"]["id"])


def test_qrcode_png_by_default(api: APIClient, charge: Charge) -> None:
    response = api.get(f"{URL}/{charge.pk}/qrcode")
    assert response.status_code == 200
    assert response["Content-Type"] == "image/png"
    assert response.content.startswith(b"\x89PNG\r\n\x1a\n")


def test_qrcode_explicit_png(api: APIClient, charge: Charge) -> None:
    response = api.get(f"{URL}/{charge.pk}/qrcode", {"format": "png"})
    assert response.status_code == 200
    assert response["Content-Type"] == "image/png"
    assert response.content.startswith(b"\x89PNG\r\n\x1a\n")


def test_qrcode_svg(api: APIClient, charge: Charge) -> None:
    response = api.get(f"{URL}/{charge.pk}/qrcode", {"format": "svg"})
    assert response.status_code == 200
    assert response["Content-Type"] == "image/svg+xml"
    assert b"<svg" in response.content


def test_qrcode_unknown_format_is_422(api: APIClient, charge: Charge) -> None:
    response = api.get(f"{URL}/{charge.pk}/qrcode", {"format": "gif"})
    assert response.status_code == 422
    body = response.json()
    assert body["success"] is False
    assert set(body["data"]["errors"]) == {"format"}


def test_qrcode_of_unknown_or_foreign_charge_is_404(
    api: APIClient, charge: Charge, issue_credential: Callable[..., IssuedCredential]
) -> None:
    other = client_for(issue_credential(AccountFactory()))
    for client, charge_id in ((other, charge.pk), (api, uuid.uuid4()), (api, "not-a-uuid")):
        response = client.get(f"{URL}/{charge_id}/qrcode")
        assert response.status_code == 404
        assert response.json() == NOT_FOUND


# --------------------------------------------------------------------------- permissions and cost


def test_cashout_credential_cannot_read_charges(
    account: Account, acquirer: Acquirer, issue_credential: Callable[..., IssuedCredential]
) -> None:
    charge = make_charge(account, acquirer)
    cashout = client_for(issue_credential(account, ApiCredential.Permission.CASHOUT))
    for path in (URL, f"{URL}/{charge.pk}", f"{URL}/{charge.pk}/qrcode"):
        response = cashout.get(path)
        assert response.status_code == 403, path
        assert response.json() == NO_PERMISSION
    cashin = client_for(issue_credential(account, ApiCredential.Permission.CASHIN))
    assert cashin.get(URL).status_code == 200


def test_listing_needs_credentials() -> None:
    response = APIClient().get(URL)
    assert response.status_code == 401


@pytest.mark.parametrize("rows", [15, 40])
def test_listing_runs_in_a_bounded_number_of_queries(
    api: APIClient,
    account: Account,
    acquirer: Acquirer,
    rows: int,
    django_assert_max_num_queries: Any,
) -> None:
    charges = make_many(account, acquirer, rows)
    for charge in charges[:5]:
        pay(charge, timezone.now(), e2e_id=f"E{charge.pk.hex}"[:32])
    api.get(URL)  # the credential's last_used_at write happens once, not per listing

    with django_assert_max_num_queries(6):
        data = listing(api, per_page=100)

    assert len(data["transactions"]) == rows


def test_the_filter_form_class_is_built_once_and_each_request_gets_its_own_errors(api: APIClient) -> None:
    from payments.selectors import ChargeFilterSet

    first = ChargeFilterSet(data={}).get_form_class()
    assert ChargeFilterSet(data={}).get_form_class() is first
    bad_amount = listing_errors(api, URL, amount_min="x")
    bad_status = listing_errors(api, URL, status="nope")
    assert set(bad_amount) == {"amount_min"}
    assert set(bad_status) == {"status"}


def test_the_schema_documents_pix_on_reads_and_not_in_the_file() -> None:
    schema = APIClient().get("/api/schema/", HTTP_ACCEPT="application/json").json()
    components = schema["components"]["schemas"]

    def resolved(node: dict[str, Any]) -> dict[str, Any]:
        while "$ref" in node or "allOf" in node:
            node = components[node["$ref"].rsplit("/", 1)[1]] if "$ref" in node else node["allOf"][0]
        return node

    def data_of(path: str) -> dict[str, Any]:
        response = schema["paths"][path]["get"]["responses"]["200"]["content"]["application/json"]
        return resolved(resolved(response["schema"])["properties"]["data"])

    assert resolved(data_of("/api/transactions/{charge_id}")["properties"]["pix"])["properties"] == {
        "emv": {"type": "string", "description": ANY}
    }
    item = resolved(data_of("/api/transactions")["properties"]["transactions"]["items"])
    assert "pix" in item["properties"]
    csv_example = schema["paths"]["/api/transactions.csv"]["get"]["description"]
    assert "pix" not in csv_example.split("`")[1].split(";")
