"""Segregation of duties: who may not approve an account's withdrawals now.

Whoever decided how a withdrawal of an account could be asked for should not
be the one who lets it leave. For ``STAFF_SEGREGATION_DAYS`` after a staff
member

- sent the claim link of a credential of the account that can cash out
  (``cashout`` or ``all``: issued, rotated or link sent again), or
- asked for a change of the account's contact e-mail (pending or applied),
  or approved one,

they may not approve that account's withdrawals. Whoever creates an account
in the back office with a contact e-mail is that e-mail's requester
(``accounts.account_changes.account_create_by_staff``), so the creator counts
through the decision that matters: who chose where its links go. Creating an
account without one is not counted by itself: its other first values (manual
approval, limits) reach no one until a contact another person approved
receives a credential, and counting it would only take approvers away from a
small team. The withdrawal approval
service asks :func:`withdrawal_approval_conflict` before it approves
(``withdrawals.approvals.withdrawal_staff_approve``); hiding a button would
not be enough.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from accounts.models import AccountChangeRequest, ApiCredential, CredentialLink

CAN_CASH_OUT = (ApiCredential.Permission.CASHOUT, ApiCredential.Permission.ALL)


def segregation_window() -> dt.timedelta:
    return dt.timedelta(days=settings.STAFF_SEGREGATION_DAYS)


def withdrawal_approval_conflict(*, user_id: Any, account_id: Any, now: dt.datetime | None = None) -> str | None:
    """Why ``user_id`` may not approve withdrawals of ``account_id`` now
    (pt-BR, for staff), or None. The most recent reason wins: it lasts longest."""
    now = now or timezone.now()
    since = now - segregation_window()
    found: list[tuple[dt.datetime, str]] = []
    link = (
        CredentialLink.objects.filter(
            sent_by_id=user_id,
            created_at__gte=since,
            credential__account_id=account_id,
            credential__permission__in=CAN_CASH_OUT,
        )
        .select_related("credential")
        .order_by("-created_at")
        .first()
    )
    if link is not None:
        found.append(
            (
                link.created_at,
                f"enviou o link de resgate da credencial {link.credential.public_key} "
                f"({link.credential.get_permission_display()}) desta conta",
            )
        )
    contact = AccountChangeRequest.Field.EMAIL
    asked = (
        AccountChangeRequest.objects.filter(
            account_id=account_id,
            field=contact,
            requested_by_id=user_id,
            requested_at__gte=since,
            state__in=(AccountChangeRequest.State.PENDING, AccountChangeRequest.State.APPROVED),
        )
        .order_by("-requested_at")
        .first()
    )
    if asked is not None:
        found.append((asked.requested_at, f"pediu a alteração do e-mail de contato desta conta (pedido #{asked.pk})"))
    approved = (
        AccountChangeRequest.objects.filter(
            Q(account_id=account_id, field=contact, decided_by_id=user_id, decided_at__gte=since),
            state=AccountChangeRequest.State.APPROVED,
        )
        .order_by("-decided_at")
        .first()
    )
    if approved is not None and approved.decided_at is not None:
        found.append(
            (approved.decided_at, f"aprovou a alteração do e-mail de contato desta conta (pedido #{approved.pk})")
        )
    if not found:
        return None
    when, what = max(found)
    until = timezone.localtime(when + segregation_window())
    return (
        f"Segregação de funções: você {what} em {timezone.localtime(when):%d/%m/%Y} e não pode aprovar saques "
        f"desta conta até {until:%d/%m/%Y %H:%M}. Outra pessoa da equipe precisa aprová-los."
    )
