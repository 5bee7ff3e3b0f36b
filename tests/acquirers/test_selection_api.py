"""GET/PUT /pix-cash-in/acquirers: the account's default cash-in acquirers,
with every rule of the spec's table and the check order of decisions §2."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest
from rest_framework.test import APIClient

from accounts.models import Account, ApiCredential
from accounts.services import IssuedCredential
from acquirers.models import Acquirer, AcquirerSlot
from acquirers.services import acquirer_grants_set
from payments.models import Charge
from tests.conftest import client_for
from tests.factories import AccountFactory, AcquirerFactory

URL = "/api/pix-cash-in/acquirers"
ENTRY_FIELDS = {
    "nominal",
    "acquirer_key",
    "acquirer_name",
    "max_ticket",
    "conversion_percent",
    "is_new",
    "active_priority",
}
NO_SLOTS: dict[str, Any] = {"primary": None, "secondary": None, "tertiary": None}
CHARGE_BODY = {
    "payment_method": "pix",
    "amount": 1000,
    "buyer": {"buyer_name": "Fulano", "buyer_document": "52998224725", "buyer_phone": "11999998888"},
}


def refused(message: str) -> dict[str, Any]:
    return {"success": False, "message": message, "data": None}


NO_PERMISSION = refused("Esta credencial não tem permissão para realizar esta operação.")
NOT_APPROVED = refused("Sua conta precisa estar aprovada para usar esta funcionalidade.")
BLOCKED = refused("Sua conta está bloqueada. Não é permitido realizar esta ação.")
FEATURE_OFF = refused("Seleção de adquirente PIX cash-in não está habilitada para esta conta.")
DUPLICATE_PRIORITY = "Não é permitido informar a mesma prioridade mais de uma vez."
DUPLICATE_ACQUIRER = "Não é permitido repetir a mesma adquirente em prioridades diferentes."
UNAVAILABLE = "Adquirente indisponível para seleção nesta conta."
BOTH_FORMS = "Informe apenas um dos campos: acquirer_key ou acquirers."

pytestmark = pytest.mark.django_db


@pytest.fixture
def account(db: Any) -> Account:
    return AccountFactory(can_select_pix_cash_in_acquirer=True)


@pytest.fixture
def acquirers(account: Account) -> dict[str, Acquirer]:
    """alpha, beta, gamma: available; delta: granted but disabled; omega: enabled, not granted."""
    made: dict[str, Acquirer] = {
        "alpha": AcquirerFactory(
            key="alpha",
            name="Alpha",
            nominal="Alpha Pagamentos S.A.",
            max_ticket=150_000,
            conversion_percent_override=Decimal("87.50"),
            is_new=False,
            default_priority=1,
        ),
        "beta": AcquirerFactory(key="beta", name="Beta", max_ticket=300_000, is_new=True),
        "gamma": AcquirerFactory(key="gamma", name="Gamma", conversion_percent_override=Decimal("12.25")),
        "delta": AcquirerFactory(key="delta", name="Delta", enabled=False),
        "omega": AcquirerFactory(key="omega", name="Omega"),
    }
    acquirer_grants_set(account=account, acquirers=[made[k] for k in ("alpha", "beta", "gamma", "delta")])
    return made


def slot(acquirer: Acquirer) -> dict[str, str]:
    return {"acquirer_key": acquirer.key, "acquirer_name": acquirer.name}


def stored_slots(account: Account) -> dict[int, str]:
    rows = AcquirerSlot.objects.filter(account=account, purpose=AcquirerSlot.Purpose.CASHIN)
    return dict(rows.values_list("priority", "acquirer__key"))


def put(api: APIClient, body: Any) -> Any:
    return api.put(URL, body, format="json")


def put_ok(api: APIClient, body: Any) -> dict[str, Any]:
    response = put(api, body)
    assert response.status_code == 200, response.content
    payload: dict[str, Any] = response.json()
    assert (payload["success"], payload["message"]) == (True, "Adquirentes atualizadas com sucesso.")
    assert set(payload["data"]) == {"active_acquirers"}
    active: dict[str, Any] = payload["data"]["active_acquirers"]
    return active


def unprocessable(api: APIClient, account: Account, body: Any) -> dict[str, Any]:
    """A 422 in the validation envelope; the stored configuration must be untouched."""
    before = stored_slots(account)
    response = put(api, body)
    assert response.status_code == 422, response.content
    payload: dict[str, Any] = response.json()
    assert set(payload) == {"success", "message", "data"}
    assert payload["success"] is False
    assert set(payload["data"]) == {"errors"}
    assert stored_slots(account) == before
    return payload


def rule_violation(api: APIClient, account: Account, body: Any) -> dict[str, list[str]]:
    """A 422 of the acquirer rules: message "Erro de validação" (spec, Errors)."""
    payload = unprocessable(api, account, body)
    assert payload["message"] == "Erro de validação"
    errors: dict[str, list[str]] = payload["data"]["errors"]
    return errors


# --------------------------------------------------------------------------- check order


@pytest.mark.parametrize("method", ["get", "put"])
def test_401_before_everything(method: str) -> None:
    AccountFactory(status=Account.Status.PENDING, is_blocked=True)
    response = getattr(APIClient(), method)(URL, {"acquirer_key": "Bad Key"}, format="json")
    assert response.status_code == 401
    assert response.json() == {
        "error": "Credenciais inválidas",
        "message": "Chave pública e chave privada são obrigatórias",
    }


@pytest.mark.parametrize("method", ["get", "put"])
@pytest.mark.parametrize(
    ("account_fields", "permission", "expected"),
    [
        # Every later check would also fail: the first one decides.
        ({"status": Account.Status.PENDING, "is_blocked": True}, ApiCredential.Permission.CASHOUT, NO_PERMISSION),
        ({"status": Account.Status.REJECTED, "is_blocked": True}, ApiCredential.Permission.ALL, NOT_APPROVED),
        ({"status": Account.Status.APPROVED, "is_blocked": True}, ApiCredential.Permission.CASHIN, BLOCKED),
        ({"status": Account.Status.APPROVED, "is_blocked": False}, ApiCredential.Permission.ALL, FEATURE_OFF),
    ],
    ids=["permission", "not-approved", "blocked", "feature-off"],
)
def test_403_in_order(
    issue_credential: Callable[..., IssuedCredential],
    method: str,
    account_fields: dict[str, Any],
    permission: str,
    expected: dict[str, Any],
) -> None:
    account = AccountFactory(can_select_pix_cash_in_acquirer=False, **account_fields)
    client = client_for(issue_credential(account, permission))
    # An invalid body too: validation comes after every 403.
    response = getattr(client, method)(URL, {"acquirers": [{"acquirer_key": "Bad Key"}]}, format="json")
    assert response.status_code == 403
    assert response.json() == expected
    assert stored_slots(account) == {}


def test_cashout_credential_gets_the_permission_403_even_with_the_feature_on(
    account: Account, issue_credential: Callable[..., IssuedCredential]
) -> None:
    client = client_for(issue_credential(account, ApiCredential.Permission.CASHOUT))
    assert client.get(URL).json() == NO_PERMISSION
    assert put(client, {"acquirer_key": "alpha"}).json() == NO_PERMISSION


@pytest.mark.parametrize("permission", [ApiCredential.Permission.CASHIN, ApiCredential.Permission.ALL])
def test_cashin_and_all_credentials_may_use_it(
    account: Account,
    acquirers: dict[str, Acquirer],
    issue_credential: Callable[..., IssuedCredential],
    permission: str,
) -> None:
    client = client_for(issue_credential(account, permission))
    assert client.get(URL).status_code == 200
    assert put(client, {"acquirer_key": "beta"}).status_code == 200


def test_validation_after_the_feature_check(api: APIClient, account: Account) -> None:
    errors = rule_violation(api, account, {"acquirers": [{"acquirer_key": "Bad Key", "priority": 1}]})
    assert set(errors) == {"acquirers.0.acquirer_key"}


# --------------------------------------------------------------------------- GET


def test_get_lists_only_available_acquirers(api: APIClient, acquirers: dict[str, Acquirer]) -> None:
    response = api.get(URL)

    assert response.status_code == 200
    body = response.json()
    assert (body["success"], body["message"]) == (True, "Adquirentes listadas com sucesso.")
    assert set(body["data"]) == {"acquirers", "active_acquirers"}
    assert body["data"]["active_acquirers"] == NO_SLOTS
    entries = body["data"]["acquirers"]
    assert all(set(entry) == ENTRY_FIELDS for entry in entries)
    assert entries == [
        {
            "nominal": "Alpha Pagamentos S.A.",
            "acquirer_key": "alpha",
            "acquirer_name": "Alpha",
            "max_ticket": 150_000,
            "conversion_percent": 87.5,
            "is_new": False,
            "active_priority": None,
        },
        {
            "nominal": "Beta Pagamentos S.A.",
            "acquirer_key": "beta",
            "acquirer_name": "Beta",
            "max_ticket": 300_000,
            "conversion_percent": 0,
            "is_new": True,
            "active_priority": None,
        },
        {
            "nominal": "Gamma Pagamentos S.A.",
            "acquirer_key": "gamma",
            "acquirer_name": "Gamma",
            "max_ticket": 300_000,
            "conversion_percent": 12.25,
            "is_new": False,
            "active_priority": None,
        },
    ]
    # A JSON number, never a string.
    assert all(isinstance(e["conversion_percent"], int | float) for e in entries)


def test_get_without_grants_lists_nothing(api: APIClient) -> None:
    AcquirerFactory(key="ungranted")
    assert api.get(URL).json()["data"] == {"acquirers": [], "active_acquirers": NO_SLOTS}


def test_get_shows_active_priorities_and_snapshot(api: APIClient, acquirers: dict[str, Acquirer]) -> None:
    put_ok(api, {"acquirers": [{"acquirer_key": "gamma", "priority": 1}, {"acquirer_key": "alpha", "priority": 3}]})

    data = api.get(URL).json()["data"]

    assert {e["acquirer_key"]: e["active_priority"] for e in data["acquirers"]} == {
        "alpha": 3,
        "beta": None,
        "gamma": 1,
    }
    assert data["active_acquirers"] == {
        "primary": slot(acquirers["gamma"]),
        "secondary": None,
        "tertiary": slot(acquirers["alpha"]),
    }


# --------------------------------------------------------------------------- PUT, array form


def test_put_array_form_sets_every_slot(api: APIClient, account: Account, acquirers: dict[str, Acquirer]) -> None:
    response = put(
        api,
        {
            "acquirers": [
                {"acquirer_key": "beta", "priority": 2},
                {"acquirer_key": "gamma", "priority": 1},
                {"acquirer_key": "alpha", "priority": 3},
            ]
        },
    )

    assert response.status_code == 200
    expected = {
        "primary": slot(acquirers["gamma"]),
        "secondary": slot(acquirers["beta"]),
        "tertiary": slot(acquirers["alpha"]),
    }
    assert response.json() == {
        "success": True,
        "message": "Adquirentes atualizadas com sucesso.",
        "data": {"active_acquirers": expected},
    }
    assert stored_slots(account) == {1: "gamma", 2: "beta", 3: "alpha"}
    assert api.get(URL).json()["data"]["active_acquirers"] == expected


def test_put_array_form_clears_priorities_not_sent(
    api: APIClient, account: Account, acquirers: dict[str, Acquirer]
) -> None:
    put_ok(
        api, {"acquirers": [{"acquirer_key": k, "priority": p} for p, k in ((1, "alpha"), (2, "beta"), (3, "gamma"))]}
    )

    active = put_ok(
        api, {"acquirers": [{"acquirer_key": "gamma", "priority": 1}, {"acquirer_key": "alpha", "priority": 2}]}
    )

    assert active == {"primary": slot(acquirers["gamma"]), "secondary": slot(acquirers["alpha"]), "tertiary": None}
    assert stored_slots(account) == {1: "gamma", 2: "alpha"}


def test_put_array_form_may_leave_gaps(api: APIClient, account: Account, acquirers: dict[str, Acquirer]) -> None:
    active = put_ok(api, {"acquirers": [{"acquirer_key": "beta", "priority": 3}]})
    assert active == {"primary": None, "secondary": None, "tertiary": slot(acquirers["beta"])}


def test_put_same_configuration_twice(api: APIClient, account: Account, acquirers: dict[str, Acquirer]) -> None:
    body = {"acquirers": [{"acquirer_key": "alpha", "priority": 1}, {"acquirer_key": "beta", "priority": 2}]}
    assert put_ok(api, body) == put_ok(api, body)
    assert stored_slots(account) == {1: "alpha", 2: "beta"}


# --------------------------------------------------------------------------- PUT, single form


def test_put_single_form_defaults_to_primary_and_keeps_other_slots(
    api: APIClient, account: Account, acquirers: dict[str, Acquirer]
) -> None:
    put_ok(api, {"acquirers": [{"acquirer_key": "alpha", "priority": 1}, {"acquirer_key": "beta", "priority": 2}]})

    active = put_ok(api, {"acquirer_key": "gamma"})

    assert active == {"primary": slot(acquirers["gamma"]), "secondary": slot(acquirers["beta"]), "tertiary": None}
    assert stored_slots(account) == {1: "gamma", 2: "beta"}


def test_put_single_form_with_priority(api: APIClient, account: Account, acquirers: dict[str, Acquirer]) -> None:
    put_ok(api, {"acquirer_key": "alpha"})
    active = put_ok(api, {"acquirer_key": "gamma", "priority": 3})
    assert active == {"primary": slot(acquirers["alpha"]), "secondary": None, "tertiary": slot(acquirers["gamma"])}


def test_put_single_form_moves_an_acquirer_that_held_another_slot(
    api: APIClient, account: Account, acquirers: dict[str, Acquirer]
) -> None:
    put_ok(
        api, {"acquirers": [{"acquirer_key": k, "priority": p} for p, k in ((1, "alpha"), (2, "beta"), (3, "gamma"))]}
    )

    active = put_ok(api, {"acquirer_key": "gamma", "priority": 1})

    assert active == {"primary": slot(acquirers["gamma"]), "secondary": slot(acquirers["beta"]), "tertiary": None}
    assert stored_slots(account) == {1: "gamma", 2: "beta"}


# --------------------------------------------------------------------------- PUT, refusals


def test_both_forms_is_422(api: APIClient, account: Account, acquirers: dict[str, Acquirer]) -> None:
    put_ok(api, {"acquirer_key": "alpha"})
    body = {"acquirer_key": "beta", "acquirers": [{"acquirer_key": "gamma", "priority": 1}]}
    assert rule_violation(api, account, body) == {"acquirers": [BOTH_FORMS]}


NEITHER = [{}, {"priority": 1}, {"other": "x"}]


@pytest.mark.parametrize("body", NEITHER)
def test_neither_form_is_422(api: APIClient, account: Account, acquirers: dict[str, Acquirer], body: Any) -> None:
    put_ok(api, {"acquirer_key": "alpha"})
    payload = unprocessable(api, account, body)
    assert set(payload["data"]["errors"]) == {"acquirers"}


@pytest.mark.parametrize("body", NEITHER)
def test_neither_form_has_the_acquirer_rules_message(
    api: APIClient, account: Account, acquirers: dict[str, Acquirer], body: Any
) -> None:
    assert set(rule_violation(api, account, body)) == {"acquirers"}


@pytest.mark.parametrize(
    ("items", "message"),
    [
        ([("alpha", 1), ("beta", 1)], DUPLICATE_PRIORITY),
        ([("alpha", 1), ("beta", 2), ("gamma", 2)], DUPLICATE_PRIORITY),
        ([("alpha", 1), ("alpha", 2)], DUPLICATE_ACQUIRER),
        ([("alpha", 1), ("omega", 2)], UNAVAILABLE),  # enabled, not granted
        ([("delta", 1)], UNAVAILABLE),  # granted, disabled
        ([("alpha", 1), ("nope", 2)], UNAVAILABLE),  # unknown
    ],
    ids=["same-priority", "same-priority-of-three", "same-acquirer", "not-granted", "disabled", "unknown"],
)
def test_acquirer_rules_refuse_and_change_nothing(
    api: APIClient, account: Account, acquirers: dict[str, Acquirer], items: list[tuple[str, int]], message: str
) -> None:
    put_ok(api, {"acquirers": [{"acquirer_key": "gamma", "priority": 1}, {"acquirer_key": "beta", "priority": 3}]})

    errors = rule_violation(api, account, {"acquirers": [{"acquirer_key": k, "priority": p} for k, p in items]})

    assert errors == {"acquirers": [message]}
    assert stored_slots(account) == {1: "gamma", 3: "beta"}


@pytest.mark.parametrize("key", ["omega", "delta", "nope"])
def test_single_form_unavailable_is_422(
    api: APIClient, account: Account, acquirers: dict[str, Acquirer], key: str
) -> None:
    put_ok(api, {"acquirer_key": "alpha"})
    assert rule_violation(api, account, {"acquirer_key": key}) == {"acquirers": [UNAVAILABLE]}


def test_revoked_grant_makes_the_acquirer_unavailable(
    api: APIClient, account: Account, acquirers: dict[str, Acquirer]
) -> None:
    acquirer_grants_set(account=account, acquirers=[acquirers["alpha"]])
    assert rule_violation(api, account, {"acquirer_key": "beta"}) == {"acquirers": [UNAVAILABLE]}


ITEMS = [{"acquirer_key": k, "priority": p} for k, p in (("alpha", 1), ("beta", 2), ("gamma", 3), ("delta", 1))]


@pytest.mark.parametrize("acquirers_value", [[], ITEMS, "alpha"], ids=["0-items", "4-items", "not-a-list"])
def test_array_of_0_or_4_items_is_422(
    api: APIClient, account: Account, acquirers: dict[str, Acquirer], acquirers_value: Any
) -> None:
    put_ok(api, {"acquirer_key": "alpha"})
    # Keyed by the field name, not DRF's "acquirers.non_field_errors".
    assert set(rule_violation(api, account, {"acquirers": acquirers_value})) == {"acquirers"}


def test_array_size_error_on_charge_creation_is_keyed_by_the_field_name(
    api: APIClient, account: Account, acquirers: dict[str, Acquirer]
) -> None:
    response = api.post("/api/transactions", {**CHARGE_BODY, "acquirers": []}, format="json")
    assert response.status_code == 422
    assert set(response.json()["data"]["errors"]) == {"acquirers"}
    assert not Charge.objects.exists()


@pytest.mark.parametrize("key", ["Alpha", "al-pha", "al pha", "", "a" * 65, "ção"])
def test_bad_acquirer_key_is_422(api: APIClient, account: Account, acquirers: dict[str, Acquirer], key: Any) -> None:
    assert set(rule_violation(api, account, {"acquirers": [{"acquirer_key": key, "priority": 1}]})) == {
        "acquirers.0.acquirer_key"
    }
    assert set(rule_violation(api, account, {"acquirer_key": key})) == {"acquirer_key"}


def test_key_of_64_chars_passes_validation(api: APIClient, account: Account) -> None:
    # Well-formed: refused only because no such acquirer is available.
    assert rule_violation(api, account, {"acquirer_key": "a" * 64}) == {"acquirers": [UNAVAILABLE]}


def test_missing_priority_in_an_item_is_422(api: APIClient, account: Account, acquirers: dict[str, Acquirer]) -> None:
    errors = rule_violation(
        api, account, {"acquirers": [{"acquirer_key": "alpha", "priority": 1}, {"acquirer_key": "beta"}]}
    )
    assert set(errors) == {"acquirers.1.priority"}
    errors = rule_violation(api, account, {"acquirers": [{"acquirer_key": "alpha"}]})
    assert set(errors) == {"acquirers.0.priority"}


@pytest.mark.parametrize("priority", [0, 4, -1, "1", 1.5, None, True])
def test_bad_priority_is_422(api: APIClient, account: Account, acquirers: dict[str, Acquirer], priority: Any) -> None:
    assert set(rule_violation(api, account, {"acquirers": [{"acquirer_key": "alpha", "priority": priority}]})) == {
        "acquirers.0.priority"
    }
    assert set(rule_violation(api, account, {"acquirer_key": "alpha", "priority": priority})) == {"priority"}


def test_missing_key_in_an_item_is_422(api: APIClient, account: Account, acquirers: dict[str, Acquirer]) -> None:
    assert set(rule_violation(api, account, {"acquirers": [{"priority": 1}]})) == {"acquirers.0.acquirer_key"}


def test_body_that_is_not_an_object_is_400(api: APIClient, account: Account, acquirers: dict[str, Acquirer]) -> None:
    response = put(api, [{"acquirer_key": "alpha", "priority": 1}])
    assert response.status_code == 400
    assert response.json() == refused("Corpo da requisição inválido.")
    assert stored_slots(account) == {}


# --------------------------------------------------------------------------- effect on charges


def create_charge(api: APIClient, **extra: Any) -> Charge:
    response = api.post("/api/transactions", {**CHARGE_BODY, **extra}, format="json")
    assert response.status_code == 201, response.content
    return Charge.objects.get(pk=response.json()["data"]["id"])


def test_later_charges_use_the_new_default(api: APIClient, account: Account, acquirers: dict[str, Acquirer]) -> None:
    # Without a configuration the platform default chain applies (alpha).
    assert create_charge(api).acquirer.key == "alpha"

    put_ok(api, {"acquirer_key": "beta"})
    assert create_charge(api).acquirer.key == "beta"

    put_ok(api, {"acquirers": [{"acquirer_key": "gamma", "priority": 1}, {"acquirer_key": "beta", "priority": 2}]})
    assert create_charge(api).acquirer.key == "gamma"


def test_default_chain_falls_back_in_priority_order(
    api: APIClient, account: Account, acquirers: dict[str, Acquirer]
) -> None:
    Acquirer.objects.filter(key="gamma").update(options={"charge": "fail", "payout": "ok"})
    put_ok(api, {"acquirers": [{"acquirer_key": "gamma", "priority": 1}, {"acquirer_key": "beta", "priority": 2}]})
    assert create_charge(api).acquirer.key == "beta"


def test_override_does_not_change_the_default(api: APIClient, account: Account, acquirers: dict[str, Acquirer]) -> None:
    put_ok(api, {"acquirer_key": "beta"})
    assert create_charge(api, acquirer_key="gamma").acquirer.key == "gamma"
    assert stored_slots(account) == {1: "beta"}
    assert create_charge(api).acquirer.key == "beta"


def test_disabled_acquirer_in_a_slot_is_passed_over(
    api: APIClient, account: Account, acquirers: dict[str, Acquirer]
) -> None:
    put_ok(api, {"acquirers": [{"acquirer_key": "gamma", "priority": 1}, {"acquirer_key": "beta", "priority": 2}]})
    Acquirer.objects.filter(key="gamma").update(enabled=False)

    assert create_charge(api).acquirer.key == "beta"
    assert "gamma" not in {e["acquirer_key"] for e in api.get(URL).json()["data"]["acquirers"]}
