"""``Idempotency-Key`` on both money-moving POSTs, /withdrawals and
/transactions (decisions §7): replay of the first response (successes and
refusals alike) with ``Idempotent-Replayed: true``, 422 for a reused key with
another body or a bad key, 409 while the first request runs, keys scoped to
the account and the endpoint, 24 h lifetime and the hourly purge, 5xx
stored, a claim whose request died taken over after ``WEB_TIMEOUT``. Races
run on real PostgreSQL connections from threads."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import pytest
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone
from rest_framework.test import APIClient

import payments.apis
import withdrawals.apis
from accounts.models import Account, ApiCredential, LedgerEntry
from accounts.selectors import available_balance, ledger_sum
from accounts.services import credential_issue, ledger_post
from api.idempotency import idempotency_purge
from api.models import IdempotencyRecord
from api.tasks import purge_idempotency_keys
from payments.models import Charge
from tests.conftest import client_for
from tests.factories import AccountFactory, AcquirerFactory
from tests.realworld import run_concurrently
from withdrawals import services
from withdrawals.models import Withdrawal

HEADER = "HTTP_IDEMPOTENCY_KEY"
REPLAYED = "Idempotent-Replayed"
VALIDATION = "Erro de validação nos dados fornecidos"
KEY_INVALID = "A chave de idempotência deve ter de 1 a 255 caracteres."
KEY_REUSED = "Esta chave de idempotência já foi usada com outra requisição."
IN_FLIGHT = {
    "success": False,
    "message": "Uma requisição com esta chave de idempotência ainda está em processamento.",
    "data": None,
}
CPF = "52998224725"
SEED_BALANCE = 100_000
TTL = dt.timedelta(hours=24)

pytestmark = pytest.mark.django_db


@dataclass(frozen=True)
class Endpoint:
    """One idempotent POST, with bodies that succeed, fail validation (422)
    and fail a business rule (400), and the service call behind it."""

    name: str
    url: str
    body: dict[str, Any]
    other_body: dict[str, Any]
    invalid_body: dict[str, Any]
    refused_body: dict[str, Any]
    refused_message: str
    internal_error: str
    service_module: ModuleType
    service_name: str
    model: type[Withdrawal] | type[Charge]


WITHDRAWALS = Endpoint(
    name="withdrawals",
    url="/api/withdrawals",
    body={"amount": 5000, "key_type": "cpf", "key_value": CPF, "discount_fee": True},
    other_body={"amount": 6000, "key_type": "cpf", "key_value": CPF, "discount_fee": True},
    invalid_body={"amount": 5000, "key_type": "cpf", "key_value": "123"},
    refused_body={"amount": SEED_BALANCE + 1, "key_type": "cpf", "key_value": CPF},
    refused_message="Saldo insuficiente para realizar o saque.",
    internal_error="Erro interno do servidor.",
    service_module=withdrawals.apis,
    service_name="withdrawal_request",
    model=Withdrawal,
)
TRANSACTIONS = Endpoint(
    name="transactions",
    url="/api/transactions",
    body={
        "payment_method": "pix",
        "amount": 1000,
        "buyer": {"buyer_name": "Fulano", "buyer_document": "52998224725", "buyer_phone": "11999998888"},
    },
    other_body={
        "payment_method": "pix",
        "amount": 1000,
        "buyer": {"buyer_name": "Beltrano", "buyer_document": "52998224725", "buyer_phone": "11999998888"},
    },
    invalid_body={
        "payment_method": "pix",
        "amount": 1000,
        "buyer": {"buyer_name": "Fulano", "buyer_document": "123", "buyer_phone": "11999998888"},
    },
    refused_body={
        "payment_method": "pix",
        "amount": 300_001,
        "buyer": {"buyer_name": "Fulano", "buyer_document": "52998224725", "buyer_phone": "11999998888"},
    },
    refused_message="O valor máximo permitido para transações é de R$ 3.000,00.",
    internal_error="Ocorreu um erro ao criar o pagamento.",
    service_module=payments.apis,
    service_name="charge_create",
    model=Charge,
)


@pytest.fixture(params=[WITHDRAWALS, TRANSACTIONS], ids=lambda e: e.name)
def endpoint(request: pytest.FixtureRequest, db: Any) -> Endpoint:
    endpoint: Endpoint = request.param
    return endpoint


@pytest.fixture(autouse=True)
def platform(db: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sandbox acquirer for charges; the payout is never enqueued."""
    AcquirerFactory(key="alpha", default_priority=1)
    monkeypatch.setattr(services, "_enqueue_processing", lambda withdrawal_id, countdown=0: None)


