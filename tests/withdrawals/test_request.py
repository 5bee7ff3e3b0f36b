"""POST /api/withdrawals as a client sees it (decisions §1, §2, §5): the
check order (401 → 403 → 422 → 400s) with exact bodies, the creation body,
the debit and its ledger entry, the key rules of each type, the effective
minimum, fees, the per-request / daily / balance rules in their order, the
America/Sao_Paulo day of the daily limit, and the balance under real
PostgreSQL concurrency. After every failure nothing has changed: no
withdrawal, same balance, same ledger, nothing enqueued."""

from __future__ import annotations

import datetime as dt
import functools
import random
import re
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone
from rest_framework.test import APIClient
from validate_docbr import CNPJ

from accounts.models import Account, AccountBalance, ApiCredential, LedgerEntry
from accounts.selectors import available_balance, ledger_sum
from accounts.services import account_set_blocked, credential_issue, ledger_post
from tests import realworld
from tests.conftest import client_for
from tests.factories import AccountFactory
from tests.helpers import SAO_PAULO, local
from tests.withdrawals.conftest import snapshot
from withdrawals import services
from withdrawals.models import Withdrawal, WithdrawalStatus
from withdrawals.selectors import day_start, withdrawn_today

URL = "/api/withdrawals"
BALANCE_URL = "/api/withdrawals/balance"


VALIDATION = "Erro de validação nos dados fornecidos"
REQUIRED = "Este campo é obrigatório."
NOT_INTEGER = "Um número inteiro válido é exigido."
NOT_BOOLEAN = "Deve ser um valor booleano válido."
INVALID_KEY = "Chave PIX inválida para o tipo informado."
NOTHING_LEFT = "O valor do saque não cobre a taxa de saque."
PER_REQUEST = "O valor excede o limite por solicitação de saque."
DAILY = "O valor excede o limite diário de saques."
INSUFFICIENT = "Saldo insuficiente para realizar o saque."
CREATED = "Saque solicitado com sucesso."

MISSING_KEYS = {"error": "Credenciais inválidas", "message": "Chave pública e chave privada são obrigatórias"}
INVALID_KEYS = {"error": "Credenciais inválidas", "message": "Chave não encontrada ou inativa"}
NO_PERMISSION = "Esta credencial não tem permissão para realizar esta operação."
NOT_APPROVED = "Sua conta precisa estar aprovada para usar esta funcionalidade."
BLOCKED = "Sua conta está bloqueada. Não é permitido realizar esta ação."
BAD_BODY = {"success": False, "message": "Corpo da requisição inválido.", "data": None}

CPF = "52998224725"
CPF_FORMATTED = "529.982.247-25"
CNPJ_NUMERIC = "11222333000181"
# The example of Receita Federal's alphanumeric CNPJ (IN RFB 2.229/2024).
CNPJ_ALPHANUMERIC = "12ABC34501DE35"
SEED_BALANCE = 1_000_000
TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$")

pytestmark = pytest.mark.django_db


# --------------------------------------------------------------------------- helpers


def fund(account: Account, amount: int) -> None:
    with transaction.atomic():
        ledger_post(
            account_id=account.pk,
            amount=amount,
            kind=LedgerEntry.Kind.CHARGE_PAID,
            reference=f"seed:{uuid.uuid4().hex}",
        )


def account_with_balance(balance: int = SEED_BALANCE, **fields: Any) -> Account:
    account = AccountFactory(**fields)
    if balance:
        fund(account, balance)
    return account


@pytest.fixture
def account(db: Any) -> Account:
    return account_with_balance()


@pytest.fixture
def api(account: Account) -> APIClient:
    return client_for(credential_issue(account=account))


def client_of(account: Account, permission: str = ApiCredential.Permission.ALL) -> APIClient:
    return client_for(credential_issue(account=account, permission=permission))


def post(client: APIClient, body: Any) -> Any:
    response: Any = client.post(URL, body, format="json")
    return response


def body(amount: int = 5000, **fields: Any) -> dict[str, Any]:
    return {"amount": amount, "key_type": "cpf", "key_value": CPF, **fields}


def error(message: str) -> dict[str, Any]:
    return {"success": False, "message": message, "data": None}


def invalid(errors: dict[str, list[str]]) -> dict[str, Any]:
    return {"success": False, "message": VALIDATION, "data": {"errors": errors}}


@pytest.fixture
def enqueued(monkeypatch: pytest.MonkeyPatch) -> list[uuid.UUID]:
    """The withdrawals handed to the background processing on commit."""
    calls: list[uuid.UUID] = []

    def record(withdrawal_id: uuid.UUID, countdown: float = 0) -> None:
        calls.append(withdrawal_id)

    monkeypatch.setattr(services, "_enqueue_processing", record)
    return calls


