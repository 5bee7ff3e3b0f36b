"""Back office for charges and acquirers: finding, inspecting, acting
through the transition service, and what each staff group may do."""

from __future__ import annotations

import csv
import functools
from collections.abc import Callable
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.contrib.admin.models import LogEntry
from django.db import connection
from django.http import StreamingHttpResponse
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from accounts.models import Account, LedgerEntry, MoneyActionRequest
from accounts.selectors import available_balance
from acquirers.models import Acquirer, InboundNotification
from core.admin.lists import CsvColumn
from payments.admin.charges import ChargeAdmin
from payments.models import Charge, ChargeRefund, ChargeStatus, ChargeTransition
from payments.refunds import RefundOutcome, charge_refund_pursue
from payments.services import charge_transition
from tests.factories import AccountFactory, AcquirerFactory, ChargeFactory
from tests.helpers import admin_action, admin_messages, staff_login
from tests.realworld import run_concurrently

pytestmark = pytest.mark.django_db

CHARGES = reverse("admin:payments_charge_changelist")
REQUESTS = reverse("admin:accounts_moneyactionrequest_changelist")
REASON = "MED analisado pelo time de risco"
BODY = {
    "payment_method": "pix",
    "amount": 1000,
    "buyer": {"buyer_name": "Fulano", "buyer_document": "52998224725", "buyer_phone": "11999998888"},
}


@pytest.fixture
def charge(api: Any, account: Account) -> Charge:
    AcquirerFactory(key="alpha", default_priority=1)
    response = api.post("/api/transactions", BODY, format="json")
    assert response.status_code == 201
    return Charge.objects.get(pk=response.json()["data"]["id"])


def act(client: Client, action: str, charge: Charge, reason: str | None = REASON) -> Any:
    """The action, confirmed with ``reason`` when it moves money (``None``: the changelist's POST only)."""
    return admin_action(client, CHARGES, action, [charge.pk], reason=reason)


def ledger_kinds(account: Account) -> list[str]:
    return list(LedgerEntry.objects.filter(account=account).order_by("id").values_list("kind", flat=True))


def test_list_filters_and_search(admin_client: Client, charge: Charge) -> None:
    for query in (
        "",
        "?status__exact=pending",
        f"?acquirer__id__exact={charge.acquirer_id}",
        "?created_at__gte=2020-01-01+00%3A00%3A00-03%3A00",
    ):
        response = admin_client.get(CHARGES + query)
        assert response.status_code == 200, query
        assert str(charge.pk) in response.content.decode(), query
    for term in (str(charge.pk), charge.txid, charge.buyer_document):
        assert str(charge.pk) in admin_client.get(CHARGES, {"q": term}).content.decode(), term
    # A term that is not a UUID must not break the UUID column search.
    assert admin_client.get(CHARGES, {"q": "not-a-uuid"}).status_code == 200


def test_change_page_shows_attempts_and_history(admin_client: Client, charge: Charge) -> None:
    charge_transition(charge_id=charge.pk, to_status=ChargeStatus.PAID, source="sandbox")
    page = admin_client.get(reverse("admin:payments_charge_change", args=[charge.pk])).content.decode()
    assert "alpha" in page  # the attempt's acquirer
    assert "Sandbox" in page  # the transition's source
    assert 'name="status"' not in page  # nothing editable by hand


def test_cancel_action_goes_through_the_service(admin_client: Client, charge: Charge) -> None:
    act(admin_client, "cancel", charge)
    charge.refresh_from_db()
    assert charge.status == ChargeStatus.CANCELED
    transition = ChargeTransition.objects.get(charge=charge)
    assert (transition.source, transition.actor) == ("staff", "admin")
    assert LogEntry.objects.filter(object_id=str(charge.pk)).exists()


