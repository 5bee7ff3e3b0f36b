"""POST /api/due-charges as a client sees it: the 201 and what is stored,
every field refused with a 422 under its name before any acquirer is
called (nothing stored), idempotent repeats, and the chain's fallback."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from accounts.models import Account
from acquirers.adapters.sandbox import SandboxAdapter
from acquirers.models import Acquirer
from acquirers.services import acquirer_grants_set
from payments.due_charges import NOT_PAYABLE
from payments.due_models import DueCharge
from payments.models import Charge, ChargeAttempt
from tests.due_charges.helpers import CNPJ, CPF, FINE, INTEREST, URL, body, client_of, due_in
from tests.factories import AccountFactory, AcquirerFactory

pytestmark = pytest.mark.django_db

VALIDATION = "Erro de validação nos dados fornecidos"
ALL_FAILED = "Erro ao processar o pagamento. Tente novamente mais tarde."
NET_BELOW_MIN = "O valor da transação deve resultar em pelo menos R$ 0,10 após as taxas."


@pytest.fixture
def acquirer(db: Any) -> Acquirer:
    return AcquirerFactory(key="due_ok", default_priority=1)


@pytest.fixture
def account(db: Any) -> Account:
    return AccountFactory()


@pytest.fixture
def api(account: Account) -> APIClient:
    return client_of(account)


def test_created_with_its_terms_and_the_amount_due_today(api: APIClient, account: Account, acquirer: Acquirer) -> None:
    response = api.post(URL, body(debtor={"name": "Empresa X", "document": "11.222.333/0001-81", "state": "SP"}))

    assert response.status_code == 201
    assert response.json()["message"] == "Cobrança com vencimento criada com sucesso."
    data = response.json()["data"]
    charge = Charge.objects.get(pk=data["id"])
    assert (charge.kind, charge.status, charge.amount, charge.account_id) == ("due", "pending", 15000, account.pk)
    assert data["status"] == "pending"
    assert (data["amount"], data["due_date"], data["days_after_due"]) == (15000, due_in(10).isoformat(), 30)
    assert (data["fine"], data["interest"], data["rebate"], data["discount"]) == (FINE, INTEREST, None, None)
    assert data["amount_due_today"] == {
        "date": due_in(0).isoformat(),
        "amount": 15000,
        "components": {"original": 15000, "multa": 0, "juros": 0, "abatimento": 0, "desconto": 0},
    }
    assert data["debtor"]["document"] == CNPJ
    assert data["debtor"]["state"] == "SP"
    assert data["pix"]["emv"] == charge.emv != ""
    assert data["acquirer"] == "due_ok"
    assert data["txid"] == charge.txid
    assert DueCharge.objects.get(pk=charge.pk).due_date == due_in(10)


def _nested(path: str, value: Any) -> dict[str, Any]:
    if path.startswith("debtor."):
        return {"debtor": {"name": "Maria da Silva", "document": CPF, path.split(".", 1)[1]: value}}
    return {path: value}


@pytest.mark.parametrize(
    ("field", "value", "key"),
    [
        ("amount", 99, "amount"),
        ("amount", "150", "amount"),
        ("due_date", "2026-1-5", "due_date"),
        ("due_date", "10/12/2026", "due_date"),
        ("due_date", "9999-12-31", "due_date"),  # past ten years ahead: counted day by day, it would overflow
        ("due_date", "2999-01-01", "due_date"),
        ("days_after_due", -1, "days_after_due"),
        ("days_after_due", 3651, "days_after_due"),
        ("debtor.document", "12345678900", "debtor.document"),
        ("debtor.name", "", "debtor.name"),
        ("debtor.email", "não-é-email", "debtor.email"),
        ("debtor.email", "a" * 190 + "@example.com", "debtor.email"),  # a cobv's devedor.email holds 200
        ("debtor.zip_code", "123", "debtor.zip_code"),
        ("description", "x" * 141, "description"),
        ("fine", {"modalidade": 9, "valorPerc": "2.00"}, "fine"),
        ("interest", "2%", "interest"),
        ("discount", {"modalidade": 1, "descontoDataFixa": [{"data": "2099-01-01", "valorPerc": "5.00"}]}, "discount"),
        ("postback_url", "ftp://x", "postback_url"),
        ("acquirers", [{"acquirer_key": "due_ok"}], "acquirers.0.priority"),
    ],
)
def test_a_bad_field_is_a_422_under_its_name_and_no_acquirer_is_called(
    api: APIClient, acquirer: Acquirer, monkeypatch: pytest.MonkeyPatch, field: str, value: Any, key: str
) -> None:
    def never(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("an acquirer was called")

    monkeypatch.setattr(SandboxAdapter, "create_due_charge", never)
    response = api.post(URL, body(**_nested(field, value)))

    assert response.status_code == 422, response.json()
    assert response.json()["message"] == VALIDATION
    errors = response.json()["data"]["errors"]
    assert any(name == key or name.startswith(key + ".") for name in errors), errors
    assert not Charge.objects.exists()
    assert not ChargeAttempt.objects.exists()


def test_a_charge_no_longer_payable_is_refused_on_its_due_date(api: APIClient, acquirer: Acquirer) -> None:
    response = api.post(URL, body(due_date=due_in(-5).isoformat(), days_after_due=2))

    assert response.status_code == 422
    assert response.json()["data"]["errors"] == {"due_date": [NOT_PAYABLE]}
    assert not Charge.objects.exists()


def test_both_override_forms_are_refused(api: APIClient, acquirer: Acquirer) -> None:
    response = api.post(URL, body(acquirer_key="due_ok", acquirers=[{"acquirer_key": "due_ok", "priority": 1}]))

    assert response.status_code == 422
    assert "acquirers" in response.json()["data"]["errors"]
    assert not Charge.objects.exists()


def test_a_repeat_with_the_same_key_answers_the_same_charge(api: APIClient, acquirer: Acquirer) -> None:
    first = api.post(URL, body(), HTTP_IDEMPOTENCY_KEY="mensalidade-12")
    again = api.post(URL, body(), HTTP_IDEMPOTENCY_KEY="mensalidade-12")

    assert first.status_code == again.status_code == 201
    assert again.json() == first.json()
    assert again.headers["Idempotent-Replayed"] == "true"
    assert Charge.objects.count() == 1
    other = api.post(URL, body(amount=20000), HTTP_IDEMPOTENCY_KEY="mensalidade-12")
    assert other.status_code == 422
    assert "idempotency_key" in other.json()["data"]["errors"]
    assert Charge.objects.count() == 1


def test_the_chain_falls_back_to_the_next_acquirer(api: APIClient) -> None:
    AcquirerFactory(key="due_first", default_priority=1, options={"charge": "fail"})
    AcquirerFactory(key="due_second", default_priority=2)

    response = api.post(URL, body())

    assert response.status_code == 201
    assert response.json()["data"]["acquirer"] == "due_second"
    charge = Charge.objects.get()
    attempts = list(ChargeAttempt.objects.filter(charge=charge.pk).order_by("position"))
    assert [a.acquirer.key for a in attempts] == ["due_first", "due_second"]


def test_every_acquirer_failing_is_a_400_and_stores_no_charge(api: APIClient) -> None:
    AcquirerFactory(key="due_down", default_priority=1, options={"charge": "fail"})

    response = api.post(URL, body())

    assert response.status_code == 400
    assert response.json() == {"success": False, "message": ALL_FAILED, "data": None}
    assert not Charge.objects.exists()


def test_an_override_picks_the_acquirer(acquirer: Acquirer) -> None:
    chosen = AcquirerFactory(key="due_chosen")
    account = AccountFactory(can_select_pix_cash_in_acquirer=True)
    acquirer_grants_set(account=account, acquirers=[chosen])

    response = client_of(account).post(URL, body(acquirers=[{"acquirer_key": "due_chosen", "priority": 1}]))

    assert response.status_code == 201, response.json()
    assert response.json()["data"]["acquirer"] == "due_chosen"


def test_a_rebate_leaving_too_little_after_the_fee_is_a_400_before_any_acquirer(
    api: APIClient, acquirer: Acquirer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(SandboxAdapter, "create_due_charge", lambda *a, **k: pytest.fail("an acquirer was called"))

    response = api.post(URL, body(rebate={"modalidade": 1, "valorPerc": "149.95"}))

    assert response.status_code == 400, response.json()
    assert response.json() == {"success": False, "message": NET_BELOW_MIN, "data": None}
    assert not Charge.objects.exists()
