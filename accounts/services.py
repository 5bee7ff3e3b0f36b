"""Writes for accounts: lifecycle, credentials and the ledger.

``ledger_post`` is the only code that changes a balance.
"""

from __future__ import annotations

import datetime as dt
import functools
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.utils import timezone

from accounts import approvals
from accounts.exceptions import ActionNotExecutable, ApprovalRefused, InvalidTransition
from accounts.models import Account, AccountBalance, ApiCredential, CredentialLink, LedgerEntry, MoneyActionRequest
from accounts.sql import balance_row_locked, post_entry
from core.exceptions import InsufficientBalance
from core.tokens import hash_secret, new_public_key, new_secret_key, new_webhook_secret

# --------------------------------------------------------------------------- accounts


@transaction.atomic
def account_create(*, name: str, document: str = "", **fields: Any) -> Account:
    """Create an account (pending unless ``status`` says otherwise) with its zero balance."""
    account = Account.objects.create(name=name, document=document, **fields)
    AccountBalance.objects.create(account=account)
    return account


#: Called after commit with the id of an account that may cash out again
#: (approved and unblocked). Filled in ``AppConfig.ready`` by the layers
#: above (withdrawals resumes the payouts it held), which accounts never imports.
_REACTIVATED: list[Callable[[uuid.UUID], object]] = []


def account_on_reactivated(hook: Callable[[uuid.UUID], object]) -> None:
    """Register ``hook(account_id)`` for accounts that become approved and unblocked."""
    if hook not in _REACTIVATED:
        _REACTIVATED.append(hook)


def _may_cash_out(account: Account) -> bool:
    return account.is_approved and not account.is_blocked


def _announce_if_reactivated(account: Account, *, before: bool) -> None:
    if not before and _may_cash_out(account):
        for hook in _REACTIVATED:
            transaction.on_commit(functools.partial(hook, account.pk))


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
    before = _may_cash_out(account)
    account.status = status
    account.save(update_fields=["status", "updated_at"])
    _announce_if_reactivated(account, before=before)
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
    before = _may_cash_out(account)
    account.is_blocked = blocked
    account.save(update_fields=["is_blocked", "updated_at"])
    _announce_if_reactivated(account, before=before)
    return True


def account_rotate_postback_secret(*, account: Account) -> str:
    """A new postback signing secret, returned here and shown once; the old
    one keeps signing beside it for ``WEBHOOK_SECRET_ROTATION_HOURS`` so the
    merchant's receiver can switch without a gap."""
    secret = new_webhook_secret()
    with transaction.atomic():
        # Locked: two rotations at once must chain (old → previous), not race.
        current = Account.objects.select_for_update().values_list("postback_secret", flat=True).get(pk=account.pk)
        Account.objects.filter(pk=account.pk).update(
            postback_secret=secret,
            previous_postback_secret=current,
            previous_postback_secret_expires_at=timezone.now()
            + dt.timedelta(hours=settings.WEBHOOK_SECRET_ROTATION_HOURS),
            updated_at=timezone.now(),
        )
    return secret


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
    """Deactivate for good; requests with it get 401 from now on. A credential
    still waiting for its claim is revoked too: its link stops working."""
    now = timezone.now()
    with transaction.atomic():
        updated = ApiCredential.objects.filter(pk=credential.pk, revoked_at=None).update(
            is_active=False, revoked_at=now
        )
        CredentialLink.objects.filter(credential_id=credential.pk, used_at=None, replaced_at=None).update(
            replaced_at=now
        )
    credential.refresh_from_db()
    return bool(updated)


ROTATED = " (rotacionada)"


def rotated_label(credential: ApiCredential) -> str:
    """The label of ``credential``'s successor: its own (or its key), marked, within the column's 100."""
    return (credential.label or credential.public_key)[: 100 - len(ROTATED)] + ROTATED