def test_refund_chargeback_and_resolve_move_money(
    admin_client: Client, staff_member: Any, charge: Charge, account: Account
) -> None:
    charge_transition(charge_id=charge.pk, to_status=ChargeStatus.PAID, source="sandbox")
    assert available_balance(account) == charge.liquid_amount

    act(admin_client, "mark_chargeback", charge)
    assert available_balance(account) == 0
    act(admin_client, "resolve_chargeback", charge)
    # Asked, not done: crediting needs a second staff member.
    assert available_balance(account) == 0
    pending = MoneyActionRequest.objects.get(state="pending")
    admin_action(staff_member("finance", "fernanda"), REQUESTS, "approve_requests", [pending.pk], reason="ok")
    assert available_balance(account) == charge.liquid_amount
    act(admin_client, "refund", charge)
    # Asked, not done: the money would go to the payer, so a second staff member approves.
    charge.refresh_from_db()
    assert (charge.status, available_balance(account)) == (ChargeStatus.PAID, charge.liquid_amount)
    refund_request = MoneyActionRequest.objects.get(state="pending", action="refund_charge")
    admin_action(staff_member("finance", "gabriel"), REQUESTS, "approve_requests", [refund_request.pk], reason="ok")
    assert available_balance(account) == 0  # reserved at the approval
    # The acquirer is asked after the commit, by the refund's task.
    assert charge_refund_pursue(refund_id=ChargeRefund.objects.get(charge=charge).pk) == RefundOutcome.REFUNDED
    charge.refresh_from_db()
    assert charge.status == ChargeStatus.REFUNDED
    assert available_balance(account) == 0
    assert ledger_kinds(account) == [
        "charge_paid",
        "charge_chargeback",
        "chargeback_reversal",
        "refund_hold",
        "refund_release",
        "charge_refund",
    ]
    reasons = LogEntry.objects.filter(object_id=str(charge.pk), user__username="admin")
    assert all(entry.change_message.endswith(f"Motivo: {REASON}") for entry in reasons)
    assert reasons.count() == 3


def test_refund_shows_the_amounts_and_asks_a_reason_first(admin_client: Client, charge: Charge) -> None:
    charge_transition(charge_id=charge.pk, to_status=ChargeStatus.PAID, source="sandbox")
    charge.refresh_from_db()
    before = ledger_kinds(charge.account)

    page = act(admin_client, "refund", charge, reason=None)

    assert page.status_code == 200
    html = page.content.decode()
    assert "a adquirente devolve o Pix ao pagador" in html
    assert charge.liquid_amount == 1000  # no cash-in fee on this account
    assert '<td class="amount">R$ 10,00</td>' in html  # debited from the account
    assert '<th class="total">R$ 10,00</th>' in html
    assert 'name="reason"' in html
    charge.refresh_from_db()
    assert charge.status == ChargeStatus.PAID
    assert ledger_kinds(charge.account) == before
    assert not LogEntry.objects.filter(object_id=str(charge.pk)).exists()

    act(admin_client, "refund", charge, reason="")
    charge.refresh_from_db()
    assert charge.status == ChargeStatus.PAID


def test_action_not_allowed_by_status_changes_nothing(admin_client: Client, charge: Charge) -> None:
    response = act(admin_client, "refund", charge)  # pending cannot be refunded
    assert admin_messages(response) == ["Estornar: nenhum registro selecionado está em um status que permita."]
    charge.refresh_from_db()
    assert charge.status == ChargeStatus.PENDING
    assert not ChargeTransition.objects.filter(charge=charge).exists()


def test_charges_cannot_be_added_or_deleted(admin_client: Client, charge: Charge) -> None:
    assert admin_client.get(reverse("admin:payments_charge_add")).status_code == 403
    assert admin_client.get(reverse("admin:payments_charge_delete", args=[charge.pk])).status_code == 403


def test_support_sees_charges_but_cannot_act(staff_client: Any, charge: Charge) -> None:
    client = staff_client("support")
    listing = client.get(CHARGES)
    assert listing.status_code == 200
    assert 'value="cancel"' not in listing.content.decode()
    act(client, "cancel", charge)
    charge.refresh_from_db()
    assert charge.status == ChargeStatus.PENDING


def test_operations_can_act_on_charges(staff_client: Any, charge: Charge) -> None:
    act(staff_client("operations"), "cancel", charge)
    charge.refresh_from_db()
    assert charge.status == ChargeStatus.CANCELED


def test_acquirer_options_are_checked_by_the_adapter(admin_client: Client) -> None:
    url = reverse("admin:acquirers_acquirer_add")
    form = {
        "key": "beta",
        "name": "Beta",
        "nominal": "",
        "adapter": "sandbox",
        "options": '{"charge": "sometimes"}',
        "enabled": "on",
        "max_ticket": "300000",
        "conversion_percent_override": "90",
        "connect_timeout_ms": "3000",
        "read_timeout_ms": "10000",
    }
    response = admin_client.post(url, form)
    assert response.status_code == 200
    assert "charge must be one of" in response.content.decode()
    assert not Acquirer.objects.filter(key="beta").exists()

    admin_client.post(url, {**form, "options": '{"charge": "timeout"}'})
    assert Acquirer.objects.get(key="beta").options == {"charge": "timeout", "payout": "ok"}


