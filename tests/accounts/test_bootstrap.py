"""``manage.py pix_bootstrap`` (decisions §9): what the file creates, that a
second run changes nothing, updates, and that a bad file changes nothing."""

from __future__ import annotations

import copy
import io
import json
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.apps import apps
from django.conf import settings
from django.core.management import CommandError, call_command
from django.db import connections
from django.test import override_settings
from rest_framework.test import APIClient

from accounts.models import Account, AccountBalance, ApiCredential
from acquirers.models import Acquirer, AcquirerGrant, AcquirerSlot
from provisioning.management.commands.pix_bootstrap import Command
from webhooks.models import WebhookEndpoint

BALANCE = "/api/withdrawals/balance"

# The example of decisions §9, verbatim.
EXAMPLE: dict[str, Any] = {
    "acquirers": [
        {
            "key": "alpha",
            "name": "Alpha",
            "nominal": "Alpha Pagamentos S.A.",
            "adapter": "sandbox",
            "options": {"charge": "ok", "payout": "ok"},
            "max_ticket": 300000,
            "conversion_percent": 92.5,
            "is_new": False,
            "default_priority": 1,
        }
    ],
    "accounts": [
        {
            "ref": "acme",
            "name": "ACME Ltda",
            "status": "approved",
            "blocked": False,
            "payment_methods": ["pix"],
            "acquirer_selection": True,
            "available_acquirers": ["alpha"],
            "active_acquirers": ["alpha"],
            "cashout_acquirers": ["alpha"],
            "withdrawals_need_approval": False,
            "cashin_fee": {"fixed": 0, "bps": 199},
            "withdrawal_fee": {"fixed": 100, "bps": 0},
            "withdrawal_limits": {"minimum": 1000, "per_request": 500000, "per_day_total": 2000000},
            "credentials": [{"ref": "main", "permission": "all"}],
            "webhooks": [{"ref": "hook", "url": "https://example.com/hook"}],
        }
    ],
}


def acquirer(key: str, **fields: Any) -> dict[str, Any]:
    return {"key": key, "name": key.title(), "adapter": "sandbox", "options": {"charge": "ok"}, **fields}


def three_acquirers() -> dict[str, Any]:
    """The example with three acquirers, all granted and active, and a two-step payout chain."""
    data = copy.deepcopy(EXAMPLE)
    data["acquirers"] += [acquirer("beta", default_priority=2), acquirer("gamma", default_priority=None)]
    account = data["accounts"][0]
    account["available_acquirers"] = ["alpha", "beta", "gamma"]
    account["active_acquirers"] = ["alpha", "beta", "gamma"]
    account["cashout_acquirers"] = ["beta", "alpha"]
    account["withdrawal_limits"] = {"minimum": 2000, "per_request": 100000, "per_day_total": 300000}
    return data


@pytest.fixture
def bootstrap(tmp_path: Path) -> Callable[[Any], dict[str, Any]]:
    """Write ``data`` to a file, run the command on it, return its parsed output."""
    counter = iter(range(1000))

    def run(data: Any) -> dict[str, Any]:
        path = tmp_path / f"bootstrap{next(counter)}.json"
        path.write_text(json.dumps(data))
        out, err = io.StringIO(), io.StringIO()
        call_command("pix_bootstrap", str(path), stdout=out, stderr=err)
        assert err.getvalue() == ""
        result: dict[str, Any] = json.loads(out.getvalue())
        return result

    return run


def chain(account: Account, purpose: str) -> list[str]:
    slots = AcquirerSlot.objects.filter(account=account, purpose=purpose).order_by("priority")
    return [slot.acquirer.key for slot in slots.select_related("acquirer")]


def granted(account: Account) -> set[str]:
    return set(AcquirerGrant.objects.filter(account=account).values_list("acquirer__key", flat=True))


