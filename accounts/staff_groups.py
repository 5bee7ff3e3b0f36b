"""Back-office groups, kept in step with the models after every migrate.

- ``support``: sees everything in the back office, changes nothing.
- ``operations``: sees everything and acts on accounts (approve, reject,
  block, configure, credentials), and runs the money actions: refund,
  chargeback, approve and cancel withdrawals, and *asks* for the crediting
  ones (resolve a chargeback for the account, mark a withdrawal returned, fail an
  undetermined payout); runs and resolves reconciliation with acquirers, and
  asks for the one debiting action (debit again a payout the acquirer made
  although it failed here); sends a MED infraction's defence on the
  account's behalf and asks to register, accept or close infractions;
  cancels a Pix Automático recurrence and sends a missed cycle again.
- ``finance``: sees everything and approves or rejects those requests, the
  staff refunds of paid charges operations ask for, and the account changes
  operations ask for (contact e-mail, manual approval, withdrawal limits)
  and the requests about MED infractions;
  the one who asked can never approve (``accounts.services.money_action_approve``,
  ``accounts.account_changes.account_change_approve``).

No group is ever given a permission of ``auth`` (users, groups, permissions):
whoever could grant permissions could give themselves, or a second account
of theirs, both halves of every maker-checker. Only superusers manage staff
(README, "Money safety": superusers are break-glass operators).
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import Group, Permission

PROJECT_APPS = (
    "accounts",
    "acquirers",
    "payments",
    "withdrawals",
    "infractions",
    "due_charges",
    "recurrences",
    "reconciliation",
    "webhooks",
)

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
    # One approval for a whole payout batch (withdrawals.batches): the same people, the same segregation.
    "withdrawals.change_payoutbatch",
    "withdrawals.approve_payout_batch",
    "withdrawals.cancel_withdrawal",
    "withdrawals.request_withdrawal_return",
    "withdrawals.request_undetermined_payout_failure",
    # Webhooks: enable/disable endpoints, rotate secrets, resend events.
    "webhooks.change_webhookendpoint",
    "webhooks.change_webhookdelivery",
    # Acquirers: close a circuit breaker by hand.
    "acquirers.reset_circuit_breaker",
    # Reconciliation with acquirers: run it on demand, resolve its items (asking where money moves).
    "reconciliation.resolve_reconciliationitem",
    # A Pix received after a cancel: ask to credit or return it; ask a silent acquirer to cancel again.
    "payments.request_late_payment_resolution",
    "payments.retry_chargecancellation",
    # MED infractions: the defence on the account's behalf (the merchant could send it itself), and asking to
    # register one an acquirer reported by other means, to accept a return without defence or close one.
    "infractions.defend_infraction",
    "infractions.request_infraction_action",
    # Pix Automático: cancel a recurrence, send a missed cycle again (no money moves out; every field read-only).
    "recurrences.change_recurrence",
    "recurrences.change_cycle",
)


FINANCE_EXTRA = (
    # The second staff member of the actions that credit an account.
    "accounts.approve_chargeback_resolution",
    "accounts.approve_withdrawal_return",
    "accounts.approve_undetermined_payout_failure",
    "accounts.approve_sent_payout_redebit",
    "accounts.approve_late_payment_resolution",
    "accounts.approve_refund_after_chargeback_redebit",
    # A refund sends the merchant's money to the payer, whom an insider can be.
    "accounts.approve_charge_refund",
    # What decides where an account's money may go (accounts.account_changes).
    "accounts.approve_account_change",
    # What blocks, releases or debits an account's money over a MED infraction staff reported or closed.
    "infractions.approve_infraction_action",
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


#: Django's default permissions, as staff read them in the group and user pages.
DEFAULT_ACTIONS = {"add": "adicionar", "change": "modificar", "delete": "excluir", "view": "ver"}


def sync_permission_names(**kwargs: Any) -> None:
    """Every permission named in pt-BR, on new and existing databases alike.

    Django names its default permissions in English ("Can add conta") and
    never renames a permission that exists (a verbose name or a Meta
    permission renamed later stays as first created). After every migrate,
    each permission of an installed model gets its declared name (Meta
    permissions) or "Pode <ação> <nome do modelo>"; only the rows whose name
    differs are written.

    Django sends post_migrate once per installed app (on every test flush
    too), after that app's permissions are created: the names are set once,
    at the last such app's, when every permission exists."""
    from django.apps import apps
    from django.conf import settings
    from django.contrib.auth import get_permission_codename
    from django.utils import translation

    # Django sends it only to apps with a models module.
    if kwargs.get("app_config") is not [c for c in apps.get_app_configs() if c.models_module is not None][-1]:
        return
    expected: dict[tuple[str, str, str], str] = {}
    with translation.override(settings.LANGUAGE_CODE):
        for model in apps.get_models():
            opts = model._meta
            key = (opts.app_label, opts.model_name or "")
            for action in opts.default_permissions:
                verb = DEFAULT_ACTIONS.get(action, action)
                expected[(*key, get_permission_codename(action, opts))] = f"Pode {verb} {opts.verbose_name}"[:255]
            for codename, declared in opts.permissions:
                expected[(*key, codename)] = str(declared)[:255]
    stale = []
    for permission in Permission.objects.select_related("content_type"):
        ct = permission.content_type
        wanted = expected.get((ct.app_label, ct.model, permission.codename))
        if wanted is not None and permission.name != wanted:
            permission.name = wanted
            stale.append(permission)
    Permission.objects.bulk_update(stale, ["name"])