def test_inbound_notifications_are_read_only(admin_client: Client) -> None:
    acquirer = AcquirerFactory(key="gamma")
    notification = InboundNotification.objects.create(acquirer=acquirer, headers={}, body="{}")
    assert admin_client.get(reverse("admin:acquirers_inboundnotification_changelist")).status_code == 200
    assert admin_client.get(reverse("admin:acquirers_inboundnotification_add")).status_code == 403
    page = admin_client.post(reverse("admin:acquirers_inboundnotification_change", args=[notification.pk]), {})
    assert page.status_code == 403


# --------------------------------------------------------------------------- lists staff can work with (issue 15)

EXPORT = reverse("admin:payments_charge_export")


@pytest.fixture
def charges(api: Any, account: Account) -> dict[str, Charge]:
    """A few charges in several statuses and amounts, newest last."""
    AcquirerFactory(key="alpha", default_priority=1)
    made: dict[str, Charge] = {}
    for name, amount, status in (
        ("pending", 1234, None),
        ("paid", 4990, ChargeStatus.PAID),
        ("big", 123456, ChargeStatus.PAID),
        ("canceled", 2000, ChargeStatus.CANCELED),
    ):
        response = api.post("/api/transactions", {**BODY, "amount": amount}, format="json")
        assert response.status_code == 201
        charge = Charge.objects.get(pk=response.json()["data"]["id"])
        if status is not None:
            charge_transition(charge_id=charge.pk, to_status=status, source="sandbox")
        charge.refresh_from_db()
        made[name] = charge
    return made


def totals(response: Any) -> str:
    assert response.status_code == 200
    page = response.content.decode()
    start = page.index('id="list-totals"')
    return " ".join(page[start : page.index("</p>", start)].split())


def test_list_shows_reais_and_pt_br_columns(admin_client: Client, charges: dict[str, Charge]) -> None:
    page = admin_client.get(CHARGES).content.decode()
    for shown in ("R$ 12,34", "R$ 49,90", "R$ 1.234,56", "R$ 20,00"):
        assert shown in page
    for header in ("Valor", "Valor líquido", "Status", "Criada em", "Paga em", "Exportar CSV"):
        assert header in page, header
    assert ">Paga<" in page  # status labels, not values
    assert ">Pendente<" in page
    assert ">123456<" not in page  # no raw centavos
    assert ">4990<" not in page
    index = admin_client.get(reverse("admin:index")).content.decode()
    assert "Cobranças" in index


def test_totals_count_and_sum_what_the_filters_select(admin_client: Client, charges: dict[str, Charge]) -> None:
    assert totals(admin_client.get(CHARGES)) == (
        'id="list-totals"> <strong>4 cobranças</strong> · Valor: <strong>R$ 1.316,80</strong>'
        " · Valor líquido: <strong>R$ 1.316,80</strong>"
    )
    paid = totals(admin_client.get(CHARGES, {"status__exact": "paid"}))
    assert "<strong>2 cobranças</strong> · Valor: <strong>R$ 1.284,46</strong>" in paid
    assert "com os filtros e a busca aplicados" in paid
    one = totals(admin_client.get(CHARGES, {"q": charges["canceled"].txid}))
    assert "<strong>1 cobrança</strong> · Valor: <strong>R$ 20,00</strong>" in one
    none = totals(admin_client.get(CHARGES, {"status__exact": "chargeback"}))
    assert "<strong>0 cobranças</strong> · Valor: <strong>R$ 0,00</strong>" in none


def test_detail_page_shows_reais_in_title_and_fields_and_no_save_button(
    admin_client: Client, charges: dict[str, Charge]
) -> None:
    charge = charges["big"]
    page = admin_client.get(reverse("admin:payments_charge_change", args=[charge.pk])).content.decode()
    # The title and breadcrumb, no longer "<uuid> 123456 paid".
    assert "Cobrança R$ 1.234,56 (paga)" in page
    assert "R$ 1.234,56" in page
    assert "Taxa da plataforma" in page
    assert "Nome do pagador" in page
    assert "Mudanças de status" in page  # plurals, not "statuss"
    assert "Tentativas nas adquirentes" in page
    assert 'name="_save"' not in page
    assert 'name="_continue"' not in page
    assert "Ver cobrança" in page
    # Paid: refund and chargeback are offered on the page; cancelling is not.
    assert 'value="refund"' in page
    assert 'value="mark_chargeback"' in page
    assert 'value="cancel"' not in page