def fund(account: Account, amount: int) -> None:
    with transaction.atomic():
        ledger_post(
            account_id=account.pk,
            amount=amount,
            kind=LedgerEntry.Kind.CHARGE_PAID,
            reference=f"seed:{uuid.uuid4().hex}",
        )


def funded_account() -> Account:
    account = AccountFactory()
    fund(account, SEED_BALANCE)
    return account


@pytest.fixture
def account(db: Any) -> Account:
    return funded_account()


@pytest.fixture
def api(account: Account) -> APIClient:
    return client_for(credential_issue(account=account))


def send(client: APIClient, endpoint: Endpoint, body: Any = None, key: str | None = "key-1") -> Any:
    headers: dict[str, Any] = {} if key is None else {HEADER: key}
    payload = endpoint.body if body is None else body
    if isinstance(payload, str):
        response: Any = client.post(endpoint.url, data=payload, content_type="application/json", **headers)
    else:
        response = client.post(endpoint.url, payload, format="json", **headers)
    return response


@dataclass(frozen=True)
class Effects:
    rows: int
    ledger: int
    balance: int
    records: int


def effects(account: Account, endpoint: Endpoint) -> Effects:
    return Effects(
        rows=endpoint.model.objects.filter(account=account).count(),
        ledger=LedgerEntry.objects.filter(account=account).count(),
        balance=available_balance(account),
        records=IdempotencyRecord.objects.filter(account=account).count(),
    )


def replayed(response: Any) -> bool:
    return response.headers.get(REPLAYED) == "true"


def request_hash(body: Any) -> str:
    """The canonical form api/idempotency.py hashes: sorted keys, no spaces."""
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def reordered(value: Any) -> Any:
    """The same JSON value with every object's keys in reverse order."""
    if isinstance(value, dict):
        return {k: reordered(value[k]) for k in reversed(list(value))}
    return value


def invalid_key(message: str) -> dict[str, Any]:
    return {"success": False, "message": VALIDATION, "data": {"errors": {"idempotency_key": [message]}}}


# --------------------------------------------------------------------------- replay


def test_same_key_and_body_replays_the_first_response(api: APIClient, account: Account, endpoint: Endpoint) -> None:
    first = send(api, endpoint)
    assert first.status_code == 201, first.content
    assert REPLAYED not in first.headers
    after_first = effects(account, endpoint)
    assert (after_first.rows, after_first.records) == (1, 1)

    for _ in range(2):
        again = send(api, endpoint)
        assert again.status_code == 201
        assert again.json() == first.json()
        assert replayed(again)
        assert effects(account, endpoint) == after_first
    if endpoint is WITHDRAWALS:
        assert available_balance(account) == SEED_BALANCE - 5000 == ledger_sum(account)
        assert LedgerEntry.objects.filter(account=account, kind="withdrawal").count() == 1


def test_without_a_key_nothing_is_deduplicated(api: APIClient, account: Account, endpoint: Endpoint) -> None:
    assert [send(api, endpoint, key=None).status_code for _ in range(2)] == [201, 201]
    assert effects(account, endpoint).rows == 2
    assert effects(account, endpoint).records == 0


