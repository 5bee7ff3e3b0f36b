"""POST /api/transactions as a client sees it: the spec's nine-step check
order with exact bodies, field validation, business rules and fees, the
creation body and the stored charge, the acquirer chain (default, platform,
override), fallback, timeouts with their background cancel, invalid answers
from acquirers, and the 500. After every failure nothing has changed: no
charge, same balance, same ledger, same acquirer slots."""

from __future__ import annotations

import datetime as dt
import json
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import pytest
from brcode.utils.brcodeId import jsonFromBrcode
from django.db import transaction
from django.test import override_settings
from django.utils import timezone
from rest_framework import serializers
from rest_framework.test import APIClient
from validate_docbr import CNPJ

from accounts.models import Account, AccountBalance, ApiCredential, LedgerEntry
from accounts.services import account_set_blocked, credential_issue, credential_revoke, ledger_post
from acquirers import adapters, brcode
from acquirers.adapters.base import (
    AcquirerAdapter,
    AcquirerUnavailable,
    ChargeRequest,
    ChargeResult,
    Notification,
    PayoutRequest,
    PayoutResult,
)
from acquirers.adapters.sandbox import SandboxAdapter
from acquirers.models import Acquirer, AcquirerGrant, AcquirerSlot
from acquirers.services import account_active_acquirers_replace, acquirer_grants_set
from acquirers.tasks import cancel_charge_at_acquirer
from payments.models import Charge, ChargeAttempt
from payments.serializers import ChargeCreatedSerializer
from tests.conftest import client_for
from tests.factories import AccountFactory, AcquirerFactory

pytestmark = pytest.mark.django_db

URL = "/api/transactions"

VALIDATION = "Erro de validação nos dados fornecidos"
ACQUIRER_RULES = "Erro de validação"
REQUIRED = "Este campo é obrigatório."
NOT_INTEGER = "Um número inteiro válido é exigido."
MIN_AMOUNT = "O valor mínimo permitido para transações é de R$ 1,00."
BAD_DOCUMENT = "CPF ou CNPJ inválido."
BAD_PHONE = "Informe DDD e número, apenas dígitos (10 ou 11)."
BAD_URL = "Informe uma URL http ou https válida."
BAD_KEY = "Use apenas letras minúsculas, números e _."
METADATA_TOO_BIG = "Os metadados devem ter no máximo 4096 bytes."

METHOD_NOT_ENABLED = "Este método de pagamento não está habilitado para sua conta."
AMOUNT_ABOVE_MAX = "O valor máximo permitido para transações é de R$ 3.000,00."
NET_BELOW_MIN = "O valor da transação deve resultar em pelo menos R$ 0,10 após as taxas."
ALL_FAILED = "Erro ao processar o pagamento. Tente novamente mais tarde."
NO_ACQUIRER_AVAILABLE = "Nenhuma das adquirentes informadas está disponível para seleção nesta conta."
DUPLICATE_PRIORITY = "Não é permitido informar a mesma prioridade mais de uma vez."
DUPLICATE_ACQUIRER = "Não é permitido repetir a mesma adquirente em prioridades diferentes."
BOTH_FORMS = "Informe apenas um dos campos: acquirer_key ou acquirers."

MISSING_KEYS = {"error": "Credenciais inválidas", "message": "Chave pública e chave privada são obrigatórias"}
INVALID_KEYS = {"error": "Credenciais inválidas", "message": "Chave não encontrada ou inativa"}

VALID_CPF = "52998224725"
VALID_CNPJ = "11222333000181"


# Fixtures live here, not in a conftest: other modules of this folder share
# the folder, and an account holding money would change what they see.
SEED_BALANCE = 12_345


def account_with_balance(**fields: Any) -> Account:
    """An approved account (unless ``fields`` say otherwise) that already holds
    SEED_BALANCE, so "the balance did not change" means something."""
    account = AccountFactory(**fields)
    with transaction.atomic():
        ledger_post(
            account_id=account.pk,
            amount=SEED_BALANCE,
            kind=LedgerEntry.Kind.CHARGE_PAID,
            reference=f"seed:{account.pk}",
        )
    return account


@pytest.fixture
def account(db: Any) -> Account:
    return account_with_balance()


@pytest.fixture
def client_of(db: Any) -> Callable[..., APIClient]:
    """A client authenticated with a fresh credential of ``account``."""

    def make(account: Account, permission: str = ApiCredential.Permission.ALL) -> APIClient:
        return client_for(credential_issue(account=account, permission=permission))

    return make


@pytest.fixture
def platform_acquirer(db: Any) -> Acquirer:
    """The whole platform default chain: one sandbox acquirer that accepts."""
    return AcquirerFactory(key="platform_ok", name="Platform", default_priority=1)


def error(message: str) -> dict[str, Any]:
    return {"success": False, "message": message, "data": None}


def invalid(errors: dict[str, list[str]], message: str = VALIDATION) -> dict[str, Any]:
    return {"success": False, "message": message, "data": {"errors": errors}}


def acquirer_rule(message: str) -> dict[str, Any]:
    return invalid({"acquirers": [message]}, ACQUIRER_RULES)


NO_PERMISSION = error("Esta credencial não tem permissão para realizar esta operação.")
NOT_APPROVED = error("Sua conta precisa estar aprovada para usar esta funcionalidade.")
BLOCKED = error("Sua conta está bloqueada. Não é permitido realizar esta ação.")


def buyer(**overrides: Any) -> dict[str, Any]:
    data = {"buyer_name": "Maria da Silva", "buyer_document": VALID_CPF, "buyer_phone": "11987654321"}
    data.update(overrides)
    return data


def body(**overrides: Any) -> dict[str, Any]:
    data: dict[str, Any] = {"payment_method": "pix", "amount": 1000, "buyer": buyer()}
    data.update(overrides)
    return data


def without(data: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k not in keys}


def post(client: APIClient, payload: Any) -> Any:
    return client.post(URL, payload, format="json")


@dataclass(frozen=True)
class Snapshot:
    """Everything a failed creation must leave as it was."""

    charges: int
    attempts: int
    balance: int
    ledger: tuple[tuple[Any, ...], ...]
    slots: tuple[tuple[Any, ...], ...]


def snapshot(account: Account) -> Snapshot:
    return Snapshot(
        charges=Charge.objects.count(),
        attempts=ChargeAttempt.objects.count(),
        balance=AccountBalance.objects.get(account=account).available,
        ledger=tuple(LedgerEntry.objects.order_by("id").values_list("id", "account_id", "kind", "amount")),
        slots=tuple(
            AcquirerSlot.objects.order_by("account_id", "purpose", "priority").values_list(
                "account_id", "purpose", "priority", "acquirer_id"
            )
        ),
    )


def attempts_of(charge_id: Any) -> list[tuple[int, str, str]]:
    return [
        (a.position, a.acquirer.key, a.outcome)
        for a in ChargeAttempt.objects.filter(charge_id=charge_id).select_related("acquirer").order_by("position")
    ]


def created(response: Any) -> Charge:
    assert response.status_code == 201, response.content
    return Charge.objects.get(pk=response.json()["data"]["id"])


