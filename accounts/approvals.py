"""Maker-checker actions: how each one is quoted and carried out.

The records these actions change (charges, withdrawals) live in apps above
accounts, so those apps register their actions here from ``AppConfig.ready``
and ``accounts.services`` reaches them through this registry, never by
importing them.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Quote:
    account_id: uuid.UUID
    amount: int  # centavos the action credits


@dataclass(frozen=True)
class MoneyAction:
    """One action that credits an account and needs a second staff member.

    ``quote(target_id)`` and ``perform(target_id, actor, reason)`` raise
    :class:`~accounts.exceptions.ActionNotExecutable` when the record's
    state does not allow the action; ``perform`` applies it through the
    record's own transition service, with the request's reason.
    ``check_reason(reason)``, when given, raises
    :class:`~accounts.exceptions.ApprovalRefused` for a reason that
    ``perform`` would refuse, so it is refused when asked, not approved.
    ``destination(target_id)``, for an action whose money leaves the
    platform, says to whom (pt-BR, as the record knows it), for the approver
    to check before approving."""

    action: str
    target_type: str  # "app_label.model", as the request stores it
    approve_permission: str  # "app_label.codename"
    quote: Callable[[str], Quote]
    perform: Callable[[str, str, str], None]
    check_reason: Callable[[str], None] | None = None
    destination: Callable[[str], str] | None = None


_REGISTRY: dict[str, MoneyAction] = {}


def register(action: MoneyAction) -> None:
    _REGISTRY[action.action] = action


def money_action(action: str) -> MoneyAction:
    try:
        return _REGISTRY[action]
    except KeyError:
        raise LookupError(f"no money action {action!r} is registered") from None