def test_key_order_and_whitespace_are_the_same_body(api: APIClient, account: Account, endpoint: Endpoint) -> None:
    first = send(api, endpoint, json.dumps(endpoint.body, separators=(",", ":")))
    assert first.status_code == 201
    same = json.dumps(reordered(endpoint.body), indent=4) + "\n"
    assert same != json.dumps(endpoint.body)

    again = send(api, endpoint, same)

    assert again.status_code == 201
    assert again.json() == first.json()
    assert replayed(again)
    assert effects(account, endpoint).rows == 1


def test_any_credential_of_the_account_gets_the_replay(account: Account, endpoint: Endpoint) -> None:
    first = send(client_for(credential_issue(account=account)), endpoint)
    again = send(client_for(credential_issue(account=account)), endpoint)
    assert (first.status_code, again.status_code) == (201, 201)
    assert again.json() == first.json()
    assert replayed(again)
    assert effects(account, endpoint).rows == 1


def test_different_body_is_422_and_changes_nothing(api: APIClient, account: Account, endpoint: Endpoint) -> None:
    first = send(api, endpoint)
    assert first.status_code == 201
    before = effects(account, endpoint)

    for other in (endpoint.other_body, endpoint.invalid_body, {**endpoint.body, "extra": 1}, "[]"):
        response = send(api, endpoint, other)
        assert response.status_code == 422, other
        assert response.json() == invalid_key(KEY_REUSED)
        assert REPLAYED not in response.headers
        assert effects(account, endpoint) == before

    # The key still belongs to the first request.
    again = send(api, endpoint)
    assert (again.status_code, again.json(), replayed(again)) == (201, first.json(), True)


@pytest.mark.parametrize("key", ["", "k" * 256, "x" * 1000])
def test_key_of_bad_length_is_422(api: APIClient, account: Account, endpoint: Endpoint, key: str) -> None:
    before = effects(account, endpoint)
    response = send(api, endpoint, key=key)
    assert response.status_code == 422
    assert response.json() == invalid_key(KEY_INVALID)
    assert effects(account, endpoint) == before


@pytest.mark.parametrize("key", ["k", "k" * 255, "pedido-123:tentativa/1", str(uuid.uuid4())])
def test_key_of_1_to_255_characters_is_accepted(api: APIClient, account: Account, endpoint: Endpoint, key: str) -> None:
    first = send(api, endpoint, key=key)
    assert first.status_code == 201
    again = send(api, endpoint, key=key)
    assert (again.status_code, again.json(), replayed(again)) == (201, first.json(), True)
    assert IdempotencyRecord.objects.get(account=account).key == key


def test_bad_key_is_checked_before_the_body(api: APIClient, endpoint: Endpoint) -> None:
    response = send(api, endpoint, endpoint.invalid_body, key="k" * 256)
    assert response.json() == invalid_key(KEY_INVALID)


# --------------------------------------------------------------------------- refusals are stored too


def test_validation_failure_is_stored_and_replayed(api: APIClient, account: Account, endpoint: Endpoint) -> None:
    first = send(api, endpoint, endpoint.invalid_body)
    assert first.status_code == 422
    assert set(first.json()["data"]["errors"]) != {"idempotency_key"}

    again = send(api, endpoint, endpoint.invalid_body)

    assert (again.status_code, again.json(), replayed(again)) == (422, first.json(), True)
    assert effects(account, endpoint).rows == 0
    assert IdempotencyRecord.objects.get(account=account).response_status == 422


def test_business_refusal_is_stored_and_replayed(api: APIClient, account: Account, endpoint: Endpoint) -> None:
    first = send(api, endpoint, endpoint.refused_body)
    assert first.status_code == 400
    assert first.json() == {"success": False, "message": endpoint.refused_message, "data": None}

    again = send(api, endpoint, endpoint.refused_body)

    assert (again.status_code, again.json(), replayed(again)) == (400, first.json(), True)
    assert effects(account, endpoint).rows == 0


