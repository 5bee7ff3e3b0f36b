"""Reconciliation with each acquirer: its listings of a day against our
records, against the fake PSPs on loopback (the API Pix fake serves
``GET /pix`` and ``GET /cob`` with pagination, checked against the official
spec; Efí's fake serves ``GET /v2/gn/pix/enviados``).

Each mismatch kind gives exactly its item; "paid there, pending here" is
healed once through the charge's transition service; nothing else moves money.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from django.conf import settings
from django.core.management import call_command
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.models import Account, LedgerEntry
from accounts.selectors import available_balance, ledger_sum
from acquirers import adapters
from acquirers.adapters.base import Notification, NotificationEvent, PayoutRequest
from acquirers.adapters.sandbox import SandboxAdapter
from acquirers.models import Acquirer
from payments.events import charge_event_apply
from payments.models import Charge, ChargeStatus, ChargeTransition, LatePayment
from reconciliation.models import ReconciliationItem, ReconciliationRun
from reconciliation.run import acquirer_reconcile, local_day_window
from reconciliation.tasks import reconcile_acquirer_day, reconcile_acquirers_yesterday
from tests.acquirers.fake_efi import FakeEfi
from tests.acquirers.fake_psp import FakePsp, Fault
from tests.factories import AcquirerFactory, WithdrawalFactory
from webhooks.models import WebhookEvent
from withdrawals.models import PayoutAttempt, Withdrawal

pytestmark = pytest.mark.django_db
AMOUNT = 1000
LIQUID = 955  # 1000 - (30 + 1.5%)
BODY = {
    "payment_method": "pix",
    "amount": AMOUNT,
    "buyer": {"buyer_name": "Fulano", "buyer_document": "52998224725", "buyer_phone": "11999998888"},
}


def today() -> dt.date:
    return timezone.localdate()


def new_charge(api: APIClient) -> Charge:
    response = api.post("/api/transactions", BODY, format="json")
    assert response.status_code == 201, response.content
    return Charge.objects.get(pk=response.json()["data"]["id"])


def reconcile(acquirer: Acquirer, day: dt.date | None = None) -> ReconciliationRun:
    run = acquirer_reconcile(acquirer_id=acquirer.pk, day=day or today())
    run.refresh_from_db()
    return run


def items() -> list[tuple[str, str, str]]:
    return sorted(ReconciliationItem.objects.values_list("kind", "key", "status"))


def rerun_changes_nothing(acquirer: Acquirer, account: Account, *, unmatched: int) -> None:
    """A rerun of the day: the same items, nothing healed, credited or debited again."""
    before, balance = items(), available_balance(account)
    again = reconcile(acquirer)
    assert (again.status, again.healed_count, again.unmatched_count) == ("done", 0, unmatched), again.error
    assert items() == before
    assert available_balance(account) == ledger_sum(account) == balance


def paid_here(acquirer: Acquirer, charge: Charge, e2e_id: str) -> None:
    """The acquirer's notification of the Pix, applied here (as its callback would be)."""
    notification = Notification(event=NotificationEvent.CHARGE_PAID, reference=charge.txid, e2e_id=e2e_id)
    charge_event_apply(acquirer=acquirer, notification=notification, source="acquirer")


def pages(psp: FakePsp, operation: str) -> list[str]:
    return [c.query for c in psp.calls_of(operation)]


# --------------------------------------------------------------------------- received (API Pix)


def test_paid_there_and_pending_here_is_healed_once_through_the_transition_service(
    api: APIClient, account: Account, bacen_acquirer: Acquirer, fake_psp: FakePsp
) -> None:
    fake_psp.list_page_size = 2  # three Pix: two pages of GET /pix
    charges = [new_charge(api) for _ in range(3)]
    e2e_ids = [fake_psp.pay(c.txid) for c in charges]  # the callbacks were lost

    run = reconcile(bacen_acquirer)

    assert (run.status, run.healed_count, run.unmatched_count) == ("done", 3, 0)
    assert (run.matched_count, run.matched_amount) == (3, 3 * AMOUNT)
    assert [q.count("paginacao.paginaAtual=") for q in pages(fake_psp, "pix.list")] == [1, 1]
    assert ["paginacao.paginaAtual=1" in q for q in pages(fake_psp, "pix.list")] == [False, True]
    for charge, e2e_id in zip(charges, e2e_ids, strict=True):
        charge.refresh_from_db()
        assert (charge.status, charge.e2e_id) == (ChargeStatus.PAID, e2e_id)
        transition = ChargeTransition.objects.get(charge=charge, to_status="paid")
        assert transition.source == ChargeTransition.Source.RECONCILIATION
    assert available_balance(account) == ledger_sum(account) == 3 * LIQUID
    assert WebhookEvent.objects.filter(account=account, status="paid").count() == 3
    assert items() == sorted((ReconciliationItem.Kind.PAID_THERE_NOT_HERE, e, "healed") for e in e2e_ids)

    # A rerun over the same day: nothing credited twice, no item twice, no webhook twice.
    again = reconcile(bacen_acquirer)

    assert again.pk == run.pk
    assert (again.executions, again.status, again.healed_count, again.matched_count) == (2, "done", 0, 3)
    assert available_balance(account) == ledger_sum(account) == 3 * LIQUID
    assert LedgerEntry.objects.filter(account=account).count() == 3
    assert WebhookEvent.objects.filter(account=account, status="paid").count() == 3
    assert ReconciliationItem.objects.count() == 3


