"""What the due-date charge lifecycle tests share: an account with fees, due
charges created through the service (and its acquirer chain) at the sandbox,
the sandbox's payer over HTTP, and the amount due computed here by hand, from
the terms' own words, so the driver and the ledger are checked against
something they do not share."""

from __future__ import annotations

import datetime as dt
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from rest_framework.test import APIClient

from accounts.models import Account
from acquirers import adapters
from acquirers.adapters.sandbox import SandboxAdapter
from acquirers.models import Acquirer
from payments.business_days import is_business_day
from payments.due_charges import due_charge_create, due_terms_build
from payments.due_payments import now_in_brazil
from payments.models import Charge
from payments.services import Buyer

FEE_FIXED, FEE_BPS = 30, 150
ORIGINAL = 15000
FINE_PERCENT, INTEREST_PERCENT_A_DAY, DISCOUNT_PERCENT = "2.00", "0.10", "5.00"
DAYS_AFTER_DUE = 30


def fee(paid: int) -> int:
    """The account's fee on what was paid: 30 + 1.5 % (half up), never more than it."""
    return min(FEE_FIXED + (paid * FEE_BPS + 5000) // 10000, paid)


def today() -> dt.date:
    return now_in_brazil()


def business_day_from(day: dt.date) -> dt.date:
    """The first business day on or after ``day``: a due date no holiday moves."""
    while not is_business_day(day):
        day += dt.timedelta(days=1)
    return day


def sandbox(acquirer: Acquirer) -> SandboxAdapter:
    adapter = adapters.build(acquirer)
    assert isinstance(adapter, SandboxAdapter)
    return adapter


def make_due(
    account: Account,
    *,
    due_date: dt.date,
    amount: int = ORIGINAL,
    discount_until: dt.date | None = None,
    days_after_due: int = DAYS_AFTER_DUE,
) -> Charge:
    """A due-date charge with a 2 % fine, 0.10 % a day of interest and, when
    ``discount_until`` is given, 5 % off up to that day (fixed date)."""
    terms: dict[str, Any] = {
        "fine": {"modalidade": 2, "valorPerc": FINE_PERCENT},
        "interest": {"modalidade": 2, "valorPerc": INTEREST_PERCENT_A_DAY},
    }
    if discount_until is not None:
        terms["discount"] = {
            "modalidade": 2,
            "descontoDataFixa": [{"data": discount_until.isoformat(), "valorPerc": DISCOUNT_PERCENT}],
        }
    built = due_terms_build(amount=amount, due_date=due_date, days_after_due=days_after_due, terms=terms)
    debtor = Buyer(name="Maria da Silva", document="52998224725", phone="", address={})
    return due_charge_create(account=account, terms=built, debtor=debtor, description="Mensalidade")


def _percent(amount: int, percent: str) -> int:
    return int((Decimal(amount) * Decimal(percent) / 100).quantize(Decimal(1), rounding=ROUND_HALF_UP))


def expected_parts(
    original: int, *, on: dt.date, due: dt.date, discount_until: dt.date | None = None
) -> dict[str, int]:
    """The terms of :func:`make_due` read by hand for a due date that is a
    business day: the discount up to its date, the fine once and interest
    per calendar day late after the due date."""
    parts = {"original": original, "multa": 0, "juros": 0, "abatimento": 0, "desconto": 0}
    if on > due:
        parts["multa"] = _percent(original, FINE_PERCENT)
        parts["juros"] = _percent(original * (on - due).days, INTEREST_PERCENT_A_DAY)
    elif discount_until is not None and on <= discount_until:
        parts["desconto"] = _percent(original, DISCOUNT_PERCENT)
    return parts


def paid_of(parts: dict[str, int]) -> int:
    return parts["original"] + parts["multa"] + parts["juros"] - parts["abatimento"] - parts["desconto"]


def pay(api: APIClient, charge: Charge, day: dt.date | None = None) -> Any:
    """The sandbox's payer pays on ``day`` (none: today), over HTTP."""
    body = {"date": day.isoformat()} if day is not None else {}
    return api.post(f"/api/sandbox/due-charges/{charge.pk}/pay", body, format="json")