def wait_until(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met before the deadline")
        time.sleep(0.02)


def selecting_account(*granted: Acquirer, **fields: Any) -> Account:
    """An account with the selection feature and ``granted`` available to it."""
    account = account_with_balance(can_select_pix_cash_in_acquirer=True, **fields)
    acquirer_grants_set(account=account, acquirers=list(granted))
    return account


def with_slots(account: Account, *chain: Acquirer) -> Account:
    """Grant ``chain`` (keeping earlier grants) and make it the account's active acquirers."""
    granted = {grant.acquirer for grant in AcquirerGrant.objects.filter(account=account).select_related("acquirer")}
    acquirer_grants_set(account=account, acquirers=[*granted, *chain])
    account_active_acquirers_replace(account=account, slots=dict(enumerate(chain, start=1)))
    return account


# =========================================================================== 1. check order: auth


def test_missing_credentials(account: Account, platform_acquirer: Acquirer) -> None:
    before = snapshot(account)
    response = post(APIClient(), body())
    assert response.status_code == 401
    assert response.json() == MISSING_KEYS
    assert snapshot(account) == before


def test_wrong_secret(account: Account, platform_acquirer: Acquirer) -> None:
    issued = credential_issue(account=account)
    before = snapshot(account)
    response = APIClient().post(
        URL,
        body(),
        format="json",
        HTTP_X_PUBLIC_KEY=issued.credential.public_key,
        HTTP_X_SECRET_KEY=issued.secret_key + "x",
    )
    assert response.status_code == 401
    assert response.json() == INVALID_KEYS
    assert snapshot(account) == before


def test_revoked_credential(account: Account, platform_acquirer: Acquirer) -> None:
    issued = credential_issue(account=account)
    credential_revoke(credential=issued.credential)
    before = snapshot(account)
    response = post(client_for(issued), body())
    assert response.status_code == 401
    assert response.json() == INVALID_KEYS
    assert snapshot(account) == before


def test_cashout_credential_may_not_create(account: Account, client_of: Any, platform_acquirer: Acquirer) -> None:
    before = snapshot(account)
    response = post(client_of(account, ApiCredential.Permission.CASHOUT), body())
    assert response.status_code == 403
    assert response.json() == NO_PERMISSION
    assert snapshot(account) == before


@pytest.mark.parametrize("permission", [ApiCredential.Permission.CASHIN, ApiCredential.Permission.ALL])
def test_cashin_and_all_credentials_may_create(
    account: Account, client_of: Any, platform_acquirer: Acquirer, permission: str
) -> None:
    charge = created(post(client_of(account, permission), body()))
    assert charge.account_id == account.pk


@pytest.mark.parametrize("status", [Account.Status.PENDING, Account.Status.REJECTED])
def test_account_not_approved(client_of: Any, platform_acquirer: Acquirer, status: str) -> None:
    account = account_with_balance(status=status)
    before = snapshot(account)
    response = post(client_of(account), body())
    assert response.status_code == 403
    assert response.json() == NOT_APPROVED
    assert snapshot(account) == before


def test_account_blocked(account: Account, client_of: Any, platform_acquirer: Acquirer) -> None:
    account_set_blocked(account=account, blocked=True)
    before = snapshot(account)
    response = post(client_of(account), body())
    assert response.status_code == 403
    assert response.json() == BLOCKED
    assert snapshot(account) == before


# =========================================================================== 1. check order: precedence


def test_step1_before_step2_wrong_secret_of_cashout_credential(account: Account, platform_acquirer: Acquirer) -> None:
    issued = credential_issue(account=account, permission=ApiCredential.Permission.CASHOUT)
    response = APIClient().post(
        URL, [1], format="json", HTTP_X_PUBLIC_KEY=issued.credential.public_key, HTTP_X_SECRET_KEY="sk_wrong"
    )
    assert response.status_code == 401
    assert response.json() == INVALID_KEYS


def test_step1_before_body_parsing() -> None:
    response = APIClient().post(URL, "not json", content_type="application/json")
    assert response.status_code == 401
    assert response.json() == MISSING_KEYS


def test_step2_before_step3(client_of: Any) -> None:
    account = account_with_balance(status=Account.Status.PENDING, is_blocked=True)
    response = post(client_of(account, ApiCredential.Permission.CASHOUT), {})
    assert response.status_code == 403
    assert response.json() == NO_PERMISSION


def test_step3_before_step4(client_of: Any) -> None:
    account = account_with_balance(status=Account.Status.REJECTED, is_blocked=True)
    response = post(client_of(account), {})
    assert response.status_code == 403
    assert response.json() == NOT_APPROVED


def test_step3_before_step5(client_of: Any) -> None:
    account = account_with_balance(status=Account.Status.PENDING)
    before = snapshot(account)
    response = post(client_of(account), body(amount="abc", buyer={}))
    assert response.status_code == 403
    assert response.json() == NOT_APPROVED
    assert snapshot(account) == before


def test_step4_before_step5(client_of: Any) -> None:
    account = account_with_balance(is_blocked=True)
    response = post(client_of(account), body(amount=1, payment_method="boleto"))
    assert response.status_code == 403
    assert response.json() == BLOCKED


def test_step4_before_a_body_that_is_not_an_object(client_of: Any) -> None:
    account = account_with_balance(is_blocked=True)
    response = post(client_of(account), [body()])
    assert response.status_code == 403
    assert response.json() == BLOCKED


def test_step5_before_step6(client_of: Any, platform_acquirer: Acquirer) -> None:
    account = account_with_balance(payment_methods=[])
    before = snapshot(account)
    response = post(client_of(account), body(buyer=buyer(buyer_document="12345678900")))
    assert response.status_code == 422
    assert response.json() == invalid({"buyer.buyer_document": [BAD_DOCUMENT]})
    assert snapshot(account) == before


def test_step5_acquirer_rules_before_step6(client_of: Any, platform_acquirer: Acquirer) -> None:
    account = selecting_account(payment_methods=[])
    before = snapshot(account)
    response = post(client_of(account), body(acquirers=[{"acquirer_key": "ghost", "priority": 1}]))
    assert response.status_code == 422
    assert response.json() == acquirer_rule(NO_ACQUIRER_AVAILABLE)
    assert snapshot(account) == before


def test_step5_before_step7(api: APIClient, account: Account, platform_acquirer: Acquirer) -> None:
    before = snapshot(account)
    response = post(api, without(body(amount=300_001), "buyer"))
    assert response.status_code == 422
    assert response.json() == invalid({"buyer": [REQUIRED]})
    assert snapshot(account) == before


def test_step6_before_step7(client_of: Any, platform_acquirer: Acquirer) -> None:
    account = account_with_balance(payment_methods=[])
    before = snapshot(account)
    response = post(client_of(account), body(amount=300_001))
    assert response.status_code == 400
    assert response.json() == error(METHOD_NOT_ENABLED)
    assert snapshot(account) == before


def test_step7_before_step8(client_of: Any, platform_acquirer: Acquirer) -> None:
    account = account_with_balance(cashin_fee_fixed=300_000)  # net of 300001 would be 1
    before = snapshot(account)
    response = post(client_of(account), body(amount=300_001))
    assert response.status_code == 400
    assert response.json() == error(AMOUNT_ABOVE_MAX)
    assert snapshot(account) == before


def test_step8_before_step9_chain_is_never_tried(client_of: Any) -> None:
    AcquirerFactory(key="platform_fail", default_priority=1, options={"charge": "fail"})
    account = account_with_balance(cashin_fee_fixed=95)
    before = snapshot(account)
    response = post(client_of(account), body(amount=100))
    assert response.status_code == 400
    assert response.json() == error(NET_BELOW_MIN)
    assert snapshot(account) == before  # also: no attempt at the failing acquirer


# =========================================================================== 2. field validation


@pytest.mark.parametrize(
    ("payload", "errors"),
    [
        pytest.param(without(body(), "payment_method"), {"payment_method": [REQUIRED]}, id="no-payment-method"),
        pytest.param(without(body(), "amount"), {"amount": [REQUIRED]}, id="no-amount"),
        pytest.param(without(body(), "buyer"), {"buyer": [REQUIRED]}, id="no-buyer"),
        pytest.param(
            {},
            {"payment_method": [REQUIRED], "amount": [REQUIRED], "buyer": [REQUIRED]},
            id="empty-object",
        ),
        pytest.param(body(buyer=without(buyer(), "buyer_name")), {"buyer.buyer_name": [REQUIRED]}, id="no-buyer-name"),
        pytest.param(
            body(buyer=without(buyer(), "buyer_document")),
            {"buyer.buyer_document": [REQUIRED]},
            id="no-buyer-document",
        ),
        pytest.param(
            body(buyer=without(buyer(), "buyer_phone")), {"buyer.buyer_phone": [REQUIRED]}, id="no-buyer-phone"
        ),
        pytest.param(
            body(buyer={}),
            {"buyer.buyer_name": [REQUIRED], "buyer.buyer_document": [REQUIRED], "buyer.buyer_phone": [REQUIRED]},
            id="empty-buyer",
        ),
        pytest.param(
            body(payment_method="boleto"), {"payment_method": ['"boleto" não é uma escolha válida.']}, id="boleto"
        ),
        pytest.param(body(payment_method="PIX"), {"payment_method": ['"PIX" não é uma escolha válida.']}, id="PIX"),
        pytest.param(body(amount="100"), {"amount": [NOT_INTEGER]}, id="amount-string"),
        pytest.param(body(amount=100.5), {"amount": [NOT_INTEGER]}, id="amount-fraction"),
        pytest.param(body(amount=100.0), {"amount": [NOT_INTEGER]}, id="amount-float"),
        pytest.param(body(amount=True), {"amount": [NOT_INTEGER]}, id="amount-true"),
        pytest.param(body(amount=None), {"amount": ["Este campo pode não ser nulo."]}, id="amount-null"),
        pytest.param(body(amount=99), {"amount": [MIN_AMOUNT]}, id="amount-99"),
        pytest.param(body(amount=0), {"amount": [MIN_AMOUNT]}, id="amount-0"),
        pytest.param(body(amount=-500), {"amount": [MIN_AMOUNT]}, id="amount-negative"),
        pytest.param(
            body(buyer=buyer(buyer_document="529.982.247-24")), {"buyer.buyer_document": [BAD_DOCUMENT]}, id="cpf-dv"
        ),
        pytest.param(
            body(buyer=buyer(buyer_document="111.111.111-11")),
            {"buyer.buyer_document": [BAD_DOCUMENT]},
            id="cpf-repeated",
        ),
        pytest.param(
            body(buyer=buyer(buyer_document="11.222.333/0001-82")),
            {"buyer.buyer_document": [BAD_DOCUMENT]},
            id="cnpj-dv",
        ),
        pytest.param(
            body(buyer=buyer(buyer_document="5299822472")), {"buyer.buyer_document": [BAD_DOCUMENT]}, id="10-digits"
        ),
        pytest.param(body(buyer=buyer(buyer_name="")), {"buyer.buyer_name": ["Este campo pode não estar em branco."]}),
        pytest.param(
            body(buyer=buyer(buyer_phone="(11) 98765-4321")), {"buyer.buyer_phone": [BAD_PHONE]}, id="phone-mask"
        ),
        pytest.param(body(buyer=buyer(buyer_phone="11abc654321")), {"buyer.buyer_phone": [BAD_PHONE]}, id="phone-abc"),
        pytest.param(body(buyer=buyer(buyer_phone="987654321")), {"buyer.buyer_phone": [BAD_PHONE]}, id="phone-9"),
        pytest.param(body(postback_url="ftp://example.com/hook"), {"postback_url": [BAD_URL]}, id="postback-ftp"),
        pytest.param(body(postback_url="example.com/hook"), {"postback_url": [BAD_URL]}, id="postback-no-scheme"),
        pytest.param(
            body(metadata=["a"]),
            {"metadata": ['Esperava um dicionário de itens, mas recebeu tipo "list".']},
            id="metadata-list",
        ),
        pytest.param(
            body(metadata="a"),
            {"metadata": ['Esperava um dicionário de itens, mas recebeu tipo "str".']},
            id="metadata-string",
        ),
        pytest.param(body(metadata={"note": "x" * 4090}), {"metadata": [METADATA_TOO_BIG]}, id="metadata-4097B"),
        pytest.param(
            body(amount="1", buyer=buyer(buyer_document="0")),
            {"amount": [NOT_INTEGER], "buyer.buyer_document": [BAD_DOCUMENT]},
            id="all-errors-at-once",
        ),
    ],
)
def test_invalid_fields(
    api: APIClient, account: Account, platform_acquirer: Acquirer, payload: Any, errors: dict[str, list[str]]
) -> None:
    before = snapshot(account)
    response = post(api, payload)
    assert response.status_code == 422
    assert response.json() == invalid(errors)
    assert snapshot(account) == before


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param([body()], id="list"),
        pytest.param("pix", id="string"),
        pytest.param(1000, id="number"),
        pytest.param(None, id="null"),
    ],
)
def test_body_that_is_not_an_object(
    api: APIClient, account: Account, platform_acquirer: Acquirer, payload: Any
) -> None:
    before = snapshot(account)
    response = api.post(URL, json.dumps(payload), content_type="application/json")
    assert response.status_code == 400
    assert response.json() == error("Corpo da requisição inválido.")
    assert snapshot(account) == before


