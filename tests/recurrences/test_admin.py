"""The back office of Pix Automático: recurrences and their cycles as the
API shows them, the failed and missed cycles to act on, the outcomes per
payer bank and journey (exact counts on a crafted set), the staff cancel
(status, webhook, history), the send-now action (refused on a cycle it
does not fit), the overview card, and who may see and act."""

from __future__ import annotations

import datetime as dt
import re
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from accounts.models import Account
from accounts.selectors import available_balance
from acquirers.models import Acquirer
from payments.choices import ChargeKind
from payments.due_payments import now_in_brazil
from recurrences import admin_selectors, resend
from recurrences.cycle_base import cycle_txid
from recurrences.models import CancelledBy, Cycle, CycleStatus, Journey, Recurrence, RecurrenceStatus
from recurrences.services import recurrence_create
from tests.factories import AccountFactory, AcquirerFactory, ChargeFactory
from tests.helpers import staff_login
from tests.recurrences.support import AMOUNT, approve, make_account, make_acquirer, sandbox, terms
from webhooks.models import WebhookEvent

pytestmark = pytest.mark.django_db

RECURRENCES = reverse("admin:recurrences_recurrence_changelist")
CYCLES = reverse("admin:recurrences_cycle_changelist")
OUTCOMES = reverse("admin:recurrences_outcomes")
ENDED = (RecurrenceStatus.REJECTED, RecurrenceStatus.EXPIRED, RecurrenceStatus.CANCELLED)
_numbers = iter(range(10**6))


def recurrence(
    account: Account,
    acquirer: Acquirer,
    *,
    status: str = RecurrenceStatus.APPROVED,
    journey: str = "push",
    payer_ispb: str = "",
    asked_ispb: str = "",
    cancelled_by: str = "",
    approved: bool | None = None,
    days_ago: int = 1,
    document: str = "52998224725",
    name: str = "Maria Pagadora",
) -> Recurrence:
    """A recurrence as the services leave it (ended ones with their end, approved ones with their approval)."""
    n = next(_numbers)
    contract = f"CT-{n:05d}"
    created = timezone.now() - dt.timedelta(days=days_ago)
    ever_approved = status == RecurrenceStatus.APPROVED if approved is None else approved
    row = Recurrence.objects.create(
        account=account,
        acquirer=acquirer,
        id_rec=f"RR12345678{n:08d}abcdefghijklmnop"[:29],
        status=status,
        journey=journey,
        terms={
            "vinculo": {"objeto": "Academia", "contrato": contract, "devedor": {"cpf": document, "nome": name}},
            "calendario": {"dataInicial": "2026-01-10", "periodicidade": "MENSAL"},
            "valor": {"valorRec": "89.90"},
            "politicaRetentativa": "PERMITE_3R_7D",
        },
        debtor_document=document,
        contract=contract,
        payer_bank={"ispb": asked_ispb, "branch": "1", "account": "123"} if asked_ispb else {},
        payer_ispb=payer_ispb,
        cancelled_by=cancelled_by,
        approved_at=created + dt.timedelta(hours=1) if ever_approved else None,
        ended_at=created + dt.timedelta(days=1) if status in ENDED else None,
    )
    Recurrence.objects.filter(pk=row.pk).update(created_at=created)
    row.refresh_from_db()
    return row


def cycle(
    rec: Recurrence,
    index: int,
    *,
    status: str = CycleStatus.ACTIVE,
    due: dt.date | None = None,
    retries: int = 0,
    charge: str | None = None,
    amount: int | None = 8_990,
) -> Cycle:
    """A cycle; ``charge`` is its charge's status (the money's side) when its cobr reached the acquirer."""
    txid = cycle_txid(rec.pk, index)
    money = (
        ChargeFactory(
            account=rec.account,
            acquirer=rec.acquirer,
            kind=ChargeKind.RECURRING,
            status=charge,
            txid=txid,
            amount=8_990,
        )
        if charge
        else None
    )
    return Cycle.objects.create(
        recurrence=rec,
        index=index,
        due_date=due or now_in_brazil() - dt.timedelta(days=3),
        amount=amount,
        status=status,
        txid=txid,
        charge=money,
        retries=retries,
        failure_reason="Saldo insuficiente." if status == CycleStatus.FAILED else "",
    )