def make_withdrawal(
    account: Account,
    amount: int,
    status: str = WithdrawalStatus.PENDING,
    created_at: dt.datetime | None = None,
) -> Withdrawal:
    withdrawal = Withdrawal.objects.create(
        account=account,
        amount=amount,
        fee=0,
        discount_fee=True,
        total_debit=amount,
        liquid_amount=amount,
        pix_key_type="cpf",
        pix_key=CPF,
        status=status,
        idempotency_id=uuid.uuid4().hex,
    )
    if created_at is not None:
        Withdrawal.objects.filter(pk=withdrawal.pk).update(created_at=created_at)
        withdrawal.refresh_from_db()
    return withdrawal


# --------------------------------------------------------------------------- credentials and account (401, 403)


def test_missing_credentials_is_401(account: Account, refused: Callable[..., None]) -> None:
    refused(APIClient(), account, body(), 401, MISSING_KEYS)


def test_wrong_secret_is_401(account: Account, refused: Callable[..., None]) -> None:
    issued = credential_issue(account=account)
    client = APIClient()
    client.credentials(HTTP_X_PUBLIC_KEY=issued.credential.public_key, HTTP_X_SECRET_KEY=issued.secret_key + "x")
    refused(client, account, body(), 401, INVALID_KEYS)


def test_cashin_credential_is_403(account: Account, refused: Callable[..., None]) -> None:
    refused(client_of(account, ApiCredential.Permission.CASHIN), account, body(), 403, error(NO_PERMISSION))


@pytest.mark.parametrize("permission", [ApiCredential.Permission.CASHOUT, ApiCredential.Permission.ALL])
def test_cashout_and_all_credentials_may_withdraw(account: Account, permission: str) -> None:
    response = post(client_of(account, permission), body())
    assert response.status_code == 201, response.content


@pytest.mark.parametrize("status", [Account.Status.PENDING, Account.Status.REJECTED])
def test_account_not_approved_is_403(status: str, refused: Callable[..., None]) -> None:
    account = account_with_balance(status=status)
    refused(client_of(account), account, body(), 403, error(NOT_APPROVED))


def test_blocked_account_is_403(account: Account, refused: Callable[..., None]) -> None:
    account_set_blocked(account=account, blocked=True)
    refused(client_of(account), account, body(), 403, error(BLOCKED))


def test_credentials_are_checked_before_permission(account: Account, refused: Callable[..., None]) -> None:
    issued = credential_issue(account=account, permission=ApiCredential.Permission.CASHIN)
    client = APIClient()
    client.credentials(HTTP_X_PUBLIC_KEY=issued.credential.public_key, HTTP_X_SECRET_KEY="sk_wrong")
    refused(client, account, {"amount": "x"}, 401, INVALID_KEYS)


def test_permission_is_checked_before_the_account_and_the_body(refused: Callable[..., None]) -> None:
    account = account_with_balance(status=Account.Status.PENDING, is_blocked=True)
    refused(client_of(account, ApiCredential.Permission.CASHIN), account, [], 403, error(NO_PERMISSION))


def test_approval_is_checked_before_blocked_and_the_body(refused: Callable[..., None]) -> None:
    account = account_with_balance(status=Account.Status.REJECTED, is_blocked=True)
    refused(client_of(account), account, {"amount": "x"}, 403, error(NOT_APPROVED))


def test_blocked_is_checked_before_the_body(account: Account, refused: Callable[..., None]) -> None:
    account_set_blocked(account=account, blocked=True)
    refused(client_of(account), account, {}, 403, error(BLOCKED))


# --------------------------------------------------------------------------- success


def test_created_body_debit_and_ledger(
    api: APIClient, account: Account, enqueued: list[uuid.UUID], django_capture_on_commit_callbacks: Any
) -> None:
    before = snapshot(account)
    with django_capture_on_commit_callbacks(execute=True):
        response = post(api, body(7000))

    assert response.status_code == 201, response.content
    payload = response.json()
    assert set(payload) == {"success", "message", "data"}
    assert (payload["success"], payload["message"]) == (True, CREATED)
    data = payload["data"]
    withdrawal = Withdrawal.objects.get()
    assert data == {
        "id": str(withdrawal.pk),
        "amount": 7000,
        "liquid_amount": 7000,
        "pix_key_type": "cpf",
        "pix_key": CPF,
        "status": "pending",
        "created_at": local(withdrawal.created_at),
    }
    assert TIMESTAMP.match(data["created_at"])
    assert (withdrawal.account_id, withdrawal.status, withdrawal.fee) == (account.pk, WithdrawalStatus.PENDING, 0)
    assert (withdrawal.total_debit, withdrawal.discount_fee) == (7000, True)
    assert (withdrawal.e2e_id, withdrawal.paid_at) == (None, None)
    assert re.fullmatch(r"[a-zA-Z0-9]{1,35}", withdrawal.idempotency_id)

    assert available_balance(account) == before.balance - 7000 == ledger_sum(account)
    entry = LedgerEntry.objects.filter(account=account).exclude(id__in=[e[0] for e in before.ledger]).get()
    assert (entry.kind, entry.amount, entry.balance_after) == ("withdrawal", -7000, before.balance - 7000)
    assert enqueued == [withdrawal.pk]