def test_malformed_json(api: APIClient, account: Account, platform_acquirer: Acquirer) -> None:
    before = snapshot(account)
    response = api.post(URL, '{"amount": 100,', content_type="application/json")
    assert response.status_code == 400
    assert response.json() == error("Corpo da requisição inválido.")
    assert snapshot(account) == before


def test_json_without_content_type_is_parsed(api: APIClient, platform_acquirer: Acquirer) -> None:
    created(api.post(URL, json.dumps(body()), content_type="text/plain"))


def test_empty_body_is_not_a_json_object(api: APIClient, account: Account, platform_acquirer: Acquirer) -> None:
    before = snapshot(account)
    response = api.post(URL, "", content_type="application/json")
    assert snapshot(account) == before
    assert response.status_code == 400
    assert response.json() == error("Corpo da requisição inválido.")


def test_buyer_not_an_object_is_reported_under_buyer(api: APIClient, platform_acquirer: Acquirer) -> None:
    response = post(api, body(buyer="Maria"))
    assert response.status_code == 422
    assert list(response.json()["data"]["errors"]) == ["buyer"]


def test_amount_minimum_is_accepted(api: APIClient, platform_acquirer: Acquirer) -> None:
    charge = created(post(api, body(amount=100)))
    assert charge.amount == 100


@pytest.mark.parametrize(
    ("document", "stored"),
    [
        pytest.param("529.982.247-25", VALID_CPF, id="cpf-formatted"),
        pytest.param(VALID_CPF, VALID_CPF, id="cpf-digits"),
        pytest.param("11.222.333/0001-81", VALID_CNPJ, id="cnpj-formatted"),
        pytest.param(VALID_CNPJ, VALID_CNPJ, id="cnpj-digits"),
    ],
)
def test_valid_documents_are_stored_unformatted(
    api: APIClient, platform_acquirer: Acquirer, document: str, stored: str
) -> None:
    charge = created(post(api, body(buyer=buyer(buyer_document=document))))
    assert charge.buyer_document == stored


@pytest.mark.parametrize("mask", [False, True])
def test_alphanumeric_cnpj(api: APIClient, platform_acquirer: Acquirer, mask: bool) -> None:
    document = CNPJ().generate(mask=mask, digits_only=False)
    plain = document.replace(".", "").replace("/", "").replace("-", "")
    assert not plain.isdigit()  # really the alphanumeric format
    charge = created(post(api, body(buyer=buyer(buyer_document=document))))
    assert charge.buyer_document == plain


def test_alphanumeric_cnpj_with_wrong_check_digits(
    api: APIClient, account: Account, platform_acquirer: Acquirer
) -> None:
    document = CNPJ().generate(digits_only=False)
    wrong = document[:-1] + str((int(document[-1]) + 1) % 10)
    before = snapshot(account)
    response = post(api, body(buyer=buyer(buyer_document=wrong)))
    assert response.status_code == 422
    assert response.json() == invalid({"buyer.buyer_document": [BAD_DOCUMENT]})
    assert snapshot(account) == before


def test_metadata_of_exactly_4096_bytes_is_accepted(api: APIClient, platform_acquirer: Acquirer) -> None:
    metadata = {"note": "x" * 4084}  # {"note": "…"} is 12 bytes + 4084
    charge = created(post(api, body(metadata=metadata)))
    assert charge.metadata == metadata


def test_metadata_size_counts_bytes_not_characters(
    api: APIClient, account: Account, platform_acquirer: Acquirer
) -> None:
    before = snapshot(account)
    response = post(api, body(metadata={"note": "ç" * 2043}))  # 2043 characters, 4098 bytes
    assert response.status_code == 422
    assert response.json() == invalid({"metadata": [METADATA_TOO_BIG]})
    assert snapshot(account) == before


def test_unknown_fields_are_ignored(api: APIClient, platform_acquirer: Acquirer) -> None:
    payload = body(coupon="XYZ", status="paid", platform_tax=0, buyer=buyer(buyer_age=30))
    charge = created(post(api, payload))
    assert charge.status == Charge.Status.PENDING
    assert charge.platform_tax == 0


