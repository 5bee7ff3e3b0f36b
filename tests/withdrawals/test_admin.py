"""The back office for withdrawals: finding them (filters, the approval queue,
search), inspecting payouts and history read-only, acting through the
transition service (approve, cancel, mark returned), and who may do what."""

from __future__ import annotations

import csv
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.contenttypes.models import ContentType
from django.db import transaction
from django.http import StreamingHttpResponse
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from accounts.models import Account, LedgerEntry, MoneyActionRequest
from accounts.selectors import available_balance, ledger_sum
from accounts.services import ledger_post
from acquirers.models import Acquirer
from tests.factories import AccountFactory, AcquirerFactory
from tests.helpers import admin_action
from withdrawals import services
from withdrawals.admin.withdrawals import WithdrawalAdmin
from withdrawals.models import PayoutAttempt, Withdrawal, WithdrawalStatus, WithdrawalTransition
from withdrawals.payouts import withdrawal_process
from withdrawals.services import withdrawal_approve, withdrawal_request

WITHDRAWALS = reverse("admin:withdrawals_withdrawal_changelist")
SEED = 50_000
AMOUNT = 5000
FEE = 150  # 100 + 1 % of 5000
SKIPPED = "1 saque ignorado: o status atual não permite."
REASON = "Conferido com o cliente"

pytestmark = pytest.mark.django_db


@dataclass
class Book:
    """One of each case the back office must tell apart."""

    auto: Account
    manual: Account
    acquirer: Acquirer
    queued: Withdrawal  # pending, manual-approval account: in the approval queue
    pending_auto: Withdrawal  # pending, automatic account: not in the queue
    approved: Withdrawal  # approved, manual account: left the queue
    paid: Withdrawal  # paid by the acquirer, e-mail key

    def all(self) -> list[Withdrawal]:
        return [self.queued, self.pending_auto, self.approved, self.paid]


def seed(account: Account) -> None:
    with transaction.atomic():
        ledger_post(
            account_id=account.pk, amount=SEED, kind=LedgerEntry.Kind.CHARGE_PAID, reference=f"seed:{uuid.uuid4().hex}"
        )


def request(account: Account, key_type: str = "cpf", key_value: str = "52998224725") -> Withdrawal:
    return withdrawal_request(account=account, amount=AMOUNT, key_type=key_type, key_value=key_value)


@pytest.fixture
def book(db: Any) -> Book:
    fees = {"withdrawal_fee_fixed": 100, "withdrawal_fee_bps": 100}
    auto = AccountFactory(name="Loja Automática", **fees)
    manual = AccountFactory(name="Loja Manual", withdrawals_need_approval=True, **fees)
    seed(auto)
    seed(manual)
    acquirer = AcquirerFactory(key="alpha", default_priority=1, connect_timeout_ms=100, read_timeout_ms=200)
    queued = request(manual, key_value="12345678909")
    pending_auto = request(auto, key_value="11144477735")
    approved = request(manual, key_value="52998224725")
    withdrawal_approve(withdrawal_id=approved.pk, source="staff")
    paid = request(auto, key_type="email", key_value="fulano@example.com")
    assert withdrawal_process(withdrawal_id=paid.pk) == "approved"
    assert withdrawal_process(withdrawal_id=paid.pk) == WithdrawalStatus.PAID
    for withdrawal in (queued, pending_auto, approved, paid):
        withdrawal.refresh_from_db()
    return Book(auto, manual, acquirer, queued, pending_auto, approved, paid)


def shown(response: Any, book: Book) -> set[uuid.UUID]:
    """Which of the book's withdrawals a changelist page lists (by their row checkbox)."""
    assert response.status_code == 200
    page = response.content.decode()
    return {w.pk for w in book.all() if f'name="_selected_action" value="{w.pk}"' in page}


def act(client: Client, action: str, *withdrawals: Withdrawal, reason: str | None = REASON) -> Any:
    """The action confirmed with ``reason`` (``None``: the changelist's POST only)."""
    return admin_action(client, WITHDRAWALS, action, [w.pk for w in withdrawals], reason=reason)


def messages_of(response: Any) -> list[str]:
    return [str(message) for message in response.context["messages"]]