def test_nothing_is_enqueued_when_the_account_needs_manual_approval(
    enqueued: list[uuid.UUID], django_capture_on_commit_callbacks: Any
) -> None:
    account = account_with_balance(withdrawals_need_approval=True)
    with django_capture_on_commit_callbacks(execute=True):
        response = post(client_of(account), body())
    assert response.status_code == 201
    assert Withdrawal.objects.get().status == WithdrawalStatus.PENDING
    assert available_balance(account) == SEED_BALANCE - 5000
    assert enqueued == []


def test_unknown_fields_are_ignored(api: APIClient) -> None:
    response = post(api, body(status="paid", fee=0, id=str(uuid.uuid4()), liquid_amount=1))
    assert response.status_code == 201
    assert response.json()["data"]["status"] == "pending"
    assert response.json()["data"]["liquid_amount"] == 5000


def test_withdrawing_the_whole_balance(refused: Callable[..., None]) -> None:
    account = account_with_balance(12_345)
    response = post(client_of(account), body(12_345))
    assert response.status_code == 201
    assert available_balance(account) == 0 == ledger_sum(account)
    refused(client_of(account), account, body(1000), 400, error(INSUFFICIENT))


# --------------------------------------------------------------------------- fields (422) and body (400)


@pytest.mark.parametrize(
    ("payload", "errors"),
    [
        ({"key_value": CPF}, {"amount": [REQUIRED]}),
        ({"amount": 5000}, {"key_value": [REQUIRED]}),
        ({"key_type": "cpf"}, {"amount": [REQUIRED], "key_value": [REQUIRED]}),
        ({"amount": "1000", "key_value": CPF}, {"amount": [NOT_INTEGER]}),
        ({"amount": 1000.5, "key_value": CPF}, {"amount": [NOT_INTEGER]}),
        ({"amount": 1000.0, "key_value": CPF}, {"amount": [NOT_INTEGER]}),
        ({"amount": True, "key_value": CPF}, {"amount": [NOT_INTEGER]}),
        ({"amount": [1000], "key_value": CPF}, {"amount": [NOT_INTEGER]}),
        ({"amount": 5000, "key_value": CPF, "discount_fee": "true"}, {"discount_fee": [NOT_BOOLEAN]}),
        ({"amount": 5000, "key_value": CPF, "discount_fee": 1}, {"discount_fee": [NOT_BOOLEAN]}),
        ({"amount": 5000, "key_value": CPF, "discount_fee": 0}, {"discount_fee": [NOT_BOOLEAN]}),
        ({"amount": 5000, "key_value": CPF, "discount_fee": "false"}, {"discount_fee": [NOT_BOOLEAN]}),
    ],
)
def test_field_errors(
    api: APIClient, account: Account, refused: Callable[..., None], payload: dict[str, Any], errors: dict[str, Any]
) -> None:
    refused(api, account, payload, 422, invalid(errors))


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"amount": None, "key_value": CPF}, "amount"),
        ({"amount": 5000, "key_value": None}, "key_value"),
        ({"amount": 5000, "key_value": 52998224725}, "key_value"),
        ({"amount": 5000, "key_value": ""}, "key_value"),
        ({"amount": 5000, "key_value": CPF, "discount_fee": None}, "discount_fee"),
        ({"amount": 5000, "key_value": CPF, "key_type": "evp"}, "key_type"),
        ({"amount": 5000, "key_value": CPF, "key_type": "CPF"}, "key_type"),
        ({"amount": 5000, "key_value": CPF, "key_type": ""}, "key_type"),
        ({"amount": 5000, "key_value": CPF, "key_type": 1}, "key_type"),
        ({"amount": 5000, "key_value": CPF, "key_type": None}, "key_type"),
    ],
)
def test_field_errors_name_the_field(api: APIClient, account: Account, payload: dict[str, Any], field: str) -> None:
    before = snapshot(account)
    response = post(api, payload)
    assert response.status_code == 422, response.content
    result = response.json()
    assert (result["success"], result["message"]) == (False, VALIDATION)
    assert set(result["data"]["errors"]) == {field}
    assert all(isinstance(m, str) and m for m in result["data"]["errors"][field])
    assert snapshot(account) == before


def test_key_type_defaults_to_cpf(api: APIClient, account: Account, refused: Callable[..., None]) -> None:
    response = post(api, {"amount": 5000, "key_value": CPF_FORMATTED})
    assert response.status_code == 201
    assert (response.json()["data"]["pix_key_type"], response.json()["data"]["pix_key"]) == ("cpf", CPF)
    # An e-mail without key_type is read as a CPF, so it is not a valid key.
    refused(
        api, account, {"amount": 5000, "key_value": "fulano@example.com"}, 422, invalid({"key_value": [INVALID_KEY]})
    )


