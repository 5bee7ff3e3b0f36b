"""Listings through compiled statements (api.listing_statements): the same
pages, totals and 422s as through the ORM, for any parameters; every filter
of both record listings compiles; a first page that is not full sends no
COUNT; forms that share their fields validate from many threads at once."""

from __future__ import annotations

import datetime as dt
import logging
import threading
import uuid
import zoneinfo
from collections.abc import Callable
from typing import Any

import django_filters
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accounts.models import Account
from accounts.services import credential_issue
from api.listing import (
    ORDER,
    SORTED_ORDER,
    TIMESTAMP_FORMAT,
    ListingFilterSet,
    filter_and_paginate,
)
from api.listing_statements import Scope, compiled, listing
from core.exceptions import ValidationFailed
from payments.models import Charge, ChargeStatus
from payments.selectors import ChargeFilterSet, charges_scope
from payments.serializers import ChargeSerializer
from tests.conftest import client_for
from tests.factories import AccountFactory, AcquirerFactory, ChargeFactory, WithdrawalFactory
from withdrawals.models import Withdrawal, WithdrawalStatus
from withdrawals.selectors import WithdrawalFilterSet, withdrawals_scope
from withdrawals.serializers import WITHDRAWAL_COLUMNS

SAO_PAULO = zoneinfo.ZoneInfo("America/Sao_Paulo")
START = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)


def _records(account: Account, other: Account) -> list[Any]:
    acquirer = AcquirerFactory(key="sbx_compiled")
    made: list[Any] = []
    for n in range(36):
        created = START + dt.timedelta(hours=7 * n)
        paid = created + dt.timedelta(minutes=n) if n % 3 else None
        fields = {
            "amount": 100 * (n % 9) + 50,
            "created_at": created,
            "paid_at": paid,
            "e2e_id": f"E{n:031d}" if paid else None,
        }
        made.append(
            ChargeFactory(
                account=account,
                acquirer=acquirer,
                status=ChargeStatus.PAID if paid else (ChargeStatus.PENDING if n % 2 else ChargeStatus.CANCELED),
                txid=f"txcompiled{n:025d}",
                **fields,
            )
        )
        made.append(
            WithdrawalFactory(
                account=account,
                status=WithdrawalStatus.PAID if paid else WithdrawalStatus.PENDING,
                idempotency_id=f"wdcompiled{n:025d}",
                **fields,
            )
        )
    # Another account's records, at the same times: never listed.
    ChargeFactory(account=other, acquirer=acquirer, created_at=START, txid="txcompiledother0000000000000")
    WithdrawalFactory(account=other, created_at=START, idempotency_id="wdcompiledother0000000000000")
    return made


@pytest.fixture
def world(db: Any) -> dict[str, Any]:
    account, other = AccountFactory(), AccountFactory()
    records = _records(account, other)
    return {
        "account": account,
        "charge_ids": [str(r.pk) for r in records if isinstance(r, Charge)],
        "withdrawal_ids": [str(r.pk) for r in records if isinstance(r, Withdrawal)],
        "e2e_ids": sorted({r.e2e_id for r in records if r.e2e_id}),
    }


def _charges(account: Account) -> Scope[Charge]:
    return charges_scope(account, ChargeSerializer.Meta.fields)


def _withdrawals(account: Account) -> Scope[Withdrawal]:
    return withdrawals_scope(account, WITHDRAWAL_COLUMNS)


LISTINGS: dict[str, tuple[type[ListingFilterSet], Callable[[Account], Scope[Any]], str, list[str]]] = {
    "charges": (ChargeFilterSet, _charges, "charge_ids", list(ChargeStatus.values)),
    "withdrawals": (WithdrawalFilterSet, _withdrawals, "withdrawal_ids", list(WithdrawalStatus.values)),
}


def _stamp(moment: dt.datetime) -> str:
    return moment.astimezone(SAO_PAULO).strftime(TIMESTAMP_FORMAT)


def _answer(filterset: type[django_filters.FilterSet], records: Any, params: dict[str, str]) -> Any:
    """What the listing answers: the page's ids in order with the pagination, or the 422's fields."""
    try:
        items, pagination = filter_and_paginate(filterset, records, params)
    except ValidationFailed as exc:
        return ("422", exc.errors)
    return ([str(item.pk) for item in items], pagination)