def test_optional_buyer_fields_and_http_postback(api: APIClient, platform_acquirer: Acquirer) -> None:
    address = {
        "buyer_city": "Campinas",
        "buyer_state": "SP",
        "buyer_zipcode": "13010000",
        "buyer_neighborhood": "Centro",
        "buyer_number": "100",
        "buyer_complement": "Sala 2",
    }
    charge = created(post(api, body(buyer=buyer(**address), postback_url="http://example.com/pix")))
    assert charge.buyer_address == address
    assert charge.postback_url == "http://example.com/pix"


@override_settings(WEBHOOKS_ALLOW_PRIVATE_NETWORKS=False)
def test_production_refuses_a_plain_http_postback(
    api: APIClient, account: Account, platform_acquirer: Acquirer
) -> None:
    # Postbacks carry the payer's data: https only where private networks are refused.
    before = snapshot(account)
    response = post(api, body(postback_url="http://example.com/pix"))
    assert response.status_code == 422
    assert response.json() == invalid({"postback_url": ["A URL deve usar https: os eventos levam dados do pagador."]})
    assert snapshot(account) == before  # no acquirer was asked: no attempt recorded
    assert created(post(api, body(postback_url="https://example.com/pix"))).postback_url == "https://example.com/pix"


# =========================================================================== 3. business rules and fees


def test_payment_method_not_enabled(client_of: Any, platform_acquirer: Acquirer) -> None:
    account = account_with_balance(payment_methods=[])
    before = snapshot(account)
    response = post(client_of(account), body())
    assert response.status_code == 400
    assert response.json() == error(METHOD_NOT_ENABLED)
    assert snapshot(account) == before


def test_amount_above_maximum(api: APIClient, account: Account, platform_acquirer: Acquirer) -> None:
    before = snapshot(account)
    response = post(api, body(amount=300_001))
    assert response.status_code == 400
    assert response.json() == error(AMOUNT_ABOVE_MAX)
    assert snapshot(account) == before


def test_amount_maximum_is_accepted(api: APIClient, platform_acquirer: Acquirer) -> None:
    charge = created(post(api, body(amount=300_000)))
    assert charge.amount == 300_000


@pytest.mark.parametrize(
    ("fixed", "bps", "amount"),
    [
        pytest.param(95, 0, 100, id="fixed-95"),
        pytest.param(91, 0, 100, id="net-9"),
        pytest.param(200, 0, 150, id="fee-above-amount"),
        pytest.param(0, 9050, 100, id="bps-90.5-rounds-up-to-91"),
        pytest.param(0, 10_000, 300_000, id="bps-100pct"),
    ],
)
def test_net_below_ten(client_of: Any, platform_acquirer: Acquirer, fixed: int, bps: int, amount: int) -> None:
    account = account_with_balance(cashin_fee_fixed=fixed, cashin_fee_bps=bps)
    before = snapshot(account)
    response = post(client_of(account), body(amount=amount))
    assert response.status_code == 400
    assert response.json() == error(NET_BELOW_MIN)
    assert snapshot(account) == before


@pytest.mark.parametrize(
    ("fixed", "bps", "amount", "tax"),
    [
        pytest.param(0, 0, 1000, 0, id="no-fee"),
        pytest.param(90, 0, 100, 90, id="net-exactly-10"),
        pytest.param(0, 9000, 100, 90, id="bps-net-exactly-10"),
        pytest.param(0, 150, 1001, 15, id="15.015-down"),
        pytest.param(0, 50, 1001, 5, id="5.005-down"),
        pytest.param(0, 50, 100, 1, id="0.5-half-up"),
        pytest.param(0, 150, 100, 2, id="1.5-half-up"),
        pytest.param(0, 250, 100, 3, id="2.5-half-up-not-even"),
        pytest.param(0, 50, 300, 2, id="1.5-half-up-again"),
        pytest.param(0, 199, 12345, 246, id="245.6655-up"),
        pytest.param(100, 199, 300_000, 6070, id="fixed-plus-bps"),
        pytest.param(30, 1, 4999, 30, id="0.4999-down"),
    ],
)
def test_fees(client_of: Any, platform_acquirer: Acquirer, fixed: int, bps: int, amount: int, tax: int) -> None:
    account = account_with_balance(cashin_fee_fixed=fixed, cashin_fee_bps=bps)
    response = post(client_of(account), body(amount=amount))
    charge = created(response)
    data = response.json()["data"]
    assert (data["amount"], data["platform_tax"], data["liquid_amount"]) == (amount, tax, amount - tax)
    assert (charge.platform_tax, charge.liquid_amount) == (tax, amount - tax)


# =========================================================================== 4. the 201 body and the stored charge


def test_created_body_is_exactly_the_spec(client_of: Any, platform_acquirer: Acquirer) -> None:
    account = account_with_balance(name="Loja São João", cashin_fee_fixed=10, cashin_fee_bps=199)
    response = post(client_of(account), body(amount=12345))
    assert response.status_code == 201
    payload = response.json()
    charge = Charge.objects.get()
    assert payload == {
        "success": True,
        "message": "Transação criada com sucesso.",
        "data": {
            "id": str(charge.id),
            "amount": 12345,
            "platform_tax": 10 + 246,
            "liquid_amount": 12345 - 256,
            "pix": {"emv": charge.emv},
        },
    }
    assert uuid.UUID(payload["data"]["id"]).version == 4


@pytest.mark.parametrize("amount", [100, 101, 12345, 300_000])
def test_emv_decodes_with_an_independent_decoder(api: APIClient, platform_acquirer: Acquirer, amount: int) -> None:
    response = post(api, body(amount=amount))
    charge = created(response)
    decoded = jsonFromBrcode(response.json()["data"]["pix"]["emv"])  # raises on a CRC or length mismatch
    assert decoded["54"] == f"{amount // 100}.{amount % 100:02d}"
    assert decoded["53"] == "986"
    assert decoded["58"] == "BR"
    assert decoded["26"]["00"] == "br.gov.bcb.pix"
    assert decoded["26"]["25"].endswith(charge.txid)


def test_charge_row_keeps_what_the_client_sent(client_of: Any, platform_acquirer: Acquirer) -> None:
    account = account_with_balance(charge_expiry_seconds=900)
    metadata = {"order": "A-1", "items": [1, 2], "nested": {"ok": True}}
    payload = body(
        amount=2500,
        buyer=buyer(buyer_name="João Ação", buyer_document="529.982.247-25", buyer_phone="1133334444"),
        postback_url="https://example.com/hook?x=1",
        metadata=metadata,
    )
    before = snapshot(account)
    started = timezone.now()
    charge = created(post(client_of(account), payload))
    finished = timezone.now()

    assert charge.account_id == account.pk
    assert charge.payment_method == "pix"
    assert charge.status == Charge.Status.PENDING
    assert (charge.amount, charge.platform_tax, charge.liquid_amount) == (2500, 0, 2500)
    assert (charge.buyer_name, charge.buyer_document, charge.buyer_phone) == ("João Ação", VALID_CPF, "1133334444")
    assert charge.buyer_address == {}
    assert charge.postback_url == "https://example.com/hook?x=1"
    assert charge.metadata == metadata
    assert charge.acquirer_id == platform_acquirer.pk
    assert charge.txid == charge.id.hex
    assert charge.provider_charge_id == f"sbx_{charge.txid}"
    assert charge.e2e_id is None
    assert charge.paid_at is None
    expiry = dt.timedelta(seconds=900)
    assert started + expiry <= charge.expires_at <= finished + expiry
    # A pending charge moves no money.
    assert snapshot(account) == replace(before, charges=1, attempts=1)


# =========================================================================== 5. acquirer chain


def test_default_chain_is_the_accounts_active_slots(client_of: Any, platform_acquirer: Acquirer) -> None:
    first = AcquirerFactory(key="slot_b")
    second = AcquirerFactory(key="slot_a")
    account = with_slots(account_with_balance(), first, second)
    charge = created(post(client_of(account), body()))
    assert charge.acquirer_id == first.pk
    assert attempts_of(charge.id) == [(1, "slot_b", "ok")]


def test_active_slot_no_longer_granted_or_disabled_is_passed_over(client_of: Any) -> None:
    ungranted = AcquirerFactory(key="slot_ungranted")
    disabled = AcquirerFactory(key="slot_disabled")
    usable = AcquirerFactory(key="slot_usable")
    account = account_with_balance()
    acquirer_grants_set(account=account, acquirers=[disabled, usable])
    account_active_acquirers_replace(account=account, slots={1: ungranted, 2: disabled, 3: usable})
    Acquirer.objects.filter(pk=disabled.pk).update(enabled=False)
    charge = created(post(client_of(account), body()))
    assert charge.acquirer_id == usable.pk
    assert attempts_of(charge.id) == [(1, "slot_usable", "ok")]