def test_discount_fee_defaults_to_true() -> None:
    account = account_with_balance(withdrawal_fee_fixed=250)
    response = post(client_of(account), {"amount": 5000, "key_value": CPF})
    assert response.status_code == 201
    assert response.json()["data"]["liquid_amount"] == 4750
    assert Withdrawal.objects.get().discount_fee is True
    assert available_balance(account) == SEED_BALANCE - 5000


@pytest.mark.parametrize(
    "raw", ["", "   ", "[]", '[{"amount": 5000}]', "1", '"x"', "null", "true", "{", "{'amount': 1}"]
)
def test_body_that_is_not_a_json_object_is_400(api: APIClient, account: Account, raw: str) -> None:
    before = snapshot(account)
    response = api.post(URL, data=raw, content_type="application/json")
    assert response.status_code == 400
    assert response.json() == BAD_BODY
    assert snapshot(account) == before


def test_body_without_content_type_is_still_read_as_json(api: APIClient) -> None:
    response = api.post(URL, data=b'{"amount": 5000, "key_value": "52998224725"}', content_type="text/plain")
    assert response.status_code == 201


# --------------------------------------------------------------------------- key rules


@pytest.mark.parametrize(
    ("key_type", "value", "stored"),
    [
        ("cpf", CPF, CPF),
        ("cpf", CPF_FORMATTED, CPF),
        ("cpf", f"  {CPF_FORMATTED} ", CPF),
        ("cnpj", CNPJ_NUMERIC, CNPJ_NUMERIC),
        ("cnpj", "11.222.333/0001-81", CNPJ_NUMERIC),
        ("cnpj", CNPJ_ALPHANUMERIC, CNPJ_ALPHANUMERIC),
        ("cnpj", "12.ABC.345/01DE-35", CNPJ_ALPHANUMERIC),
        ("cnpj", "12.abc.345/01de-35", CNPJ_ALPHANUMERIC),
        ("email", "fulano@example.com", "fulano@example.com"),
        ("email", "Fulano.De.Tal@Example.COM.br", "fulano.de.tal@example.com.br"),
        ("email", "a" * 64 + "@exemplos.com", "a" * 64 + "@exemplos.com"),  # exactly 77
        ("phone", "+5511987654321", "+5511987654321"),
        ("phone", "11987654321", "+5511987654321"),
        ("phone", "1133334444", "+551133334444"),
        ("phone", "+551133334444", "+551133334444"),
        ("random", "123e4567-e89b-12d3-a456-426614174000", "123e4567-e89b-12d3-a456-426614174000"),
        ("random", "0190a6e2-7c1e-7b3a-9c1e-2f3a4b5c6d7e", "0190a6e2-7c1e-7b3a-9c1e-2f3a4b5c6d7e"),
        ("random", "6F9619FF-8B86-D011-B42D-00C04FC964FF", "6f9619ff-8b86-d011-b42d-00c04fc964ff"),
    ],
)
def test_valid_keys_and_their_stored_form(api: APIClient, key_type: str, value: str, stored: str) -> None:
    response = post(api, {"amount": 5000, "key_type": key_type, "key_value": value})
    assert response.status_code == 201, response.content
    assert (response.json()["data"]["pix_key_type"], response.json()["data"]["pix_key"]) == (key_type, stored)
    withdrawal = Withdrawal.objects.get()
    assert (withdrawal.pix_key_type, withdrawal.pix_key) == (key_type, stored)


def test_generated_keys_are_accepted(api: APIClient) -> None:
    for value in (str(uuid.uuid1()), str(uuid.uuid4()).upper()):
        response = post(api, {"amount": 1000, "key_type": "random", "key_value": value})
        assert response.status_code == 201, (value, response.content)
        assert response.json()["data"]["pix_key"] == value.lower()
    cnpjs = [CNPJ().generate(), CNPJ().generate(digits_only=False), CNPJ().generate(mask=True, digits_only=False)]
    for value in cnpjs:
        response = post(api, {"amount": 1000, "key_type": "cnpj", "key_value": value})
        assert response.status_code == 201, (value, response.content)
        assert response.json()["data"]["pix_key"] == re.sub(r"[./-]", "", value).upper()


