"""Reads for charges."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import django_filters
from django.db.models import BigIntegerField, OuterRef, QuerySet, Subquery, UUIDField
from django.db.models.functions import Cast, Substr

from accounts.models import Account, LedgerKind
from accounts.selectors import StatementDetail, StatementReference
from accounts.settlement import SettlementFee
from acquirers.adapters.sandbox import SandboxAdapter
from api.listing import RecordFilterSet
from api.listing_statements import Scope
from core.selectors import get_by_uuid, owned_by_uuid
from payments.due_models import DueCharge
from payments.exceptions import ChargeNotFound, RefundNotFound
from payments.models import Charge, ChargeRefund, ChargeStatus, LatePayment


class ChargeFilterSet(RecordFilterSet):
    status = django_filters.ChoiceFilter(field_name="status", choices=ChargeStatus.choices)

    class Meta:
        model = Charge
        fields: list[str] = []


def charges_of(account: Account) -> QuerySet[Charge]:
    return Charge.objects.filter(account=account)


def charges_scope(account: Account, fields: Sequence[str]) -> Scope[Charge]:
    """:func:`charges_of` as a listing's shape, loading ``fields``."""
    return Scope(Charge, {"account_id": account.pk}, tuple(fields))


def charge_get(*, account: Account, charge_id: Any, fields: Sequence[str] | None = None) -> Charge:
    """The account's charge, or :class:`ChargeNotFound` for unknown, malformed
    or someone else's ids (no difference visible from outside). ``fields``:
    only these are loaded (a read that shows them and nothing else)."""
    if fields is not None:
        return owned_by_uuid(Charge, account.pk, charge_id, ChargeNotFound, fields)
    return get_by_uuid(charges_of(account), charge_id, ChargeNotFound)


def sandbox_charge_get(*, account: Account, charge_id: Any) -> Charge:
    """A charge the sandbox drivers may move: the account's, at an acquirer
    using the sandbox adapter. Any other (a real acquirer's charge included)
    is :class:`ChargeNotFound`, like an unknown id: the drivers never create
    evidence of a payment a real acquirer did not make."""
    return get_by_uuid(charges_of(account).filter(acquirer__adapter=SandboxAdapter.name), charge_id, ChargeNotFound)


def charge_refund_get(*, account: Account, charge_id: Any) -> ChargeRefund:
    """The latest refund of the account's charge: :class:`ChargeNotFound` for
    the charge as :func:`charge_get`, :class:`RefundNotFound` when it has none."""
    charge = charge_get(account=account, charge_id=charge_id, fields=["id", "amount"])
    refund = ChargeRefund.objects.filter(charge_id=charge.pk).order_by("-id").first()
    if refund is None:
        raise RefundNotFound()
    refund.charge = charge  # its amount is shown; loaded already
    return refund


#: How payments.refunds names a refund's ledger entries: ``refund:<ChargeRefund id>``.
REFUND_REFERENCE_PREFIX = "refund:"


def refund_charge_id() -> Subquery:
    """The charge a refund's ledger reference is for, as the statement reads
    it (accounts.selectors): only evaluated where STATEMENT_REFUND's pattern
    matches, so the cast always reads digits a bigint holds."""
    refund_pk = Cast(Substr(OuterRef("reference"), len(REFUND_REFERENCE_PREFIX) + 1), BigIntegerField())
    return Subquery(ChargeRefund.objects.filter(pk=refund_pk).values("charge_id")[:1])


STATEMENT_REFUND = StatementReference(
    pattern=rf"^{REFUND_REFERENCE_PREFIX}[0-9]{{1,18}}$", record_type="transaction", record_id=refund_charge_id
)


def late_payment_charge_id() -> Subquery:
    """The charge a late payment's credit (``late_payment:<id>``) is for, as
    the statement reads it: only evaluated where its pattern matches."""
    late_pk = Cast(Substr(OuterRef("reference"), len("late_payment:") + 1), BigIntegerField())
    return Subquery(LatePayment.objects.filter(pk=late_pk).values("charge_id")[:1])


STATEMENT_LATE_PAYMENT = StatementReference(
    pattern=r"^late_payment:[0-9]{1,18}$", record_type="transaction", record_id=late_payment_charge_id
)


#: How payments.services names a charge's ledger entries: ``charge:<uuid>:<version>``.
_CHARGE_REFERENCE = r"^charge:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}:[0-9]+$"


def charge_of_reference() -> Cast:
    """The charge a ``charge:<uuid>:<version>`` ledger reference names (only
    evaluated where _CHARGE_REFERENCE matches: the cast reads a uuid)."""
    return Cast(Substr(OuterRef("reference"), len("charge:") + 1, 36), UUIDField())


#: A paid charge's credit is its liquid amount: its platform_tax was netted out.
SETTLEMENT_CHARGE_FEE = SettlementFee(
    kind=LedgerKind.CHARGE_PAID,
    pattern=_CHARGE_REFERENCE,
    # order_by(): by primary key, with no sort (Charge's default ordering).
    fee=lambda: Subquery(Charge.objects.filter(pk=charge_of_reference()).order_by().values("platform_tax")[:1]),
)


#: A due-date charge's credit shows what was paid, by component (the statement's ``components``).
STATEMENT_DUE_COMPONENTS = StatementDetail(
    name="due_components",
    kind=LedgerKind.CHARGE_PAID,
    pattern=_CHARGE_REFERENCE,
    value=lambda: Subquery(
        DueCharge.objects.filter(charge_id=charge_of_reference()).order_by().values("paid_components")[:1]
    ),
)