def ids(page: str) -> set[str]:
    """The records listed (each row's short id carries the full one as its title)."""
    return set(re.findall(r'<span title="([0-9a-f-]{36})">', page))


@pytest.fixture
def where() -> tuple[Account, Acquirer]:
    return AccountFactory(), AcquirerFactory()


# --------------------------------------------------------------------------- pages


def test_the_pages_render_in_pt_br_with_the_cycles_as_the_api_shows_them(
    admin_client: Client, where: tuple[Account, Acquirer]
) -> None:
    rec = recurrence(*where, payer_ispb="60701190")
    refunded = cycle(rec, 0, status=CycleStatus.PAID, charge="refunded")
    missed = cycle(rec, 1, status=CycleStatus.MISSED, due=now_in_brazil() + dt.timedelta(days=1))

    page = admin_client.get(RECURRENCES).content.decode()
    assert "Autorizada" in page
    assert "Solicitação ao banco do pagador (Jornada 1)" in page
    assert "Maria Pagadora (52998224725)" in page
    assert "ISPB do PSP pagador" in page
    assert OUTCOMES in page

    detail = admin_client.get(reverse("admin:recurrences_recurrence_change", args=[rec.pk]))
    assert detail.status_code == 200
    text = detail.content.decode()
    assert "Estornado" in text  # the charge's status, as the API derives it
    assert "Perdido" in text
    assert "R$ 89,90" in text
    assert reverse("admin:payments_charge_change", args=[refunded.charge_id]) in text
    assert reverse("admin:recurrences_cycle_change", args=[missed.pk]) in text
    assert 'data-action="cancel"' in text

    cycles = admin_client.get(CYCLES).content.decode()
    for label in ("Valor", "Estornado", "Perdido", "Falhos ou perdidos"):
        assert label in cycles
    cycle_page = admin_client.get(reverse("admin:recurrences_cycle_change", args=[missed.pk])).content.decode()
    assert "Não disponível: fora do prazo de envio" in cycle_page
    outcomes = admin_client.get(OUTCOMES)
    assert outcomes.status_code == 200
    assert "Taxa de autorização" in outcomes.content.decode()


def test_recurrence_filters_and_search(admin_client: Client, where: tuple[Account, Acquirer]) -> None:
    account, acquirer = where
    approved = recurrence(account, acquirer, payer_ispb="11111111", document="11144477735")
    waiting = recurrence(account, acquirer, status=RecurrenceStatus.CREATED, journey="qr")
    pushed = recurrence(account, AcquirerFactory(), status=RecurrenceStatus.REJECTED, asked_ispb="22222222")
    by_payer = recurrence(
        account, acquirer, status=RecurrenceStatus.CANCELLED, payer_ispb="22222222", cancelled_by=CancelledBy.PAYER
    )

    def listed(**params: Any) -> set[str]:
        response = admin_client.get(RECURRENCES, params)
        assert response.status_code == 200
        return ids(response.content.decode())

    assert listed(status="created") == {str(waiting.pk)}
    assert listed(journey__exact="qr") == {str(waiting.pk)}
    # The bank a push request went to counts as the payer's while the acquirer names none.
    assert listed(payer_ispb="22222222") == {str(pushed.pk), str(by_payer.pk)}
    assert listed(cancelled_by__exact="payer") == {str(by_payer.pk)}
    assert listed(acquirer__id__exact=pushed.acquirer_id) == {str(pushed.pk)}
    assert listed(q=approved.id_rec) == {str(approved.pk)}
    assert listed(q=waiting.contract) == {str(waiting.pk)}
    assert listed(q="11144477735") == {str(approved.pk)}
    assert listed(q=str(by_payer.pk)) == {str(by_payer.pk)}


