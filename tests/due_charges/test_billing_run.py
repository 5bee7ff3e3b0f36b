"""The issue's "done when": a monthly billing run of 1,000 debtors created
in one batch (a real worker creating each at the sandbox), with fine,
interest and a fixed-date discount, paid on different simulated days
through the sandbox's payer over HTTP (early with the discount, early
without it, on time, late with fine and interest), one never paid and
expired, each pay day reconciled, and the ledger exact to the centavo."""

from __future__ import annotations

import datetime as dt
import uuid
from collections import Counter
from typing import Any

import pytest
from rest_framework.test import APIClient

from accounts.models import Account, LedgerEntry
from accounts.selectors import available_balance, ledger_sum
from acquirers.models import Acquirer
from payments.cancel_pursuit import charge_cancel_pursue
from payments.models import Charge, ChargeStatus
from payments.services import charges_expire
from reconciliation.models import ReconciliationItem
from reconciliation.run import acquirer_reconcile
from tests.due_charges.support import (
    DISCOUNT_PERCENT,
    FEE_BPS,
    FEE_FIXED,
    FINE_PERCENT,
    INTEREST_PERCENT_A_DAY,
    business_day_from,
    expected_parts,
    fee,
    paid_of,
    pay,
    sandbox,
    today,
)
from tests.factories import AccountFactory, AcquirerFactory
from tests.realworld import wait_for
from webhooks.models import WebhookEvent

DEBTORS = 1000
DAYS_AFTER_DUE = 15


@pytest.fixture
def account(db: Any) -> Account:
    return AccountFactory(cashin_fee_fixed=FEE_FIXED, cashin_fee_bps=FEE_BPS)


@pytest.fixture
def acquirer(db: Any) -> Acquirer:
    # A key of its own: the sandbox keeps its state in Redis across tests (the day\'s listing included).
    return AcquirerFactory(key=f"sbx_billing_run_{uuid.uuid4().hex[:8]}", default_priority=1)


def billing_item(n: int, *, due: dt.date, discount_until: dt.date) -> dict[str, Any]:
    """:func:`tests.due_charges.support.make_due`'s terms, as a batch item."""
    return {
        "amount": 10000 + 137 * n,
        "due_date": due.isoformat(),
        "days_after_due": DAYS_AFTER_DUE,
        "debtor": {"name": f"Devedor {n}", "document": "52998224725"},
        "fine": {"modalidade": 2, "valorPerc": FINE_PERCENT},
        "interest": {"modalidade": 2, "valorPerc": INTEREST_PERCENT_A_DAY},
        "discount": {
            "modalidade": 2,
            "descontoDataFixa": [{"data": discount_until.isoformat(), "valorPerc": DISCOUNT_PERCENT}],
        },
        "description": f"Mensalidade {n}",
    }


@pytest.mark.django_db(transaction=True)
def test_a_billing_run_paid_on_different_days_reconciles_with_the_ledger_exact(
    celery_worker_process: Any, api: APIClient, account: Account, acquirer: Acquirer, settings: Any
) -> None:
    # A thousand payers in seconds on one credential: the sandbox's payer is not traffic to limit here.
    settings.API_RATE_LIMIT_PER_MINUTE = 100_000
    due = business_day_from(today() + dt.timedelta(days=10))
    discount_until = business_day_from(today() + dt.timedelta(days=4))
    assert today() < discount_until < due
    schedule = [
        today(),  # early, with the discount
        discount_until,  # the discount's last day
        due - dt.timedelta(days=1),  # early, past the discount: the original
        due,  # on time
        due + dt.timedelta(days=1),  # late: the fine and a day of interest
        due + dt.timedelta(days=DAYS_AFTER_DUE - 3),  # late: the fine and 12 days of interest
    ]
    items = [billing_item(n, due=due, discount_until=discount_until) for n in range(DEBTORS)]
    created = api.post("/api/due-charges/batches", {"items": items}, format="json")
    assert created.status_code == 202, created.content
    batch_url = f"/api/due-charges/batches/{created.json()['data']['id']}"
    done = wait_for(lambda: (r := api.get(batch_url).json()["data"])["status"] == "done" and r, timeout=300)
    assert done["counts"] == {"total": DEBTORS, "pending": 0, "created": DEBTORS, "failed": 0}
    charges = list(Charge.objects.filter(account=account, kind="due").order_by("amount"))
    assert [c.amount for c in charges] == [10000 + 137 * n for n in range(DEBTORS)]
    never_paid, billed = charges[-1], charges[:-1]
    pay_day = {charge.pk: schedule[i % len(schedule)] for i, charge in enumerate(billed)}

    for charge in billed:
        response = pay(api, charge, pay_day[charge.pk])
        assert response.status_code == 200, response.content

    # The one never paid expires after its last payable day and is withdrawn at the acquirer.
    assert charges_expire(now=never_paid.expires_at + dt.timedelta(seconds=1)) == 1
    assert charge_cancel_pursue(charge_id=never_paid.pk) == "done"
    assert sandbox(acquirer).due_charge_status(never_paid.txid).status == "REMOVIDA_PELO_USUARIO_RECEBEDOR"
    assert pay(api, never_paid, due).status_code == 409

    # Each pay day reconciled against the sandbox's listing: every Pix matched, nothing to heal or report.
    for day, count in sorted(Counter(pay_day.values()).items()):
        run = acquirer_reconcile(acquirer_id=acquirer.pk, day=day)
        run.refresh_from_db()
        assert (run.status, run.matched_count, run.unmatched_count, run.healed_count) == ("done", count, 0, 0), (
            day,
            run.error,
        )
    assert list(ReconciliationItem.objects.values_list("kind", "key")) == []

    # The ledger, exactly: each charge credited what its payer paid that day less the fee on it.
    credits = dict(
        LedgerEntry.objects.filter(account=account, kind=LedgerEntry.Kind.CHARGE_PAID).values_list(
            "reference", "amount"
        )
    )
    expected_total = 0
    kinds_seen = Counter[str]()
    for charge in Charge.objects.filter(pk__in=[c.pk for c in billed]).select_related("due"):
        parts = expected_parts(charge.due.original, on=pay_day[charge.pk], due=due, discount_until=discount_until)
        paid = paid_of(parts)
        assert (charge.status, charge.amount, charge.due.paid_amount) == (ChargeStatus.PAID, paid, paid)
        assert (charge.platform_tax, charge.liquid_amount) == (fee(paid), paid - fee(paid))
        assert credits.pop(f"charge:{charge.pk}:{charge.version}") == charge.liquid_amount
        components = charge.due.paid_components
        assert components == {name: value for name, value in parts.items() if value}
        assert (
            components["original"]
            + components.get("multa", 0)
            + components.get("juros", 0)
            - components.get("abatimento", 0)
            - components.get("desconto", 0)
            == paid
        )
        kinds_seen.update(name for name in components if name != "original")
        expected_total += paid - fee(paid)
    assert credits == {}  # no credit for anything else (the expired charge included)
    assert available_balance(account) == ledger_sum(account) == expected_total
    # Every kind of day happened: discounts, fines and interest were all paid.
    assert set(kinds_seen) == {"desconto", "multa", "juros"}

    never_paid.refresh_from_db()
    assert never_paid.status == ChargeStatus.CANCELED
    statuses = Counter(WebhookEvent.objects.filter(account=account).values_list("event_type", "status"))
    assert statuses == {
        ("due_charge", "paid"): DEBTORS - 1,
        ("due_charge", "canceled"): 1,
        ("due_charge_batch", "done"): 1,
    }
