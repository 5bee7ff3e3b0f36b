"""Settlement per day (issue 16): GET /api/settlements and the back office's
page of an account — credits, debits, fees and the closing balance of each
America/Sao_Paulo day, matching the ledger to the centavo."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.db import transaction
from django.db.models import Max
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.models import Account, AccountBalance, ApiCredential, LedgerEntry
from accounts.services import credential_issue, ledger_post
from accounts.settlement import account_settlement
from payments.models import ChargeStatus, ChargeTransition
from payments.refunds import charge_refund_release, charge_refund_reserve
from payments.services import charge_transition
from tests.conftest import client_for
from tests.factories import AccountFactory, ChargeFactory
from tests.helpers import SAO_PAULO, VALIDATION, staff_login
from withdrawals.models import WithdrawalStatus
from withdrawals.services import withdrawal_request, withdrawal_transition

URL = "/api/settlements"
CPF = "52998224725"
FIELDS = ("credits", "debits", "fees", "entries", "closing_balance")
REQUIRED = "Informe o período (date_start e date_end) do fechamento."
TOO_LONG = "O período do fechamento é de no máximo 31 dias."
BAD_DATE = "Use o formato AAAA-MM-DD."
REVERSED = "A data final não pode ser anterior à inicial."
BLANK = "Este campo não pode ser em branco."

pytestmark = pytest.mark.django_db


@contextmanager
def on(account: Account, day: int, hour: int = 12, minute: int = 0, second: int = 0) -> Iterator[None]:
    """The ledger entries the block posts are dated March ``day`` 2025 at
    this Sao Paulo time (blocks run in time order: ids follow times)."""
    last = LedgerEntry.objects.filter(account=account).aggregate(last=Max("id"))["last"] or 0
    yield
    moment = dt.datetime(2025, 3, day, hour, minute, second, tzinfo=SAO_PAULO)
    LedgerEntry.objects.filter(account=account, id__gt=last).update(created_at=moment)


def pay(account: Account, amount: int) -> Any:
    """A charge paid through the real transition; its fee is 1 % (the factory's platform_tax)."""
    charge = ChargeFactory(account=account, amount=amount)
    assert charge_transition(charge_id=charge.pk, to_status=ChargeStatus.PAID, source=ChargeTransition.Source.SANDBOX)
    return charge


def adjust(account: Account, amount: int) -> None:
    with transaction.atomic():
        ledger_post(account_id=account.pk, amount=amount, kind=LedgerEntry.Kind.CHARGE_PAID, reference=uuid.uuid4().hex)


@pytest.fixture
def history(account: Account, no_enqueue: list[Any]) -> Account:
    """Six days of an account whose withdrawals cost R$ 1,50 each."""
    Account.objects.filter(pk=account.pk).update(withdrawal_fee_fixed=150)
    account.refresh_from_db()
    with on(account, 9, 23, 59, 59):
        adjust(account, 1000)  # before the period: the opening balance, no fee known
    with on(account, 10, 0, 0, 0):
        refunded = pay(account, 10_000)  # +9_900, fee 100
    with on(account, 10, 18):
        held = pay(account, 5_000)  # +4_950, fee 50
    with on(account, 11):
        withdrawal_request(account=account, amount=2_000, key_type="cpf", key_value=CPF)  # -2_000, fee 150 inside
        failed = withdrawal_request(account=account, amount=3_000, key_type="cpf", key_value=CPF, discount_fee=False)
    # March 12: nothing.
    with on(account, 13):
        withdrawal_transition(withdrawal_id=failed.pk, to_status=WithdrawalStatus.FAILED, source="staff", actor="ops")
        assert charge_refund_reserve(charge_id=held.pk)  # -4_950
    with on(account, 14, 9):
        assert charge_refund_release(charge_id=held.pk)  # +4_950
        charge_transition(charge_id=refunded.pk, to_status=ChargeStatus.REFUNDED, source="staff")  # -9_900
    with on(account, 14, 23, 59, 59):
        pay(account, 20_000)  # +19_800, fee 200
    with on(account, 15, 0, 0, 0):
        pay(account, 30_000)  # +29_700, fee 300: after the period below
    return account


#: March 10-14 of ``history``: (credits, debits, fees, entries, closing_balance).
EXPECTED = {
    "2025-03-10": (14_850, 0, 150, 2, 15_850),
    "2025-03-11": (0, 5_150, 300, 2, 10_700),
    "2025-03-12": (0, 0, 0, 0, 10_700),
    "2025-03-13": (3_150, 4_950, -150, 2, 8_900),
    "2025-03-14": (24_750, 9_900, 200, 3, 23_750),
}


def settlement(api: APIClient, start: str, end: str) -> dict[str, Any]:
    response = api.get(URL, {"date_start": start, "date_end": end})
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["success"] is True
    assert body["message"] == "Fechamento consultado com sucesso."
    data: dict[str, Any] = body["data"]
    return data


@pytest.fixture
def cashout(account: Account) -> APIClient:
    return client_for(credential_issue(account=account, permission=ApiCredential.Permission.CASHOUT))


def test_each_day_of_the_period(history: Account, cashout: APIClient) -> None:
    data = settlement(cashout, "2025-03-10", "2025-03-14")
    assert data["date_start"] == "2025-03-10"
    assert data["date_end"] == "2025-03-14"
    assert data["opening_balance"] == 1000
    assert {day["date"]: tuple(day[f] for f in FIELDS) for day in data["days"]} == EXPECTED
    assert [day["date"] for day in data["days"]] == list(EXPECTED)  # oldest first, the empty day too
    assert data["closing_balance"] == 23_750
    assert data["totals"] == {
        "credits": 42_750,
        "debits": 20_000,
        "fees": 500,
        "entries": 9,
        "med_blocked": 0,
        "med_released": 0,
        "med_returned": 0,
    }


def test_the_settlement_adds_up_both_ways_and_matches_the_ledger(history: Account, cashout: APIClient) -> None:
    data = settlement(cashout, "2025-03-09", "2025-03-15")
    days = data["days"]
    assert data["opening_balance"] == 0
    # Chained: every closing is the previous one plus the day's credits minus its debits.
    previous = [data["opening_balance"]] + [day["closing_balance"] for day in days]
    for before, day in zip(previous, days, strict=False):
        assert day["closing_balance"] == before + day["credits"] - day["debits"], day
    # Summed: the days' net is the balance's change over the period.
    net = sum(day["credits"] - day["debits"] for day in days)
    assert net == days[-1]["closing_balance"] - data["opening_balance"]
    # Each closing is the balance_after of the day's last ledger entry.
    for day in days:
        date = dt.date.fromisoformat(day["date"])
        start = dt.datetime.combine(date, dt.time(), tzinfo=SAO_PAULO)
        last = (
            LedgerEntry.objects.filter(account=history, created_at__gte=start, created_at__lt=start + dt.timedelta(1))
            .order_by("-id")
            .first()
        )
        if last is not None:
            assert day["closing_balance"] == last.balance_after, day
    # The last closing is the account's balance; every entry was counted once.
    assert data["closing_balance"] == AccountBalance.objects.get(account=history).available == 53_450
    assert sum(day["entries"] for day in days) == LedgerEntry.objects.filter(account=history).count()


def test_fees_are_the_records_fees(history: Account, cashout: APIClient) -> None:
    """Charges' platform_tax and withdrawals' fee, less the fee a failed one
    gave back: the total is what the platform kept."""
    from payments.models import Charge
    from withdrawals.models import Withdrawal

    data = settlement(cashout, "2025-03-09", "2025-03-15")
    kept = sum(Charge.objects.filter(account=history).values_list("platform_tax", flat=True)) + sum(
        Withdrawal.objects.filter(account=history).exclude(status=WithdrawalStatus.FAILED).values_list("fee", flat=True)
    )
    assert data["totals"]["fees"] == kept == 100 + 50 + 200 + 300 + 150


def test_a_re_debit_charges_the_fee_again(history: Account, cashout: APIClient) -> None:
    """Reconciliation's re-debit of a failed withdrawal the acquirer paid after
    all: its total is debited again, fee included, and the fees say so."""
    from withdrawals.models import Withdrawal
    from withdrawals.redebits import withdrawal_sent_payout_redebit

    failed = Withdrawal.objects.get(account=history, status=WithdrawalStatus.FAILED)
    with on(history, 15, 9):
        assert withdrawal_sent_payout_redebit(withdrawal_id=failed.pk, actor="ops", reason="pago na adquirente")

    day = settlement(cashout, "2025-03-15", "2025-03-15")["days"][0]
    assert (day["debits"], day["fees"]) == (failed.total_debit, 300 + failed.fee)


def test_the_selector_runs_two_statements(history: Account, django_assert_num_queries: Any) -> None:
    with django_assert_num_queries(2):  # the opening balance, the days grouped
        result = account_settlement(account=history, date_start=dt.date(2025, 3, 1), date_end=dt.date(2025, 3, 31))
    assert len(result.days) == 31
    assert result.closing_balance == 53_450


def test_days_after_today_are_not_listed(account: Account, cashout: APIClient) -> None:
    today = timezone.localdate(timezone.now(), SAO_PAULO)
    adjust(account, 700)
    data = settlement(cashout, str(today - dt.timedelta(days=2)), str(today + dt.timedelta(days=10)))
    assert data["date_end"] == str(today)
    assert [day["date"] for day in data["days"]] == [str(today - dt.timedelta(days=n)) for n in (2, 1, 0)]
    assert data["days"][-1]["closing_balance"] == data["closing_balance"] == 700
    future = settlement(cashout, str(today + dt.timedelta(days=1)), str(today + dt.timedelta(days=2)))
    assert future["days"] == []
    assert future["opening_balance"] == future["closing_balance"] == 700


def test_another_accounts_entries_are_never_counted(history: Account, cashout: APIClient) -> None:
    other = AccountFactory()
    with on(other, 10):
        pay(other, 50_000)
    data = settlement(cashout, "2025-03-10", "2025-03-14")
    assert {day["date"]: tuple(day[f] for f in FIELDS) for day in data["days"]} == EXPECTED
    theirs = client_for(credential_issue(account=other, permission=ApiCredential.Permission.ALL))
    assert settlement(theirs, "2025-03-10", "2025-03-10")["days"][0]["credits"] == 49_500


@pytest.mark.parametrize(
    ("params", "errors"),
    [
        ({}, {"date_start": [REQUIRED], "date_end": [REQUIRED]}),
        ({"date_start": "2025-03-01"}, {"date_end": [REQUIRED]}),
        ({"date_start": "2025-03-01", "date_end": "2025-04-01"}, {"date_end": [TOO_LONG]}),
        (
            {"date_start": "2025-03-02", "date_end": "2025-03-01"},
            {"date_end": ["A data final não pode ser anterior à inicial."]},
        ),
        ({"date_start": "01/03/2025", "date_end": "2025-03-31"}, {"date_start": [BAD_DATE]}),
        ({"date_start": "2025-02-29", "date_end": "2025-3-1"}, {"date_start": [BAD_DATE], "date_end": [BAD_DATE]}),
        (
            {"date_start": "2025-03-01 00:00:00", "date_end": ""},
            {"date_start": [BAD_DATE], "date_end": ["Este campo não pode ser em branco."]},
        ),
    ],
)
def test_a_bad_or_too_long_period_is_a_422(
    account: Account, cashout: APIClient, params: dict[str, str], errors: dict[str, list[str]]
) -> None:
    response = cashout.get(URL, params)
    assert response.status_code == 422
    assert response.json() == {"success": False, "message": VALIDATION, "data": {"errors": errors}}


def test_a_period_of_31_days_and_the_calendars_ends(account: Account, cashout: APIClient) -> None:
    assert len(settlement(cashout, "2025-03-01", "2025-03-31")["days"]) == 31
    assert settlement(cashout, "9999-12-31", "9999-12-31")["days"] == []
    first = settlement(cashout, "0001-01-01", "0001-01-31")
    assert (len(first["days"]), first["opening_balance"], first["closing_balance"]) == (31, 0, 0)


def test_credentials(account: Account) -> None:
    period = {"date_start": "2025-03-01", "date_end": "2025-03-02"}
    assert APIClient().get(URL, period).status_code == 401
    cashin = client_for(credential_issue(account=account, permission=ApiCredential.Permission.CASHIN))
    refused = cashin.get(URL, period)
    assert refused.status_code == 403
    assert refused.json()["message"] == "Esta credencial não tem permissão para realizar esta operação."
    for permission in (ApiCredential.Permission.CASHOUT, ApiCredential.Permission.ALL):
        assert client_for(credential_issue(account=account, permission=permission)).get(URL, period).status_code == 200


def test_the_settlement_is_documented(schema: dict[str, Any]) -> None:
    operation = schema["paths"][URL]["get"]
    assert operation["tags"] == ["balance"]
    assert "`cashout` or `all`" in operation["description"]
    assert {p["name"] for p in operation["parameters"] if p.get("required")} == {"date_start", "date_end"}
    assert set(operation["responses"]) >= {"200", "401", "403", "422"}
    [example] = operation["responses"]["200"]["content"]["application/json"]["examples"].values()
    data = example["value"]["data"]
    closings = [data["opening_balance"]] + [day["closing_balance"] for day in data["days"]]
    for before, day in zip(closings, data["days"], strict=False):
        assert day["closing_balance"] == before + day["credits"] - day["debits"]
    assert data["closing_balance"] == closings[-1]


# --------------------------------------------------------------------------- back office


@pytest.fixture
def settlement_page(history: Account, staff_client: Callable[[str], Any]) -> Callable[..., Any]:
    client = staff_client("support")

    def get(**params: str) -> Any:
        return client.get(f"/admin/accounts/account/{history.pk}/settlement/", params)

    return get


def test_the_account_page_links_its_settlement(history: Account, staff_client: Callable[[str], Any]) -> None:
    page = staff_client("support").get(f"/admin/accounts/account/{history.pk}/change/")
    assert page.status_code == 200
    assert f"/admin/accounts/account/{history.pk}/settlement/" in page.content.decode()


def test_staff_read_the_settlement_in_reais(settlement_page: Callable[..., Any]) -> None:
    page = settlement_page(inicio="2025-03-10", fim="2025-03-14")
    assert page.status_code == 200
    html = page.content.decode()
    for text in ("Fechamento diário", "10/03/2025", "14/03/2025", "R$ 148,50", "R$ 51,50", "-R$ 1,50", "R$ 237,50"):
        assert text in html, text
    assert "Saldo inicial" in html


def test_the_back_office_exports_the_settlement(settlement_page: Callable[..., Any]) -> None:
    response = settlement_page(inicio="2025-03-10", fim="2025-03-14", formato="csv")
    assert response.status_code == 200
    text = b"".join(response.streaming_content).decode("utf-8")
    lines = text.lstrip("\ufeff").splitlines()
    assert lines[0] == (
        "data;créditos (centavos);créditos (R$);débitos (centavos);débitos (R$);tarifas (centavos);tarifas (R$);"
        "lançamentos;saldo final (centavos);saldo final (R$)"
    )
    assert lines[1] == "10/03/2025;14850;148,50;0;0,00;150;1,50;2;15850;158,50"
    assert lines[4] == "13/03/2025;3150;31,50;4950;49,50;-150;-1,50;2;8900;89,00"
    assert len(lines) == 1 + 5


def test_a_bad_period_in_the_back_office_is_explained(settlement_page: Callable[..., Any]) -> None:
    page = settlement_page(inicio="2025-03-01", fim="2025-04-15")
    assert page.status_code == 200
    assert "no máximo 31 dias" in page.content.decode()


def test_the_page_reads_in_pt_br(settlement_page: Callable[..., Any]) -> None:
    from tests.platform.test_admin_language import ENGLISH, shown

    for params in ({"inicio": "2025-03-10", "fim": "2025-03-14"}, {"inicio": "2025-03-10", "fim": "2025-03-01"}, {}):
        page = settlement_page(**params)
        assert page.status_code == 200
        assert not ENGLISH.findall(shown(page.content.decode())), params


def test_staff_without_the_ledger_do_not_see_it(history: Account, client: Any, django_user_model: Any) -> None:
    user = django_user_model.objects.create_user(username="nobody", password="x", is_staff=True)
    staff_login(client, user)
    assert client.get(f"/admin/accounts/account/{history.pk}/settlement/").status_code == 403
    client.logout()
    anonymous = client.get(f"/admin/accounts/account/{history.pk}/settlement/")
    assert anonymous.status_code == 302