def test_cycle_filters_show_the_failed_ones_to_act_on(admin_client: Client, where: tuple[Account, Acquirer]) -> None:
    account, acquirer = where
    bank_a = recurrence(account, acquirer, payer_ispb="11111111")
    bank_b = recurrence(account, AcquirerFactory(), payer_ispb="22222222")
    today = now_in_brazil()
    failed = cycle(bank_a, 0, status=CycleStatus.FAILED, charge="canceled", retries=3)
    missed_open = cycle(bank_b, 1, status=CycleStatus.MISSED, due=today + dt.timedelta(days=5))
    paid = cycle(bank_a, 2, status=CycleStatus.PAID, charge="paid", due=today - dt.timedelta(days=20))
    active = cycle(bank_b, 3, due=today + dt.timedelta(days=8))

    def listed(**params: Any) -> set[str]:
        response = admin_client.get(CYCLES, params)
        assert response.status_code == 200
        return ids(response.content.decode())

    assert listed(attention="act") == {str(failed.pk), str(missed_open.pk)}
    assert listed(attention="sendable") == {str(missed_open.pk)}
    assert listed(status="failed") == {str(failed.pk)}
    assert listed(status="missed") == {str(missed_open.pk)}
    assert listed(payer_ispb="11111111") == {str(failed.pk), str(paid.pk)}
    assert listed(recurrence__acquirer__id__exact=bank_b.acquirer_id) == {str(missed_open.pk), str(active.pk)}
    assert listed(due_date__gte=today.isoformat()) == {str(missed_open.pk), str(active.pk)}
    assert listed(q=bank_b.id_rec) == {str(missed_open.pk), str(active.pk)}


# --------------------------------------------------------------------------- outcomes per bank and journey