def test_paid_here_but_unknown_there_is_an_alarm_and_never_a_debit(
    api: APIClient, account: Account, bacen_acquirer: Acquirer, fake_psp: FakePsp
) -> None:
    charge = new_charge(api)
    # Paid here on some evidence the PSP does not have: its cob is still ATIVA.
    charge_event_apply(
        acquirer=None,
        notification=Notification(
            event=NotificationEvent.CHARGE_PAID, reference=charge.txid, e2e_id="E12345678202611270000abcdefghijk"
        ),
        source="staff",
    )
    balance = available_balance(account)
    entries = LedgerEntry.objects.count()

    run = reconcile(bacen_acquirer)

    assert (run.status, run.matched_count, run.unmatched_count, run.unmatched_amount) == ("done", 0, 1, AMOUNT)
    item = ReconciliationItem.objects.get()
    assert (item.kind, item.status, item.target_id) == (
        ReconciliationItem.Kind.PAID_HERE_UNKNOWN_THERE,
        "open",
        str(charge.pk),
    )
    assert (item.ours_status, item.ours_amount, item.theirs_status) == ("paid", AMOUNT, "active")
    assert available_balance(account) == balance
    assert LedgerEntry.objects.count() == entries
    charge.refresh_from_db()
    assert charge.status == ChargeStatus.PAID


def test_a_charge_concluded_there_with_no_pix_listed_credits_nothing(
    api: APIClient, account: Account, bacen_acquirer: Acquirer, fake_psp: FakePsp
) -> None:
    charge = new_charge(api)
    with fake_psp.lock:
        fake_psp.cobs[charge.txid]["status"] = "CONCLUIDA"  # no pix[]: no received amount, no e2e id

    run = reconcile(bacen_acquirer)

    assert (run.healed_count, run.unmatched_count) == (0, 1)
    item = ReconciliationItem.objects.get()
    assert (item.kind, item.status, item.target_id) == (
        ReconciliationItem.Kind.PAID_THERE_NOT_HERE,
        "open",
        str(charge.pk),
    )
    assert "sem Pix listado" in item.detail
    charge.refresh_from_db()
    assert (charge.status, available_balance(account), LedgerEntry.objects.count()) == (ChargeStatus.PENDING, 0, 0)


@pytest.mark.parametrize("callback_first", [False, True])
def test_a_second_pix_for_a_charge_is_reported_and_credited_once(
    api: APIClient, account: Account, bacen_acquirer: Acquirer, fake_psp: FakePsp, callback_first: bool
) -> None:
    charge = new_charge(api)
    first = fake_psp.pay(charge.txid)
    if callback_first:  # paid here before the run; otherwise the run heals it and then meets the second Pix
        charge_event_apply(
            acquirer=bacen_acquirer,
            notification=Notification(event=NotificationEvent.CHARGE_PAID, reference=charge.txid, e2e_id=first),
            source="acquirer",
        )
    second = fake_psp.receive(txid=charge.txid, amount="10.00")

    reconcile(bacen_acquirer)

    charge.refresh_from_db()
    assert charge.status == ChargeStatus.PAID
    # Whichever Pix the listing gave first paid it (the callback's, when it came first); the other is reported.
    assert charge.e2e_id in ([first] if callback_first else [first, second])
    other = second if charge.e2e_id == first else first
    found = {(i.kind, i.key, i.status) for i in ReconciliationItem.objects.all()}
    assert (ReconciliationItem.Kind.UNKNOWN_HERE, other, "open") in found
    assert available_balance(account) == ledger_sum(account) == LIQUID


def test_an_amount_that_differs_is_an_item_and_credits_nothing(
    api: APIClient, account: Account, bacen_acquirer: Acquirer, fake_psp: FakePsp
) -> None:
    charge = new_charge(api)
    e2e_id = fake_psp.pay(charge.txid, amount="9.99")

    run = reconcile(bacen_acquirer)

    assert (run.unmatched_count, run.unmatched_amount, run.healed_count) == (1, 999, 0)
    item = ReconciliationItem.objects.get()
    assert (item.kind, item.key, item.ours_amount, item.theirs_amount) == (
        ReconciliationItem.Kind.AMOUNT_DIFFERS,
        e2e_id,
        AMOUNT,
        999,
    )
    assert item.theirs_raw["valor"] == "9.99"
    charge.refresh_from_db()
    assert charge.status == ChargeStatus.PENDING
    assert available_balance(account) == 0
    assert not LedgerEntry.objects.exists()


def test_a_pix_for_no_charge_of_ours_is_unknown_here(bacen_acquirer: Acquirer, fake_psp: FakePsp) -> None:
    e2e_id = fake_psp.receive(txid=None, amount="5.00")

    run = reconcile(bacen_acquirer)

    assert items() == [(ReconciliationItem.Kind.UNKNOWN_HERE, e2e_id, "open")]
    assert (run.unmatched_count, run.unmatched_amount) == (1, 500)


def test_paid_there_but_canceled_here_is_a_late_payment_never_credited_by_itself(
    api: APIClient, account: Account, bacen_acquirer: Acquirer, fake_psp: FakePsp
) -> None:
    charge = new_charge(api)
    e2e_id = fake_psp.pay(charge.txid)
    Charge.objects.filter(pk=charge.pk).update(status=ChargeStatus.CANCELED)  # expired here meanwhile

    run = reconcile(bacen_acquirer)
    reconcile(bacen_acquirer)  # a rerun records nothing twice

    # The contract refuses canceled → paid: the Pix waits as a late payment
    # for staff to credit or return (maker-checker); nothing is credited here.
    (late,) = LatePayment.objects.all()
    assert (late.charge_id, late.e2e_id, late.amount, late.status) == (charge.pk, e2e_id, charge.amount, "open")
    assert late.source == "reconciliation"
    assert items() == [(ReconciliationItem.Kind.PAID_THERE_NOT_HERE, e2e_id, "healed")]
    assert (run.healed_count, run.unmatched_count) == (1, 0)
    assert available_balance(account) == 0
    assert Charge.objects.get(pk=charge.pk).status == ChargeStatus.CANCELED