def test_without_slots_the_platform_default_chain_in_default_priority(client_of: Any) -> None:
    AcquirerFactory(key="aaa_second", default_priority=2, options={"charge": "fail"})
    AcquirerFactory(key="zzz_first", default_priority=1, options={"charge": "fail"})
    AcquirerFactory(key="mmm_third", default_priority=3)
    AcquirerFactory(key="not_default")  # default_priority None: never in the platform chain
    AcquirerFactory(key="disabled_default", default_priority=0, enabled=False)
    charge = created(post(client_of(account_with_balance()), body()))
    assert charge.acquirer.key == "mmm_third"
    assert attempts_of(charge.id) == [
        (1, "zzz_first", "unavailable"),
        (2, "aaa_second", "unavailable"),
        (3, "mmm_third", "ok"),
    ]


def test_acquirer_below_the_amount_is_passed_over(client_of: Any) -> None:
    small = AcquirerFactory(key="small_ticket", max_ticket=999)
    big = AcquirerFactory(key="big_ticket")
    account = with_slots(account_with_balance(), small, big)
    client = client_of(account)

    charge = created(post(client, body(amount=1000)))
    assert charge.acquirer_id == big.pk
    assert attempts_of(charge.id) == [(1, "big_ticket", "ok")]

    at_limit = created(post(client, body(amount=999)))
    assert at_limit.acquirer_id == small.pk


def test_max_ticket_applies_to_the_platform_default_chain(client_of: Any) -> None:
    AcquirerFactory(key="default_small", default_priority=1, max_ticket=500)
    AcquirerFactory(key="default_big", default_priority=2)
    charge = created(post(client_of(account_with_balance()), body(amount=501)))
    assert attempts_of(charge.id) == [(1, "default_big", "ok")]


def test_no_acquirer_at_all(api: APIClient, account: Account) -> None:
    before = snapshot(account)
    response = post(api, body())
    assert response.status_code == 400
    assert response.json() == error(ALL_FAILED)
    assert snapshot(account) == before


def test_every_acquirer_below_the_amount(api: APIClient, account: Account) -> None:
    AcquirerFactory(key="tiny", default_priority=1, max_ticket=1000)
    before = snapshot(account)
    response = post(api, body(amount=1001))
    assert response.status_code == 400
    assert response.json() == error(ALL_FAILED)
    assert snapshot(account) == before  # nothing tried, nothing recorded


def test_override_is_sorted_by_priority(client_of: Any) -> None:
    a, b, c = (AcquirerFactory(key=k) for k in ("ov_a", "ov_b", "ov_c"))
    account = selecting_account(a, b, c)
    with_slots(account, a)
    before = snapshot(account)
    charge = created(
        post(
            client_of(account),
            body(
                acquirers=[
                    {"acquirer_key": "ov_a", "priority": 3},
                    {"acquirer_key": "ov_c", "priority": 1},
                    {"acquirer_key": "ov_b", "priority": 2},
                ]
            ),
        )
    )
    assert charge.acquirer_id == c.pk
    assert attempts_of(charge.id) == [(1, "ov_c", "ok")]
    assert snapshot(account).slots == before.slots


def test_override_falls_back_in_priority_order(client_of: Any) -> None:
    failing = AcquirerFactory(key="ov_failing", options={"charge": "fail"})
    ok = AcquirerFactory(key="ov_ok")
    account = selecting_account(failing, ok)
    charge = created(
        post(
            client_of(account),
            body(acquirers=[{"acquirer_key": "ov_ok", "priority": 2}, {"acquirer_key": "ov_failing", "priority": 1}]),
        )
    )
    assert charge.acquirer_id == ok.pk
    assert attempts_of(charge.id) == [(1, "ov_failing", "unavailable"), (2, "ov_ok", "ok")]


def test_override_skips_unknown_keys_silently(client_of: Any) -> None:
    granted = AcquirerFactory(key="ov_granted")
    account = selecting_account(granted)
    charge = created(
        post(
            client_of(account),
            body(acquirers=[{"acquirer_key": "ghost", "priority": 1}, {"acquirer_key": "ov_granted", "priority": 3}]),
        )
    )
    assert charge.acquirer_id == granted.pk
    assert attempts_of(charge.id) == [(1, "ov_granted", "ok")]


def test_override_skips_not_granted_and_disabled(client_of: Any) -> None:
    granted = AcquirerFactory(key="ov2_granted")
    not_granted = AcquirerFactory(key="ov2_not_granted")
    disabled = AcquirerFactory(key="ov2_disabled")
    account = selecting_account(granted, disabled)
    Acquirer.objects.filter(pk=disabled.pk).update(enabled=False)
    charge = created(
        post(
            client_of(account),
            body(
                acquirers=[
                    {"acquirer_key": not_granted.key, "priority": 1},
                    {"acquirer_key": disabled.key, "priority": 2},
                    {"acquirer_key": granted.key, "priority": 3},
                ]
            ),
        )
    )
    assert charge.acquirer_id == granted.pk
    assert attempts_of(charge.id) == [(1, "ov2_granted", "ok")]


def test_override_wins_over_slots_and_leaves_them_alone(client_of: Any) -> None:
    slot = AcquirerFactory(key="acc_slot")
    chosen = AcquirerFactory(key="acc_chosen")
    account = selecting_account(slot, chosen)
    with_slots(account, slot)
    before = snapshot(account)
    charge = created(post(client_of(account), body(acquirer_key="acc_chosen")))
    assert charge.acquirer_id == chosen.pk
    after = snapshot(account)
    assert after.slots == before.slots
    assert list(AcquirerSlot.objects.filter(account=account).values_list("priority", "acquirer__key")) == [
        (1, "acc_slot")
    ]
    # The next charge without an override uses the slots again.
    assert created(post(client_of(account), body())).acquirer_id == slot.pk


def test_single_key_override(client_of: Any, platform_acquirer: Acquirer) -> None:
    chosen = AcquirerFactory(key="single_key")
    account = selecting_account(chosen, platform_acquirer)
    charge = created(post(client_of(account), body(acquirer_key="single_key")))
    assert charge.acquirer_id == chosen.pk
    assert attempts_of(charge.id) == [(1, "single_key", "ok")]


def test_single_key_override_is_that_key_alone(client_of: Any, platform_acquirer: Acquirer) -> None:
    failing = AcquirerFactory(key="single_failing", options={"charge": "fail"})
    account = selecting_account(failing, platform_acquirer)
    before = snapshot(account)
    response = post(client_of(account), body(acquirer_key="single_failing"))
    assert response.status_code == 400
    assert response.json() == error(ALL_FAILED)
    assert ChargeAttempt.objects.count() == before.attempts + 1
    assert replace(snapshot(account), attempts=before.attempts) == before


def test_override_acquirer_below_the_amount(client_of: Any) -> None:
    # Available to the account, but max_ticket < amount: passed over like in
    # any chain, and the now empty chain is the 400 (not the override's 422).
    small = AcquirerFactory(key="ov_small", max_ticket=500)
    account = selecting_account(small)
    before = snapshot(account)
    response = post(client_of(account), body(amount=501, acquirer_key="ov_small"))
    assert response.status_code == 400
    assert response.json() == error(ALL_FAILED)
    assert snapshot(account) == before


@pytest.mark.parametrize(
    "override",
    [
        pytest.param({"acquirers": [{"acquirer_key": "ghost", "priority": 1}]}, id="unknown-key"),
        pytest.param(
            {"acquirers": [{"acquirer_key": "nope_one", "priority": 1}, {"acquirer_key": "nope_two", "priority": 2}]},
            id="two-not-granted",
        ),
        pytest.param({"acquirer_key": "nope_one"}, id="single-not-granted"),
        pytest.param({"acquirer_key": "ov_off"}, id="single-disabled"),
    ],
)
def test_override_with_nothing_available(client_of: Any, platform_acquirer: Acquirer, override: dict) -> None:
    AcquirerFactory(key="nope_one")
    AcquirerFactory(key="nope_two")
    off = AcquirerFactory(key="ov_off")
    account = selecting_account(platform_acquirer, off)
    with_slots(account, platform_acquirer)
    Acquirer.objects.filter(pk=off.pk).update(enabled=False)
    before = snapshot(account)
    response = post(client_of(account), body(**override))
    assert response.status_code == 422
    assert response.json() == acquirer_rule(NO_ACQUIRER_AVAILABLE)
    assert "nope" not in response.content.decode()  # rejected keys are not named
    assert snapshot(account) == before