def _plain(filterset: type[django_filters.FilterSet], scope: Scope[Any], params: dict[str, str]) -> Any:
    """The page and its pagination by django-filter and slicing alone, for valid ``params``."""
    rows = filterset(data=params, queryset=scope.queryset()).qs.order_by(*ORDER)
    page, per_page = int(params.get("page") or 1), int(params.get("per_page") or 15)
    total = rows.count()
    ids = [str(pk) for pk in rows.values_list("pk", flat=True)[(page - 1) * per_page : page * per_page]]
    last_page = max(1, -(-total // per_page))
    return (ids, {"current_page": page, "last_page": last_page, "per_page": per_page, "total": total})


@st.composite
def parameters(draw: st.DrawFn, ids: list[str], e2e_ids: list[str], statuses: list[str]) -> dict[str, str]:
    moments = st.integers(-2, 36 * 7 + 2).map(lambda h: _stamp(START + dt.timedelta(hours=h)))
    values: dict[str, st.SearchStrategy[str]] = {
        "id": st.sampled_from([*ids, str(uuid.uuid4()), "not-a-uuid", ""]),
        "e2e_id": st.sampled_from([*e2e_ids, "E-unknown", "", "x" * 65]),
        "amount_min": st.sampled_from(["0", "50", "449", "450", "850", "9999", "1.5", "", "abc"]),
        "amount_max": st.sampled_from(["0", "50", "449", "450", "850", "9999", "-1", ""]),
        "paid_at_start": moments | st.just("2026-02-30 00:00:00"),
        "paid_at_end": moments | st.just("9999-12-31 23:59:59"),
        "created_at_start": moments,
        "created_at_end": moments | st.just("2026-03-01T12:00:00"),
        "status": st.sampled_from([*statuses, "unknown"]),
        "page": st.sampled_from(["1", "2", "3", "5", "40", "0", ""]),
        "per_page": st.sampled_from(["1", "2", "7", "15", "100", "101"]),
    }
    names = draw(st.lists(st.sampled_from(sorted(values)), unique=True, max_size=5))
    return {name: draw(values[name]) for name in names}


@pytest.mark.django_db
@pytest.mark.parametrize("name", sorted(LISTINGS))
def test_compiled_statements_answer_as_the_orm_for_any_parameters(world: dict[str, Any], name: str) -> None:
    filterset, scope_of, ids_key, statuses = LISTINGS[name]
    scope = scope_of(world["account"])

    @settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(params=parameters(world[ids_key], world["e2e_ids"], statuses))
    def check(params: dict[str, str]) -> None:
        compiled_answer = _answer(filterset, scope, params)
        assert compiled_answer == _answer(filterset, scope.queryset(), params), params
        if compiled_answer[0] != "422":
            assert compiled_answer == _plain(filterset, scope, params), params

    check()


@pytest.mark.django_db
@pytest.mark.parametrize("name", sorted(LISTINGS))
def test_every_filter_compiles_alone_and_all_together(world: dict[str, Any], name: str) -> None:
    filterset, scope_of, ids_key, statuses = LISTINGS[name]
    scope = scope_of(world["account"])
    one_each = {
        "id": world[ids_key][0],
        "e2e_id": world["e2e_ids"][0],
        "amount_min": 50,
        "amount_max": 850,
        "paid_at_start": START,
        "paid_at_end": START + dt.timedelta(days=3),
        "created_at_start": START,
        "created_at_end": START + dt.timedelta(days=3),
        "status": statuses[0],
    }
    ids = {"id": uuid.UUID(world[ids_key][0])}
    for cleaned in [*({name: value} for name, value in one_each.items()), one_each, {}]:
        cleaned = {**cleaned, **{k: ids[k] for k in cleaned if k in ids}}
        for keys_order in (ORDER, SORTED_ORDER):
            assert listing(scope, filterset, cleaned, order=ORDER, keys_order=keys_order) is not None, cleaned


@pytest.mark.django_db
def test_a_first_page_that_is_not_full_is_its_own_total(world: dict[str, Any], django_assert_num_queries: Any) -> None:
    scope = _charges(world["account"])
    one = world["charge_ids"][3]
    with django_assert_num_queries(1):
        items, pagination = filter_and_paginate(ChargeFilterSet, scope, {"id": one})
    assert [str(i.pk) for i in items] == [one]
    assert pagination == {"current_page": 1, "last_page": 1, "per_page": 15, "total": 1}
    with django_assert_num_queries(1):
        _, pagination = filter_and_paginate(ChargeFilterSet, scope, {"per_page": "100"})
    assert pagination["total"] == 36
    # A full first page, and a later page, need the COUNT; a page past the end is the COUNT alone.
    with django_assert_num_queries(2):
        _, pagination = filter_and_paginate(ChargeFilterSet, scope, {"per_page": "36"})
    assert pagination["total"] == 36
    with django_assert_num_queries(2):
        items, pagination = filter_and_paginate(ChargeFilterSet, scope, {"per_page": "10", "page": "4"})
    assert (len(items), pagination["total"], pagination["last_page"]) == (6, 36, 4)
    with django_assert_num_queries(1):
        items, pagination = filter_and_paginate(ChargeFilterSet, scope, {"page": "9"})
    assert (items, pagination["total"]) == ([], 36)


class _MethodFilterSet(ChargeFilterSet):
    # A filter of its own: not a plain comparison, so not compiled.
    amount_above = django_filters.NumberFilter(method="above")

    def above(self, queryset: Any, name: str, value: Any) -> Any:
        return queryset.filter(amount__gt=value)


@pytest.mark.django_db
def test_a_filter_that_does_not_compile_goes_through_the_orm(world: dict[str, Any]) -> None:
    scope = _charges(world["account"])
    assert listing(scope, _MethodFilterSet, {"amount_above": 449}, order=ORDER, keys_order=ORDER) is None
    items, pagination = filter_and_paginate(_MethodFilterSet, scope, {"amount_above": "449", "per_page": "100"})
    assert pagination["total"] == len(items) == 20
    assert all(item.amount > 449 for item in items)
    # Its other filters still compile.
    assert listing(scope, _MethodFilterSet, {"amount_min": 450}, order=ORDER, keys_order=ORDER) is not None


@pytest.mark.django_db
def test_a_page_of_a_field_python_must_convert_goes_through_the_orm(world: dict[str, Any]) -> None:
    # A JSON column would come back from a plain cursor unconverted: not compiled.
    scope = charges_scope(world["account"], ["id", "metadata"])
    assert listing(scope, ChargeFilterSet, {}, order=ORDER, keys_order=ORDER) is None
    items, pagination = filter_and_paginate(ChargeFilterSet, scope, {"per_page": "100"})
    assert pagination["total"] == len(items) == 36
    assert {type(item.metadata) for item in items} <= {dict, type(None)}


@pytest.mark.django_db
def test_compiled_shapes_are_kept_per_set_of_filters(world: dict[str, Any]) -> None:
    scope = _charges(world["account"])
    compiled.cache_clear()
    for n in range(5):
        filter_and_paginate(ChargeFilterSet, scope, {"amount_min": str(n), "status": "paid", "page": str(n + 1)})
    filter_and_paginate(ChargeFilterSet, scope, {"amount_max": "9"})
    assert compiled.cache_info().currsize == 2


@pytest.mark.django_db
def test_the_api_listings_go_through_compiled_statements(
    world: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    api = client_for(credential_issue(account=world["account"]))
    compiled.cache_clear()
    with caplog.at_level(logging.WARNING, logger="api.listing_statements"):
        for url in ("/api/transactions", "/api/withdrawals"):
            response = api.get(url, {"status": "paid", "per_page": "100"})
            assert response.status_code == 200
            assert response.json()["data"]["pagination"]["total"] == 24
    # One shape each was compiled, and none fell back to the ORM (which logs).
    info = compiled.cache_info()
    assert (info.misses, info.currsize) == (2, 2)
    assert caplog.records == []


def test_forms_that_share_their_fields_validate_from_many_threads_at_once() -> None:
    form_class = ChargeFilterSet.shared_form_class()
    assert issubclass(ChargeFilterSet, ListingFilterSet)
    assert form_class(data={}).fields is form_class(data={}).fields
    failures: list[str] = []
    start = threading.Barrier(16)

    def validate(n: int) -> None:
        start.wait()
        for i in range(200):
            good = {"amount_min": str(n * 1000 + i), "created_at_end": f"2026-01-{n + 1:02d} 00:00:00"}
            form = form_class(data=good)
            if not form.is_valid() or form.cleaned_data["amount_min"] != n * 1000 + i:
                failures.append(f"{n}: {form.errors or form.cleaned_data}")
            bad = form_class(data={"amount_max": f"x{n}", "id": str(uuid.UUID(int=n))})
            if bad.is_valid() or list(bad.errors) != ["amount_max"] or bad.cleaned_data["id"] != uuid.UUID(int=n):
                failures.append(f"{n}: {bad.errors}")

    threads = [threading.Thread(target=validate, args=(n,)) for n in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