def test_the_outcomes_count_each_bank_and_journey_exactly(
    admin_client: Client, where: tuple[Account, Acquirer]
) -> None:
    account, acquirer = where
    A, B = "11111111", "22222222"
    today = now_in_brazil()
    # Bank A, push: 1 authorised (its cycles: paid first, paid after retries, failed, missed), 1 rejected, 1 expired.
    a_push = recurrence(account, acquirer, payer_ispb=A)
    cycle(a_push, 0, status=CycleStatus.PAID, charge="paid")
    cycle(a_push, 1, status=CycleStatus.PAID, charge="chargeback", retries=2)
    cycle(a_push, 2, status=CycleStatus.FAILED, charge="canceled", retries=3)
    cycle(a_push, 3, status=CycleStatus.MISSED)
    cycle(a_push, 4, status=CycleStatus.PAID, charge="paid", due=today - dt.timedelta(days=90))  # out of the period
    cycle(a_push, 5, status=CycleStatus.ACTIVE)  # not ended: in no column
    recurrence(account, acquirer, status=RecurrenceStatus.REJECTED, payer_ispb=A)
    recurrence(account, acquirer, status=RecurrenceStatus.EXPIRED, asked_ispb=A)
    # Bank A, QR: authorised then cancelled by the payer's bank; cancelled by the account before any answer.
    recurrence(
        account,
        acquirer,
        status=RecurrenceStatus.CANCELLED,
        journey="qr",
        payer_ispb=A,
        cancelled_by=CancelledBy.PAYER_PSP,
        approved=True,
    )
    recurrence(
        account,
        acquirer,
        status=RecurrenceStatus.CANCELLED,
        journey="qr",
        asked_ispb=A,
        cancelled_by=CancelledBy.MERCHANT,
    )
    # Bank B, push: its bank never answered the request (only where it was sent is known); one waiting.
    recurrence(account, acquirer, status=RecurrenceStatus.REJECTED, asked_ispb=B)
    recurrence(account, acquirer, status=RecurrenceStatus.CREATED, asked_ispb=B)
    # Created before the period: not counted.
    recurrence(account, acquirer, status=RecurrenceStatus.REJECTED, payer_ispb=B, days_ago=60)

    rows, total = admin_selectors.outcomes(start=today - dt.timedelta(days=29), end=today)

    figures = {
        (row.ispb, row.journey): (
            row.created, row.approved, row.rejected, row.expired, row.cancelled_by_payer,
            row.cancelled_by_receiver, row.waiting, row.paid_first, row.paid_after_retry, row.failed, row.missed,
        )
        for row in rows
    }  # fmt: skip
    assert figures == {
        (A, "push"): (3, 1, 1, 1, 0, 0, 0, 1, 1, 1, 1),
        (A, "qr"): (2, 1, 0, 0, 1, 1, 0, 0, 0, 0, 0),
        (B, "push"): (2, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0),
    }
    assert [row.approval_rate for row in rows] == [pytest.approx(1 / 3), 1.0, 0.0]
    assert rows[0].paid_rate == 0.5
    assert (total.created, total.approved, total.failed) == (7, 2, 1)

    page = admin_client.get(OUTCOMES).content.decode()
    row = re.search(rf'<tr class="outcome" data-ispb="{A}" data-journey="push">(.*?)</tr>', page, re.S)
    assert row is not None
    cells = dict(re.findall(r'data-figure="(\w+)">(?:<a href="[^"]*">)?([^<]*)', row.group(1)))
    expected = {"created": "3", "approved": "1", "approval_rate": "33,3%", "paid_first": "1", "paid_after_retry": "1"}
    assert cells | expected == cells
    assert (cells["failed"], cells["missed"], cells["paid_rate"]) == ("1", "1", "50,0%")
    # The failed count opens exactly that cycle.
    link = re.search(r'data-figure="failed"><a href="([^"]+)"', row.group(1))
    assert link is not None
    assert len(ids(admin_client.get(link.group(1).replace("&amp;", "&")).content.decode())) == 1

    period = {"start": (today - dt.timedelta(days=70)).isoformat(), "end": (today - dt.timedelta(days=50)).isoformat()}
    narrow = admin_client.get(OUTCOMES, period).content.decode()
    assert re.findall(r'<tr class="outcome" data-ispb="(\d+)" data-journey="(\w+)"', narrow) == [(B, "push")]
    refused = admin_client.get(OUTCOMES, {"start": today.isoformat(), "end": (today - dt.timedelta(1)).isoformat()})
    assert "A data inicial é posterior à final." in refused.content.decode()


# --------------------------------------------------------------------------- actions


def test_staff_cancel_a_recurrence_with_a_reason_and_the_account_is_told(
    admin_client: Client, where: tuple[Account, Acquirer]
) -> None:
    rec = recurrence(*where, payer_ispb="11111111")
    open_cycle = cycle(rec, 0, status=CycleStatus.SCHEDULED, due=now_in_brazil() + dt.timedelta(days=5))
    ended = recurrence(*where, status=RecurrenceStatus.REJECTED)
    chosen = {"action": "cancel", "_selected_action": [str(rec.pk), str(ended.pk)]}

    confirm = admin_client.post(RECURRENCES, chosen)
    assert confirm.status_code == 200
    assert "Nenhum valor entra ou sai do saldo" in confirm.content.decode()
    assert "1 registro selecionado não permite esta ação" in confirm.content.decode()
    assert Recurrence.objects.get(pk=rec.pk).status == RecurrenceStatus.APPROVED  # only the page, so far

    done = admin_client.post(RECURRENCES, {**chosen, "confirmed": "yes", "reason": "Pedido do pagador por telefone"})
    assert done.status_code == 302

    rec.refresh_from_db()
    assert (rec.status, rec.cancelled_by, rec.cancel_pending) == ("cancelled", CancelledBy.STAFF, True)
    assert Cycle.objects.get(pk=open_cycle.pk).status == CycleStatus.CANCELLED
    event = WebhookEvent.objects.get(record_id=rec.pk, event_type="recurrence")
    assert event.status == "cancelled"
    assert LogEntry.objects.get(object_id=str(rec.pk)).change_message.endswith("Motivo: Pedido do pagador por telefone")
    assert Recurrence.objects.get(pk=ended.pk).status == RecurrenceStatus.REJECTED