@pytest.mark.parametrize(
    ("key_type", "value"),
    [
        ("cpf", "52998224724"),
        ("cpf", "529.982.247-24"),
        ("cpf", "11111111111"),
        ("cpf", "5299822472"),
        ("cpf", "529982247250"),
        ("cpf", "5299822472a"),
        ("cpf", CNPJ_NUMERIC),
        ("cpf", "fulano@example.com"),
        ("cnpj", "11222333000182"),
        ("cnpj", "11.222.333/0001-8"),
        ("cnpj", "12ABC34501DE36"),
        ("cnpj", "12ABC34501DE3"),
        ("cnpj", "00000000000000"),
        ("cnpj", CPF),
        ("email", "fulano"),
        ("email", "fulano@"),
        ("email", "@example.com"),
        ("email", "fulano@@example.com"),
        ("email", "fulano de tal@example.com"),
        ("email", "fulano@example"),
        ("email", CPF),
        ("phone", "+14155550100"),
        ("phone", "123"),
        ("phone", "11887654321"),
        ("phone", "+5511887654321"),
        ("phone", "0987654321"),
        ("phone", "113333444"),
        ("phone", "+55119876543210"),
        ("phone", "fulano@example.com"),
        ("random", "not-a-uuid"),
        ("random", "123e4567-e89b-12d3-a456-42661417400g"),
        ("random", "123e4567-e89b-12d3-a456-4266141740"),
        ("random", CPF),
    ],
)
def test_invalid_keys(
    api: APIClient, account: Account, refused: Callable[..., None], key_type: str, value: str
) -> None:
    refused(
        api,
        account,
        {"amount": 5000, "key_type": key_type, "key_value": value},
        422,
        invalid({"key_value": [INVALID_KEY]}),
    )


@pytest.mark.parametrize(
    ("key_type", "value"),
    [
        ("email", "a" * 65 + "@exemplos.com"),
        ("email", "fulano@" + "b" * 60 + ".example.com"),
        ("cpf", "1" * 78),
        ("cnpj", "1" * 78),
        ("phone", "1" * 78),
        ("random", "1" * 78),
    ],
)
def test_a_key_longer_than_77_is_a_422_under_key_value(
    api: APIClient, account: Account, key_type: str, value: str
) -> None:
    before = snapshot(account)
    response = post(api, {"amount": 5000, "key_type": key_type, "key_value": value})
    assert response.status_code == 422
    assert set(response.json()["data"]["errors"]) == {"key_value"}
    assert snapshot(account) == before


def test_a_key_longer_than_77_gets_the_key_rule_message(
    api: APIClient, account: Account, refused: Callable[..., None]
) -> None:
    refused(
        api,
        account,
        {"amount": 5000, "key_type": "email", "key_value": "a" * 65 + "@exemplos.com"},
        422,
        invalid({"key_value": [INVALID_KEY]}),
    )


# --------------------------------------------------------------------------- minimum


def test_platform_minimum_is_1000(api: APIClient, account: Account, refused: Callable[..., None]) -> None:
    refused(api, account, body(999), 422, invalid({"amount": ["O valor mínimo para saque é de R$ 10,00."]}))
    assert post(api, body(1000)).status_code == 201


@pytest.mark.parametrize("amount", [0, -1, -5000])
def test_zero_and_negative_amounts_are_below_the_minimum(
    api: APIClient, account: Account, refused: Callable[..., None], amount: int
) -> None:
    refused(api, account, body(amount), 422, invalid({"amount": ["O valor mínimo para saque é de R$ 10,00."]}))


def test_account_minimum_above_the_platform_one_wins(refused: Callable[..., None]) -> None:
    account = account_with_balance(withdrawal_minimum=2000)
    client = client_of(account)
    refused(client, account, body(1999), 422, invalid({"amount": ["O valor mínimo para saque é de R$ 20,00."]}))
    assert client.get(BALANCE_URL).json()["data"]["minimum_withdrawal"] == 2000
    assert post(client, body(2000)).status_code == 201


def test_account_minimum_below_the_platform_one_is_raised_to_it(refused: Callable[..., None]) -> None:
    account = account_with_balance(withdrawal_minimum=500)
    client = client_of(account)
    refused(client, account, body(999), 422, invalid({"amount": ["O valor mínimo para saque é de R$ 10,00."]}))
    assert client.get(BALANCE_URL).json()["data"]["minimum_withdrawal"] == 1000
    assert post(client, body(1000)).status_code == 201


def test_minimum_message_formats_thousands(refused: Callable[..., None]) -> None:
    account = account_with_balance(withdrawal_minimum=123_456)
    refused(
        client_of(account),
        account,
        body(123_455),
        422,
        invalid({"amount": ["O valor mínimo para saque é de R$ 1.234,56."]}),
    )


def test_minimum_is_a_field_error_before_the_business_rules(refused: Callable[..., None]) -> None:
    # Zero balance and a per-request limit below the amount: the 422 answers first.
    account = account_with_balance(0, withdrawal_per_request_limit=500, withdrawal_daily_limit=0)
    refused(
        client_of(account), account, body(999), 422, invalid({"amount": ["O valor mínimo para saque é de R$ 10,00."]})
    )


def test_invalid_key_is_a_field_error_before_the_business_rules(refused: Callable[..., None]) -> None:
    account = account_with_balance(0, withdrawal_per_request_limit=500)
    refused(client_of(account), account, body(5000, key_value="123"), 422, invalid({"key_value": [INVALID_KEY]}))


# --------------------------------------------------------------------------- fees


