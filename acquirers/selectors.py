"""Reads for acquirers: what an account may use, and the chains built from it."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from django.db.models import QuerySet

from accounts.models import Account
from acquirers import adapters
from acquirers.adapters.base import Capability
from acquirers.models import Acquirer, AcquirerSlot
from acquirers.sql import account_granted_ids, account_slot_rows
from core.snapshots import Snapshots

SLOT_NAMES = {1: "primary", 2: "secondary", 3: "tertiary"}


def _unable(capability: Capability) -> set[str]:
    """Adapters of this process that cannot do ``capability`` (an adapter it
    does not have at all is not among them: see the chains for those)."""
    return set(adapters.adapter_names()) - set(adapters.adapter_names(supporting=capability))


def available_acquirers(account: Account) -> QuerySet[Acquirer]:
    """Enabled on the platform and granted to the account by staff (decisions
    §4), for its charges: an acquirer whose adapter cannot charge (cash-out
    only) is neither listed nor selectable."""
    return (
        Acquirer.objects.filter(enabled=True, grants__account=account)
        .exclude(adapter__in=_unable("charge"))
        .order_by("key")
    )


def selectable_acquirers(account: Account) -> QuerySet[Acquirer]:
    """What the account may choose itself: nothing without the selection feature."""
    if not account.can_select_pix_cash_in_acquirer:
        return Acquirer.objects.none()
    return available_acquirers(account)


def slots(account: Account, purpose: str) -> dict[int, Acquirer]:
    """priority → acquirer for the account's configured slots."""
    return _slots_of(account.pk, purpose)


def active_snapshot(account: Account, current: dict[int, Acquirer] | None = None) -> dict[str, dict[str, str] | None]:
    """The spec's "active acquirers snapshot": primary/secondary/tertiary
    (``current``: the cash-in slots, when the caller already read them)."""
    if current is None:
        current = slots(account, AcquirerSlot.Purpose.CASHIN)
    return {
        name: (
            {"acquirer_key": current[priority].key, "acquirer_name": current[priority].name}
            if priority in current
            else None
        )
        for priority, name in SLOT_NAMES.items()
    }


def platform_default_chain() -> list[Acquirer]:
    return [a for a in _every_acquirer() if a.enabled and a.default_priority is not None]


def _usable(acquirers: Sequence[Acquirer], amount: int) -> list[Acquirer]:
    return [a for a in acquirers if a.enabled and a.max_ticket >= amount]


def _charging(acquirers: Sequence[Acquirer], amount: int) -> list[Acquirer]:
    """The usable acquirers whose adapter can charge."""
    unable = _unable("charge")
    return [a for a in _usable(acquirers, amount) if a.adapter not in unable]


def cashin_chain(account: Account, amount: int, override: Sequence[Acquirer] | None = None) -> list[Acquirer]:
    """The acquirers to try, in order (decisions §4).

    ``override`` (already resolved against what the account may select) wins;
    otherwise the account's active acquirers that are still available to it;
    if it has none, the platform default chain. Acquirers whose max ticket is
    below the amount are passed over, and so are those whose adapter cannot
    charge (cash-out only): a charge is never offered to them.
    """
    if override is not None:
        return _charging(override, amount)
    return _charging(_chains.get((account.pk, "cashin")) or (), amount)


def due_chain(account: Account, amount: int, override: Sequence[Acquirer] | None = None) -> list[Acquirer]:
    """The acquirers to try for a due-date charge (cobv) of ``amount``
    (``valor.original``): :func:`cashin_chain`'s, under the same rules,
    keeping only those whose adapter creates due-date charges."""
    creating = set(adapters.adapter_names(supporting="due_charge"))
    return [a for a in cashin_chain(account, amount, override) if a.adapter in creating]


def recurrence_chain(account: Account, amount: int, override: Sequence[Acquirer] | None = None) -> list[Acquirer]:
    """The acquirers to try for a Pix Automático recurrence whose cycles
    charge up to ``amount``: :func:`cashin_chain`'s, keeping only those whose
    adapter holds recurrences. Only the creation walks it: the recurrence's
    cycles stay with the acquirer that took it."""
    holding = set(adapters.adapter_names(supporting="recurrence"))
    return [a for a in cashin_chain(account, amount, override) if a.adapter in holding]


