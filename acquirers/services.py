"""Writes for acquirers: the platform's acquirers, which of them each account
may use (grants) and the account's chains (slots).

Every function is idempotent: called again with the same arguments it writes
nothing and returns ``False`` (or ``created=False``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from decimal import ROUND_HALF_UP, Decimal
from typing import Any, TypedDict, Unpack

from django.db import transaction

from accounts.models import Account
from acquirers.models import Acquirer, AcquirerGrant, AcquirerSlot
from core.exceptions import BusinessRuleError

# Primary, secondary, tertiary (interface spec: 1 to 3 acquirers).
MAX_CHAIN_LENGTH = 3


class AcquirerFields(TypedDict, total=False):
    """The settable columns of :class:`Acquirer`; an absent key keeps the
    model default on create and the stored value on update."""

    name: str
    nominal: str
    adapter: str
    options: dict[str, Any]
    enabled: bool
    max_ticket: int
    conversion_percent_override: Decimal | None
    is_new: bool
    default_priority: int | None
    connect_timeout_ms: int
    read_timeout_ms: int


@transaction.atomic
def acquirer_upsert(*, key: str, **fields: Unpack[AcquirerFields]) -> tuple[Acquirer, bool]:
    """Create the acquirer ``key`` or update the given fields of the existing one.

    Returns ``(acquirer, created)``. An update that changes nothing writes
    nothing, so ``updated_at`` tells when the configuration last changed.
    """
    acquirer = Acquirer.objects.select_for_update().filter(key=key).first()
    if acquirer is None:
        return Acquirer.objects.create(key=key, **fields), True

    changed = {name: value for name, value in fields.items() if getattr(acquirer, name) != value}
    if changed:
        for name, value in changed.items():
            setattr(acquirer, name, value)
        acquirer.save(update_fields=[*changed, "updated_at"])
    return acquirer, False


def _lock_account(account: Account) -> None:
    # Grants and slots of one account are rewritten as a set; holding the
    # account row makes concurrent rewrites (bootstrap, admin, the API) queue
    # instead of tripping over the slots' unique constraints.
    list(Account.objects.select_for_update().filter(pk=account.pk).values_list("pk", flat=True))


def _write_chain(*, account: Account, purpose: str, acquirer_ids: Sequence[int]) -> bool:
    return _write_slots(account=account, purpose=purpose, by_priority=dict(enumerate(acquirer_ids, start=1)))


def _write_slots(*, account: Account, purpose: str, by_priority: Mapping[int, int]) -> bool:
    slots = AcquirerSlot.objects.filter(account=account, purpose=purpose)
    current = dict(slots.values_list("priority", "acquirer_id"))
    if current == dict(by_priority):
        return False
    # Rewritten rather than edited in place: moving an acquirer from
    # priority 2 to 1 would clash with the unique constraints mid-way.
    slots.delete()
    AcquirerSlot.objects.bulk_create(
        AcquirerSlot(account=account, acquirer_id=acquirer_id, purpose=purpose, priority=priority)
        for priority, acquirer_id in sorted(by_priority.items())
    )
    return True


@transaction.atomic
def acquirer_grants_set(*, account: Account, acquirers: Sequence[Acquirer]) -> bool:
    """Make exactly ``acquirers`` available to ``account``.

    An acquirer whose grant is withdrawn also leaves the account's cash-in
    chain (the ones after it move up), because only granted acquirers may be
    active. The cash-out chain is staff's own and is left alone. Returns
    whether anything changed.
    """
    _lock_account(account)
    wanted = {acquirer.pk for acquirer in acquirers}
    granted = set(AcquirerGrant.objects.filter(account=account).values_list("acquirer_id", flat=True))
    withdrawn = granted - wanted
    added = wanted - granted
    if withdrawn:
        AcquirerGrant.objects.filter(account=account, acquirer_id__in=withdrawn).delete()
        remaining = (
            AcquirerSlot.objects.filter(account=account, purpose=AcquirerSlot.Purpose.CASHIN)
            .exclude(acquirer_id__in=withdrawn)
            .order_by("priority")
            .values_list("acquirer_id", flat=True)
        )
        _write_chain(account=account, purpose=AcquirerSlot.Purpose.CASHIN, acquirer_ids=list(remaining))
    if added:
        AcquirerGrant.objects.bulk_create(
            AcquirerGrant(account=account, acquirer_id=acquirer_id) for acquirer_id in sorted(added)
        )
    return bool(withdrawn or added)


@transaction.atomic
def acquirer_slots_set(*, account: Account, purpose: AcquirerSlot.Purpose, acquirers: Sequence[Acquirer]) -> bool:
    """Set the account's ``purpose`` chain to exactly ``acquirers``, in order:
    the first is the primary (priority 1), then secondary and tertiary.

    An empty sequence clears the chain (the account falls back to the
    platform default chain). Cash-in acquirers must be granted to the
    account (:class:`BusinessRuleError` ``acquirer_not_granted``); more than
    three or a repeated acquirer is a caller bug (``ValueError``), since
    callers validate their input first. Returns whether anything changed.
    """
    if len(acquirers) > MAX_CHAIN_LENGTH:
        raise ValueError(f"a chain holds at most {MAX_CHAIN_LENGTH} acquirers")
    ids = [acquirer.pk for acquirer in acquirers]
    if len(set(ids)) != len(ids):
        raise ValueError("an acquirer appears twice in the chain")

    _lock_account(account)
    if purpose == AcquirerSlot.Purpose.CASHIN:
        granted = set(
            AcquirerGrant.objects.filter(account=account, acquirer_id__in=ids).values_list("acquirer_id", flat=True)
        )
        missing = [acquirer.key for acquirer in acquirers if acquirer.pk not in granted]
        if missing:
            raise BusinessRuleError(
                f"Adquirente não liberada para esta conta: {', '.join(missing)}.", code="acquirer_not_granted"
            )
    return _write_chain(account=account, purpose=purpose, acquirer_ids=ids)


@transaction.atomic
def account_active_acquirers_replace(*, account: Account, slots: Mapping[int, Acquirer]) -> bool:
    """``PUT /pix-cash-in/acquirers``, array form: exactly these
    priority → acquirer slots; priorities not sent are cleared.

    The caller has checked that every acquirer is selectable by the account.
    """
    _lock_account(account)
    return _write_slots(
        account=account,
        purpose=AcquirerSlot.Purpose.CASHIN,
        by_priority={priority: acquirer.pk for priority, acquirer in slots.items()},
    )


@transaction.atomic
def account_active_acquirer_put(*, account: Account, priority: int, acquirer: Acquirer) -> bool:
    """``PUT /pix-cash-in/acquirers``, single form: put ``acquirer`` at
    ``priority``. The other priorities keep their acquirers; if ``acquirer``
    held another priority, that one is cleared (an acquirer holds one slot)."""
    _lock_account(account)
    current = dict(
        AcquirerSlot.objects.filter(account=account, purpose=AcquirerSlot.Purpose.CASHIN).values_list(
            "priority", "acquirer_id"
        )
    )
    wanted = {p: a for p, a in current.items() if a != acquirer.pk}
    wanted[priority] = acquirer.pk
    return _write_slots(account=account, purpose=AcquirerSlot.Purpose.CASHIN, by_priority=wanted)


# --------------------------------------------------------------------------- measured conversion

_CENT = Decimal("0.01")


def conversion_of(*, created: int, paid: int, min_sample: int) -> Decimal | None:
    """``paid`` of ``created`` charges as a percentage with 2 decimals (half
    up), or None below ``min_sample`` charges: too few to tell customers."""
    if created < max(min_sample, 1):
        return None
    return (Decimal(paid * 100) / Decimal(created)).quantize(_CENT, rounding=ROUND_HALF_UP)


@transaction.atomic
def acquirer_conversions_record(
    *, counts: Mapping[int, tuple[int, int]], min_sample: int, measured_at: dt.datetime
) -> int:
    """Store one measurement of every acquirer's conversion: ``counts`` maps
    an acquirer id to its ``(created, paid)`` charges; an acquirer absent
    from it had none. Returns how many acquirers' values changed.

    Idempotent. Written with ``update_unwatched``: the measured fields are
    read by the listing straight from the database, never from a snapshot
    (core.snapshots), so this beat must not drop every process's snapshots
    each time it runs. A row whose value and sample are unchanged gets only
    its ``conversion_measured_at`` (when it was last measured), in one
    statement for all of them; ``updated_at`` is left alone (it tells when
    staff last changed the configuration).
    """
    changed = 0
    unchanged: list[int] = []
    current = Acquirer.objects.order_by("pk").values_list("pk", "conversion_measured_percent", "conversion_sample")
    for pk, percent, sample in current:
        created, paid = counts.get(pk, (0, 0))
        measured = conversion_of(created=created, paid=paid, min_sample=min_sample)
        if (measured, created) == (percent, sample):
            unchanged.append(pk)
            continue
        Acquirer.objects.filter(pk=pk).update_unwatched(
            conversion_measured_percent=measured, conversion_sample=created, conversion_measured_at=measured_at
        )
        changed += 1
    if unchanged:
        Acquirer.objects.filter(pk__in=unchanged).update_unwatched(conversion_measured_at=measured_at)
    return changed