@pytest.mark.parametrize(
    ("fixed", "bps", "amount", "discount_fee", "fee", "debit", "liquid"),
    [
        (100, 0, 5000, True, 100, 5000, 4900),
        (100, 0, 5000, False, 100, 5100, 5000),
        (0, 150, 1100, True, 17, 1100, 1083),  # 16.5 rounds half up to 17
        (0, 150, 1033, True, 15, 1033, 1018),  # 15.495 rounds down
        (0, 150, 1100, False, 17, 1117, 1100),
        (0, 50, 1100, True, 6, 1100, 1094),  # 5.5 → 6
        (0, 50, 1099, True, 5, 1099, 1094),  # 5.495 → 5
        (250, 199, 10_000, True, 449, 10_000, 9551),
        (250, 199, 10_000, False, 449, 10_449, 10_000),
        (0, 0, 5000, False, 0, 5000, 5000),
        (999, 0, 1000, True, 999, 1000, 1),  # exactly one centavo left
    ],
)
def test_fees(fixed: int, bps: int, amount: int, discount_fee: bool, fee: int, debit: int, liquid: int) -> None:
    account = account_with_balance(withdrawal_fee_fixed=fixed, withdrawal_fee_bps=bps)
    response = post(client_of(account), body(amount, discount_fee=discount_fee))
    assert response.status_code == 201, response.content
    assert (response.json()["data"]["amount"], response.json()["data"]["liquid_amount"]) == (amount, liquid)
    withdrawal = Withdrawal.objects.get()
    assert (withdrawal.fee, withdrawal.total_debit, withdrawal.liquid_amount) == (fee, debit, liquid)
    assert withdrawal.discount_fee is discount_fee
    assert available_balance(account) == SEED_BALANCE - debit == ledger_sum(account)
    assert LedgerEntry.objects.get(account=account, kind="withdrawal").amount == -debit


@pytest.mark.parametrize(("fixed", "bps", "amount"), [(1000, 0, 1000), (1500, 0, 1200), (0, 10_000, 1000)])
def test_nothing_left_after_the_fee_is_422(refused: Callable[..., None], fixed: int, bps: int, amount: int) -> None:
    account = account_with_balance(withdrawal_fee_fixed=fixed, withdrawal_fee_bps=bps)
    refused(client_of(account), account, body(amount), 422, invalid({"amount": [NOTHING_LEFT]}))
    # Without discounting the fee the recipient gets the whole amount.
    response = post(client_of(account), body(amount, discount_fee=False))
    assert response.status_code == 201
    assert response.json()["data"]["liquid_amount"] == amount


# --------------------------------------------------------------------------- business rules (400) and their order


def test_per_request_limit(refused: Callable[..., None]) -> None:
    account = account_with_balance(withdrawal_per_request_limit=5000)
    client = client_of(account)
    refused(client, account, body(5001), 400, error(PER_REQUEST))
    assert post(client, body(5000)).status_code == 201


def test_per_request_limit_compares_the_amount_not_the_total() -> None:
    account = account_with_balance(withdrawal_per_request_limit=5000, withdrawal_fee_fixed=100)
    response = post(client_of(account), body(5000, discount_fee=False))
    assert response.status_code == 201
    assert Withdrawal.objects.get().total_debit == 5100


def test_daily_limit(refused: Callable[..., None]) -> None:
    account = account_with_balance(withdrawal_daily_limit=10_000)
    client = client_of(account)
    assert post(client, body(6000)).status_code == 201
    refused(client, account, body(4001), 400, error(DAILY))
    assert post(client, body(4000)).status_code == 201
    refused(client, account, body(1000), 400, error(DAILY))
    assert client.get(BALANCE_URL).json()["data"]["daily_limit_remaining"] == 0


def test_daily_limit_sums_amounts_not_totals() -> None:
    account = account_with_balance(withdrawal_daily_limit=10_000, withdrawal_fee_fixed=500)
    client = client_of(account)
    assert post(client, body(5000, discount_fee=False)).status_code == 201
    assert client.get(BALANCE_URL).json()["data"]["daily_limit_remaining"] == 5000
    assert post(client, body(5000, discount_fee=False)).status_code == 201
    assert available_balance(account) == SEED_BALANCE - 11_000


def test_insufficient_balance(refused: Callable[..., None]) -> None:
    account = account_with_balance(5000)
    client = client_of(account)
    refused(client, account, body(5001), 400, error(INSUFFICIENT))
    assert post(client, body(5000)).status_code == 201


def test_balance_compares_the_total_debit(refused: Callable[..., None]) -> None:
    account = account_with_balance(5000, withdrawal_fee_fixed=100)
    client = client_of(account)
    # 4950 alone fits, 4950 + 100 does not.
    refused(client, account, body(4950, discount_fee=False), 400, error(INSUFFICIENT))
    assert post(client, body(4950)).status_code == 201  # the fee comes out of the transfer
    assert available_balance(account) == 50