def test_body_that_is_not_an_object_is_stored_and_replayed(
    api: APIClient, account: Account, endpoint: Endpoint
) -> None:
    first = send(api, endpoint, "[1, 2]")
    again = send(api, endpoint, "[1,2]")
    assert first.status_code == 400
    assert (again.status_code, again.json(), replayed(again)) == (400, first.json(), True)


def test_insufficient_balance_is_replayed_even_after_the_account_is_funded() -> None:
    account = AccountFactory()
    fund(account, 3000)
    api = client_for(credential_issue(account=account))
    first = send(api, WITHDRAWALS)
    assert first.status_code == 400
    fund(account, 10_000)

    again = send(api, WITHDRAWALS)
    fresh = send(api, WITHDRAWALS, key="key-2")

    assert (again.status_code, again.json(), replayed(again)) == (400, first.json(), True)
    assert (fresh.status_code, replayed(fresh)) == (201, False)
    assert available_balance(account) == 13_000 - 5000 == ledger_sum(account)
    assert Withdrawal.objects.filter(account=account).count() == 1


def test_authentication_and_permission_failures_are_not_stored(account: Account, endpoint: Endpoint) -> None:
    wrong = ApiCredential.Permission.CASHIN if endpoint is WITHDRAWALS else ApiCredential.Permission.CASHOUT
    denied = send(client_for(credential_issue(account=account, permission=wrong)), endpoint)
    unauthenticated = send(APIClient(), endpoint)
    assert (denied.status_code, unauthenticated.status_code) == (403, 401)
    assert not IdempotencyRecord.objects.exists()

    allowed = send(client_for(credential_issue(account=account)), endpoint)
    assert (allowed.status_code, replayed(allowed)) == (201, False)


# --------------------------------------------------------------------------- scope


def test_keys_are_per_account(api: APIClient, account: Account, endpoint: Endpoint) -> None:
    other = funded_account()
    mine = send(api, endpoint)
    theirs = send(client_for(credential_issue(account=other)), endpoint)

    assert (mine.status_code, theirs.status_code) == (201, 201)
    assert not replayed(theirs)
    assert theirs.json()["data"]["id"] != mine.json()["data"]["id"]
    assert effects(account, endpoint).rows == 1
    assert effects(other, endpoint).rows == 1
    # Another body under the same key is fine on another account.
    third = send(client_for(credential_issue(account=funded_account())), endpoint, endpoint.other_body)
    assert (third.status_code, replayed(third)) == (201, False)


def test_the_same_key_on_both_endpoints_is_independent(api: APIClient, account: Account) -> None:
    withdrawal = send(api, WITHDRAWALS, key="shared")
    charge = send(api, TRANSACTIONS, key="shared")
    assert (withdrawal.status_code, charge.status_code) == (201, 201)
    assert not replayed(charge)
    assert set(charge.json()["data"]) == {"id", "amount", "platform_tax", "liquid_amount", "pix"}
    assert IdempotencyRecord.objects.filter(account=account, key="shared").count() == 2
    assert (send(api, WITHDRAWALS, key="shared").json(), send(api, TRANSACTIONS, key="shared").json()) == (
        withdrawal.json(),
        charge.json(),
    )


# --------------------------------------------------------------------------- lifetime


def age_records(account: Account, by: dt.timedelta) -> None:
    IdempotencyRecord.objects.filter(account=account).update(created_at=timezone.now() - by)


def test_a_record_younger_than_24h_still_replays(api: APIClient, account: Account, endpoint: Endpoint) -> None:
    first = send(api, endpoint)
    age_records(account, TTL - dt.timedelta(minutes=1))
    again = send(api, endpoint)
    assert (again.status_code, again.json(), replayed(again)) == (201, first.json(), True)
    assert effects(account, endpoint).rows == 1