def test_a_pix_returned_there_but_paid_here_is_an_item_and_debits_nothing(
    api: APIClient, account: Account, bacen_acquirer: Acquirer, fake_psp: FakePsp
) -> None:
    charge = new_charge(api)
    e2e_id = fake_psp.pay(charge.txid)
    paid_here(bacen_acquirer, charge, e2e_id)
    charge.refresh_from_db()
    assert charge.status == ChargeStatus.PAID
    with fake_psp.lock:  # then returned to the payer at the PSP, out of band
        fake_psp.pix[e2e_id]["devolucoes"] = [
            {
                "id": "D1",
                "rtrId": "D12345678202611270000abcdefghijk",
                "valor": "10.00",
                "horario": {"solicitacao": fake_psp.pix[e2e_id]["horario"]},
                "status": "DEVOLVIDO",
            }
        ]

    run = reconcile(bacen_acquirer)

    assert items() == [(ReconciliationItem.Kind.REFUND_DIFFERS, e2e_id, "open")]
    assert (run.matched_count, run.unmatched_count) == (0, 1)
    assert available_balance(account) == ledger_sum(account) == LIQUID
    charge.refresh_from_db()
    assert charge.status == ChargeStatus.PAID


def test_a_listing_failing_midway_fails_the_run_and_applies_nothing(
    api: APIClient, account: Account, bacen_acquirer: Acquirer, fake_psp: FakePsp
) -> None:
    fake_psp.list_page_size = 1
    charges = [new_charge(api) for _ in range(2)]
    for charge in charges:
        fake_psp.pay(charge.txid)
    # The first page answers; the second fails, every retry of it too.
    fake_psp.fail("pix.list", None, *[Fault.UNAVAILABLE] * 10)  # type: ignore[arg-type]

    run = reconcile(bacen_acquirer)

    assert run.status == ReconciliationRun.Status.FAILED
    assert "list_received" in run.error
    assert "página pix:1" in run.error
    assert not ReconciliationItem.objects.exists()
    assert set(Charge.objects.values_list("status", flat=True)) == {ChargeStatus.PENDING}
    assert available_balance(account) == 0
    assert not LedgerEntry.objects.exists()


# --------------------------------------------------------------------------- sent (Efí)


def _payout(account: Account, at: Acquirer, status: str, **fields: Any) -> Withdrawal:
    withdrawal = WithdrawalFactory(
        account=account, status=status, idempotency_id=uuid.uuid4().hex, acquirer=at, **fields
    )
    PayoutAttempt.objects.create(withdrawal=withdrawal, acquirer=at, action="send", outcome="processing", latency_ms=10)
    return withdrawal


def test_payouts_sent_there_are_matched_healed_or_reported_never_debited_or_credited(
    account: Account, efi_acquirer: Acquirer, fake_efi: FakeEfi
) -> None:
    fake_efi.list_page_size = 2
    paid = _payout(account, efi_acquirer, "paid", paid_at=timezone.now())
    approved = _payout(account, efi_acquirer, "approved")
    failed = _payout(account, efi_acquirer, "failed")
    unknown_there = _payout(account, efi_acquirer, "paid", paid_at=timezone.now())
    for withdrawal in (paid, approved, failed):
        fake_efi.record(withdrawal.idempotency_id, "50.00", "REALIZADO")
    balance, entries = available_balance(account), LedgerEntry.objects.count()

    run = reconcile(efi_acquirer)

    assert run.status == "done", run.error
    assert [q.count("paginacao.paginaAtual=1") for q in [c.query for c in fake_efi.calls_of("list")]] == [0, 1]
    assert items() == sorted(
        [
            (ReconciliationItem.Kind.PAID_THERE_NOT_HERE, approved.idempotency_id, "healed"),
            (ReconciliationItem.Kind.PAYOUT_SENT_THERE_FAILED_HERE, failed.idempotency_id, "open"),
            (ReconciliationItem.Kind.PAID_HERE_UNKNOWN_THERE, unknown_there.idempotency_id, "open"),
        ]
    )
    assert (run.matched_count, run.healed_count, run.unmatched_count) == (2, 1, 2)
    statuses = dict(Withdrawal.objects.values_list("pk", "status"))
    assert statuses == {paid.pk: "paid", approved.pk: "paid", failed.pk: "failed", unknown_there.pk: "paid"}
    assert (available_balance(account), LedgerEntry.objects.count()) == (balance, entries)

    reconcile(efi_acquirer)
    assert ReconciliationItem.objects.count() == 3


