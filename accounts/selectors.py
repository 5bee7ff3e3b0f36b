"""Reads for accounts: credentials, balance, limits and the statement."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db.models import Case, Exists, JSONField, OuterRef, QuerySet, Sum, UUIDField, Value, When

from accounts.models import Account, AccountBalance, ApiCredential, CredentialLink, LedgerEntry
from accounts.sql import active_credential_row

# The request rule of the spec; an account may only raise it (decisions §5).
PLATFORM_MINIMUM_WITHDRAWAL = 1000


def active_credential(public_key: str) -> ApiCredential | None:
    """The active credential with this public key, its account loaded with
    it (as ``select_related("account")`` would), or None."""
    return active_credential_row(public_key)


def effective_minimum_withdrawal(account: Account) -> int:
    return max(PLATFORM_MINIMUM_WITHDRAWAL, account.withdrawal_minimum)


def available_balance(account: Account) -> int:
    row = AccountBalance.objects.filter(account=account).values_list("available", flat=True).first()
    return row or 0


def balance_amounts(account: Account) -> tuple[int, int, int]:
    """``(available, held, hold_uncovered)`` of the account's balance row, in one query."""
    row = AccountBalance.objects.filter(account=account).values_list("available", "held", "hold_uncovered").first()
    return row or (0, 0, 0)


def ledger_sum(account: Account) -> int:
    return LedgerEntry.objects.filter(account=account).aggregate(total=Sum("amount"))["total"] or 0


# --------------------------------------------------------------------------- statement

# What a ledger entry's ``reference`` names, by its format (every ledger_post
# caller):
#   charge:<charge uuid>:<version>          charge_paid, charge_refund, charge_chargeback,
#                                           chargeback_reversal (payments.services.charge_transition)
#   refund:<ChargeRefund id>                refund_hold, refund_release (payments.refunds): names the
#                                           charge's refund, so the charge comes from a registered
#                                           lookup (see StatementReference)
#   withdrawal:<withdrawal uuid>            withdrawal (withdrawals.services.withdrawal_request)
#   withdrawal:<withdrawal uuid>:<version>  withdrawal_reversal, withdrawal_return
#                                           (withdrawals.services.withdrawal_transition)
#   infraction:<uuid>:hold | :release       med_hold, med_hold_release; and
#   infraction:<uuid>:returned:<centavos>   med_return (infractions.services): names the MED
#                                           infraction, so its charge comes from a registered
#                                           lookup (infractions.statement)
# Anything else (entries posted by hand, by scripts or benchmarks) names no
# record the API shows: its record is None.
_DIRECT_REFERENCES = (
    ("transaction", re.compile(r"charge:([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}):[0-9]+")),
    (
        "withdrawal",
        re.compile(r"withdrawal:([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})(?::[0-9]+)?"),
    ),
)


@dataclass(frozen=True)
class StatementReference:
    """A reference format whose id is not the record's own: ``pattern`` (a
    PostgreSQL regex the whole reference matches) and ``record_id``, an
    expression giving the record's uuid from the outer entry's ``reference``
    (an ``OuterRef``), evaluated only where ``pattern`` matches. The apps that
    own those records register them from ``AppConfig.ready``: accounts cannot
    import them."""

    pattern: str
    record_type: str
    record_id: Callable[[], Any]


_INDIRECT: list[StatementReference] = []


def statement_reference_register(reference: StatementReference) -> None:
    if reference not in _INDIRECT:
        _INDIRECT.append(reference)


@dataclass(frozen=True)
class StatementDetail:
    """More about the entries of one ``kind`` whose reference matches
    ``pattern`` (a PostgreSQL regex): ``value``, an expression over the outer
    entry (JSON), annotated as ``name`` and null on every other entry. Read in
    the statement's page query itself; registered by the app that owns the
    record (a due-date charge's credit shows what was paid, by component)."""

    name: str
    kind: str
    pattern: str
    value: Callable[[], Any]


_DETAILS: list[StatementDetail] = []


def statement_detail_register(detail: StatementDetail) -> None:
    if detail not in _DETAILS:
        _DETAILS.append(detail)


def statement_entries(*, account: Account) -> QuerySet[LedgerEntry]:
    """The account's ledger entries, each with ``indirect_record_id`` (the
    record of a reference registered as :class:`StatementReference`, else
    None) and each registered :class:`StatementDetail`, read in the
    statement's page query itself."""
    entries = LedgerEntry.objects.filter(account=account)
    details = {
        d.name: Case(
            When(kind=d.kind, reference__regex=d.pattern, then=d.value()), default=None, output_field=JSONField()
        )
        for d in _DETAILS
    }
    entries = entries.annotate(**details) if details else entries
    whens = [When(reference__regex=ref.pattern, then=ref.record_id()) for ref in _INDIRECT]
    if not whens:
        return entries.annotate(indirect_record_id=Value(None, output_field=UUIDField()))
    return entries.annotate(indirect_record_id=Case(*whens, default=None, output_field=UUIDField()))


def statement_record(entry: LedgerEntry) -> dict[str, str] | None:
    """``{"type": "transaction" | "withdrawal", "id": uuid}`` of the record
    an entry of :func:`statement_entries` is for; None when its reference
    names none (never an error: references are free text to the ledger)."""
    for record_type, shape in _DIRECT_REFERENCES:
        if match := shape.fullmatch(entry.reference):
            return {"type": record_type, "id": str(uuid.UUID(match.group(1)))}
    indirect = getattr(entry, "indirect_record_id", None)
    if indirect is not None:
        for ref in _INDIRECT:
            if re.fullmatch(ref.pattern, entry.reference):
                return {"type": ref.record_type, "id": str(indirect)}
    return None


def credentials_not_delivered_by_link(*, permissions: tuple[str, ...]) -> QuerySet[ApiCredential]:
    """Active credentials of ``permissions`` that no claim link delivered:
    their secret was shown to whoever made them (the back office before
    claim links, ``pix_bootstrap``, a shell), by account and age."""
    delivered = CredentialLink.objects.filter(credential=OuterRef("pk"))
    return (
        ApiCredential.objects.filter(is_active=True, permission__in=permissions)
        .exclude(Exists(delivered))
        .select_related("account")
        .order_by("account__name", "created_at", "pk")
    )