def change_log(withdrawal: Withdrawal) -> list[tuple[str, str]]:
    rows = LogEntry.objects.filter(
        content_type=ContentType.objects.get_for_model(Withdrawal), object_id=str(withdrawal.pk), action_flag=CHANGE
    )
    return [(row.user.get_username(), row.change_message) for row in rows]


def state(withdrawal: Withdrawal) -> tuple[Any, ...]:
    withdrawal.refresh_from_db()
    return (
        withdrawal.status,
        withdrawal.version,
        available_balance(withdrawal.account),
        LedgerEntry.objects.filter(account=withdrawal.account).count(),
        WithdrawalTransition.objects.filter(withdrawal=withdrawal).count(),
    )


@pytest.fixture
def enqueued(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    calls: list[Any] = []
    monkeypatch.setattr(services, "_enqueue_processing", lambda *args, **kwargs: calls.append(args))
    return calls


# --------------------------------------------------------------------------- finding


def test_changelist_filters(admin_client: Client, book: Book) -> None:
    def get(query: str) -> Any:
        return admin_client.get(WITHDRAWALS + query)

    everything = {w.pk for w in book.all()}
    assert shown(get(""), book) == everything
    assert shown(get("?status__exact=pending"), book) == {book.queued.pk, book.pending_auto.pk}
    assert shown(get("?status__exact=paid"), book) == {book.paid.pk}
    assert shown(get("?pix_key_type__exact=email"), book) == {book.paid.pk}
    assert shown(get("?pix_key_type__exact=cpf"), book) == everything - {book.paid.pk}
    assert shown(get(f"?acquirer__id__exact={book.acquirer.pk}"), book) == {book.paid.pk}
    assert shown(get("?created_at__gte=2020-01-01+00%3A00%3A00-03%3A00"), book) == everything


def test_approval_queue_shows_only_pending_withdrawals_of_manual_accounts(admin_client: Client, book: Book) -> None:
    response = admin_client.get(WITHDRAWALS, {"queue": "awaiting"})
    assert shown(response, book) == {book.queued.pk}
    assert "Aguardando aprovação" in response.content.decode()


def test_search(admin_client: Client, book: Book) -> None:
    assert book.paid.e2e_id
    cases = {
        book.paid.e2e_id: {book.paid.pk},
        "11144477735": {book.pending_auto.pk},
        "fulano@example.com": {book.paid.pk},
        book.queued.idempotency_id: {book.queued.pk},
        str(book.approved.pk): {book.approved.pk},
        f"  {book.approved.pk}  ": {book.approved.pk},
        "Loja Manual": {book.queued.pk, book.approved.pk},
    }
    for term, expected in cases.items():
        assert shown(admin_client.get(WITHDRAWALS, {"q": term}), book) == expected, term
    # A term that is not a UUID must not break the id search.
    for term in ("not-a-uuid", "1234", "%", "' OR 1=1 --"):
        assert shown(admin_client.get(WITHDRAWALS, {"q": term}), book) == set(), term


# --------------------------------------------------------------------------- inspecting


def test_change_page_shows_payout_attempts_and_transitions_read_only(admin_client: Client, book: Book) -> None:
    url = reverse("admin:withdrawals_withdrawal_change", args=[book.paid.pk])
    response = admin_client.get(url)
    assert response.status_code == 200
    page = response.content.decode()
    attempt = PayoutAttempt.objects.get(withdrawal=book.paid)
    assert str(book.acquirer) in page  # the attempt's acquirer
    assert "Envio" in page  # its action
    assert book.paid.e2e_id
    assert book.paid.e2e_id in page
    assert attempt.outcome in page
    assert "Adquirente" in page  # the transitions' sources
    assert "Sistema" in page
    for field in Withdrawal._meta.fields:
        assert f'name="{field.name}"' not in page, field.name
    # History only: no inline row can be deleted or added.
    assert "-DELETE" not in page
    assert "payout_attempts-__prefix__" not in page
    assert "transitions-__prefix__" not in page

    before = state(book.paid)
    admin_client.post(url, {"status": WithdrawalStatus.PENDING, "amount": "1", "e2e_id": ""})
    assert state(book.paid) == before
    book.paid.refresh_from_db()
    assert book.paid.amount == AMOUNT


def test_withdrawals_cannot_be_added_or_deleted(admin_client: Client, book: Book) -> None:
    assert admin_client.get(reverse("admin:withdrawals_withdrawal_add")).status_code == 403
    delete = reverse("admin:withdrawals_withdrawal_delete", args=[book.queued.pk])
    assert admin_client.get(delete).status_code == 403
    assert admin_client.post(delete, {"post": "yes"}).status_code == 403
    assert 'value="delete_selected"' not in admin_client.get(WITHDRAWALS).content.decode()
    act(admin_client, "delete_selected", book.queued)
    assert Withdrawal.objects.filter(pk=book.queued.pk).exists()


# --------------------------------------------------------------------------- acting


def test_approve_shows_a_confirmation_page_with_the_amounts_first(
    admin_client: Client, book: Book, enqueued: list[Any]
) -> None:
    second = request(book.manual, key_value="11144477735")
    before = {w.pk: state(w) for w in (book.queued, second, book.paid)}

    page = act(admin_client, "approve", book.queued, second, book.paid, reason=None)

    assert page.status_code == 200
    assert page.templates[0].name == "admin/confirm_money_action.html"
    assert "no-store" in page["Cache-Control"]
    html = page.content.decode()
    assert "Aprovar envia o Pix à chave de destino" in html
    assert html.count("R$ 50,00") == 2  # each requested amount...
    assert html.count("R$ 48,50") == 2  # ...and what is sent (after the fee)
    assert "R$ 97,00" in html  # the total sent
    assert "1 registro selecionado não está em um status que permita" in html  # the paid one
    assert 'name="reason"' in html
    assert {w.pk: state(w) for w in (book.queued, second, book.paid)} == before
    assert enqueued == []
    assert not LogEntry.objects.exists()


def test_confirming_without_a_reason_changes_nothing(admin_client: Client, book: Book, enqueued: list[Any]) -> None:
    before = state(book.queued)

    page = act(admin_client, "approve", book.queued, reason="   ")

    assert page.status_code == 200
    assert page.context["form"].errors["reason"]
    assert state(book.queued) == before
    assert enqueued == []
    assert change_log(book.queued) == []


def test_approve_goes_through_the_service_and_enqueues_the_payout_after_commit(
    admin_client: Client, book: Book, enqueued: list[Any], django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        response = act(admin_client, "approve", book.queued, book.paid)
        assert enqueued == []  # not before the change is committed

    assert enqueued == [(book.queued.pk,)]
    book.queued.refresh_from_db()
    assert book.queued.status == WithdrawalStatus.APPROVED
    assert book.queued.approved_at is not None
    transition = WithdrawalTransition.objects.filter(withdrawal=book.queued).get()
    assert (transition.from_status, transition.to_status, transition.source, transition.actor) == (
        WithdrawalStatus.PENDING,
        WithdrawalStatus.APPROVED,
        "staff",
        "admin",
    )
    assert change_log(book.queued) == [("admin", f"Aprovar (Pendente → Aprovado). Motivo: {REASON}")]
    assert messages_of(response) == ["Aprovar: 1 saque.", SKIPPED]
    # The paid one was skipped and untouched.
    book.paid.refresh_from_db()
    assert book.paid.status == WithdrawalStatus.PAID
    assert change_log(book.paid) == []


def test_cancel_gives_the_total_back(admin_client: Client, book: Book) -> None:
    before = available_balance(book.manual)

    response = act(admin_client, "cancel", book.queued, book.approved)

    book.queued.refresh_from_db()
    assert book.queued.status == WithdrawalStatus.CANCELED
    assert book.queued.total_debit == AMOUNT
    assert available_balance(book.manual) == before + AMOUNT == ledger_sum(book.manual)
    entry = LedgerEntry.objects.filter(account=book.manual).latest("id")
    assert (entry.kind, entry.amount) == (LedgerEntry.Kind.WITHDRAWAL_REVERSAL, AMOUNT)
    assert change_log(book.queued) == [
        ("admin", f"Cancelar (devolve o saldo) (Pendente → Cancelado). Motivo: {REASON}")
    ]
    # Approved is past cancelling (decisions §5): skipped with a warning.
    assert messages_of(response) == ["Cancelar (devolve o saldo): 1 saque.", SKIPPED]
    book.approved.refresh_from_db()
    assert book.approved.status == WithdrawalStatus.APPROVED
    assert not PayoutAttempt.objects.filter(withdrawal=book.queued).exists()


def test_mark_returned_only_asks_and_credits_once_another_staff_member_approves(
    admin_client: Client, staff_member: Callable[[str, str], Client], book: Book
) -> None:
    before = available_balance(book.auto)

    response = act(admin_client, "mark_returned", book.paid, book.pending_auto)

    # Asked, not done: nothing credited, the withdrawal still paid.
    pending = MoneyActionRequest.objects.get()
    assert (pending.action, pending.target_id, pending.amount, pending.reason, pending.state) == (
        "mark_withdrawal_returned",
        str(book.paid.pk),
        AMOUNT - FEE,
        REASON,
        "pending",
    )
    assert available_balance(book.auto) == before
    book.paid.refresh_from_db()
    assert book.paid.status == WithdrawalStatus.PAID
    assert change_log(book.paid) == [
        ("admin", f"Marcar como devolvido pelo destino: pedido #{pending.pk} aguardando aprovação. Motivo: {REASON}")
    ]
    assert messages_of(response)[1] == "1 registro ignorado: o status atual não permite."

    finance = staff_member("finance", "fernanda")
    approve = admin_action(
        finance, reverse("admin:accounts_moneyactionrequest_changelist"), "approve_requests", [pending.pk], reason="ok"
    )

    assert messages_of(approve) == ["1 pedido aprovado e executado."]
    book.paid.refresh_from_db()
    assert book.paid.status == WithdrawalStatus.REFUNDED
    assert available_balance(book.auto) == before + AMOUNT - FEE == ledger_sum(book.auto)
    entry = LedgerEntry.objects.filter(account=book.auto).latest("id")
    assert (entry.kind, entry.amount) == (LedgerEntry.Kind.WITHDRAWAL_RETURN, AMOUNT - FEE)
    transition = WithdrawalTransition.objects.filter(withdrawal=book.paid).latest("id")
    assert (transition.to_status, transition.source) == (WithdrawalStatus.REFUNDED, "staff")
    assert transition.actor == f"fernanda (aprovou o pedido #{pending.pk} de admin)"
    assert [who for who, _ in change_log(book.paid)] == ["fernanda", "admin"]  # newest first
    book.pending_auto.refresh_from_db()
    assert book.pending_auto.status == WithdrawalStatus.PENDING


@pytest.mark.parametrize(
    ("action", "target"),
    [("approve", "approved"), ("cancel", "approved"), ("mark_returned", "queued"), ("approve", "paid")],
)
def test_action_the_status_does_not_allow_changes_nothing(
    admin_client: Client, book: Book, enqueued: list[Any], action: str, target: str
) -> None:
    withdrawal: Withdrawal = getattr(book, target)
    before = state(withdrawal)

    response = act(admin_client, action, withdrawal)

    [message] = messages_of(response)
    assert message.endswith(": nenhum registro selecionado está em um status que permita.")
    assert state(withdrawal) == before
    assert change_log(withdrawal) == []
    assert enqueued == []
    assert not MoneyActionRequest.objects.exists()


# --------------------------------------------------------------------------- who may do what


def test_support_sees_withdrawals_but_cannot_act(staff_client: Callable[[str], Client], book: Book) -> None:
    client = staff_client("support")
    listing = client.get(WITHDRAWALS)
    assert listing.status_code == 200
    page = listing.content.decode()
    assert str(book.queued.pk) in page
    for action in ("approve", "cancel", "mark_returned"):
        assert f'value="{action}"' not in page
    assert client.get(reverse("admin:withdrawals_withdrawal_change", args=[book.paid.pk])).status_code == 200
    assert client.get(WITHDRAWALS, {"queue": "awaiting"}).status_code == 200

    before = {w.pk: state(w) for w in book.all()}
    for reason in (None, REASON):
        act(client, "approve", book.queued, reason=reason)
        act(client, "cancel", book.queued, reason=reason)
        act(client, "mark_returned", book.paid, reason=reason)

    assert {w.pk: state(w) for w in book.all()} == before
    assert not LogEntry.objects.exists()
    assert not MoneyActionRequest.objects.exists()


def test_operations_can_act(staff_client: Callable[[str], Client], book: Book, enqueued: list[Any]) -> None:
    client = staff_client("operations")
    page = client.get(WITHDRAWALS).content.decode()
    for action in ("approve", "cancel", "mark_returned"):
        assert f'value="{action}"' in page
    assert client.get(reverse("admin:withdrawals_withdrawal_add")).status_code == 403

    act(client, "approve", book.queued)
    act(client, "mark_returned", book.paid)

    book.queued.refresh_from_db()
    book.paid.refresh_from_db()
    # Marking returned credits the account: operations only asks for it.
    assert (book.queued.status, book.paid.status) == (WithdrawalStatus.APPROVED, WithdrawalStatus.PAID)
    assert MoneyActionRequest.objects.get().requested_by.get_username() == "operations-user"
    assert WithdrawalTransition.objects.filter(withdrawal=book.queued).get().actor == "operations-user"
    assert change_log(book.queued) == [("operations-user", f"Aprovar (Pendente → Aprovado). Motivo: {REASON}")]


# --------------------------------------------------------------------------- lists staff can work with (issue 15)

EXPORT = reverse("admin:withdrawals_withdrawal_export")
UNDETERMINED = reverse("admin:withdrawals_undeterminedpayout_changelist")


def order(response: Any, *withdrawals: Withdrawal) -> list[uuid.UUID]:
    """The given withdrawals in the order the page lists them."""
    page = response.content.decode()
    return sorted((w.pk for w in withdrawals), key=lambda pk: page.index(f'value="{pk}"'))


def totals(response: Any) -> str:
    assert response.status_code == 200
    page = response.content.decode()
    start = page.index('id="list-totals"')
    return " ".join(page[start : page.index("</p>", start)].split())


def csv_rows(response: Any) -> list[dict[str, str]]:
    assert isinstance(response, StreamingHttpResponse)
    body = response.getvalue().decode("utf-8")
    return list(csv.DictReader(body.removeprefix("\ufeff").splitlines(), delimiter=";"))


def test_list_shows_reais_destination_and_pt_br_labels(admin_client: Client, book: Book) -> None:
    page = admin_client.get(WITHDRAWALS).content.decode()
    assert "R$ 50,00" in page
    assert "R$ 48,50" in page  # sent, after the fee
    assert "CPF: 12345678909" in page
    assert "E-mail: fulano@example.com" in page
    for header in ("Valor enviado", "Chave de destino", "Pedido em", "Exportar CSV", "Aguardando aprovação (1)"):
        assert header in page, header
    assert ">Pendente<" in page
    assert ">5000<" not in page


def test_totals_follow_the_filters(admin_client: Client, book: Book) -> None:
    assert "<strong>4 saques</strong> · Valor: <strong>R$ 200,00</strong>" in totals(admin_client.get(WITHDRAWALS))
    pending = totals(admin_client.get(WITHDRAWALS, {"status__exact": "pending"}))
    assert (
        "<strong>2 saques</strong> · Valor: <strong>R$ 100,00</strong> · Valor enviado: <strong>R$ 97,00</strong>"
        in (pending)
    )
    queue = totals(admin_client.get(WITHDRAWALS, {"queue": "awaiting"}))
    assert "<strong>1 saque</strong> · Valor: <strong>R$ 50,00</strong>" in queue


def test_approval_queue_is_oldest_first_with_key_amount_and_account(admin_client: Client, book: Book) -> None:
    newer = request(book.manual, key_type="email", key_value="novo@example.com")
    listing = admin_client.get(WITHDRAWALS)
    assert order(listing, book.queued, newer) == [newer.pk, book.queued.pk]  # the list: newest first

    queue = admin_client.get(WITHDRAWALS, {"queue": "awaiting"})
    assert order(queue, book.queued, newer) == [book.queued.pk, newer.pk]  # the queue: oldest first
    page = queue.content.decode()
    assert "Aguardando aprovação (2)" in page
    assert "CPF: 12345678909" in page
    assert "E-mail: novo@example.com" in page
    assert "Loja Manual" in page
    assert "<strong>2 saques</strong> · Valor: <strong>R$ 100,00</strong>" in totals(queue)


def test_detail_page_in_reais_without_save_and_with_its_actions(admin_client: Client, book: Book) -> None:
    page = admin_client.get(reverse("admin:withdrawals_withdrawal_change", args=[book.queued.pk])).content.decode()
    assert "Saque R$ 50,00 (pendente)" in page
    assert "R$ 48,50" in page
    assert "Débito total" in page
    assert "Tentativas de pagamento" in page
    assert "Mudanças de status do saque" in page
    assert 'name="_save"' not in page
    assert 'name="_continue"' not in page
    assert 'value="approve"' in page
    assert 'value="cancel"' in page
    assert 'value="mark_returned"' not in page
    paid = admin_client.get(reverse("admin:withdrawals_withdrawal_change", args=[book.paid.pk])).content.decode()
    assert 'value="mark_returned"' in paid
    assert 'value="approve"' not in paid


def test_approve_from_the_detail_page_confirms_logs_the_reason_and_comes_back(
    admin_client: Client, book: Book, enqueued: list[Any], django_capture_on_commit_callbacks: Any
) -> None:
    run = reverse("admin:withdrawals_withdrawal_run", args=[book.queued.pk])
    change = reverse("admin:withdrawals_withdrawal_change", args=[book.queued.pk])
    before = state(book.queued)

    confirm = admin_client.post(run, {"action": "approve"})

    assert confirm.status_code == 200
    assert "Aprovar envia o Pix à chave de destino" in confirm.content.decode()
    assert state(book.queued) == before
    with django_capture_on_commit_callbacks(execute=True):
        done = admin_client.post(run, {"action": "approve", "confirmed": "yes", "reason": REASON})
    assert done.status_code == 302
    assert done["Location"] == change
    book.queued.refresh_from_db()
    assert book.queued.status == WithdrawalStatus.APPROVED
    assert enqueued == [(book.queued.pk,)]
    assert change_log(book.queued) == [("admin", f"Aprovar (Pendente → Aprovado). Motivo: {REASON}")]


def test_refused_detail_actions_change_nothing(
    staff_client: Callable[[str], Client], book: Book, enqueued: list[Any]
) -> None:
    client = staff_client("support")
    page = client.get(reverse("admin:withdrawals_withdrawal_change", args=[book.queued.pk])).content.decode()
    assert 'id="detail-actions"' not in page
    before = {w.pk: state(w) for w in book.all()}
    run = reverse("admin:withdrawals_withdrawal_run", args=[book.queued.pk])
    assert client.post(run, {"action": "approve", "confirmed": "yes", "reason": REASON}).status_code == 403
    assert client.post(run, {"action": "cancel", "confirmed": "yes", "reason": REASON}).status_code == 403
    assert {w.pk: state(w) for w in book.all()} == before
    assert not LogEntry.objects.exists()
    assert enqueued == []


def test_detail_action_the_status_does_not_allow_changes_nothing(admin_client: Client, book: Book) -> None:
    before = state(book.approved)
    run = reverse("admin:withdrawals_withdrawal_run", args=[book.approved.pk])
    response = admin_client.post(run, {"action": "cancel", "confirmed": "yes", "reason": REASON}, follow=True)
    assert messages_of(response) == [
        "Cancelar (devolve o saldo): nenhum registro selecionado está em um status que permita."
    ]
    assert state(book.approved) == before
    assert change_log(book.approved) == []


def test_csv_export_of_the_queue(admin_client: Client, book: Book) -> None:
    newer = request(book.manual, key_value="11144477735")
    queue = admin_client.get(WITHDRAWALS, {"queue": "awaiting"}).content.decode()
    assert f'href="{EXPORT}?queue=awaiting"' in queue

    rows = csv_rows(admin_client.get(EXPORT, {"queue": "awaiting"}))

    assert [row["ID"] for row in rows] == [str(book.queued.pk), str(newer.pk)]  # oldest first, as listed
    first = rows[0]
    assert (first["Status"], first["Tipo de chave"], first["Chave Pix"]) == ("Pendente", "CPF", "12345678909")
    assert (first["Valor (centavos)"], first["Valor (R$)"], first["Valor enviado (R$)"]) == ("5000", "50,00", "48,50")
    assert first["Conta"] == "Loja Manual"
    requested = timezone.localtime(book.queued.created_at, ZoneInfo("America/Sao_Paulo"))
    assert first["Pedido em"] == requested.strftime("%d/%m/%Y %H:%M:%S")
    assert first["Aprovado em"] == ""
    assert [row["ID"] for row in csv_rows(admin_client.get(EXPORT, {"status__exact": "paid"}))] == [str(book.paid.pk)]


def test_csv_export_is_read_before_the_first_byte_in_the_lists_order(
    admin_client: Client, book: Book, django_assert_num_queries: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Read whole in the view (a cursor fetched ``csv_chunk_size`` rows at a
    time, account and acquirer joined), in the list's order, the queue's own
    included: nothing is read while the client downloads."""
    monkeypatch.setattr(WithdrawalAdmin, "csv_chunk_size", 1)
    for params in ({}, {"queue": "awaiting"}, {"o": "-3"}):
        listed = admin_client.get(WITHDRAWALS, params).context["cl"].result_list
        response = admin_client.get(EXPORT, params)
        with django_assert_num_queries(0):
            assert [row["ID"] for row in csv_rows(response)] == [str(w.pk) for w in listed]


def undetermined(withdrawal: Withdrawal, hours_ago: int) -> Withdrawal:
    """Test setup: the payout was sent and its acquirer has not said where it stands."""
    Withdrawal.objects.filter(pk=withdrawal.pk).update(
        status=WithdrawalStatus.APPROVED, payout_unclear_since=timezone.now() - timedelta(hours=hours_ago)
    )
    withdrawal.refresh_from_db()
    return withdrawal


def test_undetermined_payouts_oldest_first_with_amount_key_and_since(admin_client: Client, book: Book) -> None:
    recent = undetermined(book.approved, hours_ago=1)
    old = undetermined(request(book.manual, key_value="11144477735"), hours_ago=30)

    response = admin_client.get(UNDETERMINED)

    assert order(response, recent, old) == [old.pk, recent.pk]
    page = response.content.decode()
    assert "Pagamentos indeterminados" in page
    assert "CPF: 11144477735" in page
    assert "R$ 50,00" in page
    assert "Indeterminado desde" in page
    since = timezone.localtime(old.payout_unclear_since, ZoneInfo("America/Sao_Paulo"))
    assert since.strftime("%d/%m/%Y %H:%M:%S") in page
    assert "<strong>2 pagamentos indeterminados</strong> · Valor: <strong>R$ 100,00</strong>" in totals(response)


def test_fail_undetermined_from_its_page_asks_with_a_reason_and_moves_nothing(admin_client: Client, book: Book) -> None:
    payout = undetermined(book.approved, hours_ago=30)
    change = reverse("admin:withdrawals_undeterminedpayout_change", args=[payout.pk])
    page = admin_client.get(change).content.decode()
    assert 'value="fail_undetermined"' in page
    assert 'value="ask_owner_again"' in page
    assert 'name="_save"' not in page
    run = reverse("admin:withdrawals_undeterminedpayout_run", args=[payout.pk])
    before = state(payout)

    confirm = admin_client.post(run, {"action": "fail_undetermined"})
    assert confirm.status_code == 200
    assert "resposta definitiva da adquirente" in confirm.content.decode()
    assert not MoneyActionRequest.objects.exists()

    done = admin_client.post(
        run, {"action": "fail_undetermined", "confirmed": "yes", "reason": "Chamado 123: não pagou"}
    )
    assert done["Location"] == change
    pending = MoneyActionRequest.objects.get()
    assert (pending.action, pending.target_id, pending.reason) == (
        "fail_undetermined_payout",
        str(payout.pk),
        "Chamado 123: não pagou",
    )
    assert state(payout) == before  # nothing credited until a second staff member approves
    log = LogEntry.objects.get(object_id=str(payout.pk))
    assert log.change_message.endswith("Motivo: Chamado 123: não pagou")