def _configured_cashin(account_id: uuid.UUID, slots: _Slots) -> tuple[Acquirer, ...]:
    configured = slots.get(AcquirerSlot.Purpose.CASHIN)
    if configured:
        granted = set(account_granted_ids(account_id))
        return tuple(a for _, a in configured if a.pk in granted)
    return tuple(platform_default_chain())


def payout_chain(account: Account, amount: int) -> list[Acquirer]:
    """Where a withdrawal's payout goes, in order (decisions §5): the
    account's cash-out acquirers, else its active cash-in acquirers, else
    the platform default chain; disabled or too-small-ticket ones passed
    over, and so are those whose adapter cannot pay out (cash-in only) or
    that this process does not have (the sandbox with PIX_SANDBOX off): a
    payout is never sent to them. (A charge's chain keeps the unknown ones:
    the attempt, unavailable, shows staff the misconfiguration.)"""
    paying = set(adapters.adapter_names(supporting="payout"))
    chain: Sequence[Acquirer] = _chains.get((account.pk, "payout")) or ()
    return [a for a in _usable(chain, amount) if a.adapter in paying]


def _configured_payout(slots: _Slots) -> tuple[Acquirer, ...]:
    for purpose in (AcquirerSlot.Purpose.CASHOUT, AcquirerSlot.Purpose.CASHIN):
        configured = slots.get(purpose)
        if configured:
            return tuple(a for _, a in configured)
    return tuple(platform_default_chain())


def _slots_of(account_id: uuid.UUID, purpose: str) -> dict[int, Acquirer]:
    rows = AcquirerSlot.objects.filter(account_id=account_id, purpose=purpose).select_related("acquirer")
    return {row.priority: row.acquirer for row in rows}


def _every_acquirer_now(_: str) -> tuple[Acquirer, ...]:
    # The platform default chain's order (the database's collation breaks a tie on priority).
    return tuple(Acquirer.objects.order_by("default_priority", "key"))


#: Every acquirer (a handful of rows), per process, under the same rules as
#: the chains: an account's chain is built from it and its own slots, so
#: taking that chain again (an account that calls less than once a second)
#: reads one small statement, not the slots joined to their acquirers and
#: the default chain through the ORM, which was half of such a charge's CPU.
_acquirers: Snapshots[str, tuple[Acquirer, ...]] = Snapshots(_every_acquirer_now)


def _every_acquirer() -> tuple[Acquirer, ...]:
    return _acquirers.get("all") or ()


#: purpose → (priority, acquirer) of an account's slots, by priority.
_Slots = dict[str, list[tuple[int, Acquirer]]]


def _slots_with_acquirers(account_id: uuid.UUID) -> _Slots | None:
    """The account's slots with their acquirers from :data:`_acquirers`;
    None if a slot names an acquirer it does not hold (one created after it
    was taken, by a write this request's generation predates)."""
    by_id = {a.pk: a for a in _every_acquirer()}
    slots: _Slots = {}
    for purpose, priority, acquirer_id in sorted(account_slot_rows(account_id)):
        acquirer = by_id.get(acquirer_id)
        if acquirer is None:
            return None
        slots.setdefault(purpose, []).append((priority, acquirer))
    return slots


def _configured(key: tuple[uuid.UUID, str]) -> tuple[Acquirer, ...]:
    account_id, purpose = key
    slots = _slots_with_acquirers(account_id)
    if slots is None:
        # Rare (a new acquirer's first moments): the slots joined to their acquirers.
        slots = {p: sorted(_slots_of(account_id, p).items()) for p in AcquirerSlot.Purpose.values}
    return _configured_cashin(account_id, slots) if purpose == "cashin" else _configured_payout(slots)


#: (account id, "cashin" | "payout") → the configured chain before the amount and the
#: adapters are applied, per process (core.snapshots: any write to acquirers, grants
#: or slots drops it everywhere). The acquirers in it are shared: read them, never
#: change them.
_chains: Snapshots[tuple[uuid.UUID, str], tuple[Acquirer, ...]] = Snapshots(_configured)


_acquirer_keys: dict[int, str] = {}


def acquirer_label(acquirer_id: int | None) -> str:
    """An acquirer's key for a metric label, cached per process (keys are few
    and the label must not cost a query on every change)."""
    if acquirer_id is None:
        return "none"
    key = _acquirer_keys.get(acquirer_id)
    if key is None:
        key = Acquirer.objects.filter(pk=acquirer_id).values_list("key", flat=True).first() or "unknown"
        _acquirer_keys[acquirer_id] = key
    return key
