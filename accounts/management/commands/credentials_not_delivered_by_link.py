"""``manage.py credentials_not_delivered_by_link [--all-permissions]``: the
active credentials whose secret someone other than the merchant may have seen
(issued or rotated in the back office before claim links, or by
``pix_bootstrap`` or a shell), so operators can rotate them through claim
links and revoke them (docs/operations/back-office.md, "Credentials by claim
link")."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.utils import timezone

from accounts.models import ApiCredential
from accounts.segregation import CAN_CASH_OUT
from accounts.selectors import credentials_not_delivered_by_link

COLUMNS = ("public_key", "permission", "account_id", "account", "label", "created_at", "last_used_at")


def _when(moment: Any) -> str:
    return timezone.localtime(moment).isoformat(timespec="seconds") if moment else ""


class Command(BaseCommand):
    help = (
        "List the active credentials that no claim link delivered (cashout and all; --all-permissions: cashin "
        "too), tab-separated, by account. Rotate each from the back office (the new one goes by claim link) "
        "and revoke it once the merchant has switched."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--all-permissions", action="store_true", help="cashin credentials too (they can refund by API)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        permissions = tuple(ApiCredential.Permission.values) if options["all_permissions"] else CAN_CASH_OUT
        self.stdout.write("\t".join(COLUMNS))
        count = 0
        for credential in credentials_not_delivered_by_link(permissions=tuple(str(p) for p in permissions)):
            # One line per credential: tabs or line breaks in a label would break the columns.
            label = " ".join(credential.label.split())
            row = (
                credential.public_key,
                credential.permission,
                str(credential.account_id),
                " ".join(credential.account.name.split()),
                label,
                _when(credential.created_at),
                _when(credential.last_used_at),
            )
            self.stdout.write("\t".join(row))
            count += 1
        noun = "credential" if count == 1 else "credentials"
        self.stderr.write(f"{count} active {noun} not delivered by a claim link")
