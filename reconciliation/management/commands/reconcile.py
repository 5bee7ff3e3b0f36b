"""``manage.py reconcile [--acquirer KEY] [--date YYYY-MM-DD]``: reconciliation
with acquirers on demand, in this process (what beat does daily)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from acquirers.models import Acquirer
from reconciliation.run import AlreadyRunning, acquirer_reconcile, directions_of, yesterday


def _day(value: str) -> dt.date:
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        raise CommandError(f"--date {value!r} is not a date YYYY-MM-DD") from None


class Command(BaseCommand):
    help = (
        "Match an acquirer's listings of one day (America/Sao_Paulo; default: yesterday) "
        "against our charges and payouts. Without --acquirer: every enabled acquirer that lists."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--acquirer", metavar="KEY", help="the acquirer's key (default: every enabled one)")
        parser.add_argument("--date", metavar="YYYY-MM-DD", help="the day, America/Sao_Paulo (default: yesterday)")

    def handle(self, *args: Any, **options: Any) -> None:
        day = _day(options["date"]) if options["date"] else yesterday()
        if day >= dt.date.today() + dt.timedelta(days=1):
            raise CommandError(f"{day} has not begun yet")
        if options["acquirer"]:
            acquirer = Acquirer.objects.filter(key=options["acquirer"]).first()
            if acquirer is None:
                raise CommandError(f"no acquirer {options['acquirer']!r}")
            acquirers = [acquirer]
        else:
            acquirers = [a for a in Acquirer.objects.filter(enabled=True).order_by("key") if directions_of(a)]
        failed = False
        for acquirer in acquirers:
            try:
                run = acquirer_reconcile(acquirer_id=acquirer.pk, day=day)
            except AlreadyRunning:
                self.stderr.write(f"{acquirer.key} {day}: already being reconciled by another process")
                failed = True
                continue
            self.stdout.write(
                f"{acquirer.key} {day}: {run.status}; matched {run.matched_count} ({run.matched_amount} centavos), "
                f"unmatched {run.unmatched_count} ({run.unmatched_amount} centavos), healed {run.healed_count}"
                + (f"; {run.error}" if run.error else "")
            )
            failed = failed or run.status == run.Status.FAILED
        if failed:
            raise CommandError("reconciliation did not complete for every acquirer")
