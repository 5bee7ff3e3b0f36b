"""Back-office groups, kept in step with the models after every migrate.

- ``support``: sees everything in the back office, changes nothing.
- ``operations``: sees everything and acts on accounts (approve, reject,
  block, configure, credentials), and runs the money actions: refund,
  chargeback, approve and cancel withdrawals, and *asks* for the crediting
  ones (resolve a chargeback for the account, mark a withdrawal returned, fail an
  undetermined payout).
- ``finance``: sees everything and approves or rejects those requests; the
  one who asked can never approve (``accounts.services.money_action_approve``).
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import Group, Permission

PROJECT_APPS = ("accounts", "acquirers", "payments", "withdrawals", "webhooks")

OPERATIONS_EXTRA = (
    "accounts.add_account",
    "accounts.change_account",
    "accounts.approve_account",
    "accounts.manage_credentials",
    # Charges: cancel and ask the acquirer (every field stays read-only)...
    "payments.change_charge",
    # ...and one permission per action that moves money.
    "payments.refund_charge",
    "payments.mark_charge_chargeback",
    "payments.request_chargeback_resolution",
    "withdrawals.change_withdrawal",
    "withdrawals.approve_withdrawal",
    "withdrawals.cancel_withdrawal",
    "withdrawals.request_withdrawal_return",
    "withdrawals.request_undetermined_payout_failure",
    # Webhooks: enable/disable endpoints, rotate secrets, resend events.
    "webhooks.change_webhookendpoint",
    "webhooks.change_webhookdelivery",
    # Acquirers: close a circuit breaker by hand.
    "acquirers.reset_circuit_breaker",
)


FINANCE_EXTRA = (
    # The second staff member of the actions that credit an account.
    "accounts.approve_chargeback_resolution",
    "accounts.approve_withdrawal_return",
    "accounts.approve_undetermined_payout_failure",
)


def _perms(codenames: list[str]) -> list[Permission]:
    wanted = {tuple(name.split(".", 1)) for name in codenames}
    perms = Permission.objects.filter(content_type__app_label__in={app for app, _ in wanted}).select_related(
        "content_type"
    )
    return [p for p in perms if (p.content_type.app_label, p.codename) in wanted]


def ensure_staff_groups(**kwargs: Any) -> None:
    # post_migrate reaches accounts before the apps after it have their
    # permissions; create them all first so a fresh database gets full groups.
    from django.apps import apps
    from django.contrib.auth.management import create_permissions

    for app_label in PROJECT_APPS:
        create_permissions(apps.get_app_config(app_label), verbosity=0)

    view_perms = list(Permission.objects.filter(content_type__app_label__in=PROJECT_APPS, codename__startswith="view_"))
    support, _ = Group.objects.get_or_create(name="support")
    support.permissions.set(view_perms)
    operations, _ = Group.objects.get_or_create(name="operations")
    operations.permissions.set(view_perms + _perms(list(OPERATIONS_EXTRA)))
    finance, _ = Group.objects.get_or_create(name="finance")
    finance.permissions.set(view_perms + _perms(list(FINANCE_EXTRA)))