def test_send_now_is_refused_on_a_cycle_it_does_not_fit(
    admin_client: Client, where: tuple[Account, Acquirer], monkeypatch: pytest.MonkeyPatch
) -> None:
    sent: list[uuid.UUID] = []

    def send(*, cycle_id: uuid.UUID, today: dt.date) -> str:
        sent.append(cycle_id)
        return "active"

    monkeypatch.setattr(resend, "cycle_send", send)
    rec = recurrence(*where)
    today = now_in_brazil()
    active = cycle(rec, 0, status=CycleStatus.ACTIVE, charge="pending", due=today + dt.timedelta(days=5))
    too_late = cycle(rec, 1, status=CycleStatus.MISSED, due=today + dt.timedelta(days=1))

    for refused in (active, too_late):
        response = admin_client.post(
            CYCLES, {"action": "send_now", "_selected_action": [str(refused.pk)], "confirmed": "yes", "reason": "x"}
        )
        assert response.status_code == 302
        assert Cycle.objects.get(pk=refused.pk).status == refused.status
    assert sent == []
    assert not LogEntry.objects.exists()
    with pytest.raises(resend.SendAgainRefused, match="só um ciclo perdido ou falho"):
        resend.cycle_send_again(cycle_id=active.pk, today=today)


def test_send_now_puts_a_missed_cycle_back_and_sends_it_at_the_acquirer(admin_client: Client) -> None:
    """At the sandbox acquirer (which holds the recurrence): the cobr is
    created there and the cycle's charge stored pending; nothing credited."""
    account, today = make_account(), now_in_brazil()
    make_acquirer()
    rec = recurrence_create(
        account=account, terms=terms(first_due=today + dt.timedelta(days=5)), journey=Journey.QR, now=timezone.now()
    )
    approve(rec, at=timezone.now())
    missed = Cycle.objects.create(
        recurrence=rec,
        index=0,
        due_date=today + dt.timedelta(days=5),
        amount=AMOUNT,
        status=CycleStatus.MISSED,
        txid=cycle_txid(rec.pk, 0),
        failure_reason="Janela de envio perdida.",
    )
    chosen = {"action": "send_now", "_selected_action": [str(missed.pk)]}
    assert "volta a agendado" in admin_client.post(CYCLES, chosen).content.decode()

    admin_client.post(CYCLES, {**chosen, "confirmed": "yes", "reason": "Adquirente fora do ar no envio"})

    missed.refresh_from_db()
    assert missed.status == CycleStatus.ACTIVE
    assert missed.charge is not None
    assert (missed.charge.status, missed.charge.amount) == ("pending", AMOUNT)
    assert sandbox(rec.acquirer).cycle_charge_status(missed.txid).amount == AMOUNT
    assert [e.status for e in WebhookEvent.objects.filter(record_id=missed.pk).order_by("created_at")][:2] == [
        "scheduled",
        "active",
    ]
    assert "Motivo: Adquirente fora do ar no envio" in LogEntry.objects.get(object_id=str(missed.pk)).change_message
    assert available_balance(account) == 0


# --------------------------------------------------------------------------- the overview


def test_the_overview_card_counts_what_waits_and_the_cycles_to_act_on(
    admin_client: Client, where: tuple[Account, Acquirer]
) -> None:
    today = now_in_brazil()
    recurrence(*where, status=RecurrenceStatus.CREATED)
    recurrence(*where, status=RecurrenceStatus.CREATED, journey="qr")
    rec = recurrence(*where)
    cycle(rec, 0, status=CycleStatus.FAILED, charge="canceled", due=today - dt.timedelta(days=2))
    cycle(rec, 1, status=CycleStatus.FAILED, charge="canceled", due=today - dt.timedelta(days=30))  # older
    cycle(rec, 2, status=CycleStatus.MISSED, due=today + dt.timedelta(days=1))

    page = admin_client.get(reverse("admin:index")).content.decode()
    card = re.search(r'id="overview-recurrences">(.*?)</div>\s*</div>', page, re.S)
    assert card is not None
    for figure, count in (("waiting", 2), ("failed", 1), ("missed", 1)):
        tile = re.search(rf'href="([^"]+)" data-figure="{figure}">\s*<div class="n">(\d+)</div>', card.group(1))
        assert tile is not None, figure
        assert int(tile.group(2)) == count
        # The tile opens exactly those records.
        assert len(ids(admin_client.get(tile.group(1).replace("&amp;", "&")).content.decode())) == count


