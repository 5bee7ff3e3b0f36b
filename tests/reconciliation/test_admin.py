"""Back office for reconciliation with acquirers: the report per day and
acquirer with its CSV, the mismatches with both sides, their resolution
(acknowledged with a reason and an audit entry; a redébito only through a
second staff member), and the on-demand run from the acquirers' list."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import pytest
from django.contrib.admin.models import LogEntry
from django.db import transaction
from django.http import StreamingHttpResponse
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from accounts.models import Account, LedgerEntry, MoneyActionRequest
from accounts.selectors import available_balance, ledger_sum
from accounts.services import ledger_post
from acquirers.adapters.sandbox import SandboxAdapter
from acquirers.models import Acquirer
from payments.models import Charge
from reconciliation.models import ReconciliationItem, ReconciliationRun
from reconciliation.tasks import reconcile_acquirer_day
from tests.factories import AcquirerFactory, ChargeFactory, WithdrawalFactory
from tests.helpers import admin_action, admin_messages
from withdrawals.models import Withdrawal

pytestmark = pytest.mark.django_db
RUNS = reverse("admin:reconciliation_reconciliationrun_changelist")
ITEMS = reverse("admin:reconciliation_reconciliationitem_changelist")
REQUESTS = reverse("admin:accounts_moneyactionrequest_changelist")
ACQUIRERS = reverse("admin:acquirers_acquirer_changelist")
REASON = "Conferido com o extrato da adquirente"


@pytest.fixture
def acquirer(db: Any) -> Acquirer:
    return AcquirerFactory(key="efi_recon", adapter="efi_pix", options={})


@pytest.fixture
def run(acquirer: Acquirer) -> ReconciliationRun:
    now = timezone.now()
    return ReconciliationRun.objects.create(
        acquirer=acquirer,
        day=dt.date(2026, 11, 26),
        window_start=now,
        window_end=now,
        status="done",
        started_at=now,
        finished_at=now,
        executions=1,
        matched_count=3,
        matched_amount=123456,
        unmatched_count=1,
        unmatched_amount=5000,
    )


def item(run: ReconciliationRun, kind: str, **fields: Any) -> ReconciliationItem:
    defaults: dict[str, Any] = {
        "direction": "sent",
        "key": uuid.uuid4().hex,
        "ours_status": "failed",
        "ours_amount": 5000,
        "theirs_status": "paid",
        "theirs_amount": 5000,
        "theirs_raw": {"valor": "50.00", "status": "REALIZADO"},
        "last_seen_at": timezone.now(),
    }
    return ReconciliationItem.objects.create(run=run, acquirer=run.acquirer, kind=kind, **(defaults | fields))


def failed_payout(account: Account, balance: int) -> Withdrawal:
    """A withdrawal that failed here (its debit given back), on an account holding ``balance``."""
    with transaction.atomic():
        ledger_post(account_id=account.pk, amount=balance, kind="charge_paid", reference=f"seed:{uuid.uuid4().hex}")
    return WithdrawalFactory(account=account, status="failed", idempotency_id=uuid.uuid4().hex)


def test_the_report_lists_each_day_and_acquirer_and_exports_csv(admin_client: Client, run: ReconciliationRun) -> None:
    page = admin_client.get(RUNS)
    assert page.status_code == 200
    body = page.content.decode()
    assert "R$ 1.234,56" in body
    assert "R$ 50,00" in body
    for query in ("?status__exact=done", f"?acquirer__id__exact={run.acquirer_id}", "?day__year=2026"):
        assert admin_client.get(RUNS + query).status_code == 200

    export = admin_client.get(reverse("admin:reconciliation_reconciliationrun_export"))

    assert isinstance(export, StreamingHttpResponse)
    lines = b"".join(export.streaming_content).decode("utf-8-sig").splitlines()
    assert lines[0].startswith("Dia;Adquirente;Situação;Conferidos;Valor conferido (centavos)")
    assert lines[1].split(";")[:6] == ["2026-11-26", str(run.acquirer), "Concluída", "3", "123456", "1234,56"]


def test_an_item_shows_both_sides_and_is_acknowledged_with_a_reason(
    staff_client: Any, run: ReconciliationRun, account: Account
) -> None:
    found = item(
        run,
        ReconciliationItem.Kind.PAID_HERE_UNKNOWN_THERE,
        ours_status="paid",
        theirs_status="not_listed",
        theirs_amount=None,
    )
    client = staff_client("operations")
    for query in ("", "?kind__exact=paid_here_unknown_there", "?status__exact=open", f"?q={found.key}"):
        assert client.get(ITEMS + query).status_code == 200
    detail = client.get(reverse("admin:reconciliation_reconciliationitem_change", args=[found.pk])).content.decode()
    assert "Na adquirente" in detail
    assert "not_listed" in detail
    assert "R$ 50,00" in detail
    assert 'data-action="acknowledge"' in detail
    assert 'data-action="request_redebit"' not in detail  # only for a payout sent there, failed here
    entries = LedgerEntry.objects.count()

    confirm = admin_action(client, ITEMS, "acknowledge", [found.pk])
    assert "Confirmar: Resolver" in confirm.content.decode()
    done = admin_action(client, ITEMS, "acknowledge", [found.pk], reason=REASON)

    assert "1 divergência resolvida. Nenhum saldo foi movimentado." in admin_messages(done)
    found.refresh_from_db()
    assert (found.status, found.resolution, found.reason) == ("resolved", "acknowledged", REASON)
    assert found.resolved_by is not None
    assert found.resolved_at is not None
    log = LogEntry.objects.get(object_id=str(found.pk))
    assert REASON in log.change_message
    assert LedgerEntry.objects.count() == entries


def test_support_sees_items_but_cannot_resolve_them(staff_client: Any, run: ReconciliationRun) -> None:
    found = item(run, ReconciliationItem.Kind.AMOUNT_DIFFERS)
    client = staff_client("support")

    assert client.get(ITEMS).status_code == 200
    admin_action(client, ITEMS, "acknowledge", [found.pk], reason=REASON)

    found.refresh_from_db()
    assert found.status == "open"


def test_a_redebit_moves_money_only_once_a_second_staff_member_approves(
    staff_member: Any, run: ReconciliationRun, account: Account
) -> None:
    withdrawal = failed_payout(account, 10_000)
    found = item(
        run,
        ReconciliationItem.Kind.PAYOUT_SENT_THERE_FAILED_HERE,
        target_type="withdrawals.withdrawal",
        target_id=withdrawal.pk,
    )
    operator = staff_member("operations", "olivia")
    checker = staff_member("finance", "fernanda")
    detail = operator.get(reverse("admin:reconciliation_reconciliationitem_change", args=[found.pk])).content.decode()
    assert 'data-action="request_redebit"' in detail

    asked = admin_action(operator, ITEMS, "request_redebit", [found.pk], reason=REASON)

    assert any("Nada foi debitado" in m for m in admin_messages(asked))
    pending = MoneyActionRequest.objects.get()
    assert (pending.action, pending.amount, pending.state) == ("redebit_sent_payout", withdrawal.total_debit, "pending")
    found.refresh_from_db()
    assert (found.status, found.approval_request_id) == ("awaiting_approval", pending.pk)
    assert available_balance(account) == 10_000

    # The one who asked cannot approve.
    admin_action(operator, REQUESTS, "approve_requests", [pending.pk], reason="eu mesma")
    pending.refresh_from_db()
    assert pending.state == "pending"
    assert available_balance(account) == 10_000

    approved = admin_action(checker, REQUESTS, "approve_requests", [pending.pk], reason="extrato conferido")

    assert "1 pedido aprovado e executado." in admin_messages(approved)
    assert available_balance(account) == ledger_sum(account) == 10_000 - withdrawal.total_debit
    entry = LedgerEntry.objects.latest("id")
    assert (entry.kind, entry.amount, entry.reference) == (
        "withdrawal",
        -withdrawal.total_debit,
        f"withdrawal:{withdrawal.pk}:redebit",
    )
    withdrawal.refresh_from_db()
    assert withdrawal.status == "failed"  # the contract has no failed → paid
    # The item follows its approved request.
    assert operator.get(ITEMS).status_code == 200
    found.refresh_from_db()
    assert (found.status, found.resolution) == ("resolved", "money_action")


def test_no_redebit_while_the_acquirer_has_not_confirmed_the_send(
    staff_member: Any, run: ReconciliationRun, account: Account
) -> None:
    withdrawal = failed_payout(account, 10_000)
    found = item(
        run,
        ReconciliationItem.Kind.PAYOUT_SENT_THERE_FAILED_HERE,
        target_type="withdrawals.withdrawal",
        target_id=withdrawal.pk,
        theirs_status="processing",  # in flight there: it may yet fail
    )

    asked = admin_action(staff_member("operations", "olivia"), ITEMS, "request_redebit", [found.pk], reason=REASON)

    assert any("ainda não confirmou o envio" in m for m in admin_messages(asked))
    assert MoneyActionRequest.objects.count() == 0
    found.refresh_from_db()
    assert found.status == "open"
    assert available_balance(account) == 10_000


def test_a_redebit_never_overdraws(staff_member: Any, run: ReconciliationRun, account: Account) -> None:
    withdrawal = failed_payout(account, 100)  # less than the withdrawal's debit
    found = item(
        run,
        ReconciliationItem.Kind.PAYOUT_SENT_THERE_FAILED_HERE,
        target_type="withdrawals.withdrawal",
        target_id=withdrawal.pk,
    )
    admin_action(staff_member("operations", "olivia"), ITEMS, "request_redebit", [found.pk], reason=REASON)
    pending = MoneyActionRequest.objects.get()

    admin_action(staff_member("finance", "fernanda"), REQUESTS, "approve_requests", [pending.pk], reason="ok")

    pending.refresh_from_db()
    assert pending.state == "failed"
    assert "Saldo insuficiente" in pending.outcome
    assert available_balance(account) == ledger_sum(account) == 100
    # Not carried out: the item is open again, for another resolution.
    assert staff_member("support", "sofia").get(ITEMS).status_code == 200
    found.refresh_from_db()
    assert (found.status, found.resolution) == ("open", "")


def charged_back(account: Account, balance: int) -> Charge:
    """A charge in chargeback here (the MED took its money back), on an account holding ``balance``."""
    with transaction.atomic():
        ledger_post(account_id=account.pk, amount=balance, kind="charge_paid", reference=f"seed:{uuid.uuid4().hex}")
    return ChargeFactory(account=account, status="chargeback", e2e_id="E" + uuid.uuid4().hex[:31])


def refund_made_after_chargeback(run: ReconciliationRun, charge: Charge, **fields: Any) -> ReconciliationItem:
    defaults: dict[str, Any] = {
        "direction": "received",
        "key": charge.e2e_id,
        "target_type": "payments.charge",
        "target_id": charge.pk,
        "ours_status": "chargeback",
        "theirs_status": "refunded",
        "returned_by_refund": charge.amount,  # a refund of all of it, besides the MED's return
    }
    return item(run, ReconciliationItem.Kind.REFUNDED_THERE_CHARGEBACK_HERE, **(defaults | fields))


def test_a_refund_made_after_a_chargeback_is_debited_only_once_a_second_staff_member_approves(
    staff_member: Any, run: ReconciliationRun, account: Account
) -> None:
    charge = charged_back(account, 500)  # less than the refund: a refund may take the balance below zero
    found = refund_made_after_chargeback(run, charge)
    operator = staff_member("operations", "olivia")
    checker = staff_member("finance", "fernanda")
    detail = operator.get(reverse("admin:reconciliation_reconciliationitem_change", args=[found.pk])).content.decode()
    assert "Devolvida na adquirente, contestada (MED) aqui" in detail
    assert 'data-action="request_redebit"' in detail

    asked = admin_action(operator, ITEMS, "request_redebit", [found.pk], reason=REASON)

    assert any("débito do estorno criado. Nada foi debitado" in m for m in admin_messages(asked))
    pending = MoneyActionRequest.objects.get()
    assert (pending.action, pending.amount, pending.target_id) == (
        "redebit_refund_after_chargeback",
        charge.liquid_amount,
        str(found.pk),  # the item: its evidence measures the debit
    )
    assert available_balance(account) == 500
    queue = checker.get(REQUESTS).content.decode()
    assert "Debitar estorno que a adquirente fez após a contestação" in queue
    assert f"-R$ {charge.liquid_amount // 100},{charge.liquid_amount % 100:02d}" in queue.replace("\xa0", " ")

    admin_action(operator, REQUESTS, "approve_requests", [pending.pk], reason="eu mesma")  # not the one who asked
    assert available_balance(account) == 500

    approved = admin_action(checker, REQUESTS, "approve_requests", [pending.pk], reason="extrato conferido")

    assert "1 pedido aprovado e executado." in admin_messages(approved)
    assert available_balance(account) == ledger_sum(account) == 500 - charge.liquid_amount
    entry = LedgerEntry.objects.latest("id")
    assert (entry.kind, entry.amount, entry.reference) == (
        "charge_refund",
        -charge.liquid_amount,
        f"charge:{charge.pk}:refund-redebit",
    )
    charge.refresh_from_db()
    assert charge.status == "refunded"  # closed: its devolução is debited, never again
    assert operator.get(ITEMS).status_code == 200
    found.refresh_from_db()
    assert (found.status, found.resolution) == ("resolved", "money_action")

    # Never twice: a second item on the same charge cannot even ask.
    again = refund_made_after_chargeback(run, charge, key="other")
    refused = admin_action(operator, ITEMS, "request_redebit", [again.pk], reason=REASON)
    assert any("O estorno desta cobrança já foi debitado." in m for m in admin_messages(refused))
    assert MoneyActionRequest.objects.count() == 1
    assert available_balance(account) == ledger_sum(account) == 500 - charge.liquid_amount


def test_no_refund_redebit_unless_the_acquirer_says_the_pix_was_returned_in_full(
    staff_member: Any, run: ReconciliationRun, account: Account
) -> None:
    charge = charged_back(account, 10_000)
    found = refund_made_after_chargeback(run, charge, theirs_status="paid")  # a partial return there

    asked = admin_action(staff_member("operations", "olivia"), ITEMS, "request_redebit", [found.pk], reason=REASON)

    assert any("não diz que o Pix foi devolvido por inteiro" in m for m in admin_messages(asked))
    assert not MoneyActionRequest.objects.exists()
    found.refresh_from_db()
    assert found.status == "open"
    assert available_balance(account) == 10_000


def test_the_acquirers_list_runs_yesterday_on_demand(
    staff_client: Any, django_capture_on_commit_callbacks: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    efi = AcquirerFactory(key="efi_demand", adapter="efi_pix", options={})
    monkeypatch.setattr(SandboxAdapter, "supports_list_sent", False)  # as an adapter without listings
    monkeypatch.setattr(SandboxAdapter, "supports_list_received", False)
    sandbox = AcquirerFactory(key="sbx_demand", adapter="sandbox", options={})
    sent: list[tuple[Any, ...]] = []
    monkeypatch.setattr(reconcile_acquirer_day, "delay", lambda *args: sent.append(args))
    client = staff_client("operations")

    with django_capture_on_commit_callbacks(execute=True):
        done = client.post(
            ACQUIRERS,
            {"action": "reconcile_yesterday", "_selected_action": [str(efi.pk), str(sandbox.pk)]},
            follow=True,
        )

    messages = admin_messages(done)
    assert any("enfileirada para 1 adquirente" in m for m in messages)
    assert any("sbx_demand: o adaptador não lista" in m for m in messages)
    yesterday = (timezone.localdate() - dt.timedelta(days=1)).isoformat()
    assert sent == [(efi.pk, yesterday)]
