"""``manage.py pix_bootstrap FILE.json``: the operator's way to configure
acquirers and accounts from a file (decisions §9)."""

from __future__ import annotations

import json
import sys
from argparse import RawDescriptionHelpFormatter
from typing import IO, Any, NoReturn

from django.core.management.base import BaseCommand, CommandError, CommandParser, DjangoHelpFormatter

from core.exceptions import PixServiceError
from provisioning.bootstrap import bootstrap_apply

HELP = """\
Create or update, idempotently, acquirers and accounts from a JSON file
(decisions §9), and print as JSON the ids and the secrets created.

FILE is a path, or - to read standard input. The file is an object with two
lists, both optional:

  acquirers  matched by "key" (^[a-z0-9_]+$, at most 64 characters): name,
             nominal, adapter, options, enabled, max_ticket, conversion_percent
             (staff's value, shown instead of the measured conversion; null:
             show the measured one), is_new, default_priority (null: not in
             the default chain), connect_timeout_ms, read_timeout_ms.
  accounts   matched by "ref": name, document, status (pending, approved,
             rejected), blocked, payment_methods (["pix"]), acquirer_selection,
             available_acquirers, active_acquirers, cashout_acquirers,
             withdrawals_need_approval, cashin_fee {fixed, bps},
             withdrawal_fee {fixed, bps}, withdrawal_limits {minimum,
             per_request, per_day_total}, charge_expiry_seconds,
             credentials [{ref, permission: cashin|cashout|all}],
             webhooks [{ref, url}], sandbox_paid_charges [{ref, amount}]
             (PIX_SANDBOX only: charges at the account's active_acquirers,
             all sandbox, paid by the sandbox's payer after the rest is
             written; a ref already made is left as it is).

Rules:
  - Money is integer centavos, fees in basis points (0..10000); every number
    must be a JSON number and every flag a JSON boolean.
  - An omitted field takes the platform default on create and is left as it
    is on update. Unknown fields are ignored.
  - available_acquirers, active_acquirers and cashout_acquirers are set
    exactly. active_acquirers and cashout_acquirers are chains in priority
    order (at most 3, no repeats). active_acquirers must be a subset of
    available_acquirers (of the file's list, or of the account's current
    grants when the file omits it); an acquirer removed from
    available_acquirers also leaves the active chain. cashout_acquirers need
    not be granted. Every acquirer named must be in the file or the database.
  - A credential is created, and its secret printed, only when the account
    has none with that ref; an existing one keeps its keys (only its
    permission follows the file). A webhook's secret is printed only when it
    is created; an existing webhook gets the file's url.
  - An approved or rejected account cannot go back to pending.
  - A webhook url must be http or https.
  - The file is checked as a whole before anything is written, and written
    in one transaction: a bad file changes nothing and is reported on stderr
    with the path of each bad field, e.g.
    accounts[0].withdrawal_limits.per_request: ...

Output (stdout): {"acquirers": [key, ...], "accounts": {ref: {"id": ...,
  "credentials": {ref: {"public_key": ..., "secret_key": ...}},
  "webhooks": {ref: {"id": ..., "code": ..., "secret": ...}},
  "sandbox_paid_charges": {ref: charge id} (when the file has them)}}}
secret_key and secret appear only for what this run created. Keep them:
they are not stored in clear and are never shown again.
"""


class _HelpFormatter(DjangoHelpFormatter, RawDescriptionHelpFormatter):
    """Django's option order, with the description's line breaks kept."""


def _reject_constant(name: str) -> NoReturn:
    # Python's json accepts NaN and Infinity; JSON does not, and PostgreSQL's
    # jsonb would refuse them later anyway.
    raise ValueError(f"{name} não é JSON válido")


class Command(BaseCommand):
    help = HELP
    # Lets tests hand in standard input, as createsuperuser does.
    stealth_options = ("stdin",)

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        kwargs.setdefault("formatter_class", _HelpFormatter)
        return super().create_parser(prog_name, subcommand, **kwargs)

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", metavar="FILE", help="The bootstrap JSON file, or - for standard input.")

    def handle(self, *args: Any, **options: Any) -> None:
        path: str = options["file"]
        data = self._load(path, options.get("stdin") or sys.stdin)
        try:
            result = bootstrap_apply(data=data)
        except PixServiceError as exc:
            errors = getattr(exc, "errors", {})
            lines = [f"{field}: {message}" for field, messages in errors.items() for message in messages]
            raise CommandError("\n".join([f"{path}: {exc.message}", *lines])) from exc
        self.stdout.write(json.dumps(result, indent=2, ensure_ascii=False))

    def _load(self, path: str, stdin: IO[str]) -> Any:
        try:
            if path == "-":
                text = stdin.read()
            else:
                with open(path, encoding="utf-8") as file:
                    text = file.read()
        except FileNotFoundError as exc:
            raise CommandError(f"{path}: arquivo não encontrado.") from exc
        except (OSError, UnicodeDecodeError) as exc:
            raise CommandError(f"{path}: não foi possível ler o arquivo ({exc}).") from exc
        try:
            return json.loads(text, parse_constant=_reject_constant)
        except json.JSONDecodeError as exc:
            raise CommandError(f"{path}: JSON inválido na linha {exc.lineno}, coluna {exc.colno}: {exc.msg}.") from exc
        except ValueError as exc:
            raise CommandError(f"{path}: {exc}.") from exc
