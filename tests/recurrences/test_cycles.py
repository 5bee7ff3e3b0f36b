"""A recurrence's cycles through the API: listed (latest first, with their
charge's money once the acquirer holds the cobr) and read one by one; a
variable cycle's amount set while its window is open or before it, and every
refusal a 400 (409 once ended) that changes nothing."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.models import Account
from acquirers.adapters.base import RecurrenceState
from acquirers.models import Acquirer
from payments.due_payments import now_in_brazil
from recurrences.cycles import cycle_send, cycles_open
from recurrences.models import Cycle, Recurrence
from recurrences.services import recurrence_apply
from tests.helpers import listing_data
from tests.recurrences.conftest import RecAdapter
from tests.recurrences.helpers import URL, create, due_in, push_body
from webhooks.models import WebhookEvent

pytestmark = pytest.mark.django_db

FIXED = "A recorrência tem valor fixo: o valor dos ciclos não pode ser informado."
ABOVE_MAX = "O valor do ciclo excede o valor máximo da recorrência."
TOO_LATE = "O valor deste ciclo já não pode ser informado: a cobrança já foi enviada ou o prazo passou."
NOT_A_CYCLE = "A recorrência não tem esse ciclo (fora da vigência)."
NET_BELOW_MIN = "O valor da transação deve resultar em pelo menos R$ 0,10 após as taxas."


def approved(recurrence_id: str) -> Recurrence:
    """The payer authorised it at their bank, and today's round opened its cycles."""
    recurrence = Recurrence.objects.get(pk=recurrence_id)
    recurrence_apply(recurrence_id=recurrence.pk, state=RecurrenceState(id_rec=recurrence.id_rec, status="APROVADA"))
    cycles_open(recurrence_id=recurrence.pk, today=now_in_brazil())
    return Recurrence.objects.get(pk=recurrence_id)


def variable(api: APIClient, **changes: Any) -> dict[str, Any]:
    response = api.post(URL, push_body(**changes))
    assert response.status_code == 201, response.json()
    data: dict[str, Any] = response.json()["data"]
    return data


def test_cycles_are_listed_with_their_charge(api: APIClient, acquirer: Acquirer) -> None:
    created = create(api, first_due_date=due_in(3).isoformat(), periodicity="weekly")
    recurrence = approved(created["id"])
    cycles = list(Cycle.objects.filter(recurrence=recurrence).order_by("index"))
    # Weekly from 3 days ahead: the cycles due in 3 and 10 days are in their window (up to 10 days ahead).
    assert [c.index for c in cycles] == [0, 1]
    assert cycle_send(cycle_id=cycles[0].pk, today=now_in_brazil()) == "active"

    listed = listing_data(api, f"{URL}/{created['id']}/cycles")

    assert listed["pagination"]["total"] == 2
    latest, first = listed["cycles"]
    assert (latest["index"], latest["status"], latest["transaction_id"]) == (1, "scheduled", None)
    charge = Cycle.objects.select_related("charge").get(pk=cycles[0].pk).charge
    assert charge is not None
    assert (first["index"], first["status"], first["amount"], first["due_date"]) == (
        0,
        "active",
        4990,
        due_in(3).isoformat(),
    )
    assert (first["transaction_id"], first["platform_tax"], first["liquid_amount"], first["txid"]) == (
        str(charge.pk),
        charge.platform_tax,
        charge.liquid_amount,
        charge.txid,
    )
    assert listing_data(api, f"{URL}/{created['id']}/cycles", per_page=1, page=2)["cycles"] == [first]

    read = api.get(f"{URL}/{created['id']}/cycles/0")
    assert read.status_code == 200
    assert read.json()["message"] == "Ciclo consultado com sucesso."
    assert read.json()["data"] == first


@pytest.mark.parametrize("index", ["5", "x", "-1", "999999999999"])
def test_a_cycle_not_opened_is_a_404(api: APIClient, acquirer: Acquirer, index: str) -> None:
    created = create(api)

    response = api.get(f"{URL}/{created['id']}/cycles/{index}")

    assert response.status_code == 404
    assert response.json()["message"] == "Ciclo não encontrado."


