"""``manage.py staff_second_factor_reset MEMBER --by OPERATOR --reason "..."``:
the way back in when no one left can reset a colleague in the back office
(the only administrator lost their phone and recovery codes). Shell access
to the service is already every power; the command still says who did it
and why, in the admin log like the back office's reset."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from staff.services import second_factor_reset


class Command(BaseCommand):
    help = (
        "Remove a staff member's authenticator app and recovery codes (their next sign-in enrols again), "
        "logged in the admin log as done by --by, with --reason."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("member", help="username of the staff member to reset")
        parser.add_argument("--by", required=True, help="your own staff username: who does it")
        parser.add_argument("--reason", required=True, help="why (e.g. the ticket): kept in the admin log")

    def handle(self, *args: Any, **options: Any) -> None:
        users = get_user_model()._default_manager
        reason = options["reason"].strip()
        if not reason:
            raise CommandError("--reason must say why.")
        try:
            member = users.get_by_natural_key(options["member"])
            by = users.get_by_natural_key(options["by"])
        except users.model.DoesNotExist as missing:
            raise CommandError(f"no such user: {missing}") from missing
        if not (by.is_active and by.is_staff):
            raise CommandError(f"--by {by.get_username()} is not an active staff member.")
        second_factor_reset(member=member, by=by, reason=reason)
        self.stdout.write(f"{member.get_username()}: second factor reset; they enrol again at their next sign-in.")
