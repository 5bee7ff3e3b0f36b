"""What a Pix paying a due-date charge credits (payments.due_payments):
the amount the acquirer reports paid, with the fee on it, and the parts of
that amount; an immediate charge keeps its fixed amount."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from accounts.models import Account, LedgerEntry
from accounts.selectors import ledger_sum
from acquirers.adapters.base import Notification, NotificationEvent
from core.exceptions import PixServiceError
from payments.due_amounts import amount_due
from payments.due_models import DueCharge
from payments.due_payments import BRT, components_from_raw
from payments.due_terms import DueTerms
from payments.events import charge_event_apply
from payments.models import Charge, ChargeStatus
from tests.factories import AccountFactory, ChargeFactory
from webhooks.models import WebhookEvent

pytestmark = pytest.mark.django_db

TERMS = DueTerms.from_api(
    {
        "calendario": {"dataDeVencimento": "2026-12-10", "validadeAposVencimento": 30},
        "valor": {
            "original": "150.00",
            "multa": {"modalidade": 2, "valorPerc": "2.00"},
            "juros": {"modalidade": 3, "valorPerc": "1.00"},
            "desconto": {"modalidade": 1, "descontoDataFixa": [{"data": "2026-12-05", "valorPerc": "10.00"}]},
        },
    }
)
LATE = dt.datetime(2026, 12, 21, 12, tzinfo=BRT)


@pytest.fixture
def account(db: Any) -> Account:
    return AccountFactory(cashin_fee_fixed=30, cashin_fee_bps=150)


def due_charge(account: Account) -> Charge:
    charge = ChargeFactory(account=account, kind="due", amount=TERMS.original, txid="duepaymenttest000000000000000001")
    DueCharge.objects.create(
        charge=charge,
        terms=TERMS.to_api(),
        original=TERMS.original,
        due_date=TERMS.data_de_vencimento,
        last_payable_date=dt.date(2027, 1, 11),
    )
    return charge


def paid(charge: Charge, amount: int | None, at: dt.datetime = LATE, raw: dict[str, Any] | None = None) -> None:
    notification = Notification(
        event=NotificationEvent.CHARGE_PAID,
        reference=charge.txid,
        e2e_id="E00000000202612211200abcdefghijk",
        occurred_at=at,
        amount=amount,
        raw=raw or {},
    )
    charge_event_apply(acquirer=None, notification=notification, source="acquirer")


def test_a_late_payment_credits_what_was_paid_with_the_fee_on_it(account: Account) -> None:
    charge = due_charge(account)
    due = amount_due(TERMS, on=LATE.date())
    assert due.multa
    assert due.juros

    paid(charge, due.final, raw={"componentesValor": due.componentes_valor()})

    charge.refresh_from_db()
    fee = 30 + (due.final * 150 + 5_000) // 10_000
    assert (charge.status, charge.amount) == (ChargeStatus.PAID, due.final)
    assert charge.platform_tax == fee  # 30 centavos + 1.5 %, half up, on what was paid
    assert charge.liquid_amount == due.final - charge.platform_tax
    entry = LedgerEntry.objects.get(account=account)
    assert entry.amount == charge.liquid_amount
    assert ledger_sum(account) == charge.liquid_amount
    record = DueCharge.objects.get(pk=charge.pk)
    assert (
        record.paid_amount
        == due.final
        == sum(v if k not in ("abatimento", "desconto") else -v for k, v in record.paid_components.items())
    )
    assert record.paid_components == {"original": 15_000, "multa": due.multa, "juros": due.juros}
    assert record.expected_amount == due.final
    event = WebhookEvent.objects.get(record_id=charge.pk)
    assert (event.event_type, event.status) == ("due_charge", "paid")
    assert event.data["paid_amount"] == due.final
    assert event.data["paid_components"]["multa"] == due.multa


def test_what_the_acquirer_reports_is_credited_even_when_our_day_count_differs(account: Account) -> None:
    charge = due_charge(account)
    expected = amount_due(TERMS, on=LATE.date()).final

    paid(charge, expected + 7)

    record = DueCharge.objects.select_related("charge").get(pk=charge.pk)
    assert (record.charge.amount, record.paid_amount, record.expected_amount) == (expected + 7, expected + 7, expected)
    assert record.paid_components == {"original": expected + 7}  # no parts reported: all of it as paid


def test_a_payment_without_an_amount_changes_nothing(account: Account) -> None:
    charge = due_charge(account)

    with pytest.raises(PixServiceError):
        paid(charge, None)

    charge.refresh_from_db()
    assert (charge.status, charge.amount) == (ChargeStatus.PENDING, TERMS.original)
    assert not LedgerEntry.objects.exists()
    assert not WebhookEvent.objects.exists()
    assert DueCharge.objects.get(pk=charge.pk).paid_amount is None


def test_the_fee_never_exceeds_a_small_payment(account: Account) -> None:
    charge = due_charge(account)

    paid(charge, 20)

    charge.refresh_from_db()
    assert (charge.amount, charge.platform_tax, charge.liquid_amount) == (20, 19, 1)
    assert ledger_sum(account) == 1


def test_an_immediate_charge_paid_another_amount_is_still_refused(account: Account) -> None:
    charge = ChargeFactory(account=account, txid="immediatetest0000000000000000001")

    with pytest.raises(PixServiceError):
        paid(charge, charge.amount + 1)

    charge.refresh_from_db()
    assert charge.status == ChargeStatus.PENDING
    assert not LedgerEntry.objects.exists()


def test_components_are_read_in_centavos_and_unreadable_parts_left_out() -> None:
    raw = {"componentesValor": {"original": {"valor": "150.00"}, "juros": {"valor": "1.25"}, "multa": {"valor": "x"}}}
    assert components_from_raw(raw) == {"original": 15_000, "juros": 125}
    assert components_from_raw({}) == {}
    assert components_from_raw({"componentesValor": "junk"}) == {}