def balance_status(public_key: str, secret_key: str) -> tuple[int, Any]:
    response = APIClient().get(BALANCE, HTTP_X_PUBLIC_KEY=public_key, HTTP_X_SECRET_KEY=secret_key)
    return response.status_code, response.json()


def database_state() -> dict[str, Any]:
    """Row counts of every model, and every row of the models the command writes."""
    state: dict[str, Any] = {model._meta.label: model._default_manager.count() for model in apps.get_models()}
    for model in (Acquirer, Account, AccountBalance, ApiCredential, AcquirerGrant, AcquirerSlot, WebhookEndpoint):
        state[f"{model._meta.label} rows"] = list(model.objects.order_by("pk").values())
    return state


class _AnySecret:
    """Equal to any secret key: its value is random."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, str) and other.startswith("sk_")


ANY_SECRET = _AnySecret()

# --------------------------------------------------------------------------- creating


@pytest.mark.django_db
def test_example_file_creates_everything(bootstrap: Callable[[Any], dict[str, Any]]) -> None:
    output = bootstrap(EXAMPLE)

    account = Account.objects.get(ref="acme")
    credential = ApiCredential.objects.get(account=account)
    endpoint = WebhookEndpoint.objects.get(account=account)
    assert output == {
        "acquirers": ["alpha"],
        "accounts": {
            "acme": {
                "id": str(account.pk),
                "credentials": {"main": {"public_key": credential.public_key, "secret_key": ANY_SECRET}},
                "webhooks": {"hook": {"id": str(endpoint.pk), "code": endpoint.code, "secret": endpoint.secret}},
            }
        },
    }

    alpha = Acquirer.objects.get()
    assert (alpha.key, alpha.name, alpha.nominal, alpha.adapter) == (
        "alpha",
        "Alpha",
        "Alpha Pagamentos S.A.",
        "sandbox",
    )
    assert alpha.options == {"charge": "ok", "payout": "ok"}
    assert (alpha.max_ticket, alpha.conversion_percent, alpha.is_new, alpha.default_priority) == (
        300000,
        Decimal("92.50"),
        False,
        1,
    )
    assert alpha.enabled is True  # omitted: the platform default

    assert account.name == "ACME Ltda"
    assert account.status == Account.Status.APPROVED
    assert account.is_blocked is False
    assert account.payment_methods == ["pix"]
    assert account.can_select_pix_cash_in_acquirer is True
    assert account.withdrawals_need_approval is False
    assert (account.cashin_fee_fixed, account.cashin_fee_bps) == (0, 199)
    assert (account.withdrawal_fee_fixed, account.withdrawal_fee_bps) == (100, 0)
    assert (account.withdrawal_minimum, account.withdrawal_per_request_limit, account.withdrawal_daily_limit) == (
        1000,
        500000,
        2000000,
    )
    assert account.charge_expiry_seconds == 3600  # omitted: the platform default
    assert AccountBalance.objects.get(account=account).available == 0

    assert granted(account) == {"alpha"}
    assert chain(account, AcquirerSlot.Purpose.CASHIN) == ["alpha"]
    assert chain(account, AcquirerSlot.Purpose.CASHOUT) == ["alpha"]

    assert (credential.ref, credential.permission, credential.is_active) == ("main", "all", True)
    secret = output["accounts"]["acme"]["credentials"]["main"]["secret_key"]
    status, body = balance_status(credential.public_key, secret)
    assert status == 200
    assert body["data"]["limits"] == {"per_request": 500000, "per_day_total": 2000000}

    assert (endpoint.ref, endpoint.url, endpoint.is_active) == ("hook", "https://example.com/hook", True)


@pytest.mark.django_db
def test_omitted_fields_take_the_platform_defaults(bootstrap: Callable[[Any], dict[str, Any]]) -> None:
    output = bootstrap({"acquirers": [{"key": "solo", "name": "Solo"}], "accounts": [{"ref": "min", "name": "Min"}]})

    solo = Acquirer.objects.get(key="solo")
    assert (solo.adapter, solo.options, solo.enabled, solo.max_ticket, solo.default_priority) == (
        "sandbox",
        {},
        True,
        300000,
        None,
    )
    account = Account.objects.get(ref="min")
    assert account.status == Account.Status.PENDING
    assert account.payment_methods == ["pix"]
    assert account.can_select_pix_cash_in_acquirer is False
    assert (account.cashin_fee_fixed, account.cashin_fee_bps, account.withdrawal_fee_fixed) == (0, 0, 0)
    assert (account.withdrawal_minimum, account.withdrawal_per_request_limit, account.withdrawal_daily_limit) == (
        1000,
        500000,
        2000000,
    )
    assert AccountBalance.objects.filter(account=account).exists()
    assert not AcquirerGrant.objects.exists()
    assert not AcquirerSlot.objects.exists()
    assert output == {
        "acquirers": ["solo"],
        "accounts": {"min": {"id": str(account.pk), "credentials": {}, "webhooks": {}}},
    }


@pytest.mark.django_db
def test_unknown_fields_are_ignored(bootstrap: Callable[[Any], dict[str, Any]]) -> None:
    data = copy.deepcopy(EXAMPLE)
    data["comment"] = "staging"
    data["acquirers"][0]["colour"] = "blue"
    data["accounts"][0]["cashin_fee"]["currency"] = "BRL"
    bootstrap(data)
    assert Account.objects.get(ref="acme").cashin_fee_bps == 199


@pytest.mark.django_db
def test_acquirers_referenced_from_the_database_need_not_be_in_the_file(
    bootstrap: Callable[[Any], dict[str, Any]],
) -> None:
    bootstrap({"acquirers": EXAMPLE["acquirers"]})
    data = copy.deepcopy(EXAMPLE)
    del data["acquirers"]
    output = bootstrap(data)
    assert output["acquirers"] == []
    assert chain(Account.objects.get(ref="acme"), AcquirerSlot.Purpose.CASHIN) == ["alpha"]


@pytest.mark.django_db
def test_reads_standard_input_for_dash() -> None:
    out = io.StringIO()
    call_command("pix_bootstrap", "-", stdin=io.StringIO(json.dumps(EXAMPLE)), stdout=out)
    assert json.loads(out.getvalue())["accounts"]["acme"]["id"] == str(Account.objects.get(ref="acme").pk)


@pytest.mark.django_db
def test_demo_file_loads() -> None:
    out = io.StringIO()
    call_command("pix_bootstrap", str(Path(settings.BASE_DIR) / "demo" / "bootstrap.json"), stdout=out)
    output = json.loads(out.getvalue())

    assert output["acquirers"] == ["sandbox_alpha", "sandbox_beta", "sandbox_gamma"]
    account = Account.objects.get(ref="demo")
    assert account.is_approved
    assert account.can_select_pix_cash_in_acquirer
    # Where make run's back office sends credential claim links (printed on the console).
    assert account.email == "financeiro@lojademo.example"
    assert granted(account) == {"sandbox_alpha", "sandbox_beta", "sandbox_gamma"}
    assert chain(account, AcquirerSlot.Purpose.CASHIN) == ["sandbox_alpha", "sandbox_beta"]
    assert chain(account, AcquirerSlot.Purpose.CASHOUT) == ["sandbox_alpha"]
    assert output["accounts"]["demo"]["webhooks"] == {}
    keys = output["accounts"]["demo"]["credentials"]["main"]
    assert balance_status(keys["public_key"], keys["secret_key"])[0] == 200


# --------------------------------------------------------------------------- running again


@pytest.mark.django_db
def test_second_run_changes_nothing_and_shows_no_secret(bootstrap: Callable[[Any], dict[str, Any]]) -> None:
    first = bootstrap(EXAMPLE)
    before = database_state()

    second = bootstrap(EXAMPLE)

    # Every row identical, updated_at included: nothing was even rewritten.
    assert database_state() == before
    created = first["accounts"]["acme"]
    assert second == {
        "acquirers": ["alpha"],
        "accounts": {
            "acme": {
                "id": created["id"],
                "credentials": {"main": {"public_key": created["credentials"]["main"]["public_key"]}},
                "webhooks": {
                    "hook": {"id": created["webhooks"]["hook"]["id"], "code": created["webhooks"]["hook"]["code"]}
                },
            }
        },
    }
    # The first secret still works: the credential was left as it was.
    main = created["credentials"]["main"]
    assert balance_status(main["public_key"], main["secret_key"])[0] == 200


@pytest.mark.django_db
def test_update_is_applied(bootstrap: Callable[[Any], dict[str, Any]]) -> None:
    first = bootstrap(three_acquirers())
    account = Account.objects.get(ref="acme")
    main = first["accounts"]["acme"]["credentials"]["main"]
    hook = first["accounts"]["acme"]["webhooks"]["hook"]

    data = three_acquirers()
    data["acquirers"][0]["max_ticket"] = 150000
    spec = data["accounts"][0]
    spec["cashin_fee"] = {"bps": 250}
    spec["active_acquirers"] = ["gamma", "alpha"]
    spec["cashout_acquirers"] = ["alpha"]
    spec["status"] = "rejected"
    spec["blocked"] = True
    del spec["withdrawal_limits"]
    spec["credentials"] = [{"ref": "main", "permission": "cashin"}, {"ref": "ops", "permission": "cashout"}]
    spec["webhooks"] = [{"ref": "hook", "url": "https://example.com/v2/hook"}]
    second = bootstrap(data)

    assert Acquirer.objects.get(key="alpha").max_ticket == 150000
    account.refresh_from_db()
    assert (account.cashin_fee_fixed, account.cashin_fee_bps) == (0, 250)
    assert account.status == Account.Status.REJECTED
    assert account.is_blocked is True
    # withdrawal_limits omitted: left as the first run set them.
    assert (account.withdrawal_minimum, account.withdrawal_per_request_limit, account.withdrawal_daily_limit) == (
        2000,
        100000,
        300000,
    )
    assert granted(account) == {"alpha", "beta", "gamma"}
    assert chain(account, AcquirerSlot.Purpose.CASHIN) == ["gamma", "alpha"]
    assert chain(account, AcquirerSlot.Purpose.CASHOUT) == ["alpha"]

    credentials = second["accounts"]["acme"]["credentials"]
    assert credentials["main"] == {"public_key": main["public_key"]}
    assert set(credentials["ops"]) == {"public_key", "secret_key"}
    assert ApiCredential.objects.get(public_key=main["public_key"]).permission == "cashin"
    assert ApiCredential.objects.get(account=account, ref="ops").permission == "cashout"

    assert second["accounts"]["acme"]["webhooks"] == {"hook": {"id": hook["id"], "code": hook["code"]}}
    endpoint = WebhookEndpoint.objects.get(pk=hook["id"])
    assert (endpoint.url, endpoint.secret) == ("https://example.com/v2/hook", hook["secret"])
    assert WebhookEndpoint.objects.count() == 1


@pytest.mark.django_db
def test_withdrawn_grant_leaves_the_active_chain(bootstrap: Callable[[Any], dict[str, Any]]) -> None:
    bootstrap(three_acquirers())
    data = three_acquirers()
    spec = data["accounts"][0]
    spec["available_acquirers"] = ["alpha", "gamma"]
    del spec["active_acquirers"], spec["cashout_acquirers"]
    bootstrap(data)

    account = Account.objects.get(ref="acme")
    assert granted(account) == {"alpha", "gamma"}
    assert chain(account, AcquirerSlot.Purpose.CASHIN) == ["alpha", "gamma"]
    # The payout chain is staff's own and needs no grant.
    assert chain(account, AcquirerSlot.Purpose.CASHOUT) == ["beta", "alpha"]


@pytest.mark.django_db
def test_active_acquirers_are_checked_against_current_grants_when_available_is_omitted(
    bootstrap: Callable[[Any], dict[str, Any]],
) -> None:
    data = three_acquirers()
    data["accounts"][0]["available_acquirers"] = ["alpha", "beta"]
    data["accounts"][0]["active_acquirers"] = ["alpha"]
    bootstrap(data)

    spec = {"ref": "acme", "active_acquirers": ["beta", "alpha"]}
    bootstrap({"accounts": [spec]})
    account = Account.objects.get(ref="acme")
    assert chain(account, AcquirerSlot.Purpose.CASHIN) == ["beta", "alpha"]

    spec = {"ref": "acme", "active_acquirers": ["gamma"]}
    with pytest.raises(CommandError) as error:
        bootstrap({"accounts": [spec]})
    assert "accounts[0].active_acquirers[0]: " in str(error.value)
    assert chain(account, AcquirerSlot.Purpose.CASHIN) == ["beta", "alpha"]


# --------------------------------------------------------------------------- bad files


def bad_base() -> dict[str, Any]:
    """A valid file that would change the seeded database in many ways: a
    failure that let any of it through would show."""
    data = copy.deepcopy(EXAMPLE)
    data["acquirers"][0]["max_ticket"] = 100
    data["acquirers"].append(acquirer("beta"))
    spec = data["accounts"][0]
    spec["cashin_fee"]["bps"] = 250
    spec["available_acquirers"] = ["alpha", "beta"]
    spec["active_acquirers"] = ["beta", "alpha"]
    spec["credentials"].append({"ref": "ops", "permission": "cashout"})
    data["accounts"].append({"ref": "other", "name": "Other Ltda", "webhooks": [{"ref": "h", "url": "http://x.test/"}]})
    return data


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """A mutation that sets ``a.0.b`` (dot path, list indices as numbers) to ``value``."""

    def mutate(data: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = data
        for part in parents:
            node = node[int(part)] if part.isdigit() else node[part]
        node[int(last) if last.isdigit() else last] = value

    return mutate


def _delete(path: str) -> Callable[[dict[str, Any]], None]:
    def mutate(data: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = data
        for part in parents:
            node = node[int(part)] if part.isdigit() else node[part]
        del node[last]

    return mutate


def _duplicate_account(data: dict[str, Any]) -> None:
    data["accounts"].append(copy.deepcopy(data["accounts"][0]))


BAD_FILES = [
    ("string for integer", _set("acquirers.0.max_ticket", "300000"), "acquirers[0].max_ticket"),
    ("null for integer", _set("acquirers.0.max_ticket", None), "acquirers[0].max_ticket"),
    (
        "boolean for integer",
        _set("accounts.0.withdrawal_limits.per_request", True),
        "accounts[0].withdrawal_limits.per_request",
    ),
    ("float for integer", _set("accounts.0.withdrawal_fee.fixed", 100.5), "accounts[0].withdrawal_fee.fixed"),
    ("string for boolean", _set("accounts.0.blocked", "false"), "accounts[0].blocked"),
    ("number for string", _set("accounts.0.name", 123), "accounts[0].name"),
    ("line break in the name", _set("accounts.0.name", "Loja\nAzul"), "accounts[0].name"),
    ("bad acquirer key pattern", _set("acquirers.0.key", "Alpha-1"), "acquirers[0].key"),
    ("acquirer key too long", _set("acquirers.1.key", "b" * 65), "acquirers[1].key"),
    ("duplicated acquirer key", _set("acquirers.1.key", "alpha"), "acquirers[1].key"),
    (
        "unknown acquirer referenced",
        _set("accounts.0.available_acquirers", ["alpha", "zeta"]),
        "accounts[0].available_acquirers[1]",
    ),
    ("unknown cash-out acquirer", _set("accounts.0.cashout_acquirers", ["zeta"]), "accounts[0].cashout_acquirers[0]"),
    (
        "duplicated active acquirer",
        _set("accounts.0.active_acquirers", ["alpha", "alpha"]),
        "accounts[0].active_acquirers[1]",
    ),
    (
        "active acquirer not granted",
        _set("accounts.0.available_acquirers", ["alpha"]),
        "accounts[0].active_acquirers[0]",
    ),
    (
        "four active acquirers",
        _set("accounts.0.active_acquirers", ["a", "b", "c", "d"]),
        "accounts[0].active_acquirers",
    ),
    ("bps above 10000", _set("accounts.0.cashin_fee.bps", 10001), "accounts[0].cashin_fee.bps"),
    ("negative money", _set("accounts.0.withdrawal_fee.fixed", -1), "accounts[0].withdrawal_fee.fixed"),
    ("fee not an object", _set("accounts.0.cashin_fee", 199), "accounts[0].cashin_fee"),
    ("percent above 100", _set("acquirers.0.conversion_percent", 100.5), "acquirers[0].conversion_percent"),
    ("options not an object", _set("acquirers.0.options", "ok"), "acquirers[0].options"),
    ("unknown adapter", _set("acquirers.0.adapter", "nope"), "acquirers[0].adapter"),
    ("options the adapter refuses", _set("acquirers.1.options", {"charge": "maybe"}), "acquirers[1].options"),
    ("bad contact e-mail", _set("accounts.0.email", "financeiro"), "accounts[0].email"),
    ("bad status", _set("accounts.0.status", "active"), "accounts[0].status"),
    ("approved back to pending", _set("accounts.0.status", "pending"), "accounts[0].status"),
    ("bad payment method", _set("accounts.0.payment_methods", ["boleto"]), "accounts[0].payment_methods[0]"),
    ("charge expiry below 60 s", _set("accounts.0.charge_expiry_seconds", 30), "accounts[0].charge_expiry_seconds"),
    ("ftp webhook url", _set("accounts.0.webhooks.0.url", "ftp://example.com/hook"), "accounts[0].webhooks[0].url"),
    (
        "webhook url without scheme",
        _set("accounts.1.webhooks.0.url", "example.com/hook"),
        "accounts[1].webhooks[0].url",
    ),
    (
        "bad credential permission",
        _set("accounts.0.credentials.1.permission", "read"),
        "accounts[0].credentials[1].permission",
    ),
    ("duplicated credential ref", _set("accounts.0.credentials.1.ref", "main"), "accounts[0].credentials[1].ref"),
    ("empty account ref", _set("accounts.1.ref", ""), "accounts[1].ref"),
    ("duplicated account ref", _duplicate_account, "accounts[2].ref"),
    ("new account without name", _delete("accounts.1.name"), "accounts[1].name"),
    ("new acquirer without name", _delete("acquirers.1.name"), "acquirers[1].name"),
    ("accounts not a list", _set("accounts", {"ref": "acme"}), "accounts"),
]


@pytest.mark.django_db
@pytest.mark.parametrize(("mutate", "path"), [pytest.param(mutate, path, id=name) for name, mutate, path in BAD_FILES])
def test_bad_file_reports_the_field_and_changes_nothing(
    bootstrap: Callable[[Any], dict[str, Any]], mutate: Callable[[dict[str, Any]], None], path: str
) -> None:
    bootstrap(EXAMPLE)
    bootstrap({"acquirers": [acquirer("unrelated")]})  # so "beta" is new, "unrelated" untouched
    before = database_state()
    data = bad_base()
    mutate(data)

    with pytest.raises(CommandError) as error:
        bootstrap(data)

    lines = str(error.value).splitlines()
    assert any(line.startswith(f"{path}: ") for line in lines), lines
    assert database_state() == before


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://example.com/hook", "A URL deve usar https: os eventos levam dados do pagador."),
        ("https://127.0.0.1/hook", "URL não permitida: o endereço é local, privado ou reservado."),
    ],
)
def test_production_refuses_the_webhook_urls_the_api_refuses(
    bootstrap: Callable[[Any], dict[str, Any]], url: str, message: str
) -> None:
    bootstrap(EXAMPLE)
    before = database_state()
    data = copy.deepcopy(EXAMPLE)
    data["accounts"][0]["webhooks"] = [{"ref": "hook", "url": url}]

    with override_settings(WEBHOOKS_ALLOW_PRIVATE_NETWORKS=False), pytest.raises(CommandError) as error:
        bootstrap(data)

    assert f"accounts[0].webhooks[0].url: {message}" in str(error.value).splitlines()
    assert database_state() == before


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("content", "expected"),
    [
        pytest.param('{"accounts": [', "JSON inválido na linha 1", id="truncated"),
        pytest.param("{'accounts': []}", "JSON inválido", id="single quotes"),
        pytest.param('{"acquirers": [{"key": "a", "name": "A", "max_ticket": NaN}]}', "NaN", id="NaN"),
        pytest.param("[]", "(file): ", id="not an object"),
    ],
)
def test_unreadable_file_is_a_clear_error(tmp_path: Path, content: str, expected: str) -> None:
    before = database_state()
    path = tmp_path / "bad.json"
    path.write_text(content)
    out = io.StringIO()
    with pytest.raises(CommandError) as error:
        call_command("pix_bootstrap", str(path), stdout=out)
    assert expected in str(error.value)
    assert out.getvalue() == ""
    assert database_state() == before


@pytest.mark.django_db
def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="arquivo não encontrado"):
        call_command("pix_bootstrap", str(tmp_path / "nope.json"))


@pytest.mark.django_db
def test_command_line_exit_code_and_stderr(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # run_from_argv closes every connection when done, which would end the
    # test's transaction.
    monkeypatch.setattr(connections, "close_all", lambda: None)
    data = copy.deepcopy(EXAMPLE)
    data["accounts"][0]["withdrawal_limits"]["per_request"] = "500000"
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))

    with pytest.raises(SystemExit) as exit_info:
        Command().run_from_argv(["manage.py", "pix_bootstrap", "--skip-checks", str(path)])

    assert exit_info.value.code == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "accounts[0].withdrawal_limits.per_request: " in captured.err
    assert not Account.objects.exists()


@pytest.mark.django_db
def test_conversion_percent_sets_staff_override_and_null_clears_it(
    bootstrap: Callable[[Any], dict[str, Any]],
) -> None:
    """The file's conversion_percent is staff's value, shown instead of the
    measured conversion; null gives the listing back to the measurement; an
    omitted one leaves it alone (and creates an acquirer without one)."""
    data = copy.deepcopy(EXAMPLE)
    data["acquirers"].append(acquirer("beta"))
    bootstrap(data)
    alpha, beta = Acquirer.objects.get(key="alpha"), Acquirer.objects.get(key="beta")
    assert (alpha.conversion_percent_override, alpha.conversion_source) == (Decimal("92.50"), "override")
    assert (beta.conversion_percent_override, beta.conversion_percent) == (None, Decimal("0"))
    Acquirer.objects.filter(key="alpha").update_unwatched(conversion_measured_percent=Decimal("61.00"))

    del data["acquirers"][0]["conversion_percent"]
    bootstrap(data)
    assert Acquirer.objects.get(key="alpha").conversion_percent_override == Decimal("92.50")

    data["acquirers"][0]["conversion_percent"] = None
    bootstrap(data)
    alpha.refresh_from_db()
    assert alpha.conversion_percent_override is None
    assert (alpha.conversion_percent, alpha.conversion_source) == (Decimal("61.00"), "measured")