def credential_rotate(*, credential: ApiCredential) -> IssuedCredential:
    """A new pair with the same permission; the old one stays active until revoked,
    so clients can switch without downtime."""
    return credential_issue(
        account=credential.account, permission=credential.permission, label=rotated_label(credential)
    )


# --------------------------------------------------------------------------- ledger


def balance_lock(*, account_id: Any) -> AccountBalance:
    """Lock and return the account's balance row until the transaction ends.

    Every money movement of an account serialises here; callers that must
    check more than the balance (a withdrawal's daily limit) take it first.
    """
    if not transaction.get_connection().in_atomic_block:
        # What select_for_update() raises: a lock taken in autocommit would end
        # with its statement.
        raise transaction.TransactionManagementError("balance_lock must run inside a transaction")
    for _ in range(2):
        balance = balance_row_locked(account_id)
        if balance is not None:
            return balance
        # Accounts made outside account_create (admin, shell) get their row on
        # first use; ON CONFLICT makes concurrent first uses safe.
        AccountBalance.objects.bulk_create([AccountBalance(account_id=account_id)], ignore_conflicts=True)
    raise AccountBalance.DoesNotExist(f"no balance row for account {account_id}")


def ledger_post(
    *,
    account_id: Any,
    amount: int,
    kind: str,
    reference: str,
    locked: AccountBalance | None = None,
) -> LedgerEntry | None:
    """Post one signed movement and move the balance with it.

    Must run inside the caller's transaction, the one that makes the state
    change causing the movement; it locks the account's balance row until that
    transaction ends (``locked``: the row the caller already locked with
    :func:`balance_lock` in this transaction). Returns ``None`` (and changes
    nothing) when this ``(kind, reference)`` was already posted. Raises
    :class:`InsufficientBalance` when a debit that may not overdraw would.
    The posting's own INSERT tells a repeat apart
    (:func:`accounts.sql.post_entry`), so no caller says its reference is new.
    """
    balance = _locked_for_posting(account_id, locked)
    try:
        entry, moves = ledger_entry_new(balance=balance, amount=amount, kind=kind, reference=reference)
    except InsufficientBalance:
        # A repeat of a debit already posted is not a new debit: nothing to refuse.
        if LedgerEntry.objects.filter(kind=kind, reference=reference).exists():
            return None
        raise
    return entry if post_entry(entry, balance, moves, repeat_is_noop=True) else None


def balance_holds_move(*, balance: AccountBalance, held: int, uncovered: int) -> None:
    """Move the account's MED blocks (``held``, ``hold_uncovered``) by these
    centavos on ``balance``, the row the caller locked in this transaction
    with the entries that come with the change (infractions.services). The
    row's check constraint refuses a block below zero or an uncovered part
    above the block."""
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("balance_holds_move must run inside the transaction of the change that causes it")
    if held == 0 and uncovered == 0:
        return
    balance.held += held
    balance.hold_uncovered += uncovered
    AccountBalance.objects.filter(account_id=balance.account_id).update(
        held=balance.held, hold_uncovered=balance.hold_uncovered, updated_at=timezone.now()
    )


def _locked_for_posting(account_id: Any, locked: AccountBalance | None) -> AccountBalance:
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("ledger_post must run inside the transaction of the change that causes it")
    if locked is not None and str(locked.account_id) != str(account_id):
        raise ValueError("locked is another account's balance")
    return locked or balance_lock(account_id=account_id)


def ledger_entry_new(
    *, balance: AccountBalance, amount: int, kind: str, reference: str
) -> tuple[LedgerEntry, dict[str, Any]]:
    """The entry of one movement on ``balance`` (the account's row, locked),
    not saved, with the balance fields it moves (field → new value): what
    :func:`ledger_post` posts, and what an app's own statement posts with
    :func:`accounts.sql.post_entry` (withdrawals.sql). Raises
    :class:`InsufficientBalance` when a debit that may not overdraw would."""
    if not isinstance(amount, int) or isinstance(amount, bool) or amount == 0:
        raise ValueError("amount must be a non-zero int of centavos")
    new_balance = balance.available + amount
    if amount < 0 and new_balance < 0 and kind not in LedgerEntry.MAY_GO_NEGATIVE:
        raise InsufficientBalance()
    entry = LedgerEntry(
        account_id=balance.account_id, kind=kind, amount=amount, balance_after=new_balance, reference=reference
    )
    return entry, {"available": new_balance, "updated_at": timezone.now()}