def test_cancel_from_the_detail_page_confirms_with_a_reason(admin_client: Client, charges: dict[str, Charge]) -> None:
    charge = charges["pending"]
    run = reverse("admin:payments_charge_run", args=[charge.pk])
    change = reverse("admin:payments_charge_change", args=[charge.pk])
    assert 'value="cancel"' in admin_client.get(change).content.decode()

    confirm = admin_client.post(run, {"action": "cancel"})
    assert confirm.status_code == 200
    assert "Cancelar: confirmar" in confirm.content.decode()
    charge.refresh_from_db()
    assert charge.status == ChargeStatus.PENDING

    done = admin_client.post(
        run, {"action": "cancel", "confirmed": "yes", "reason": REASON, "_selected_action": [str(charge.pk)]}
    )
    assert done.status_code == 302
    assert done["Location"] == change
    charge.refresh_from_db()
    assert charge.status == ChargeStatus.CANCELED
    [entry] = LogEntry.objects.filter(object_id=str(charge.pk))
    assert entry.change_message == f"Cancelar (Pendente → Cancelada). Motivo: {REASON}"


def test_detail_action_refused_changes_nothing(staff_client: Any, charges: dict[str, Charge]) -> None:
    client = staff_client("support")
    charge = charges["paid"]
    before = ledger_kinds(charge.account)
    page = client.get(reverse("admin:payments_charge_change", args=[charge.pk])).content.decode()
    assert 'id="detail-actions"' not in page
    run = reverse("admin:payments_charge_run", args=[charge.pk])
    response = client.post(run, {"action": "refund", "confirmed": "yes", "reason": REASON})
    assert response.status_code == 403
    charge.refresh_from_db()
    assert charge.status == ChargeStatus.PAID
    assert ledger_kinds(charge.account) == before
    assert not LogEntry.objects.filter(object_id=str(charge.pk)).exists()


def csv_rows(response: Any) -> list[list[str]]:
    return csv_rows_of(response.getvalue())


def csv_rows_of(content: bytes) -> list[list[str]]:
    body = content.decode("utf-8")
    assert body.startswith("\ufeff")
    return list(csv.reader(body[1:].splitlines(), delimiter=";"))


def test_csv_export_streams_the_filtered_list(admin_client: Client, charges: dict[str, Charge]) -> None:
    listing = admin_client.get(CHARGES, {"status__exact": "paid"}).content.decode()
    assert f'href="{EXPORT}?status__exact=paid"' in listing

    response = admin_client.get(EXPORT, {"status__exact": "paid"})
    assert isinstance(response, StreamingHttpResponse)
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"].startswith('attachment; filename="cobrancas-')
    header, *rows = csv_rows(response)
    assert header[:5] == ["ID", "Criada em", "Status", "Valor (centavos)", "Valor (R$)"]
    assert [row[0] for row in rows] == [str(charges["big"].pk), str(charges["paid"].pk)]  # the list's order
    big = dict(zip(header, rows[0], strict=True))
    assert (big["Status"], big["Valor (centavos)"], big["Valor (R$)"]) == ("Paga", "123456", "1234,56")
    assert big["Valor líquido (R$)"] == "1234,56"
    assert big["txid"] == charges["big"].txid
    created = timezone.localtime(charges["big"].created_at, ZoneInfo("America/Sao_Paulo"))
    assert big["Criada em"] == created.strftime("%d/%m/%Y %H:%M:%S")
    # The search too, as on the list.
    _, *found = csv_rows(admin_client.get(EXPORT, {"q": charges["pending"].txid}))
    assert [row[0] for row in found] == [str(charges["pending"].pk)]


def test_csv_export_is_the_list_in_its_order_read_before_the_first_byte(
    admin_client: Client,
    charges: dict[str, Charge],
    monkeypatch: pytest.MonkeyPatch,
    django_assert_num_queries: Any,
) -> None:
    """The list's rows in the list's order whatever column it is sorted by,
    every row once, all read in the view (a cursor fetched ``csv_chunk_size``
    rows at a time, the account and acquirer joined): nothing is read while
    the client downloads."""
    charge = charges["paid"]
    # Six accounts: their ids (random) and their creation order disagree.
    accounts: list[Account] = [charge.account, *(AccountFactory() for _ in range(5))]
    Charge.objects.bulk_create(
        Charge(
            account=accounts[i % len(accounts)],
            acquirer=charge.acquirer,
            amount=100 + i % 3,  # ties: the id orders them
            platform_tax=0,
            liquid_amount=100 + i % 3,
            txid=f"bulk{i:031d}",
            emv="x",
            buyer_name="B",
            buyer_document="52998224725",
            buyer_phone="1",
            expires_at=charge.expires_at,
        )
        for i in range(30)
    )
    monkeypatch.setattr(ChargeAdmin, "csv_chunk_size", 4)
    total = Charge.objects.count()
    # The list's default order, then (columns counted from the checkbox) by
    # amount up and down, by account (by its own ordering: newest account
    # first), by paid_at (empty for most) both ways, by acquirer then status.
    for ordering in ({}, {"o": "4"}, {"o": "-4.2"}, {"o": "3"}, {"o": "-3"}, {"o": "7"}, {"o": "-7"}, {"o": "8.-6"}):
        listed = admin_client.get(CHARGES, {**ordering, "all": ""}).context["cl"].result_list
        assert len(listed) == total
        response = admin_client.get(EXPORT, ordering)
        with django_assert_num_queries(0):
            rows = csv_rows(response)[1:]
        assert [row[0] for row in rows] == [str(c.pk) for c in listed], ordering