def test_a_record_older_than_24h_is_ignored(api: APIClient, account: Account, endpoint: Endpoint) -> None:
    first = send(api, endpoint)
    age_records(account, TTL + dt.timedelta(seconds=1))

    again = send(api, endpoint)

    assert (again.status_code, replayed(again)) == (201, False)
    assert again.json()["data"]["id"] != first.json()["data"]["id"]
    assert effects(account, endpoint).rows == 2
    assert IdempotencyRecord.objects.get(account=account).created_at > timezone.now() - dt.timedelta(minutes=1)
    if endpoint is WITHDRAWALS:
        assert available_balance(account) == SEED_BALANCE - 10_000 == ledger_sum(account)


def test_an_expired_key_may_carry_another_body(api: APIClient, account: Account, endpoint: Endpoint) -> None:
    send(api, endpoint)
    age_records(account, TTL + dt.timedelta(seconds=1))
    response = send(api, endpoint, endpoint.other_body)
    assert (response.status_code, replayed(response)) == (201, False)


def test_purge_deletes_only_records_older_than_24h(api: APIClient, account: Account, endpoint: Endpoint) -> None:
    send(api, endpoint, key="old")
    send(api, endpoint, key="older")
    send(api, endpoint, key="fresh")
    IdempotencyRecord.objects.filter(key="old").update(created_at=timezone.now() - TTL - dt.timedelta(seconds=1))
    IdempotencyRecord.objects.filter(key="older").update(created_at=timezone.now() - dt.timedelta(days=30))

    assert idempotency_purge() == 2
    assert list(IdempotencyRecord.objects.values_list("key", flat=True)) == ["fresh"]
    assert idempotency_purge() == 0


def test_purge_with_an_explicit_now() -> None:
    account = funded_account()
    record = IdempotencyRecord.objects.create(account=account, endpoint="withdrawals", key="k", request_hash="0" * 64)
    assert idempotency_purge(now=record.created_at + TTL) == 0
    assert idempotency_purge(now=record.created_at + TTL + dt.timedelta(microseconds=1)) == 1


def test_purge_keeps_records_for_the_configured_days_but_never_less_than_24h(settings: Any) -> None:
    account = funded_account()
    for key, age in (("day-1", TTL - dt.timedelta(seconds=1)), ("day-2", TTL * 2), ("day-4", TTL * 4)):
        IdempotencyRecord.objects.create(account=account, endpoint="withdrawals", key=key, request_hash="0" * 64)
        IdempotencyRecord.objects.filter(key=key).update(created_at=timezone.now() - age)

    settings.RETENTION_DAYS_IDEMPOTENCY_KEYS = 3
    assert idempotency_purge() == 1
    settings.RETENTION_DAYS_IDEMPOTENCY_KEYS = 0  # below the replay window: the window wins
    assert idempotency_purge() == 1
    assert list(IdempotencyRecord.objects.values_list("key", flat=True)) == ["day-1"]


def test_the_purge_task_runs_hourly_from_beat(api: APIClient, account: Account) -> None:
    schedule = settings.CELERY_BEAT_SCHEDULE
    entries = [e for e in schedule.values() if e["task"] == "api.tasks.purge_idempotency_keys"]
    assert len(entries) == 1
    assert float(entries[0]["schedule"]) <= 3600  # type: ignore[arg-type]
    assert purge_idempotency_keys.name == "api.tasks.purge_idempotency_keys"

    send(api, WITHDRAWALS)
    age_records(account, TTL + dt.timedelta(hours=1))
    assert purge_idempotency_keys() == 1
    assert not IdempotencyRecord.objects.exists()


# --------------------------------------------------------------------------- in flight


def test_a_request_in_flight_is_409(api: APIClient, account: Account, endpoint: Endpoint) -> None:
    IdempotencyRecord.objects.create(
        account=account, endpoint=endpoint.name, key="key-1", request_hash=request_hash(endpoint.body)
    )
    before = effects(account, endpoint)

    response = send(api, endpoint)

    assert response.status_code == 409
    assert response.json() == IN_FLIGHT
    assert REPLAYED not in response.headers
    assert effects(account, endpoint) == before
    # Another body under the running key is still a reused key.
    assert send(api, endpoint, endpoint.other_body).json() == invalid_key(KEY_REUSED)