# --------------------------------------------------------------------------- maker-checker


def money_action_request(*, action: str, target_id: Any, requested_by: User, reason: str) -> MoneyActionRequest:
    """Ask for an action that credits an account; nothing moves until another
    staff member approves it (:func:`money_action_approve`). Raises
    :class:`ActionNotExecutable` when the record does not allow it and
    :class:`ApprovalRefused` when the same action on it is already waiting."""
    reason = reason.strip()
    if not reason:
        raise ApprovalRefused("Informe o motivo.")
    spec = approvals.money_action(action)
    if spec.check_reason is not None:
        spec.check_reason(reason)
    quote = spec.quote(str(target_id))
    try:
        with transaction.atomic():
            return MoneyActionRequest.objects.create(
                action=action,
                target_type=spec.target_type,
                target_id=str(target_id),
                account_id=quote.account_id,
                amount=quote.amount,
                reason=reason,
                requested_by=requested_by,
            )
    except IntegrityError:
        raise ApprovalRefused("Já existe um pedido aguardando aprovação para este registro.") from None


def _decision(request_id: Any, staff: User) -> MoneyActionRequest:
    """The pending request, locked, once ``staff`` may decide it."""
    request = MoneyActionRequest.objects.select_for_update().select_related("requested_by").get(pk=request_id)
    if request.state != MoneyActionRequest.State.PENDING:
        raise ApprovalRefused(f"O pedido #{request.pk} já foi decidido ({request.get_state_display()}).")
    if request.requested_by_id == staff.pk:
        raise ApprovalRefused(f"O pedido #{request.pk} foi feito por você: outra pessoa precisa decidi-lo.")
    needed = approvals.money_action(request.action).approve_permission
    if not staff.is_active or not staff.has_perm(needed):
        raise ApprovalRefused(f"Sem permissão para decidir o pedido #{request.pk}.")
    return request


def money_action_approve(*, request_id: Any, approver: User, note: str = "") -> MoneyActionRequest:
    """Approve a pending request and carry the action out through the
    record's transition service, in one transaction: the request is
    approved if and only if the money moved. The requester can never
    approve (here and in a database constraint). A record that moved on
    since the request leaves it ``failed``, with why, and nothing moved."""
    with transaction.atomic():
        request = _decision(request_id, approver)
        spec = approvals.money_action(request.action)
        actor = f"{approver.get_username()} (aprovou o pedido #{request.pk} de {request.requested_by.get_username()})"
        try:
            with transaction.atomic():
                quote = spec.quote(request.target_id)
                if quote.amount != request.amount:
                    raise ActionNotExecutable("O valor do registro mudou desde o pedido.")
                spec.perform(request.target_id, actor, request.reason)
        except ActionNotExecutable as exc:
            request.state = MoneyActionRequest.State.FAILED
            request.outcome = exc.message[:500]
        else:
            request.state = MoneyActionRequest.State.APPROVED
        request.decided_by = approver
        request.decided_at = timezone.now()
        request.decision_note = note.strip()
        request.save()
    return request


def money_action_reject(*, request_id: Any, staff: User, note: str = "") -> MoneyActionRequest:
    """Turn a pending request down; nothing moves."""
    with transaction.atomic():
        request = _decision(request_id, staff)
        request.state = MoneyActionRequest.State.REJECTED
        request.decided_by = staff
        request.decided_at = timezone.now()
        request.decision_note = note.strip()
        request.save()
    return request