@pytest.mark.django_db(transaction=True)
def test_csv_export_is_one_snapshot_rows_that_move_while_it_is_read_are_written_once(
    admin_client: Client, charges: dict[str, Charge], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sorted on a column that changes while the file is read, the file is
    the list as it stood when the export began: every row once, in its
    order, as it was. Read in batches with the connection given back
    between them, sorted by payment time (newest first, unpaid first) a
    charge paid after it was written came again among the paid ones, and
    sorted by status a charge canceled before it was read moved behind the
    batches read and was never written. The client then downloads with no
    database connection held."""
    for n in range(4):  # more pending charges
        ChargeFactory(account=charges["paid"].account, acquirer=charges["paid"].acquirer, amount=500 + n)
    # A batch per row, had the rows been read in batches.
    monkeypatch.setattr(ChargeAdmin, "csv_chunk_size", 1)
    columns = ChargeAdmin.csv_columns

    def export_while(ordering: dict[str, str], move: Callable[[Charge, list[str]], Charge | None], to: str) -> Any:
        """The export, asking ``move`` at each row written until it names a
        charge, which another connection then moves to status ``to`` (committed)."""
        written: list[str] = []
        moved: list[Charge] = []

        def row_id(record: Charge) -> Any:
            written.append(str(record.pk))
            if not moved and (charge := move(record, written)) is not None:
                moved.append(charge)
                [outcome] = run_concurrently(
                    [functools.partial(charge_transition, charge_id=charge.pk, to_status=to, source="sandbox")]
                )
                assert not isinstance(outcome, BaseException), outcome
            return record.pk

        monkeypatch.setattr(ChargeAdmin, "csv_columns", (CsvColumn("ID", row_id), *columns[1:]))
        response = admin_client.get(EXPORT, ordering)
        assert isinstance(response, StreamingHttpResponse)
        chunks = []
        for chunk in response.streaming_content:
            assert connection.connection is None, "a connection is held while the client reads"
            chunks.append(chunk)
        assert moved
        return csv_rows_of(b"".join(chunks))

    def this_one_if_pending(record: Charge, written: list[str]) -> Charge | None:
        # Paid now, it sorts first of the paid ones: after the unpaid ones still to be read.
        return record if record.status == ChargeStatus.PENDING else None

    def a_pending_one_not_read_yet(record: Charge, written: list[str]) -> Charge | None:
        # On the first paid one: "canceled" sorts before "paid", among the rows already read.
        if record.status != ChargeStatus.PAID:
            return None
        return Charge.objects.filter(status=ChargeStatus.PENDING).exclude(pk__in=written).first()

    # Columns counted from the checkbox: payment time newest first; status.
    for ordering, move, to in (
        ({"o": "-7"}, this_one_if_pending, ChargeStatus.PAID),
        ({"o": "6"}, a_pending_one_not_read_yet, ChargeStatus.CANCELED),
    ):
        listed = admin_client.get(CHARGES, {**ordering, "all": ""}).context["cl"].result_list
        header, *rows = export_while(ordering, move, to)
        assert [row[0] for row in rows] == [str(c.pk) for c in listed], ordering
        status = header.index("Status")
        assert [row[status] for row in rows] == [c.get_status_display() for c in listed], ordering


def test_csv_export_needs_the_view_permission(
    client: Client, django_user_model: Any, staff_client: Any, charges: dict[str, Charge]
) -> None:
    assert staff_client("support").get(EXPORT).status_code == 200  # who sees the list may export it
    nobody = django_user_model.objects.create_user(username="nobody", password="x", is_staff=True)
    staff_login(client, nobody)
    assert client.get(EXPORT).status_code == 403