@pytest.mark.parametrize(
    "override",
    [
        pytest.param({"acquirers": [{"acquirer_key": "granted_no_feature", "priority": 1}]}, id="array"),
        pytest.param({"acquirer_key": "granted_no_feature"}, id="single"),
    ],
)
def test_override_without_the_selection_feature(client_of: Any, override: dict) -> None:
    granted = AcquirerFactory(key="granted_no_feature", default_priority=1)
    account = account_with_balance(can_select_pix_cash_in_acquirer=False)
    with_slots(account, granted)
    before = snapshot(account)
    response = post(client_of(account), body(**override))
    assert response.status_code == 422
    assert response.json() == acquirer_rule(NO_ACQUIRER_AVAILABLE)
    assert snapshot(account) == before


@pytest.mark.parametrize(
    ("items", "message"),
    [
        pytest.param(
            [{"acquirer_key": "dup_a", "priority": 1}, {"acquirer_key": "dup_b", "priority": 1}],
            DUPLICATE_PRIORITY,
            id="same-priority",
        ),
        pytest.param(
            [{"acquirer_key": "ghost", "priority": 2}, {"acquirer_key": "dup_b", "priority": 2}],
            DUPLICATE_PRIORITY,
            id="same-priority-one-unavailable",
        ),
        pytest.param(
            [{"acquirer_key": "dup_a", "priority": 1}, {"acquirer_key": "dup_a", "priority": 2}],
            DUPLICATE_ACQUIRER,
            id="same-acquirer",
        ),
        pytest.param(
            [{"acquirer_key": "ghost", "priority": 1}, {"acquirer_key": "ghost", "priority": 3}],
            DUPLICATE_ACQUIRER,
            id="same-unavailable-acquirer",
        ),
    ],
)
def test_override_duplicates(client_of: Any, items: list, message: str) -> None:
    account = selecting_account(AcquirerFactory(key="dup_a"), AcquirerFactory(key="dup_b"))
    before = snapshot(account)
    response = post(client_of(account), body(acquirers=items))
    assert response.status_code == 422
    assert response.json() == acquirer_rule(message)
    assert snapshot(account) == before


def test_both_override_forms(client_of: Any) -> None:
    chosen = AcquirerFactory(key="both_a")
    account = selecting_account(chosen)
    before = snapshot(account)
    response = post(
        client_of(account), body(acquirer_key="both_a", acquirers=[{"acquirer_key": "both_a", "priority": 1}])
    )
    assert response.status_code == 422
    assert response.json() == acquirer_rule(BOTH_FORMS)
    assert snapshot(account) == before


@pytest.mark.parametrize(
    ("override", "errors"),
    [
        pytest.param(
            {"acquirers": [{"acquirer_key": "shape_a"}]}, {"acquirers.0.priority": [REQUIRED]}, id="no-priority"
        ),
        pytest.param(
            {"acquirers": [{"acquirer_key": "shape_a", "priority": 1}, {"priority": 2}]},
            {"acquirers.1.acquirer_key": [REQUIRED]},
            id="no-key",
        ),
        pytest.param(
            {"acquirers": [{"acquirer_key": "Shape_A", "priority": 1}]},
            {"acquirers.0.acquirer_key": [BAD_KEY]},
            id="uppercase-key",
        ),
        pytest.param(
            {"acquirers": [{"acquirer_key": "shape-a", "priority": 1}]},
            {"acquirers.0.acquirer_key": [BAD_KEY]},
            id="dash-key",
        ),
        pytest.param(
            {"acquirers": [{"acquirer_key": "a" * 65, "priority": 1}]},
            {"acquirers.0.acquirer_key": ["Certifique-se de que este campo não tenha mais de 64 caracteres."]},
            id="key-65",
        ),
        pytest.param(
            {"acquirers": [{"acquirer_key": "shape_a", "priority": 4}]},
            {"acquirers.0.priority": ["Certifique-se de que este valor seja inferior ou igual a 3."]},
            id="priority-4",
        ),
        pytest.param(
            {"acquirers": [{"acquirer_key": "shape_a", "priority": 0}]},
            # DRF's own pt-BR text, typo included.
            {"acquirers.0.priority": ["Certifque-se de que este valor seja maior ou igual a 1."]},
            id="priority-0",
        ),
        pytest.param(
            {"acquirers": [{"acquirer_key": "shape_a", "priority": "1"}]},
            {"acquirers.0.priority": [NOT_INTEGER]},
            id="priority-string",
        ),
        pytest.param({"acquirer_key": "Shape_A"}, {"acquirer_key": [BAD_KEY]}, id="single-uppercase"),
        pytest.param(
            {"acquirer_key": ""}, {"acquirer_key": ["Este campo pode não estar em branco."]}, id="single-blank"
        ),
    ],
)
def test_override_shape(client_of: Any, override: dict, errors: dict) -> None:
    account = selecting_account(AcquirerFactory(key="shape_a"))
    before = snapshot(account)
    response = post(client_of(account), body(**override))
    assert response.status_code == 422
    assert response.json() == invalid(errors)
    assert snapshot(account) == before


@pytest.mark.parametrize("count", [0, 4])
def test_override_item_count(client_of: Any, count: int) -> None:
    keys = ["cnt_a", "cnt_b", "cnt_c", "cnt_d"]
    account = selecting_account(*(AcquirerFactory(key=k) for k in keys))
    items = [{"acquirer_key": k, "priority": i % 3 + 1} for i, k in enumerate(keys[:count])]
    before = snapshot(account)
    response = post(client_of(account), body(acquirers=items))
    assert response.status_code == 422
    payload = response.json()
    assert payload["message"] == VALIDATION
    [(key, messages)] = payload["data"]["errors"].items()
    assert key.startswith("acquirers")
    assert messages == [
        "Certifique-se de que este campo tenha pelo menos 1 elementos."
        if count == 0
        else "Certifique-se de que este campo não tenha mais que 3 elementos."
    ]
    assert snapshot(account) == before


def test_override_with_four_items_is_reported_under_acquirers(client_of: Any) -> None:
    keys = ["four_a", "four_b", "four_c", "four_d"]
    account = selecting_account(*(AcquirerFactory(key=k) for k in keys))
    items = [{"acquirer_key": k, "priority": i % 3 + 1} for i, k in enumerate(keys)]
    response = post(client_of(account), body(acquirers=items))
    assert response.status_code == 422
    assert response.json() == invalid(
        {"acquirers": ["Certifique-se de que este campo não tenha mais que 3 elementos."]}
    )


# =========================================================================== 6. fallback and timeouts


def test_fallback_records_every_attempt(client_of: Any) -> None:
    failing = AcquirerFactory(key="fb_failing", options={"charge": "fail"})
    ok = AcquirerFactory(key="fb_ok")
    account = with_slots(account_with_balance(), failing, ok)
    response = post(client_of(account), body(amount=4321))
    charge = created(response)
    assert charge.acquirer_id == ok.pk
    assert jsonFromBrcode(response.json()["data"]["pix"]["emv"])["54"] == "43.21"

    first, second = ChargeAttempt.objects.filter(charge_id=charge.id).order_by("position")
    assert (first.position, first.acquirer_id, first.outcome) == (1, failing.pk, "unavailable")
    assert first.error_class == "AcquirerUnavailable"
    assert "refused" in first.error_message
    assert (second.position, second.acquirer_id, second.outcome) == (2, ok.pk, "ok")
    assert (second.error_class, second.error_message) == ("", "")
    for attempt in (first, second):
        assert attempt.account_id == account.pk
        assert attempt.latency_ms >= 0