def test_the_in_flight_hash_is_the_one_the_service_computes(
    api: APIClient, account: Account, endpoint: Endpoint
) -> None:
    send(api, endpoint, json.dumps(reordered(endpoint.body), indent=2))
    assert IdempotencyRecord.objects.get(account=account).request_hash == request_hash(endpoint.body)


@dataclass
class Gate:
    """Holds the first call of a service until released."""

    entered: threading.Event
    release: threading.Event
    calls: list[int]


@pytest.fixture
def gate(endpoint: Endpoint, monkeypatch: pytest.MonkeyPatch) -> Iterator[Gate]:
    state = Gate(threading.Event(), threading.Event(), [])
    original = getattr(endpoint.service_module, endpoint.service_name)

    def slow(**kwargs: Any) -> Any:
        state.calls.append(1)
        if len(state.calls) == 1:
            state.entered.set()
            if not state.release.wait(timeout=60):
                raise RuntimeError("never released")
        return original(**kwargs)

    monkeypatch.setattr(endpoint.service_module, endpoint.service_name, slow)
    yield state
    state.release.set()


@pytest.mark.django_db(transaction=True)
def test_a_repeat_while_the_first_runs_is_409(endpoint: Endpoint, gate: Gate) -> None:
    account = funded_account()
    issued = credential_issue(account=account)
    results: list[Any] = []
    errors: list[BaseException] = []

    def first_request() -> None:
        try:
            results.append(send(client_for(issued), endpoint))
        except BaseException as exc:  # noqa: BLE001 - surfaced by the assertion below
            errors.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=first_request)
    thread.start()
    assert gate.entered.wait(timeout=30)

    while_running = send(client_for(issued), endpoint)
    other_body = send(client_for(issued), endpoint, endpoint.other_body)
    assert effects(account, endpoint).rows == 0
    gate.release.set()
    thread.join(timeout=60)

    assert not thread.is_alive()
    assert not errors, errors
    assert (while_running.status_code, while_running.json()) == (409, IN_FLIGHT)
    assert REPLAYED not in while_running.headers
    assert other_body.json() == invalid_key(KEY_REUSED)
    [first] = results
    assert (first.status_code, replayed(first)) == (201, False)
    after = send(client_for(issued), endpoint)
    assert (after.status_code, after.json(), replayed(after)) == (201, first.json(), True)
    assert gate.calls == [1]
    assert effects(account, endpoint).rows == 1
    assert IdempotencyRecord.objects.filter(account=account).count() == 1
    if endpoint is WITHDRAWALS:
        assert LedgerEntry.objects.filter(account=account, kind="withdrawal").count() == 1
        assert available_balance(account) == SEED_BALANCE - 5000 == ledger_sum(account)


@pytest.mark.django_db(transaction=True)
def test_concurrent_identical_requests_run_once(endpoint: Endpoint) -> None:
    account = funded_account()
    issued = credential_issue(account=account)
    count = 10

    def request() -> Any:
        return send(client_for(issued), endpoint)

    responses = run_concurrently([request] * count)
    errors = [r for r in responses if isinstance(r, BaseException)]
    assert not errors, errors
    assert len(responses) == count
    originals = [r for r in responses if r.status_code == 201 and not replayed(r)]
    assert len(originals) == 1
    [original] = originals
    for response in responses:
        if response is original:
            continue
        if response.status_code == 409:
            assert response.json() == IN_FLIGHT
        else:
            assert (response.status_code, response.json(), replayed(response)) == (201, original.json(), True)
    assert effects(account, endpoint).rows == 1
    assert IdempotencyRecord.objects.filter(account=account).count() == 1
    record = IdempotencyRecord.objects.get(account=account)
    assert (record.state, record.response_status) == (IdempotencyRecord.State.DONE, 201)
    if endpoint is WITHDRAWALS:
        assert LedgerEntry.objects.filter(account=account, kind="withdrawal").count() == 1
        assert available_balance(account) == SEED_BALANCE - 5000 == ledger_sum(account)