def test_a_variable_cycles_amount_is_set_in_its_window(api: APIClient, acquirer: Acquirer) -> None:
    created = variable(api, first_due_date=due_in(5).isoformat())
    approved(created["id"])
    assert Cycle.objects.get(recurrence_id=created["id"], index=0).status == "awaiting_amount"

    response = api.put(f"{URL}/{created['id']}/cycles/0/amount", {"amount": 18735}, format="json")

    assert response.status_code == 200, response.json()
    assert response.json()["message"] == "Valor do ciclo informado."
    data = response.json()["data"]
    assert (data["index"], data["amount"], data["status"]) == (0, 18735, "scheduled")
    assert Cycle.objects.get(recurrence_id=created["id"], index=0).amount == 18735
    assert WebhookEvent.objects.filter(event_type="recurrence_cycle", record_id=data["id"]).exists()
    # Again before it is sent: replaced.
    again = api.put(f"{URL}/{created['id']}/cycles/0/amount", {"amount": 50000}, format="json")
    assert again.json()["data"]["amount"] == 50000


def test_a_later_cycles_amount_may_be_set_ahead(api: APIClient, acquirer: Acquirer) -> None:
    created = variable(api)  # first due date 20 days ahead: awaiting authorisation, nothing opened

    response = api.put(f"{URL}/{created['id']}/cycles/2/amount", {"amount": 1000}, format="json")

    assert response.status_code == 200, response.json()
    assert (response.json()["data"]["index"], response.json()["data"]["status"]) == (2, "scheduled")
    assert api.get(f"{URL}/{created['id']}/cycles/2").json()["data"]["amount"] == 1000


@pytest.mark.parametrize(
    ("setup", "index", "amount", "message"),
    [
        ("fixed", 0, 1000, FIXED),
        ("variable", 0, 50001, ABOVE_MAX),
        ("closed", 0, 1000, TOO_LATE),  # due tomorrow: its window closed 2 days before the due date
        ("ending", 2, 1000, NOT_A_CYCLE),  # past end_date
        ("sent", 0, 1000, TOO_LATE),
        ("fee", 0, 100, NET_BELOW_MIN),  # R$ 0,95 of fee on R$ 1,00
    ],
)
def test_an_amount_the_recurrence_does_not_take_is_a_400_that_changes_nothing(
    api: APIClient, account: Account, acquirer: Acquirer, setup: str, index: int, amount: int, message: str
) -> None:
    if setup == "fixed":
        created = create(api)
    elif setup == "closed":
        created = variable(api, first_due_date=due_in(1).isoformat())
    elif setup == "ending":
        created = variable(api, first_due_date=due_in(5).isoformat(), end_date=due_in(40).isoformat())
    else:
        created = variable(api, first_due_date=due_in(5).isoformat())
    if setup == "fee":
        Account.objects.filter(pk=account.pk).update(cashin_fee_fixed=95, cashin_fee_bps=0)
    if setup == "sent":
        approved(created["id"])
        Cycle.objects.filter(recurrence_id=created["id"], index=0).update(amount=1000, status="active", sends=1)
    before = list(Cycle.objects.filter(recurrence_id=created["id"]).values())
    events = WebhookEvent.objects.count()

    response = api.put(f"{URL}/{created['id']}/cycles/{index}/amount", {"amount": amount}, format="json")

    assert response.status_code == 400, response.json()
    assert response.json() == {"success": False, "message": message, "data": None}
    assert list(Cycle.objects.filter(recurrence_id=created["id"]).values()) == before
    assert WebhookEvent.objects.count() == events


def test_an_ended_recurrence_takes_no_amount(api: APIClient, acquirer: Acquirer) -> None:
    created = variable(api, first_due_date=due_in(5).isoformat())
    Recurrence.objects.filter(pk=created["id"]).update(status="expired", ended_at=timezone.now())

    response = api.put(f"{URL}/{created['id']}/cycles/0/amount", {"amount": 1000}, format="json")

    assert response.status_code == 409
    assert response.json()["message"] == "A recorrência já está encerrada."
    assert not Cycle.objects.filter(recurrence_id=created["id"]).exists()


@pytest.mark.parametrize(
    ("payload", "key"), [({"amount": 99}, "amount"), ({"amount": "1000"}, "amount"), ({}, "amount")]
)
def test_a_bad_amount_is_a_422(api: APIClient, acquirer: Acquirer, payload: dict[str, Any], key: str) -> None:
    created = variable(api)

    response = api.put(f"{URL}/{created['id']}/cycles/0/amount", payload, format="json")

    assert response.status_code == 422
    assert key in response.json()["data"]["errors"]
    assert not Cycle.objects.exists()


def test_amounts_never_reach_the_acquirer_before_the_schedule_sends(api: APIClient, acquirer: Acquirer) -> None:
    created = variable(api)
    RecAdapter.calls.clear()

    api.put(f"{URL}/{created['id']}/cycles/0/amount", {"amount": 1000}, format="json")

    assert RecAdapter.calls == []
