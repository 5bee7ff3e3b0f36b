"""Writes for accounts: lifecycle, credentials and the ledger.

``ledger_post`` is the only code that changes a balance.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils import timezone

from accounts.exceptions import InvalidTransition
from accounts.models import Account, AccountBalance, ApiCredential, LedgerEntry
from pix_service.exceptions import InsufficientBalance
from pix_service.tokens import hash_secret, new_public_key, new_secret_key

# --------------------------------------------------------------------------- accounts


@transaction.atomic
def account_create(*, name: str, document: str = "", **fields: Any) -> Account:
    """Create an account (pending unless ``status`` says otherwise) with its zero balance."""
    account = Account.objects.create(name=name, document=document, **fields)
    AccountBalance.objects.create(account=account)
    return account


_STATUS_TRANSITIONS: dict[str, set[str]] = {
    Account.Status.PENDING: {Account.Status.APPROVED, Account.Status.REJECTED},
    Account.Status.APPROVED: {Account.Status.REJECTED},
    Account.Status.REJECTED: {Account.Status.APPROVED},
}


def _account_set_status(account: Account, status: str) -> bool:
    if account.status == status:
        return False
    if status not in _STATUS_TRANSITIONS[account.status]:
        raise InvalidTransition(f"Conta {account.get_status_display()} não pode passar a {status}.")
    account.status = status
    account.save(update_fields=["status", "updated_at"])
    return True


def account_approve(*, account: Account) -> bool:
    """Approve a pending or rejected account. Returns False if it already was."""
    return _account_set_status(account, Account.Status.APPROVED)


def account_reject(*, account: Account) -> bool:
    """Reject a pending or approved account. Returns False if it already was."""
    return _account_set_status(account, Account.Status.REJECTED)


def account_set_blocked(*, account: Account, blocked: bool) -> bool:
    """Block or unblock. Returns False when nothing changed."""
    if account.is_blocked == blocked:
        return False
    account.is_blocked = blocked
    account.save(update_fields=["is_blocked", "updated_at"])
    return True


# --------------------------------------------------------------------------- credentials


@dataclass(frozen=True)
class IssuedCredential:
    credential: ApiCredential
    secret_key: str  # shown once, never stored


def credential_issue(
    *, account: Account, permission: str = ApiCredential.Permission.ALL, label: str = "", ref: str = ""
) -> IssuedCredential:
    """Issue a key pair; the secret is returned here and only here."""
    secret = new_secret_key()
    credential = ApiCredential.objects.create(
        account=account,
        permission=permission,
        label=label,
        ref=ref,
        public_key=new_public_key(),
        secret_hash=hash_secret(secret),
        secret_hint=secret[-4:],
    )
    return IssuedCredential(credential=credential, secret_key=secret)


def credential_revoke(*, credential: ApiCredential) -> bool:
    """Deactivate for good; requests with it get 401 from now on."""
    updated = ApiCredential.objects.filter(pk=credential.pk, is_active=True).update(
        is_active=False, revoked_at=timezone.now()
    )
    credential.refresh_from_db()
    return bool(updated)


def credential_rotate(*, credential: ApiCredential) -> IssuedCredential:
    """A new pair with the same permission; the old one stays active until revoked,
    so clients can switch without downtime."""
    return credential_issue(
        account=credential.account,
        permission=credential.permission,
        label=(credential.label or credential.public_key)[:90] + " (rotated)",
    )


# --------------------------------------------------------------------------- ledger


def balance_lock(*, account_id: Any) -> AccountBalance:
    """Lock and return the account's balance row until the transaction ends.

    Every money movement of an account serialises here; callers that must
    check more than the balance (a withdrawal's daily limit) take it first.
    """
    try:
        return AccountBalance.objects.select_for_update().get(account_id=account_id)
    except AccountBalance.DoesNotExist:
        # Accounts made outside account_create (admin, shell) get their row on
        # first use; ON CONFLICT makes concurrent first uses safe.
        AccountBalance.objects.bulk_create([AccountBalance(account_id=account_id)], ignore_conflicts=True)
        return AccountBalance.objects.select_for_update().get(account_id=account_id)


def ledger_post(
    *, account_id: Any, amount: int, kind: str, reference: str, locked: AccountBalance | None = None
) -> LedgerEntry | None:
    """Post one signed movement and move the balance with it.

    Must run inside the caller's transaction, the one that makes the state
    change causing the movement; it locks the account's balance row until that
    transaction ends (``locked``: the row the caller already locked with
    :func:`balance_lock` in this transaction). Returns ``None`` (and changes
    nothing) when this ``(kind, reference)`` was already posted. Raises
    :class:`InsufficientBalance` when a debit that may not overdraw would.
    """
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("ledger_post must run inside the transaction of the change that causes it")
    if not isinstance(amount, int) or isinstance(amount, bool) or amount == 0:
        raise ValueError("amount must be a non-zero int of centavos")

    if locked is not None and str(locked.account_id) != str(account_id):
        raise ValueError("locked is another account's balance")
    balance = locked or balance_lock(account_id=account_id)
    # References name one account's record, and under its balance lock no other
    # posting can interleave: this check is exact. The unique constraint stays
    # as the net under it (a violation fails the caller's whole transaction).
    if LedgerEntry.objects.filter(kind=kind, reference=reference).exists():
        return None

    new_balance = balance.available + amount
    if amount < 0 and new_balance < 0 and kind not in LedgerEntry.MAY_GO_NEGATIVE:
        raise InsufficientBalance()

    entry = LedgerEntry.objects.create(
        account_id=account_id, kind=kind, amount=amount, balance_after=new_balance, reference=reference
    )
    balance.available = new_balance
    balance.save(update_fields=["available", "updated_at"])
    return entry