def test_every_acquirer_fails(client_of: Any) -> None:
    one = AcquirerFactory(key="all_fail_1", options={"charge": "fail"})
    two = AcquirerFactory(key="all_fail_2", options={"charge": "fail"})
    account = with_slots(account_with_balance(), one, two)
    before = snapshot(account)
    response = post(client_of(account), body())
    assert response.status_code == 400
    assert response.json() == error(ALL_FAILED)

    attempts = list(ChargeAttempt.objects.order_by("position"))
    assert [(a.position, a.acquirer_id, a.outcome) for a in attempts] == [
        (1, one.pk, "unavailable"),
        (2, two.pk, "unavailable"),
    ]
    assert len({a.charge_id for a in attempts}) == 1
    assert not Charge.objects.filter(pk=attempts[0].charge_id).exists()
    assert replace(snapshot(account), attempts=before.attempts) == before


def test_timeout_moves_on_and_cancels_the_late_charge(
    client_of: Any, django_capture_on_commit_callbacks: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    slow = AcquirerFactory(key="slow_sbx", options={"charge": "timeout"}, connect_timeout_ms=100, read_timeout_ms=200)
    fast = AcquirerFactory(key="fast_sbx")
    account = with_slots(account_with_balance(), slow, fast)
    client = client_of(account)

    started = time.monotonic()
    with django_capture_on_commit_callbacks() as callbacks:
        response = post(client, body(amount=777))
    elapsed = time.monotonic() - started
    charge = created(response)

    # Left alone the sandbox would answer 0.3 s + 0.5 s after the call; the deadline ended it.
    assert elapsed < 0.8
    assert charge.acquirer_id == fast.pk
    first, second = ChargeAttempt.objects.filter(charge_id=charge.id).order_by("position")
    assert (first.acquirer_id, first.outcome, first.error_class) == (slow.pk, "timeout", "DeadlineExceeded")
    assert 290 <= first.latency_ms < 800
    assert (second.acquirer_id, second.outcome) == (fast.pk, "ok")

    # One cancel, for the slow acquirer and this charge's txid, enqueued on commit.
    assert len(callbacks) == 1
    enqueued: list[tuple[Any, ...]] = []
    monkeypatch.setattr(cancel_charge_at_acquirer, "delay", lambda *args: enqueued.append(args))
    callbacks[0]()
    assert enqueued == [(slow.pk, charge.txid)]

    # The slow acquirer did create the charge; the task withdraws it.
    slow_adapter = adapters.build(slow)
    assert isinstance(slow_adapter, SandboxAdapter)
    wait_until(lambda: slow_adapter.charge_state(charge.txid) == "active")
    cancel_charge_at_acquirer(slow.pk, charge.txid)
    assert slow_adapter.charge_state(charge.txid) == "canceled"

    # The payer holds exactly one live code: the one the client got.
    fast_adapter = adapters.build(fast)
    assert isinstance(fast_adapter, SandboxAdapter)
    assert fast_adapter.charge_state(charge.txid) == "active"


def test_timeout_at_the_only_acquirer_still_cancels(client_of: Any, django_capture_on_commit_callbacks: Any) -> None:
    slow = AcquirerFactory(key="slow_only", options={"charge": "timeout"}, connect_timeout_ms=100, read_timeout_ms=200)
    account = with_slots(account_with_balance(), slow)
    before = snapshot(account)
    client = client_of(account)  # before the capture: issuing a key has on-commit work of its own
    with django_capture_on_commit_callbacks() as callbacks:
        response = post(client, body())
    assert response.status_code == 400
    assert response.json() == error(ALL_FAILED)
    [attempt] = ChargeAttempt.objects.all()
    assert attempt.outcome == "timeout"
    assert not Charge.objects.filter(pk=attempt.charge_id).exists()
    assert replace(snapshot(account), attempts=before.attempts) == before
    assert len(callbacks) == 1

    adapter = adapters.build(slow)
    assert isinstance(adapter, SandboxAdapter)
    txid = attempt.charge_id.hex
    wait_until(lambda: adapter.charge_state(txid) == "active")
    cancel_charge_at_acquirer(slow.pk, txid)
    assert adapter.charge_state(txid) == "canceled"


def test_no_cancel_enqueued_without_a_timeout(client_of: Any, django_capture_on_commit_callbacks: Any) -> None:
    failing = AcquirerFactory(key="nc_failing", options={"charge": "fail"})
    ok = AcquirerFactory(key="nc_ok")
    account = with_slots(account_with_balance(), failing, ok)
    client = client_of(account)  # before the capture: issuing a key has on-commit work of its own
    with django_capture_on_commit_callbacks() as callbacks:
        created(post(client, body()))
    assert callbacks == []


def test_cancel_before_the_late_create_raises_so_celery_retries(db: Any) -> None:
    acquirer = AcquirerFactory(key="early_cancel")
    adapter = adapters.build(acquirer)
    txid = uuid.uuid4().hex
    with pytest.raises(AcquirerUnavailable):
        adapter.cancel_charge(txid)
    with pytest.raises(AcquirerUnavailable):
        cancel_charge_at_acquirer(acquirer.pk, txid)
    # A worker retries on it (called directly, Celery re-raises instead).
    autoretry_for = cancel_charge_at_acquirer.autoretry_for  # type: ignore[attr-defined]
    assert any(issubclass(AcquirerUnavailable, cls) for cls in autoretry_for)
    assert isinstance(adapter, SandboxAdapter)
    assert adapter.charge_state(txid) is None


def test_cancel_task_of_a_deleted_acquirer_is_a_no_op(db: Any) -> None:
    assert cancel_charge_at_acquirer(987_654_321, uuid.uuid4().hex) is None


# =========================================================================== 7. invalid answers from acquirers


class _TestAdapter(AcquirerAdapter):
    """Charges only; the rest is never called by these tests."""

    def create_payout(self, request: PayoutRequest) -> PayoutResult:
        raise NotImplementedError

    def get_payout_status(self, idempotency_id: str) -> PayoutResult:
        raise NotImplementedError

    def parse_notification(self, headers: Any, body: bytes) -> list[Notification]:
        raise NotImplementedError


def _code(request: ChargeRequest, amount: int) -> str:
    return brcode.encode_dynamic(
        location=f"pix.test.local/qr/v2/{request.txid}",
        amount=amount,
        merchant_name=request.merchant_name,
        merchant_city=request.merchant_city,
    )


@adapters.register
class BadCrcAdapter(_TestAdapter):
    name = "test_bad_emv"

    def create_charge(self, request: ChargeRequest) -> ChargeResult:
        code = _code(request, request.amount)
        wrong_crc = "0000" if code[-4:] != "0000" else "FFFF"
        return ChargeResult(provider_charge_id="bad", emv=code[:-4] + wrong_crc)


@adapters.register
class OtherAmountAdapter(_TestAdapter):
    name = "test_other_amount"

    def create_charge(self, request: ChargeRequest) -> ChargeResult:
        return ChargeResult(provider_charge_id="other", emv=_code(request, request.amount + 1))


@adapters.register
class GarbageAdapter(_TestAdapter):
    name = "test_garbage_emv"

    def create_charge(self, request: ChargeRequest) -> ChargeResult:
        return ChargeResult(provider_charge_id="garbage", emv="<html>502 Bad Gateway</html>")


@adapters.register
class BrokenAdapter(_TestAdapter):
    name = "test_broken"

    def create_charge(self, request: ChargeRequest) -> ChargeResult:
        raise KeyError("qrcode")  # an adapter bug, not an acquirer answer


@pytest.mark.parametrize(
    ("adapter", "outcome", "error_class"),
    [
        pytest.param("test_bad_emv", "invalid_response", "InvalidBRCode", id="wrong-crc"),
        pytest.param("test_other_amount", "invalid_response", "InvalidBRCode", id="other-amount"),
        pytest.param("test_garbage_emv", "invalid_response", "InvalidBRCode", id="garbage"),
        pytest.param("test_broken", "error", "KeyError", id="adapter-raises"),
    ],
)
def test_bad_acquirer_answer_moves_the_chain_on(client_of: Any, adapter: str, outcome: str, error_class: str) -> None:
    bad = AcquirerFactory(key="bad_answer", adapter=adapter)
    good = AcquirerFactory(key="good_answer")
    account = with_slots(account_with_balance(), bad, good)
    response = post(client_of(account), body(amount=5000))
    charge = created(response)
    assert charge.acquirer_id == good.pk
    emv = response.json()["data"]["pix"]["emv"]
    assert jsonFromBrcode(emv)["54"] == "50.00"
    assert charge.emv == emv
    first, second = ChargeAttempt.objects.filter(charge_id=charge.id).order_by("position")
    assert (first.acquirer_id, first.outcome, first.error_class) == (bad.pk, outcome, error_class)
    assert (second.acquirer_id, second.outcome) == (good.pk, "ok")


def test_only_bad_answers_is_a_400(client_of: Any) -> None:
    bad = AcquirerFactory(key="only_bad", adapter="test_other_amount")
    broken = AcquirerFactory(key="only_broken", adapter="test_broken")
    account = with_slots(account_with_balance(), bad, broken)
    before = snapshot(account)
    response = post(client_of(account), body())
    assert response.status_code == 400
    assert response.json() == error(ALL_FAILED)
    assert [a.outcome for a in ChargeAttempt.objects.order_by("position")] == ["invalid_response", "error"]
    assert replace(snapshot(account), attempts=before.attempts) == before


def test_unknown_adapter_name_counts_as_a_failed_attempt(client_of: Any) -> None:
    misconfigured = AcquirerFactory(key="misconfigured", adapter="no_such_adapter")
    good = AcquirerFactory(key="after_misconfigured")
    account = with_slots(account_with_balance(), misconfigured, good)
    charge = created(post(client_of(account), body()))
    # Cannot be called: unavailable, like an acquirer that does not answer.
    assert attempts_of(charge.id) == [(1, "misconfigured", "unavailable"), (2, "after_misconfigured", "ok")]


# =========================================================================== 8. unexpected errors


def test_unexpected_error_is_a_500_without_trace(
    api: APIClient, account: Account, platform_acquirer: Acquirer, monkeypatch: pytest.MonkeyPatch
) -> None:
    def explode(**kwargs: Any) -> Charge:
        raise RuntimeError("database password is hunter2")

    monkeypatch.setattr("payments.apis.charge_create", explode)
    before = snapshot(account)
    response = post(api, body())
    assert response.status_code == 500
    assert response.json() == error("Ocorreu um erro ao criar o pagamento.")
    assert "hunter2" not in response.content.decode()
    assert snapshot(account) == before
    assert AccountBalance.objects.get(account=account).available == SEED_BALANCE


# =========================================================================== 9. nothing stored, nothing left


@adapters.register
class RecordingAdapter(_TestAdapter):
    """Accepts every charge and remembers it was asked."""

    name = "test_recording"
    asked: list[str] = []

    def create_charge(self, request: ChargeRequest) -> ChargeResult:
        RecordingAdapter.asked.append(request.txid)
        return ChargeResult(provider_charge_id="recorded", emv=_code(request, request.amount))


@pytest.fixture
def recording(db: Any) -> Acquirer:
    RecordingAdapter.asked = []
    return AcquirerFactory(key="recording", adapter="test_recording", default_priority=1)


def nested(depth: int) -> Any:
    """Objects and arrays, ``depth`` of them one inside another."""
    value: Any = "bottom"
    for level in range(depth):
        value = [value] if level % 2 else {"k": value}
    return value


@pytest.mark.parametrize("depth", [33, 400])
def test_metadata_nested_too_deep_is_a_422_and_no_acquirer_is_asked(
    api: APIClient, account: Account, recording: Acquirer, depth: int
) -> None:
    before = snapshot(account)
    response = post(api, body(metadata={"deep": nested(depth - 1)}))
    assert response.status_code == 422
    assert response.json() == invalid({"metadata": ["Os metadados podem ter no máximo 32 níveis de objetos e listas."]})
    assert RecordingAdapter.asked == []
    assert snapshot(account) == before


def test_metadata_at_the_depth_limit_is_taken(api: APIClient, recording: Acquirer) -> None:
    charge = created(post(api, body(metadata={"deep": nested(31)})))
    assert charge.metadata == {"deep": nested(31)}
    assert RecordingAdapter.asked == [charge.txid]


@pytest.mark.parametrize(
    "overrides",
    [
        {"buyer": buyer(buyer_name="Maria \ud800")},
        {"buyer": buyer(buyer_city="S\udfffo Paulo")},
        {"postback_url": "https://example.com/\ud800"},
    ],
    ids=["buyer_name", "buyer_city", "postback_url"],
)
def test_text_the_database_cannot_store_is_a_422_and_no_acquirer_is_asked(
    api: APIClient, account: Account, recording: Acquirer, overrides: dict[str, Any]
) -> None:
    before = snapshot(account)
    # Escaped JSON (\ud800): valid JSON, but not UTF-8 once decoded.
    response = api.post(URL, json.dumps(body(**overrides)), content_type="application/json")
    assert response.status_code == 422
    [(field, messages)] = response.json()["data"]["errors"].items()
    assert field in {"buyer.buyer_name", "buyer.buyer_city", "postback_url"}
    assert messages == ["O texto não pode conter caracteres substitutos (U+D800 a U+DFFF)."]
    assert RecordingAdapter.asked == []
    assert snapshot(account) == before


@pytest.fixture
def charges_refused(transactional_db: Any) -> Iterator[None]:
    """The database refuses every charge row (a trigger), as a full disk
    would. Committed, so that the request meets it as in production (its
    insert is a statement of its own, not inside the test's transaction),
    and dropped afterwards."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE FUNCTION refuse_charge() RETURNS trigger AS $$ BEGIN RAISE EXCEPTION 'disk full'; END $$"
            " LANGUAGE plpgsql;"
            " CREATE TRIGGER refuse_charge BEFORE INSERT ON payments_charge"
            " FOR EACH ROW EXECUTE FUNCTION refuse_charge()"
        )
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP TRIGGER refuse_charge ON payments_charge; DROP FUNCTION refuse_charge()")


@pytest.mark.django_db(transaction=True)
def test_a_charge_whose_insert_fails_is_withdrawn_from_the_acquirer(
    charges_refused: None,
    api: APIClient,
    account: Account,
    platform_acquirer: Acquirer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The database refuses the row, after the acquirer accepted.
    enqueued: list[tuple[Any, ...]] = []
    monkeypatch.setattr(cancel_charge_at_acquirer, "delay", lambda *args: enqueued.append(args))
    before = snapshot(account)

    response = post(api, body())

    assert response.status_code == 500
    assert response.json() == error("Ocorreu um erro ao criar o pagamento.")
    assert snapshot(account) == before
    [(acquirer_id, txid)] = enqueued
    assert acquirer_id == platform_acquirer.pk
    adapter = adapters.build(platform_acquirer)
    assert isinstance(adapter, SandboxAdapter)
    assert adapter.charge_state(txid) == "active"  # the payer could pay it: nobody would ever know
    cancel_charge_at_acquirer(acquirer_id, txid)
    assert adapter.charge_state(txid) == "canceled"


def test_an_invalid_br_code_is_withdrawn_from_the_acquirer_that_made_it(
    client_of: Any, monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: Any
) -> None:
    bad = AcquirerFactory(key="bad_code", options={"charge": "invalid_emv"})
    good = AcquirerFactory(key="good_code")
    account = with_slots(account_with_balance(), bad, good)
    with django_capture_on_commit_callbacks() as callbacks:
        charge = created(post(client_of(account), body()))
    assert attempts_of(charge.id) == [(1, "bad_code", "invalid_response"), (2, "good_code", "ok")]

    enqueued: list[tuple[Any, ...]] = []
    monkeypatch.setattr(cancel_charge_at_acquirer, "delay", lambda *args: enqueued.append(args))
    for callback in callbacks:
        callback()
    assert enqueued == [(bad.pk, charge.txid)]
    bad_adapter = adapters.build(bad)
    assert isinstance(bad_adapter, SandboxAdapter)
    assert bad_adapter.charge_state(charge.txid) == "active"
    cancel_charge_at_acquirer(bad.pk, charge.txid)
    assert bad_adapter.charge_state(charge.txid) == "canceled"


def test_the_creation_body_is_what_its_declared_fields_render() -> None:
    # The body is built by hand (a charge's CPU); its declared fields are the
    # schema. DRF's own rendering of those fields must give the same body, or
    # the schema and the answer have drifted apart.
    charge = Charge(amount=1500, platform_tax=45, liquid_amount=1455, emv="000201-emv")
    serializer = ChargeCreatedSerializer()
    assert serializer.to_representation(charge) == serializers.Serializer.to_representation(serializer, charge)