def test_a_payout_failed_there_but_paid_here_is_an_item_and_credits_nothing(
    account: Account, efi_acquirer: Acquirer, fake_efi: FakeEfi
) -> None:
    paid = _payout(account, efi_acquirer, "paid", paid_at=timezone.now())
    fake_efi.record(paid.idempotency_id, "50.00", "NAO_REALIZADO")
    balance, entries = available_balance(account), LedgerEntry.objects.count()

    run = reconcile(efi_acquirer)

    assert items() == [(ReconciliationItem.Kind.PAYOUT_FAILED_THERE_PAID_HERE, paid.idempotency_id, "open")]
    assert (run.matched_count, run.unmatched_count, run.unmatched_amount) == (0, 1, 5000)
    assert (available_balance(account), LedgerEntry.objects.count()) == (balance, entries)
    paid.refresh_from_db()
    assert paid.status == "paid"


# --------------------------------------------------------------------------- runs


def test_the_sandbox_lists_the_transfers_it_recorded(account: Account) -> None:
    sandbox = AcquirerFactory(key=f"sbx_{uuid.uuid4().hex[:8]}", adapter="sandbox", options={})
    paid = _payout(account, sandbox, "paid", paid_at=timezone.now())
    failed = _payout(account, sandbox, "failed")
    for withdrawal in (paid, failed):
        result = adapters.build(sandbox).create_payout(
            PayoutRequest(
                withdrawal_id=withdrawal.pk,
                idempotency_id=withdrawal.idempotency_id,
                amount=withdrawal.liquid_amount,
                key_type="cpf",
                key_value=withdrawal.pix_key,
            )
        )
        Withdrawal.objects.filter(pk=withdrawal.pk, status="paid").update(e2e_id=result.e2e_id)

    run = reconcile(sandbox)

    assert (run.status, run.matched_count, run.unmatched_count) == ("done", 1, 1)
    assert items() == [(ReconciliationItem.Kind.PAYOUT_SENT_THERE_FAILED_HERE, failed.idempotency_id, "open")]


def test_the_sandbox_lists_the_pix_its_charges_received(api: APIClient) -> None:
    sandbox = AcquirerFactory(key=f"sbx_{uuid.uuid4().hex[:8]}", adapter="sandbox", options={}, default_priority=1)
    paid, refunded, unproven, failed = (new_charge(api) for _ in range(4))
    for charge, actions in ((paid, ["pay"]), (refunded, ["pay", "refund"]), (failed, ["fail", "pay"])):
        for action in actions:
            api.post(f"/api/sandbox/transactions/{charge.pk}/{action}")
    # Paid here without the sandbox's Pix (as a notification nobody sent would).
    charge_event_apply(
        acquirer=sandbox,
        notification=Notification(event=NotificationEvent.CHARGE_PAID, reference=unproven.txid, e2e_id="E" + "1" * 31),
        source="acquirer",
    )

    listed = adapters.build(sandbox).list_received(*local_day_window(today()))
    assert sorted((r.reference, r.status.value, r.amount) for r in listed.records) == sorted(
        [(paid.txid, "paid", AMOUNT), (refunded.txid, "refunded", AMOUNT), (failed.txid, "paid", AMOUNT)]
    )  # the failed charge's Pix too: received there, a late payment here
    run = reconcile(sandbox)
    assert (run.status, run.matched_count) == ("done", 3)
    assert sorted(items()) == sorted(
        [
            (ReconciliationItem.Kind.PAID_HERE_UNKNOWN_THERE, unproven.txid, "open"),
            # Recorded as a late payment when the sandbox payer paid: here it waits for staff.
            (ReconciliationItem.Kind.PAID_THERE_NOT_HERE, LatePayment.objects.get(charge=failed).e2e_id, "healed"),
        ]
    )