def test_balance_exactly_covering_amount_plus_fee() -> None:
    account = account_with_balance(5000, withdrawal_fee_fixed=100)
    response = post(client_of(account), body(4900, discount_fee=False))
    assert response.status_code == 201
    assert available_balance(account) == 0 == ledger_sum(account)


def test_a_negative_balance_refuses_every_withdrawal(refused: Callable[..., None]) -> None:
    account = account_with_balance(0)
    with transaction.atomic():
        ledger_post(account_id=account.pk, amount=-500, kind=LedgerEntry.Kind.CHARGE_REFUND, reference="seed:neg")
    refused(client_of(account), account, body(1000), 400, error(INSUFFICIENT))


@pytest.mark.parametrize(
    ("fields", "balance", "done_today", "amount", "message"),
    [
        # per-request + daily
        ({"withdrawal_per_request_limit": 5000, "withdrawal_daily_limit": 5000}, SEED_BALANCE, 0, 6000, PER_REQUEST),
        # per-request + balance
        ({"withdrawal_per_request_limit": 5000}, 3000, 0, 6000, PER_REQUEST),
        # daily + balance
        ({"withdrawal_daily_limit": 10_000}, 3000, 8000, 4000, DAILY),
        # all three
        ({"withdrawal_per_request_limit": 5000, "withdrawal_daily_limit": 5000}, 3000, 0, 6000, PER_REQUEST),
        # daily + balance, the balance short only because of the fee
        ({"withdrawal_daily_limit": 10_000, "withdrawal_fee_fixed": 100}, 3000, 8000, 3000, DAILY),
    ],
)
def test_business_rules_order(
    refused: Callable[..., None], fields: dict[str, int], balance: int, done_today: int, amount: int, message: str
) -> None:
    account = account_with_balance(balance, **fields)
    if done_today:
        make_withdrawal(account, done_today)
    refused(client_of(account), account, body(amount, discount_fee=False), 400, error(message))


# --------------------------------------------------------------------------- the America/Sao_Paulo day


def test_day_start_is_sao_paulo_midnight() -> None:
    # 02:30 UTC on the 10th is 23:30 of the 9th in São Paulo.
    now = dt.datetime(2026, 3, 10, 2, 30, tzinfo=dt.UTC)
    assert day_start(now) == dt.datetime(2026, 3, 9, 0, 0, tzinfo=SAO_PAULO)
    assert day_start(dt.datetime(2026, 3, 10, 3, 0, tzinfo=dt.UTC)) == dt.datetime(2026, 3, 10, tzinfo=SAO_PAULO)


def test_withdrawn_today_boundary_and_statuses(account: Account) -> None:
    now = dt.datetime(2026, 3, 10, 15, 0, tzinfo=SAO_PAULO)
    midnight = dt.datetime(2026, 3, 10, 0, 0, 0, tzinfo=SAO_PAULO)
    make_withdrawal(account, 1001, created_at=midnight - dt.timedelta(seconds=1))  # 23:59:59 yesterday
    make_withdrawal(account, 1002, created_at=midnight - dt.timedelta(microseconds=1))
    make_withdrawal(account, 2000, created_at=midnight)  # 00:00:00 today
    make_withdrawal(account, 3000, WithdrawalStatus.APPROVED, created_at=midnight + dt.timedelta(hours=10))
    make_withdrawal(account, 4000, WithdrawalStatus.PAID, created_at=midnight + dt.timedelta(hours=11))
    make_withdrawal(account, 5000, WithdrawalStatus.REFUNDED, created_at=midnight + dt.timedelta(hours=12))
    make_withdrawal(account, 7000, WithdrawalStatus.FAILED, created_at=midnight + dt.timedelta(hours=13))
    make_withdrawal(account, 8000, WithdrawalStatus.CANCELED, created_at=midnight + dt.timedelta(hours=14))
    make_withdrawal(AccountFactory(), 9000, created_at=midnight + dt.timedelta(hours=1))  # another account

    assert withdrawn_today(account, now=now) == 2000 + 3000 + 4000 + 5000
    assert withdrawn_today(account, now=midnight + dt.timedelta(hours=23, minutes=59, seconds=59)) == 14_000
    # The day is São Paulo's even when "now" is given in UTC (03:00 UTC = 00:00 -03:00).
    assert withdrawn_today(account, now=dt.datetime(2026, 3, 10, 3, 0, tzinfo=dt.UTC)) == 14_000
    # The next day starts from zero.
    assert withdrawn_today(account, now=midnight + dt.timedelta(days=1)) == 0


