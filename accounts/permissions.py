"""The 403 checks, in the order of decisions §2.

A view lists ``permission_classes`` (DRF checks them in order and stops at
the first refusal) and sets ``required_permission``; nothing else repeats
these checks. :data:`ACCOUNT_API` is the standard list.
"""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from accounts import exceptions as msg
from accounts.models import Account, ApiCredential


class DenyAll(BasePermission):
    """Default for views that forgot to declare their permissions."""

    def has_permission(self, request: Request, view: Any) -> bool:
        return False


class CredentialPermission(BasePermission):
    """The credential's permission covers the view's ``required_permission``
    (``cashin`` or ``cashout``; ``all`` only for full credentials; ``any``
    lets every credential through)."""

    message = msg.NO_PERMISSION

    def has_permission(self, request: Request, view: Any) -> bool:
        credential = request.auth
        needed = getattr(view, "required_permission", None)
        if not isinstance(credential, ApiCredential) or needed is None:
            return False
        return needed == "any" or credential.allows(needed)


class AccountApproved(BasePermission):
    message = msg.NOT_APPROVED

    def has_permission(self, request: Request, view: Any) -> bool:
        return isinstance(request.user, Account) and request.user.is_approved


class AccountNotBlocked(BasePermission):
    message = msg.BLOCKED

    def has_permission(self, request: Request, view: Any) -> bool:
        return isinstance(request.user, Account) and not request.user.is_blocked


class AcquirerSelectionEnabled(BasePermission):
    message = msg.ACQUIRER_SELECTION_DISABLED

    def has_permission(self, request: Request, view: Any) -> bool:
        return isinstance(request.user, Account) and request.user.can_select_pix_cash_in_acquirer


ACCOUNT_API: list[type[BasePermission]] = [CredentialPermission, AccountApproved, AccountNotBlocked]
