"""POST /api/recurrences as a client sees it: the 201 of each journey and
what is stored; every field refused with a 422 under its name, the business
rules' 400s, a second live recurrence's 409 and the chain's failure, each
before (or without) anything stored; idempotent repeats."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from accounts.models import Account, PaymentMethod
from acquirers.models import Acquirer
from api.models import IdempotencyRecord
from core import dispatch
from recurrences.authorisations import push_send
from recurrences.models import Recurrence
from recurrences.services import SEND_PUSH
from tests.helpers import local
from tests.recurrences.conftest import RecAdapter
from tests.recurrences.helpers import CNPJ, CPF, URL, VALIDATION, body, due_in, push_body
from webhooks.models import WebhookEvent

pytestmark = pytest.mark.django_db

LIVE_EXISTS = "Já existe uma recorrência ativa ou aguardando autorização para este devedor e contrato."
ALL_FAILED = "Erro ao processar o pagamento. Tente novamente mais tarde."
NOT_ENABLED = "Este método de pagamento não está habilitado para sua conta."
ABOVE_MAX = "O valor máximo permitido para transações é de R$ 3.000,00."
NET_BELOW_MIN = "O valor da transação deve resultar em pelo menos R$ 0,10 após as taxas."


def test_qr_journey_created_with_its_code(api: APIClient, account: Account, acquirer: Acquirer) -> None:
    response = api.post(URL, body(debtor={"document": "11.222.333/0001-81", "name": "Empresa X"}))

    assert response.status_code == 201, response.json()
    assert response.json()["message"] == "Recorrência criada com sucesso."
    data = response.json()["data"]
    stored = Recurrence.objects.get(pk=data["id"])
    assert (stored.account_id, stored.acquirer_id, stored.status, stored.journey) == (
        account.pk,
        acquirer.pk,
        "created",
        "qr",
    )
    assert data["status"] == "created"
    assert data["id_rec"] == stored.id_rec != ""
    assert data["qr_code"] == {"emv": stored.emv, "location": stored.location}
    assert data["qr_code"]["emv"].startswith("000201")
    assert data["debtor"] == {"name": "Empresa X", "document": CNPJ}
    assert (data["contract"], data["description"], data["amount"], data["max_amount"]) == (
        "ASSINATURA-0001",
        "Plano mensal",
        4990,
        None,
    )
    assert (data["periodicity"], data["first_due_date"], data["end_date"], data["retry_policy"]) == (
        "monthly",
        due_in(20).isoformat(),
        None,
        "3_in_7_days",
    )
    assert data["payer_bank"] is None
    assert data["acquirer"] == "rec_ok"
    # Decisions §1: timestamps in America/Sao_Paulo, YYYY-MM-DD HH:mm:ss.
    assert data["created_at"] == local(stored.created_at)
    # API Pix terms as the acquirer got them.
    assert stored.terms["valor"] == {"valorRec": "49.90"}
    assert stored.terms["vinculo"]["devedor"] == {"cnpj": CNPJ, "nome": "Empresa X"}
    assert stored.terms["politicaRetentativa"] == "PERMITE_3R_7D"
    event = WebhookEvent.objects.get(event_type="recurrence")
    assert event.body()["data"] == data


def test_push_journey_with_variable_amounts(api: APIClient, acquirer: Acquirer) -> None:
    response = api.post(URL, push_body(end_date=due_in(400).isoformat()))

    assert response.status_code == 201, response.json()
    data = response.json()["data"]
    assert (data["journey"], data["amount"], data["max_amount"], data["qr_code"]) == ("push", None, 50000, None)
    assert data["payer_bank"] == {"ispb": "00000000", "branch": "0001", "account": "123456"}
    assert (data["retry_policy"], data["end_date"]) == ("none", due_in(400).isoformat())
    stored = Recurrence.objects.get(pk=data["id"])
    assert stored.terms["valor"] == {"valorMinimoRecebedor": "500.00"}
    assert stored.terms["calendario"]["dataFinal"] == due_in(400).isoformat()


def _set(path: str, value: Any, fields: dict[str, Any]) -> dict[str, Any]:
    if value is _DROP:
        head, _, tail = path.partition(".")
        if tail:
            fields[head] = {k: v for k, v in fields[head].items() if k != tail}
        else:
            fields.pop(path, None)
        return fields
    head, _, tail = path.partition(".")
    if tail:
        fields[head] = {**fields.get(head, {}), tail: value}
    else:
        fields[path] = value
    return fields


_DROP = object()


@pytest.mark.parametrize(
    ("base", "field", "value", "key"),
    [
        ("qr", "debtor.document", "12345678900", "debtor.document"),
        ("qr", "debtor.name", "", "debtor.name"),
        ("qr", "debtor.name", "x" * 141, "debtor.name"),
        ("qr", "debtor", _DROP, "debtor"),
        ("qr", "contract", "x" * 36, "contract"),
        ("qr", "contract", "   ", "contract"),
        ("qr", "description", "x" * 36, "description"),
        ("qr", "amount", 99, "amount"),
        ("qr", "amount", "4990", "amount"),
        ("qr", "amount", 49.9, "amount"),
        ("qr", "max_amount", 50000, "amount"),  # both: one of them
        ("qr", "amount", _DROP, "amount"),  # neither
        ("qr", "periodicity", "daily", "periodicity"),
        ("qr", "first_due_date", "2030-1-5", "first_due_date"),
        ("qr", "first_due_date", "9999-12-31", "first_due_date"),  # more than ten years ahead
        ("qr", "end_date", "2000-01-01", "end_date"),  # before the first due date
        ("qr", "retry_policy", "always", "retry_policy"),
        ("qr", "journey", "email", "journey"),
        ("qr", "payer_bank", {"ispb": "00000000", "account": "1"}, "payer_bank"),  # refused for qr
        ("push", "payer_bank", _DROP, "payer_bank"),  # required for push
        ("push", "payer_bank.ispb", "123", "payer_bank.ispb"),
        ("push", "payer_bank.account", "", "payer_bank.account"),
        ("qr", "postback_url", "ftp://x", "postback_url"),
        ("qr", "metadata", [1], "metadata"),
    ],
)
def test_a_bad_field_is_a_422_under_its_name_and_no_acquirer_is_called(
    api: APIClient, acquirer: Acquirer, base: str, field: str, value: Any, key: str
) -> None:
    fields = _set(field, value, body() if base == "qr" else push_body())
    response = api.post(URL, fields)

    assert response.status_code == 422, response.json()
    assert response.json()["message"] == VALIDATION
    errors = response.json()["data"]["errors"]
    assert any(name == key or name.startswith(key + ".") for name in errors), errors
    assert not Recurrence.objects.exists()
    assert RecAdapter.calls == []
    assert not WebhookEvent.objects.exists()


def test_a_first_due_date_in_the_past_is_a_422(api: APIClient, acquirer: Acquirer) -> None:
    response = api.post(URL, body(first_due_date=due_in(-1).isoformat()))

    assert response.status_code == 422
    assert response.json()["data"]["errors"] == {
        "first_due_date": ["A data do primeiro vencimento não pode estar no passado."]
    }
    assert RecAdapter.calls == []


def test_an_unknown_body_is_a_400(api: APIClient, acquirer: Acquirer) -> None:
    response = api.post(URL, "[1]", content_type="application/json")

    assert response.status_code == 400
    assert response.json() == {"success": False, "message": "Corpo da requisição inválido.", "data": None}


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"amount": 300001}, ABOVE_MAX),
        ({"amount": None, "max_amount": 300001}, ABOVE_MAX),
    ],
)
def test_business_rules_are_400s_before_any_acquirer(
    api: APIClient, acquirer: Acquirer, changes: dict[str, Any], message: str
) -> None:
    fields = {k: v for k, v in {**body(), **changes}.items() if v is not None}
    response = api.post(URL, fields)

    assert response.status_code == 400, response.json()
    assert response.json() == {"success": False, "message": message, "data": None}
    assert not Recurrence.objects.exists()
    assert RecAdapter.calls == []


def test_pix_not_enabled_is_a_400(api: APIClient, account: Account, acquirer: Acquirer) -> None:
    Account.objects.filter(pk=account.pk).update(
        payment_methods=[m for m in account.payment_methods if m != PaymentMethod.PIX]
    )

    response = api.post(URL, body())

    assert response.status_code == 400
    assert response.json()["message"] == NOT_ENABLED
    assert RecAdapter.calls == []


def test_a_fixed_amount_whose_fee_leaves_less_than_ten_centavos_is_a_400(
    api: APIClient, account: Account, acquirer: Acquirer
) -> None:
    Account.objects.filter(pk=account.pk).update(cashin_fee_fixed=95, cashin_fee_bps=0)

    response = api.post(URL, body(amount=100))

    assert response.status_code == 400
    assert response.json()["message"] == NET_BELOW_MIN
    assert RecAdapter.calls == []


def test_a_second_live_recurrence_for_the_same_debtor_and_contract_is_a_409(api: APIClient, acquirer: Acquirer) -> None:
    assert api.post(URL, body()).status_code == 201
    RecAdapter.calls.clear()

    response = api.post(URL, body(debtor={"document": "529.982.247-25", "name": "Outra"}))

    assert response.status_code == 409
    assert response.json() == {"success": False, "message": LIVE_EXISTS, "data": None}
    assert Recurrence.objects.count() == 1
    assert RecAdapter.calls == []
    # Another contract, or another debtor, is another recurrence.
    assert api.post(URL, body(contract="ASSINATURA-0002")).status_code == 201
    assert api.post(URL, body(debtor={"document": CNPJ, "name": "Empresa"})).status_code == 201


def test_a_cancelled_one_does_not_hold_its_contract(api: APIClient, acquirer: Acquirer) -> None:
    first = api.post(URL, body()).json()["data"]
    assert api.post(f"{URL}/{first['id']}/cancel").status_code == 200

    assert api.post(URL, body()).status_code == 201


def test_every_acquirer_failing_is_a_400_and_nothing_is_stored(api: APIClient, acquirer: Acquirer) -> None:
    Acquirer.objects.filter(pk=acquirer.pk).update(options={"rec": "fail"})

    response = api.post(URL, body())

    assert response.status_code == 400
    assert response.json() == {"success": False, "message": ALL_FAILED, "data": None}
    assert RecAdapter.calls == ["create_recurrence"]
    assert not Recurrence.objects.exists()


def test_the_same_key_and_body_replays_the_first_answer(api: APIClient, acquirer: Acquirer) -> None:
    first = api.post(URL, body(), HTTP_IDEMPOTENCY_KEY="rec-1")
    again = api.post(URL, body(), HTTP_IDEMPOTENCY_KEY="rec-1")

    assert first.status_code == again.status_code == 201
    assert again.json() == first.json()
    assert again["Idempotent-Replayed"] == "true"
    assert Recurrence.objects.count() == 1
    assert RecAdapter.calls == ["create_recurrence"]
    assert IdempotencyRecord.objects.get(key="rec-1").response_status == 201


def test_the_same_key_with_another_body_is_a_422(api: APIClient, acquirer: Acquirer) -> None:
    assert api.post(URL, body(), HTTP_IDEMPOTENCY_KEY="rec-2").status_code == 201

    response = api.post(URL, body(contract="OUTRO"), HTTP_IDEMPOTENCY_KEY="rec-2")

    assert response.status_code == 422
    assert "idempotency_key" in response.json()["data"]["errors"]
    assert Recurrence.objects.count() == 1


def test_a_refusal_is_replayed_too(api: APIClient, acquirer: Acquirer) -> None:
    assert api.post(URL, body()).status_code == 201
    first = api.post(URL, body(), HTTP_IDEMPOTENCY_KEY="rec-3")
    again = api.post(URL, body(), HTTP_IDEMPOTENCY_KEY="rec-3")

    assert first.status_code == again.status_code == 409
    assert again["Idempotent-Replayed"] == "true"


def test_a_cashout_credential_cannot_create(account: Account, acquirer: Acquirer) -> None:
    from accounts.services import credential_issue
    from tests.conftest import client_for

    client = client_for(credential_issue(account=account, permission="cashout"))
    response = client.post(URL, body(), format="json")

    assert response.status_code == 403
    assert not Recurrence.objects.exists()


def test_the_debtor_document_is_stored_digits_only(api: APIClient, acquirer: Acquirer) -> None:
    data = api.post(URL, body(debtor={"document": "529.982.247-25", "name": "Maria"})).json()["data"]

    assert data["debtor"]["document"] == CPF
    assert Recurrence.objects.get(pk=data["id"]).debtor_document == CPF


def test_the_push_request_goes_to_the_payers_bank_after_the_answer(
    api: APIClient, acquirer: Acquirer, monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: Any
) -> None:
    queued: list[tuple[str, tuple[Any, ...]]] = []
    monkeypatch.setattr(dispatch, "enqueue", lambda task, *args, **kwargs: queued.append((task, args)))

    with django_capture_on_commit_callbacks(execute=True):
        response = api.post(URL, push_body())

    assert response.status_code == 201
    recurrence_id = response.json()["data"]["id"]
    assert queued == [(SEND_PUSH, (recurrence_id,))]
    assert RecAdapter.calls == ["create_recurrence"]  # the request itself: by the worker
    assert push_send(recurrence_id=recurrence_id)
    assert RecAdapter.calls[-1] == "request_authorisation"
    assert Recurrence.objects.get(pk=recurrence_id).push_status == "CRIADA"