def test_daily_limit_through_the_api_counts_only_todays_live_withdrawals(refused: Callable[..., None]) -> None:
    account = account_with_balance(withdrawal_daily_limit=20_000)
    client = client_of(account)
    start = day_start()
    now = timezone.now()
    make_withdrawal(account, 9000, created_at=start - dt.timedelta(seconds=1))  # yesterday
    make_withdrawal(account, 9000, WithdrawalStatus.FAILED, created_at=now)
    make_withdrawal(account, 9000, WithdrawalStatus.CANCELED, created_at=now)
    make_withdrawal(account, 3000, WithdrawalStatus.REFUNDED, created_at=now)
    make_withdrawal(account, 4000, WithdrawalStatus.PAID, created_at=now)
    make_withdrawal(account, 5000, created_at=now)

    data = client.get(BALANCE_URL).json()["data"]
    assert data["daily_limit_remaining"] == 20_000 - 12_000
    refused(client, account, body(8001), 400, error(DAILY))
    assert post(client, body(8000)).status_code == 201
    assert client.get(BALANCE_URL).json()["data"]["daily_limit_remaining"] == 0


def test_daily_limit_remaining_never_goes_below_zero(account: Account) -> None:
    make_withdrawal(account, 50_000)
    Account.objects.filter(pk=account.pk).update(withdrawal_daily_limit=10_000)
    data = client_of(account).get(BALANCE_URL).json()["data"]
    assert data["daily_limit_remaining"] == 0
    assert data["limits"]["per_day_total"] == 10_000


def test_balance_endpoint_follows_each_withdrawal(account: Account) -> None:
    Account.objects.filter(pk=account.pk).update(
        withdrawal_fee_fixed=100, withdrawal_per_request_limit=300_000, withdrawal_daily_limit=400_000
    )
    client = client_of(account)
    assert post(client, body(10_000, discount_fee=False)).status_code == 201
    response = client.get(BALANCE_URL)
    assert response.status_code == 200
    assert response.json() == {
        "success": True,
        "message": "Saldo consultado com sucesso.",
        "data": {
            "available_balance": SEED_BALANCE - 10_100,
            "blocked_balance": 0,
            "daily_limit_remaining": 400_000 - 10_000,
            "minimum_withdrawal": 1000,
            "limits": {"per_request": 300_000, "per_day_total": 400_000},
        },
    }


# --------------------------------------------------------------------------- concurrency (real PostgreSQL)


def run_concurrently(calls: list[Callable[[], Any]]) -> list[Any]:
    """The calls' results, run together on their own connections; none may raise."""
    outcomes = realworld.run_concurrently(calls)
    errors = [o for o in outcomes if isinstance(o, BaseException)]
    assert not errors, errors
    return outcomes


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_concurrent_withdrawals_never_overdraw(seed: int, no_enqueue: None) -> None:
    """50 requests race for a balance that covers exactly 10 of them."""
    rng = random.Random(seed)
    amount = rng.randrange(1000, 5001, 100)
    account = account_with_balance(10 * amount)
    credentials = [client_of(account, rng.choice(["all", "cashout"])) for _ in range(rng.randint(1, 5))]
    keys = [
        ("cpf", CPF),
        ("email", "fulano@example.com"),
        ("phone", "11987654321"),
        ("random", str(uuid.UUID(int=rng.getrandbits(128)))),
    ]
    calls: list[Callable[[], Any]] = []
    for _ in range(50):
        key_type, key_value = rng.choice(keys)
        client = rng.choice(credentials)
        payload = {"amount": amount, "key_type": key_type, "key_value": key_value}
        calls.append(functools.partial(post, client, payload))
    rng.shuffle(calls)

    responses = run_concurrently(calls)

    statuses = sorted(r.status_code for r in responses)
    assert statuses == [201] * 10 + [400] * 40
    assert all(r.json() == error(INSUFFICIENT) for r in responses if r.status_code == 400)
    assert available_balance(account) == 0 == ledger_sum(account)
    assert Withdrawal.objects.filter(account=account).count() == 10
    created = {r.json()["data"]["id"] for r in responses if r.status_code == 201}
    assert created == {str(pk) for pk in Withdrawal.objects.values_list("pk", flat=True)}
    entries = LedgerEntry.objects.filter(account=account, kind="withdrawal")
    assert entries.count() == 10
    assert sorted(entries.values_list("balance_after", flat=True)) == [amount * i for i in range(10)]
    assert not LedgerEntry.objects.filter(account=account, balance_after__lt=0).exists()


@pytest.mark.django_db(transaction=True)
def test_concurrent_withdrawals_never_exceed_the_daily_limit(no_enqueue: None) -> None:
    account = account_with_balance(SEED_BALANCE, withdrawal_daily_limit=10_000)
    client = client_of(account)
    responses = run_concurrently([lambda: post(client, body(1000)) for _ in range(30)])

    assert sorted(r.status_code for r in responses) == [201] * 10 + [400] * 20
    assert all(r.json() == error(DAILY) for r in responses if r.status_code == 400)
    assert withdrawn_today(account) == 10_000
    assert AccountBalance.objects.get(account=account).withdrawn_on_day == 10_000  # the total the limit checked
    assert available_balance(account) == SEED_BALANCE - 10_000 == ledger_sum(account)