# --------------------------------------------------------------------------- who sees and acts


def test_staff_without_the_permission_are_refused(client: Client, where: tuple[Account, Acquirer]) -> None:
    rec = recurrence(*where)
    one = cycle(rec, 0)
    nobody = staff_login(client, User.objects.create_user(username="sem_grupo", password="x", is_staff=True))
    for url in (
        RECURRENCES,
        reverse("admin:recurrences_recurrence_change", args=[rec.pk]),
        CYCLES,
        reverse("admin:recurrences_cycle_change", args=[one.pk]),
        OUTCOMES,
    ):
        assert nobody.get(url).status_code == 403, url
    assert "overview-recurrences" not in nobody.get(reverse("admin:index")).content.decode()


def test_support_sees_but_only_operations_cancel(
    staff_member: Callable[[str, str], Client], where: tuple[Account, Acquirer]
) -> None:
    rec = recurrence(*where)
    support = staff_member("support", "suporte")
    assert support.get(RECURRENCES).status_code == 200
    assert support.get(OUTCOMES).status_code == 200
    detail = support.get(reverse("admin:recurrences_recurrence_change", args=[rec.pk])).content.decode()
    assert 'data-action="cancel"' not in detail
    support.post(
        RECURRENCES, {"action": "cancel", "_selected_action": [str(rec.pk)], "confirmed": "yes", "reason": "x"}
    )
    assert Recurrence.objects.get(pk=rec.pk).status == RecurrenceStatus.APPROVED

    operations = staff_member("operations", "operacoes")
    operations.post(
        RECURRENCES, {"action": "cancel", "_selected_action": [str(rec.pk)], "confirmed": "yes", "reason": "x"}
    )
    assert Recurrence.objects.get(pk=rec.pk).status == RecurrenceStatus.CANCELLED


def test_the_lists_cost_the_same_queries_with_more_rows(admin_client: Client, where: tuple[Account, Acquirer]) -> None:
    def queries(url: str) -> int:
        admin_client.get(url)  # the session and permissions cached alike
        with CaptureQueriesContext(connection) as captured:
            assert admin_client.get(url).status_code == 200
        return len(captured)

    rec = recurrence(*where, payer_ispb="11111111")
    cycle(rec, 0, status=CycleStatus.PAID, charge="refunded")
    few = {
        url: queries(url)
        for url in (RECURRENCES, CYCLES, reverse("admin:recurrences_recurrence_change", args=[rec.pk]))
    }
    for n in range(1, 6):
        more = recurrence(AccountFactory(), AcquirerFactory(), asked_ispb=f"2222222{n}")
        cycle(more, 0, status=CycleStatus.FAILED, charge="canceled")
        cycle(rec, n, status=CycleStatus.PAID, charge="paid")
    assert {url: queries(url) for url in few} == few


def test_the_event_labels_follow_the_statuses() -> None:
    """The webhook events' labels (the back office's event list) and the cycles' API status column are one table."""
    from webhooks import readable

    assert readable.EVENT_STATUS_LABELS["recurrence"] == dict(RecurrenceStatus.choices)
    cycle_labels = readable.EVENT_STATUS_LABELS["recurrence_cycle"]
    assert {k: v for k, v in cycle_labels.items() if k in CycleStatus.values} == dict(CycleStatus.choices)
    assert set(cycle_labels) - set(CycleStatus.values) == {"refunded", "chargeback"}