def test_an_acquirer_that_lists_nothing_is_skipped_with_the_reason(db: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(SandboxAdapter, "supports_list_sent", False)
    monkeypatch.setattr(SandboxAdapter, "supports_list_received", False)
    sandbox = AcquirerFactory(key="sbx_recon", adapter="sandbox", options={})

    run = reconcile(sandbox)

    assert run.status == ReconciliationRun.Status.SKIPPED
    assert "não lista" in run.error


def test_the_window_is_the_brasilia_day() -> None:
    start, end = local_day_window(dt.date(2026, 11, 26))
    assert start.astimezone(dt.UTC) == dt.datetime(2026, 11, 26, 3, tzinfo=dt.UTC)
    assert end - start == dt.timedelta(days=1)


def test_beat_runs_yesterday_for_each_acquirer_that_lists(
    make_bacen_acquirer: Callable[..., Acquirer], monkeypatch: pytest.MonkeyPatch
) -> None:
    [entry] = [e for e in settings.CELERY_BEAT_SCHEDULE.values() if e["task"] == reconcile_acquirers_yesterday.name]
    monkeypatch.setattr(SandboxAdapter, "supports_list_sent", False)
    monkeypatch.setattr(SandboxAdapter, "supports_list_received", False)
    bacen = make_bacen_acquirer()
    AcquirerFactory(key="sbx_recon", adapter="sandbox", options={})
    AcquirerFactory(key="off_recon", adapter="bacen_pix", options=bacen.options, enabled=False)
    sent: list[tuple[Any, ...]] = []
    monkeypatch.setattr(reconcile_acquirer_day, "delay", lambda *args: sent.append(args))

    assert reconcile_acquirers_yesterday() == 1

    assert sent == [(bacen.pk, (today() - dt.timedelta(days=1)).isoformat())]
    assert "crontab" in type(entry["schedule"]).__name__


def test_the_task_and_the_command_reconcile_on_demand(bacen_acquirer: Acquirer, fake_psp: FakePsp) -> None:
    assert reconcile_acquirer_day(bacen_acquirer.pk, today().isoformat()) == "done"

    out = io.StringIO()
    call_command("reconcile", "--acquirer", bacen_acquirer.key, "--date", today().isoformat(), stdout=out)

    assert f"{bacen_acquirer.key} {today()}: done; matched 0" in out.getvalue()
    assert ReconciliationRun.objects.get().executions == 2


# --------------------------------------------------------------------------- bad records (issue 29, part 4)


def test_a_record_whose_e2e_id_another_charge_holds_is_an_item_and_the_rest_of_the_day_is_healed(
    api: APIClient, account: Account, bacen_acquirer: Acquirer, fake_psp: FakePsp
) -> None:
    other, clashing = new_charge(api), new_charge(api)
    reused = fake_psp.pay(clashing.txid)  # the PSP lists this Pix for `clashing`...
    # ...whose e2e id another charge here already holds (paid on another day).
    Charge.objects.filter(pk=other.pk).update(
        status=ChargeStatus.PAID, e2e_id=reused, paid_at=timezone.now() - dt.timedelta(days=3)
    )
    genuine = [new_charge(api) for _ in range(2)]
    e2e_ids = [fake_psp.pay(c.txid) for c in genuine]  # listed after it; their callbacks were lost

    run = reconcile(bacen_acquirer)

    assert (run.status, run.healed_count, run.unmatched_count) == ("done", 2, 1), run.error
    for charge in genuine:
        charge.refresh_from_db()
        assert charge.status == ChargeStatus.PAID
    clashing.refresh_from_db()
    assert (clashing.status, clashing.e2e_id) == (ChargeStatus.PENDING, None)
    item = ReconciliationItem.objects.get(kind=ReconciliationItem.Kind.DUPLICATE_E2E)
    assert (item.status, item.e2e_id, item.target_id) == ("open", reused, str(clashing.pk))
    assert str(other.pk) in item.detail
    assert available_balance(account) == ledger_sum(account) == 2 * LIQUID
    assert items() == sorted(
        [
            *((ReconciliationItem.Kind.PAID_THERE_NOT_HERE, e, "healed") for e in e2e_ids),
            (ReconciliationItem.Kind.DUPLICATE_E2E, f"{reused}:{clashing.txid}:{AMOUNT}:paid", "open"),
        ]
    )
    rerun_changes_nothing(bacen_acquirer, account, unmatched=1)


def test_an_error_on_one_record_rolls_back_that_record_only_and_is_an_item(
    api: APIClient, account: Account, bacen_acquirer: Acquirer, fake_psp: FakePsp, monkeypatch: pytest.MonkeyPatch
) -> None:
    charges = [new_charge(api) for _ in range(3)]
    e2e_ids = [fake_psp.pay(c.txid) for c in charges]
    broken = charges[0]

    def apply_then_break(**kwargs: Any) -> Any:
        result = charge_event_apply(**kwargs)  # the payment is applied, then something fails
        if kwargs["notification"].reference == broken.txid:
            raise RuntimeError("falha depois do crédito")
        return result

    monkeypatch.setattr("reconciliation.charges.charge_event_apply", apply_then_break)

    run = reconcile(bacen_acquirer)

    assert (run.status, run.healed_count, run.unmatched_count) == ("done", 2, 1), run.error
    broken.refresh_from_db()
    assert (broken.status, broken.e2e_id) == (ChargeStatus.PENDING, None)  # its credit rolled back with it
    failed = ReconciliationItem.objects.get(kind=ReconciliationItem.Kind.RECORD_FAILED)
    assert (failed.key, failed.status, failed.target_id) == (e2e_ids[0], "open", str(broken.pk))
    assert "RuntimeError: falha depois do crédito" in failed.detail
    assert available_balance(account) == ledger_sum(account) == 2 * LIQUID
    assert WebhookEvent.objects.filter(account=account, status="paid").count() == 2

    again = reconcile(bacen_acquirer)  # the record still breaks: the same item, nothing else

    assert (again.status, again.healed_count, again.unmatched_count) == ("done", 0, 1)
    assert ReconciliationItem.objects.count() == 3
    assert available_balance(account) == ledger_sum(account) == 2 * LIQUID


def test_findings_are_stored_as_they_come_when_the_run_dies_midway(
    api: APIClient, account: Account, bacen_acquirer: Acquirer, fake_psp: FakePsp, monkeypatch: pytest.MonkeyPatch
) -> None:
    from celery.exceptions import SoftTimeLimitExceeded

    for charge in [new_charge(api) for _ in range(3)]:
        fake_psp.pay(charge.txid)
    applied: list[str] = []

    def out_of_time_at_the_third(**kwargs: Any) -> Any:
        if len(applied) == 2:
            raise SoftTimeLimitExceeded()  # the task's time limit: not the record's fault, the run ends
        applied.append(kwargs["notification"].e2e_id)
        return charge_event_apply(**kwargs)

    monkeypatch.setattr("reconciliation.charges.charge_event_apply", out_of_time_at_the_third)

    with pytest.raises(SoftTimeLimitExceeded):
        reconcile(bacen_acquirer)

    assert ReconciliationRun.objects.get().status == ReconciliationRun.Status.FAILED
    # What was healed before is stored with its item, not lost with the end of the run.
    assert items() == sorted((ReconciliationItem.Kind.PAID_THERE_NOT_HERE, e, "healed") for e in applied)
    assert available_balance(account) == ledger_sum(account) == 2 * LIQUID


def test_a_second_record_with_an_e2e_id_already_listed_is_an_item_and_never_applied(
    api: APIClient, account: Account, bacen_acquirer: Acquirer, fake_psp: FakePsp
) -> None:
    first, second = new_charge(api), new_charge(api)
    e2e_id = fake_psp.pay(first.txid)
    with fake_psp.lock:  # the PSP's charge listing names the same Pix under another charge
        cob = fake_psp.cobs[second.txid]
        cob["status"] = "CONCLUIDA"
        cob["pix"] = [{**fake_psp.pix[e2e_id], "txid": second.txid}]

    run = reconcile(bacen_acquirer)

    assert (run.status, run.healed_count, run.unmatched_count) == ("done", 1, 1)
    first.refresh_from_db()
    second.refresh_from_db()
    assert (first.status, second.status) == (ChargeStatus.PAID, ChargeStatus.PENDING)
    assert items() == sorted(
        [
            (ReconciliationItem.Kind.PAID_THERE_NOT_HERE, e2e_id, "healed"),
            (ReconciliationItem.Kind.DUPLICATE_E2E, f"{e2e_id}:{second.txid}:{AMOUNT}:paid", "open"),
        ]
    )
    repeated = ReconciliationItem.objects.get(kind=ReconciliationItem.Kind.DUPLICATE_E2E)
    assert repeated.target_id == str(second.pk)
    assert first.txid in repeated.detail
    assert available_balance(account) == ledger_sum(account) == LIQUID

    reconcile(bacen_acquirer)
    assert ReconciliationItem.objects.count() == 2


def _devolucao(fake_psp: FakePsp, e2e_id: str, valor: str, status: str, natureza: str = "ORIGINAL") -> None:
    """A devolução the PSP made (or is making) out of band."""
    with fake_psp.lock:
        pix = fake_psp.pix[e2e_id]
        horario = {"solicitacao": pix["horario"]}
        if status == "DEVOLVIDO":
            horario["liquidacao"] = pix["horario"]
        devolucao = {
            "id": f"D{len(pix.get('devolucoes', []))}x",
            "rtrId": "D12345678202611270000abcdefghijk",
            "valor": valor,
            "natureza": natureza,
            "horario": horario,
            "status": status,
        }
        pix.setdefault("devolucoes", []).append(devolucao)


@pytest.mark.parametrize(("returned", "status"), [("3.00", "DEVOLVIDO"), ("10.00", "EM_PROCESSAMENTO")])
def test_a_partial_return_on_a_pix_being_healed_is_an_item(
    api: APIClient, account: Account, bacen_acquirer: Acquirer, fake_psp: FakePsp, returned: str, status: str
) -> None:
    charge = new_charge(api)
    e2e_id = fake_psp.pay(charge.txid)
    _devolucao(fake_psp, e2e_id, returned, status)

    run = reconcile(bacen_acquirer)

    # Paid: healed (the status poll would credit it too), and the return is for staff, never dropped.
    charge.refresh_from_db()
    assert charge.status == ChargeStatus.PAID
    assert items() == sorted(
        [
            (ReconciliationItem.Kind.PAID_THERE_NOT_HERE, e2e_id, "healed"),
            (ReconciliationItem.Kind.PARTIAL_RETURN, e2e_id, "open"),
        ]
    )
    partial = ReconciliationItem.objects.get(kind=ReconciliationItem.Kind.PARTIAL_RETURN)
    assert partial.theirs_raw["devolucoes"][0]["valor"] == returned
    assert ("R$ 3,00 de R$ 10,00" if status == "DEVOLVIDO" else "em andamento") in partial.detail
    assert (run.healed_count, run.unmatched_count) == (1, 1)
    assert available_balance(account) == ledger_sum(account) == LIQUID  # nothing debited automatically

    reconcile(bacen_acquirer)
    assert ReconciliationItem.objects.count() == 2
    assert available_balance(account) == ledger_sum(account) == LIQUID


def test_a_partial_return_on_a_pix_already_paid_here_is_an_item(
    api: APIClient, account: Account, bacen_acquirer: Acquirer, fake_psp: FakePsp
) -> None:
    charge = new_charge(api)
    e2e_id = fake_psp.pay(charge.txid)
    paid_here(bacen_acquirer, charge, e2e_id)
    _devolucao(fake_psp, e2e_id, "4.00", "DEVOLVIDO")

    run = reconcile(bacen_acquirer)

    assert items() == [(ReconciliationItem.Kind.PARTIAL_RETURN, e2e_id, "open")]
    assert (run.matched_count, run.unmatched_count) == (0, 1)
    assert available_balance(account) == ledger_sum(account) == LIQUID


@pytest.mark.parametrize(("natureza", "reported"), [("ORIGINAL", True), ("MED_FRAUDE", False)])
def test_refunded_there_and_charged_back_here_is_an_item_unless_the_return_was_the_med(
    api: APIClient, account: Account, bacen_acquirer: Acquirer, fake_psp: FakePsp, natureza: str, reported: bool
) -> None:
    from payments.services import charge_transition

    charge = new_charge(api)
    e2e_id = fake_psp.pay(charge.txid)
    paid_here(bacen_acquirer, charge, e2e_id)
    charge_transition(charge_id=charge.pk, to_status=ChargeStatus.CHARGEBACK, source="staff", actor="ops")
    _devolucao(fake_psp, e2e_id, "10.00", "DEVOLVIDO", natureza)
    entries = LedgerEntry.objects.count()

    run = reconcile(bacen_acquirer)

    if reported:  # a refund besides the chargeback: the payer may have been repaid twice
        assert items() == [(ReconciliationItem.Kind.REFUNDED_THERE_CHARGEBACK_HERE, e2e_id, "open")]
        item = ReconciliationItem.objects.get()
        assert (item.ours_status, item.theirs_status, item.target_id) == ("chargeback", "refunded", str(charge.pk))
        assert "recebeu R$ 10,00 a mais que o Pix" in item.detail
        assert (run.matched_count, run.unmatched_count) == (0, 1)
    else:  # MED's own return: both sides agree
        assert items() == []
        assert (run.matched_count, run.unmatched_count) == (1, 0)
    assert LedgerEntry.objects.count() == entries
    assert available_balance(account) == ledger_sum(account) == 0


@pytest.mark.parametrize(
    ("med", "refunded", "excess"),
    [
        ("5.00", "5.00", None),  # returned once in all, half by MED, half by refund: both sides agree
        ("7.00", "5.00", 200),  # R$ 2,00 beyond the Pix
        (None, "10.00", 1000),  # no MED listed: the chargeback here is its return, in full
        ("3.00", "3.00", 0),  # less than the Pix in all: reported, nothing to redebit
    ],
)
def test_a_refund_redebit_takes_only_what_the_payer_got_beyond_the_pix(
    api: APIClient,
    account: Account,
    bacen_acquirer: Acquirer,
    fake_psp: FakePsp,
    med: str | None,
    refunded: str,
    excess: int | None,
) -> None:
    from accounts.exceptions import ActionNotExecutable
    from accounts.models import MoneyActionRequest
    from accounts.services import money_action_request
    from payments.services import charge_transition
    from tests.helpers import asked_and_approved, staff_user

    charge = new_charge(api)
    e2e_id = fake_psp.pay(charge.txid)
    paid_here(bacen_acquirer, charge, e2e_id)
    charge_transition(charge_id=charge.pk, to_status=ChargeStatus.CHARGEBACK, source="acquirer")
    if med:
        _devolucao(fake_psp, e2e_id, med, "DEVOLVIDO", "MED_OPERACIONAL")
    _devolucao(fake_psp, e2e_id, refunded, "DEVOLVIDO")

    run = reconcile(bacen_acquirer)

    assert available_balance(account) == ledger_sum(account) == 0  # paid, charged back
    if excess is None:
        assert items() == []
        assert (run.matched_count, run.unmatched_count) == (1, 0)
        return
    item = ReconciliationItem.objects.get()
    assert (item.kind, item.key, item.status) == (
        ReconciliationItem.Kind.REFUNDED_THERE_CHARGEBACK_HERE,
        e2e_id,
        "open",
    )
    cents = int(med.replace(".", "")) if med else None
    assert (item.returned_by_med, item.returned_by_refund) == (cents, int(refunded.replace(".", "")))
    reconcile(bacen_acquirer)  # a rerun keeps the evidence
    item.refresh_from_db()
    assert (item.returned_by_med, item.returned_by_refund) == (cents, int(refunded.replace(".", "")))
    maker, checker = staff_user("operations", "olivia"), staff_user("finance", "fernanda")
    action = MoneyActionRequest.Action.REDEBIT_REFUND_AFTER_CHARGEBACK
    if not excess:
        assert "não recebeu mais que o Pix" in item.detail
        with pytest.raises(ActionNotExecutable, match="não há o que debitar"):
            money_action_request(action=action, target_id=item.pk, requested_by=maker, reason="extrato")
        assert available_balance(account) == ledger_sum(account) == 0
        return

    done = asked_and_approved(action, item.pk, maker=maker, checker=checker)

    debit = excess * LIQUID // AMOUNT  # pro rata to the liquid amount, rounded down
    assert (done.state, done.amount) == ("approved", debit)
    assert available_balance(account) == ledger_sum(account) == -debit
    charge.refresh_from_db()
    assert charge.status == ChargeStatus.REFUNDED


def test_a_payout_named_by_two_sent_pix_is_reported_never_applied_twice(
    account: Account, efi_acquirer: Acquirer, fake_efi: FakeEfi
) -> None:
    approved = _payout(account, efi_acquirer, "approved")
    first = fake_efi.record(approved.idempotency_id, "50.00", "REALIZADO")
    with fake_efi.lock:  # a second Pix listed under the same idEnvio
        fake_efi.sends["again"] = {**fake_efi.sends[approved.idempotency_id], "endToEndId": "E" + "9" * 31}
    balance, entries = available_balance(account), LedgerEntry.objects.count()

    run = reconcile(efi_acquirer)

    assert run.status == "done", run.error
    found = {(i.kind, i.key, i.status) for i in ReconciliationItem.objects.all()}
    assert len(found) == 2
    assert (
        ReconciliationItem.Kind.DUPLICATE_E2E,
        f"{approved.idempotency_id}:{first}",
        "open",
    ) in found  # the earlier one
    assert {k for k, _, _ in found} == {
        ReconciliationItem.Kind.DUPLICATE_E2E,
        ReconciliationItem.Kind.PAID_THERE_NOT_HERE,
    }
    assert (available_balance(account), LedgerEntry.objects.count()) == (balance, entries)

    reconcile(efi_acquirer)
    assert ReconciliationItem.objects.count() == 2


# --------------------------------------------------------------------------- unreadable records


@pytest.mark.parametrize(
    "malformed",
    [
        {"endToEndId": "E-ilegivel"},
        {"valor": "dez reais"},
        {"devolucoes": [{"id": "D1", "rtrId": "D1", "valor": "um real", "horario": {}, "status": "DEVOLVIDO"}]},
    ],
    ids=["e2e_id", "valor", "devolucao"],
)
def test_an_unreadable_record_is_an_item_and_the_rest_of_the_day_is_healed(
    api: APIClient, account: Account, bacen_acquirer: Acquirer, fake_psp: FakePsp, malformed: dict[str, Any]
) -> None:
    """One entry of ``GET /pix`` the adapter cannot read, among good ones:
    that entry is an item (kept whole), the good ones are healed, the run is
    done; a rerun finds the same item and heals nothing twice."""
    charges = [new_charge(api) for _ in range(2)]
    e2e_ids = [fake_psp.pay(c.txid) for c in charges]  # the callbacks were lost
    bad = fake_psp.receive(txid=charges[0].txid, amount="12.34", at=fake_psp.pix[e2e_ids[0]]["horario"])
    with fake_psp.lock:
        fake_psp.pix[bad].update(malformed)
        entry = json.loads(json.dumps(fake_psp.pix[bad]))

    run = reconcile(bacen_acquirer)

    assert (run.status, run.healed_count, run.unmatched_count) == ("done", 2, 1), run.error
    for charge, e2e_id in zip(charges, e2e_ids, strict=True):
        charge.refresh_from_db()
        assert (charge.status, charge.e2e_id) == (ChargeStatus.PAID, e2e_id)
    unreadable = ReconciliationItem.objects.get(kind=ReconciliationItem.Kind.RECORD_FAILED)
    assert unreadable.key.startswith("ilegivel:")
    assert (unreadable.status, unreadable.theirs_raw, unreadable.reference) == ("open", entry, charges[0].txid)
    assert "Registro ilegível" in unreadable.detail
    assert available_balance(account) == ledger_sum(account) == 2 * LIQUID
    rerun_changes_nothing(bacen_acquirer, account, unmatched=1)
    assert LedgerEntry.objects.filter(account=account).count() == 2
    # The PSP broke its own contract on that entry (the fake says so); nothing else.
    assert fake_psp.violations
    assert all("/pix" in v for v in fake_psp.violations)
    fake_psp.violations.clear()


def test_an_entry_that_is_not_an_object_is_unreadable_not_a_failed_page() -> None:
    from acquirers.adapters.apipix.listing import pix_records, read_entry
    from acquirers.adapters.base import ProviderRecordStatus

    (record,) = read_entry("lixo", pix_records)

    assert (record.status, record.raw, record.amount) == (ProviderRecordStatus.UNREADABLE, {"entrada": "lixo"}, 0)


# --------------------------------------------------------------------------- duplicate e2e ids (late payments, keys)


def test_a_pix_a_late_payment_holds_is_never_healed_on_another_charge(
    api: APIClient, account: Account, bacen_acquirer: Acquirer, fake_psp: FakePsp
) -> None:
    """A Pix recorded as paid after the cancel of one charge (staff may credit
    it) listed under a pending charge: healing it would credit it twice."""
    from payments.services import charge_transition

    cancelled, pending = new_charge(api), new_charge(api)
    charge_transition(charge_id=cancelled.pk, to_status=ChargeStatus.CANCELED, source="staff")
    e2e_id = fake_psp.pay(cancelled.txid)
    paid_here(bacen_acquirer, cancelled, e2e_id)  # recorded as a late payment of the cancelled charge
    late = LatePayment.objects.get(e2e_id=e2e_id)
    with fake_psp.lock:  # the PSP now lists that Pix under the pending charge
        fake_psp.pix[e2e_id]["txid"] = pending.txid
        fake_psp.cobs[cancelled.txid]["status"] = "ATIVA"
        del fake_psp.cobs[cancelled.txid]["pix"]

    run = reconcile(bacen_acquirer)

    assert run.status == "done", run.error
    pending.refresh_from_db()
    assert (pending.status, pending.e2e_id) == (ChargeStatus.PENDING, None)
    item = ReconciliationItem.objects.get(kind=ReconciliationItem.Kind.DUPLICATE_E2E)
    assert (item.target_id, item.status) == (str(pending.pk), "open")
    assert f"pagamento após cancelamento #{late.pk}" in item.detail
    assert available_balance(account) == ledger_sum(account) == 0


def test_repeats_of_one_pix_under_one_txid_with_other_amounts_are_an_item_each(
    api: APIClient, account: Account, bacen_acquirer: Acquirer, fake_psp: FakePsp
) -> None:
    charge = new_charge(api)
    e2e_id = fake_psp.pay(charge.txid)
    with fake_psp.lock:  # the charge's listing names its Pix twice more, with other values
        pix = fake_psp.pix[e2e_id]
        fake_psp.cobs[charge.txid]["pix"] = [pix, {**pix, "valor": "20.00"}, {**pix, "valor": "30.00"}]

    run = reconcile(bacen_acquirer)

    assert run.status == "done", run.error
    assert items() == sorted(
        [
            (ReconciliationItem.Kind.PAID_THERE_NOT_HERE, e2e_id, "healed"),
            (ReconciliationItem.Kind.DUPLICATE_E2E, f"{e2e_id}:{charge.txid}:2000:paid", "open"),
            (ReconciliationItem.Kind.DUPLICATE_E2E, f"{e2e_id}:{charge.txid}:3000:paid", "open"),
        ]
    )
    assert available_balance(account) == ledger_sum(account) == LIQUID

    reconcile(bacen_acquirer)
    assert ReconciliationItem.objects.count() == 3
