"""Efí's MED infractions (``efi_pix``: ``GET /v2/gn/infracoes``, ``POST
/v2/gn/infracoes/{idInfracao}/defesa``) against the Efí fake on loopback
(mTLS, shapes checked against what Efí's SDKs document; the fixture fails a
test on any departure), then through the poller and the defence's task."""

from __future__ import annotations

import datetime as dt
import urllib.parse
import uuid
from collections.abc import Callable

import pytest
from rest_framework.test import APIClient

from accounts.models import Account, LedgerEntry
from acquirers import adapters
from acquirers.adapters.apipix.efi import EfiPixAdapter
from acquirers.adapters.base import InfractionStatus
from acquirers.models import Acquirer
from infractions import polling
from infractions.defense_delivery import Delivery, defense_send
from infractions.defenses import infraction_defend
from infractions.models import Infraction
from infractions.tasks import send_defense
from payments.models import Charge, ChargeStatus
from tests.acquirers.conftest import efi_options, warm_up
from tests.acquirers.fake_efi import EfiFault, FakeEfi
from tests.acquirers.fake_efi_med import decide, new_infraction
from tests.acquirers.fake_server import new_e2e_id
from tests.factories import AcquirerFactory

pytestmark = pytest.mark.django_db
CHARGE = {
    "payment_method": "pix",
    "amount": 10000,
    "buyer": {"buyer_name": "Fulano", "buyer_document": "52998224725", "buyer_phone": "11999998888"},
}


def adapter_of(acquirer: Acquirer) -> EfiPixAdapter:
    adapter = adapters.build(acquirer)
    assert isinstance(adapter, EfiPixAdapter)
    return adapter


def received_at_efi(api: APIClient, efi: Acquirer) -> Charge:
    """A charge whose Pix the Efí account received. ``efi_pix`` takes no
    charges (cash-in at Efí is a ``bacen_pix`` acquirer on another key):
    paid at a sandbox acquirer, then held as Efí's, the way the service
    matches an infraction to its charge (acquirer and e2e id)."""
    AcquirerFactory(key=f"sbx_{uuid.uuid4().hex[:8]}", options={}, default_priority=1)
    charge_id = api.post("/api/transactions", CHARGE, format="json").json()["data"]["id"]
    assert api.post(f"/api/sandbox/transactions/{charge_id}/pay").status_code == 200
    Charge.objects.filter(pk=charge_id).update(acquirer=efi)
    return Charge.objects.get(pk=charge_id)


def test_the_listing_reads_efis_records(fake_efi: FakeEfi, efi_acquirer: Acquirer) -> None:
    e2e = new_e2e_id("12345678")
    deadline = dt.datetime.now(dt.UTC).replace(microsecond=0) + dt.timedelta(days=5)
    opened = new_infraction(fake_efi, e2e_id=e2e, valor="123.45", deadline=deadline)
    statuses = {}
    for status in ("EM_DEFESA", "ACEITA", "REJEITADA", "CANCELADA_EFI"):
        ident = new_infraction(fake_efi, e2e_id=new_e2e_id("12345678"), valor="10.00", status=status)
        statuses[ident] = status
    # One Efí could not have meant: left out (listed again next time), never the page's failure.
    broken = new_infraction(fake_efi, e2e_id=new_e2e_id("12345678"), valor="10.00")
    fake_efi.infractions[broken]["valor"] = 1000
    since = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=10)

    page = adapter_of(efi_acquirer).list_infractions(since)

    records = {r.external_id: r for r in page.records}
    assert set(records) == {opened, *statuses}
    first = records[opened]
    assert (first.e2e_id, first.status, first.amount, first.blocked_amount, first.returned_amount) == (
        e2e,
        InfractionStatus.OPEN,
        12345,
        12345,
        0,
    )
    assert (first.defense_deadline, first.closed_at, first.reason) == (deadline, None, "Golpe - golpe")
    assert {records[i].status for i in statuses} == {
        InfractionStatus.IN_DEFENSE,
        InfractionStatus.ACCEPTED,
        InfractionStatus.REJECTED,
        InfractionStatus.CANCELED,
    }
    accepted = next(r for r in page.records if r.status is InfractionStatus.ACCEPTED)
    assert accepted.returned_amount == 1000
    assert accepted.closed_at is not None
    assert page.next_page is None
    # Whatever ``since`` asks, the window reaches 30 days back: which moment Efí filters on is not documented.
    (call,) = fake_efi.calls_of("infractions")
    query = dict(urllib.parse.parse_qsl(call.query))
    inicio = dt.datetime.fromisoformat(query["inicio"].replace("Z", "+00:00"))
    assert inicio <= dt.datetime.now(dt.UTC) - dt.timedelta(days=30) + dt.timedelta(minutes=1)