# --------------------------------------------------------------------------- a request that died


def test_a_claim_left_in_flight_past_the_request_timeout_runs_again(
    api: APIClient, account: Account, endpoint: Endpoint
) -> None:
    # What a worker killed mid-request leaves: the claim, no effect (the effect
    # and the key's answer commit together).
    IdempotencyRecord.objects.create(
        account=account, endpoint=endpoint.name, key="key-1", request_hash=request_hash(endpoint.body)
    )
    age_records(account, dt.timedelta(seconds=settings.WEB_TIMEOUT - 5))
    assert send(api, endpoint).status_code == 409  # it may still be running
    age_records(account, dt.timedelta(seconds=settings.WEB_TIMEOUT + 1))

    response = send(api, endpoint)

    assert (response.status_code, replayed(response)) == (201, False), response.content
    assert effects(account, endpoint).rows == 1
    record = IdempotencyRecord.objects.get(account=account)
    assert (record.state, record.response_status) == (IdempotencyRecord.State.DONE, 201)
    again = send(api, endpoint)
    assert (again.status_code, again.json(), replayed(again)) == (201, response.json(), True)
    if endpoint is WITHDRAWALS:
        assert available_balance(account) == SEED_BALANCE - 5000 == ledger_sum(account)


def test_the_effect_and_the_answer_commit_together(
    api: APIClient, account: Account, endpoint: Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The answer is written inside the effect's transaction: a failure after
    # the row was written but before COMMIT leaves neither.
    original = getattr(endpoint.service_module, endpoint.service_name)

    def fails_before_commit(**kwargs: Any) -> Any:
        settle = kwargs["in_transaction"]

        def then_fail(created: Any) -> None:
            settle(created)
            assert IdempotencyRecord.objects.get(account=account).response_status == 201
            raise RuntimeError("lost before COMMIT")

        return original(**{**kwargs, "in_transaction": then_fail})

    monkeypatch.setattr(endpoint.service_module, endpoint.service_name, fails_before_commit)
    failed = send(api, endpoint)

    assert failed.status_code == 500
    assert effects(account, endpoint).rows == 0
    assert IdempotencyRecord.objects.get(account=account).response_status == 500


@pytest.mark.django_db(transaction=True)
def test_a_request_that_outlived_its_claim_commits_nothing(endpoint: Endpoint, gate: Gate) -> None:
    account = funded_account()
    issued = credential_issue(account=account)
    results: list[Any] = []

    def first_request() -> None:
        try:
            results.append(send(client_for(issued), endpoint))
        finally:
            connection.close()

    thread = threading.Thread(target=first_request)
    thread.start()
    assert gate.entered.wait(timeout=30)
    age_records(account, dt.timedelta(seconds=settings.WEB_TIMEOUT + 1))
    retry = send(client_for(issued), endpoint)  # takes the key over and runs
    gate.release.set()
    thread.join(timeout=60)

    assert (retry.status_code, replayed(retry)) == (201, False)
    [late] = results
    # The first request reached its COMMIT after the retry took its key: it
    # rolled back, and says so with the in-flight answer.
    assert (late.status_code, late.json()) == (409, IN_FLIGHT)
    assert effects(account, endpoint).rows == 1
    again = send(client_for(issued), endpoint)
    assert (again.status_code, again.json(), replayed(again)) == (201, retry.json(), True)
    if endpoint is WITHDRAWALS:
        assert LedgerEntry.objects.filter(account=account, kind="withdrawal").count() == 1
        assert available_balance(account) == SEED_BALANCE - 5000 == ledger_sum(account)


@pytest.mark.django_db(transaction=True)
def test_a_connection_killed_mid_request_still_finalises_the_key(
    endpoint: Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The handler's failure kills this thread's connection; the key's answer
    # is stored on a fresh one, so a retry gets it instead of 409 for 24 h.
    account = funded_account()
    api = client_for(credential_issue(account=account))

    def connection_terminated(**kwargs: Any) -> Any:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(pg_backend_pid())")
        raise AssertionError("the backend should be gone")

    monkeypatch.setattr(endpoint.service_module, endpoint.service_name, connection_terminated)
    failed = send(api, endpoint)
    monkeypatch.undo()

    assert failed.status_code == 500
    assert failed.json() == {"success": False, "message": endpoint.internal_error, "data": None}
    again = send(api, endpoint)
    assert (again.status_code, again.json(), replayed(again)) == (500, failed.json(), True)
    assert effects(account, endpoint).rows == 0
    if endpoint is WITHDRAWALS:
        assert available_balance(account) == SEED_BALANCE == ledger_sum(account)


# --------------------------------------------------------------------------- 5xx


def test_a_500_is_stored_and_replayed(
    api: APIClient, account: Account, endpoint: Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A failure after the debit committed must not let a retry debit again:
    # like Stripe, every answer, 5xx included, is kept for the key.
    calls: list[int] = []

    def fails(**kwargs: Any) -> Any:
        calls.append(1)
        raise RuntimeError("database went away")

    monkeypatch.setattr(endpoint.service_module, endpoint.service_name, fails)

    failed = send(api, endpoint)
    assert failed.status_code == 500
    assert failed.json() == {"success": False, "message": endpoint.internal_error, "data": None}
    assert "database went away" not in failed.content.decode()
    again = send(api, endpoint)
    assert (again.status_code, again.json(), replayed(again)) == (500, failed.json(), True)
    assert len(calls) == 1
    assert effects(account, endpoint).rows == 0


def test_a_replay_never_calls_the_service(api: APIClient, endpoint: Endpoint, monkeypatch: pytest.MonkeyPatch) -> None:
    first = send(api, endpoint)
    assert first.status_code == 201
    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(endpoint.service_module, endpoint.service_name, lambda **kwargs: calls.append(kwargs))

    again = send(api, endpoint)

    assert (again.status_code, again.json(), replayed(again)) == (201, first.json(), True)
    assert calls == []


# --------------------------------------------------------------------------- rate limit (the other half of §7)


def test_a_credential_over_600_requests_a_minute_gets_429(api: APIClient, monkeypatch: pytest.MonkeyPatch) -> None:
    # The window's clock is pinned mid-minute: 601 requests under load may
    # otherwise straddle a minute boundary and land in a fresh window.
    from core import ratelimit

    pinned = (time.time() // 60) * 60 + 30
    monkeypatch.setattr(ratelimit, "clock", lambda: pinned)
    statuses = [api.get("/api/withdrawals/balance").status_code for _ in range(600)]
    assert statuses == [200] * 600
    response = api.get("/api/withdrawals/balance")
    assert response.status_code == 429
    assert response.json()["success"] is False
    assert response.json()["data"] is None
    assert int(response.headers["Retry-After"]) >= 1


@pytest.mark.django_db(transaction=True)
def test_concurrent_requests_never_pass_the_limit(api: APIClient, settings: Any) -> None:
    """50 concurrent requests against a limit of 10: exactly 10 pass, the
    others get the 429 envelope (the Redis counter is atomic)."""

    settings.API_RATE_LIMIT_PER_MINUTE = 10
    statuses = run_concurrently([lambda: api.get("/api/withdrawals/balance").status_code] * 50)
    # A request that straddles a minute boundary may land in a fresh window.
    assert statuses.count(200) in (10, 11, 20)
    assert statuses.count(200) + statuses.count(429) == 50
    throttled = api.get("/api/withdrawals/balance")
    assert throttled.status_code == 429
    assert throttled.json() == {
        "success": False,
        "message": "Limite de requisições excedido. Tente novamente em instantes.",
        "data": None,
    }
