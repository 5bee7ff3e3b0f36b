"""The issue's "done when", as an integrator drives it over HTTP: a monthly
subscription run end to end in the sandbox for a year, on a simulated clock
(one beat round a day, no sleeping). One payer authorises by QR, another
by the push journey; the payers' bank (the sandbox's routes) settles each
cycle on its due date; the QR subscriber's third cycle is refused once and
paid on the policy's retry; the push subscriber pays twice, then cancels at
their bank with the third cycle sent: it is cancelled, no cycle follows.
The ledger equals the balance every day, and the money is exactly the paid
cycles' net."""

from __future__ import annotations

import datetime as dt
import uuid
from collections import Counter
from typing import Any

import pytest
from rest_framework.test import APIClient

from accounts.models import Account, LedgerEntry
from acquirers.models import Acquirer
from payments.models import Charge
from recurrences.schedule import recurrences_tick
from tests.factories import AccountFactory
from tests.recurrences.support import (
    AMOUNT,
    FEE_BPS,
    FEE_FIXED,
    PAYER_ISPB,
    assert_ledger_is_balance,
    fee,
    make_acquirer,
    noon,
)
from webhooks.models import WebhookEvent

pytestmark = pytest.mark.django_db(transaction=True)

URL = "/api/recurrences"
SANDBOX = "/api/sandbox/recurrences"
START = dt.date(2027, 1, 4)
FIRST_DUE = dt.date(2027, 1, 20)
PAYER_CANCELS_ON = dt.date(2027, 3, 15)  # the third cycle sent (its window opened on the 10th), not yet due
REFUSED_ONCE = 2  # the QR subscriber's third cycle


@pytest.fixture
def account(db: Any) -> Account:
    return AccountFactory(cashin_fee_fixed=FEE_FIXED, cashin_fee_bps=FEE_BPS)


@pytest.fixture
def acquirer(db: Any) -> Acquirer:
    return make_acquirer()


def _subscribe(api: APIClient, *, contract: str, document: str, journey: str, **extra: Any) -> dict[str, Any]:
    body = {
        "debtor": {"document": document, "name": "Maria da Silva"},
        "contract": contract,
        "description": "Plano Pro",
        "amount": AMOUNT,
        "periodicity": "monthly",
        "first_due_date": FIRST_DUE.isoformat(),
        "end_date": "2027-12-20",
        "retry_policy": "3_in_7_days",
        "journey": journey,
        **extra,
    }
    response = api.post(URL, body, format="json", HTTP_IDEMPOTENCY_KEY=uuid.uuid4().hex)
    assert response.status_code == 201, response.json()
    data: dict[str, Any] = response.json()["data"]
    return data


def _cycles(api: APIClient, recurrence_id: str) -> list[dict[str, Any]]:
    response = api.get(f"{URL}/{recurrence_id}/cycles", {"page_size": 50})
    assert response.status_code == 200, response.json()
    rows: list[dict[str, Any]] = response.json()["data"]["cycles"]
    return sorted(rows, key=lambda c: c["index"])


def _run_day(api: APIClient, day: dt.date, recurrences: list[str], refusals: dict[tuple[str, int], int]) -> None:
    """The beat's round at noon; the payer's bank settles what is scheduled
    today (a cycle on its due date, a retry on its day), refusing where
    ``refusals`` says; the next round, an hour later, reads it."""
    recurrences_tick(now=noon(day))
    for recurrence_id in recurrences:
        for cycle in _cycles(api, recurrence_id):
            first = cycle["status"] == "active" and cycle["due_date"] == day.isoformat()
            retry = cycle["status"] == "retrying" and cycle["next_retry_on"] == day.isoformat()
            if not (first or retry):
                continue
            key = (recurrence_id, cycle["index"])
            outcome = "fail" if refusals.get(key, 0) > 0 else "pay"
            refusals[key] = refusals.get(key, 0) - 1
            url = f"{SANDBOX}/{recurrence_id}/cycles/{cycle['index']}/{outcome}"
            response = api.post(url, {"date": day.isoformat()}, format="json")
            assert response.status_code == 200, (url, response.json())
    recurrences_tick(now=noon(day, 13))


def test_a_year_of_a_monthly_subscription_through_the_api(
    api: APIClient, account: Account, acquirer: Acquirer, settings: Any
) -> None:
    settings.API_RATE_LIMIT_PER_MINUTE = 100_000  # a year of reads in seconds on one credential
    qr = _subscribe(api, contract="ASSINATURA-1", document="52998224725", journey="qr")
    push = _subscribe(
        api,
        contract="ASSINATURA-2",
        document="11144477735",
        journey="push",
        payer_bank={"ispb": PAYER_ISPB, "branch": "0001", "account": "123456"},
    )
    assert qr["qr_code"]["emv"]
    assert qr["status"] == "created"
    assert push["qr_code"] is None

    recurrences_tick(now=noon(START))  # the push request reaches the payer's bank
    assert api.get(f"{URL}/{push['id']}").json()["data"]["push_status"] == "ENVIADA"
    for recurrence in (qr, push):
        response = api.post(f"{SANDBOX}/{recurrence['id']}/approve", {"payer_ispb": PAYER_ISPB}, format="json")
        assert response.status_code == 200, response.json()
        assert response.json()["data"]["status"] == "approved"

    ids = [qr["id"], push["id"]]
    refusals = {(qr["id"], REFUSED_ONCE): 1}
    day = START + dt.timedelta(days=1)
    while day <= dt.date(2028, 1, 31):
        if day == PAYER_CANCELS_ON:
            response = api.post(f"{SANDBOX}/{push['id']}/payer-cancel", {}, format="json")
            assert response.status_code == 200, response.json()
        _run_day(api, day, ids, refusals)
        assert_ledger_is_balance(account)
        day += dt.timedelta(days=1)

    qr_cycles = _cycles(api, qr["id"])
    assert [c["index"] for c in qr_cycles] == list(range(12))
    assert [c["status"] for c in qr_cycles] == ["paid"] * 12
    assert [c["retries"] for c in qr_cycles] == [1 if i == REFUSED_ONCE else 0 for i in range(12)]
    assert {c["due_date"][-2:] for c in qr_cycles} == {"20"}
    push_cycles = _cycles(api, push["id"])
    assert [c["status"] for c in push_cycles] == ["paid", "paid", "cancelled"]

    push_now = api.get(f"{URL}/{push['id']}").json()["data"]
    assert (push_now["status"], push_now["cancelled_by"]) == ("cancelled", "payer")
    assert api.get(f"{URL}/{qr['id']}").json()["data"]["status"] == "completed"

    # Exactly fourteen cycles' net money: each paid once, nothing else credited.
    net = AMOUNT - fee(AMOUNT)
    credits = LedgerEntry.objects.filter(account=account, kind=LedgerEntry.Kind.CHARGE_PAID)
    assert sorted(credits.values_list("amount", flat=True)) == [net] * 14
    assert api.get("/api/withdrawals/balance").json()["data"]["available_balance"] == 14 * net
    assert_ledger_is_balance(account)
    assert Charge.objects.filter(account=account).count() == 15

    # A webhook for every change: the authorisations, and each cycle's.
    events = Counter(WebhookEvent.objects.filter(account=account).values_list("event_type", "status"))
    assert events[("recurrence", "approved")] == 2
    assert events[("recurrence", "cancelled")] == 1
    assert events[("recurrence", "completed")] == 1
    assert events[("recurrence_cycle", "paid")] == 14
    assert events[("recurrence_cycle", "retrying")] == 1
    assert events[("recurrence_cycle", "cancelled")] == 1