def test_the_poll_reads_every_page_and_blocks_the_charge(
    api: APIClient, account: Account, fake_efi: FakeEfi, efi_acquirer: Acquirer
) -> None:
    charge = received_at_efi(api, efi_acquirer)
    fake_efi.list_page_size = 2
    old = dt.datetime.now(dt.UTC) - dt.timedelta(days=20)
    for _ in range(2):
        new_infraction(fake_efi, e2e_id=new_e2e_id("12345678"), valor="5.00", created=old)
    ours = new_infraction(fake_efi, e2e_id=str(charge.e2e_id), valor="100.00")

    assert polling.infractions_poll(acquirer=efi_acquirer) == 3
    assert polling.infractions_poll(acquirer=efi_acquirer) == 3  # again: nothing more

    pages = [dict(urllib.parse.parse_qsl(c.query))["paginacao.paginaAtual"] for c in fake_efi.calls_of("infractions")]
    assert pages == ["0", "1", "0", "1"]
    infraction = Infraction.objects.get(external_id=ours)
    assert (infraction.account_id, infraction.charge_id, infraction.status) == (account.pk, charge.pk, "open")
    assert infraction.hold == charge.liquid_amount
    holds = LedgerEntry.objects.filter(account=account, kind="med_hold").values_list("amount", flat=True)
    assert list(holds) == [-charge.liquid_amount]
    charge.refresh_from_db()
    assert charge.status == ChargeStatus.CHARGEBACK
    # Pix the account received elsewhere: recorded for staff, nothing blocked.
    assert Infraction.objects.filter(account=None).count() == 2

    decide(fake_efi, ours, "REJEITADA")
    polling.infractions_poll(acquirer=efi_acquirer)
    infraction.refresh_from_db()
    charge.refresh_from_db()
    assert (infraction.status, charge.status, charge.med_open) == ("rejected", ChargeStatus.PAID, False)


@pytest.fixture
def defended(fake_efi: FakeEfi, make_efi_acquirer: Callable[..., Acquirer]) -> Callable[..., Infraction]:
    """An infraction polled from Efí and defended by its merchant (not delivered yet)."""
    # Each ask is one request, cut well under a second: a test counts them.
    acquirer = make_efi_acquirer(read_timeout_ms=700, options=efi_options(fake_efi, max_retries=0))
    warm_up(acquirer)

    def make(status: str = "ABERTA") -> Infraction:
        ident = new_infraction(fake_efi, e2e_id=new_e2e_id("12345678"), valor="50.00", status=status)
        polling.infractions_poll(acquirer=acquirer)
        infraction = Infraction.objects.get(external_id=ident)
        infraction_defend(infraction_id=infraction.pk, text="Produto entregue; segue o rastreio.", by="loja")
        return infraction

    return make


def test_a_defence_is_delivered_as_efi_documents_it(fake_efi: FakeEfi, defended: Callable[..., Infraction]) -> None:
    infraction = defended()

    assert defense_send(infraction_id=infraction.pk) is Delivery.SENT

    assert fake_efi.defenses == [
        (infraction.external_id, {"analise": "rejeitado", "justificativa": "Produto entregue; segue o rastreio."})
    ]
    (call,) = fake_efi.calls_of("defense")
    assert call.path == f"/v2/gn/infracoes/{infraction.external_id}/defesa"
    infraction.refresh_from_db()
    assert infraction.defense_sent_at is not None
    assert (infraction.status, infraction.defense_error) == ("in_defense", "")
    assert fake_efi.infractions[infraction.external_id]["status"] == "EM_DEFESA"


def test_a_closed_infraction_refuses_the_defence_for_good(
    fake_efi: FakeEfi, defended: Callable[..., Infraction]
) -> None:
    infraction = defended()
    decide(fake_efi, infraction.external_id, "ACEITA")  # decided at Efí before our next poll

    assert defense_send(infraction_id=infraction.pk) is Delivery.DECLINED

    infraction.refresh_from_db()
    assert infraction.defense_sent_at is None
    assert "infracao_encerrada" in infraction.defense_error
    assert fake_efi.defenses == []
    assert defense_send(infraction_id=infraction.pk) is Delivery.SKIPPED
    assert len(fake_efi.calls_of("defense")) == 1


@pytest.mark.parametrize("fault", [EfiFault.UNAVAILABLE, EfiFault.FORBIDDEN])
def test_no_definitive_answer_leaves_the_defence_to_be_asked_again(
    fake_efi: FakeEfi, defended: Callable[..., Infraction], fault: EfiFault
) -> None:
    infraction = defended()
    fake_efi.fail("defense", fault)

    assert defense_send(infraction_id=infraction.pk) is Delivery.UNKNOWN

    infraction.refresh_from_db()
    assert (infraction.defense_sent_at, infraction.defense_error) == (None, "")
    assert defense_send(infraction_id=infraction.pk) is Delivery.SENT
    assert len(fake_efi.defenses) == 1


def test_a_timeout_is_retried_and_the_defence_is_sent_once(
    fake_efi: FakeEfi, defended: Callable[..., Infraction]
) -> None:
    infraction = defended()
    fake_efi.delay = 1.5
    fake_efi.fail("defense", EfiFault.TIMEOUT)  # Efí takes it, the answer comes too late

    result = send_defense.apply(args=(str(infraction.pk),))

    # Asked again (the task's retry): Efí says it has the defence already, which is success.
    assert result.get() == "sent"
    assert len(fake_efi.calls_of("defense")) == 2
    assert len(fake_efi.defenses) == 1
    infraction.refresh_from_db()
    assert infraction.defense_sent_at is not None
    assert (infraction.status, infraction.defense_error) == ("in_defense", "")


def test_efi_offers_infractions_and_bacen_pix_does_not() -> None:
    assert EfiPixAdapter.supports("infractions")
    assert not adapters.adapter_class("bacen_pix").supports("infractions")
    assert "efi_pix" in adapters.adapter_names(supporting="infractions")


def test_efis_scopes_for_infractions_are_not_asked_for(fake_efi: FakeEfi) -> None:
    # Efí grants the scopes enabled on the application (gn.infractions.read/write): none requested.
    assert EfiPixAdapter.validate_options(efi_options(fake_efi))["scopes"] == []
