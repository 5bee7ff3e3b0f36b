"""The options staff save for an API Pix acquirer, validated when saved.

Generic over providers that follow Banco Central's API Pix conventions and
their dialects: one base URL, one token URL, scopes, client authentication by
HTTP Basic or in the body.

- **Secrets never live in the options**: options hold environment variable
  *names*; a literal secret is refused, so the admin never shows one.
- **Base URLs are staff-configured and may be private** (a PSP reached over a
  private link), so there is no address filter as for webhooks; but only
  https is accepted (and the client never follows redirects: one could carry
  the bearer token away).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal
from urllib.parse import urlsplit

from acquirers.adapters.base import InvalidOptions

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")

#: Option names that would hold a secret itself; options name environment variables instead.
LITERAL_SECRET_OPTIONS = frozenset(
    {
        "client_secret",
        "secret",
        "password",
        "cert_pem",
        "key_pem",
        "certificate",
        "private_key",
        "key",
        "token",
        "access_token",
        "notification_token",
        "notification_secret",
    }
)

CONNECTION_OPTIONS = frozenset(
    {
        "base_url",
        "token_url",
        "client_id",
        "client_id_env",
        "client_secret_env",
        "cert_path",
        "cert_pem_env",
        "key_path",
        "key_pem_env",
        "ca_bundle_path",
        "ca_bundle_pem_env",
        "scopes",
        "token_auth",
        "token_body",
        "max_retries",
    }
)

TokenAuth = Literal["basic", "body"]
TokenBody = Literal["form", "json"]


def env_name(options: Mapping[str, Any], name: str, *, required: bool = False) -> str | None:
    """The environment variable named by option ``name``, checked for shape."""
    value = options.get(name)
    if value is None or value == "":
        if required:
            raise InvalidOptions(f"{name} is required: the name of an environment variable")
        return None
    if not isinstance(value, str) or not _ENV_NAME.match(value):
        raise InvalidOptions(f"{name} must be the name of an environment variable ([A-Za-z_][A-Za-z0-9_]*)")
    return value


def _https_url(options: Mapping[str, Any], name: str) -> str:
    value = options.get(name)
    if not isinstance(value, str) or not value:
        raise InvalidOptions(f"{name} is required (an https URL)")
    parts = urlsplit(value)
    if parts.scheme != "https" or not parts.hostname or parts.username or parts.password:
        raise InvalidOptions(f"{name} must be an https URL without credentials")
    if parts.query or parts.fragment:
        raise InvalidOptions(f"{name} must not have a query or fragment")
    return value.rstrip("/")


def refuse_literal_secrets(options: Mapping[str, Any]) -> None:
    """Options are shown in the admin and kept in backups: secrets stay in the environment."""
    for name in sorted(set(options) & LITERAL_SECRET_OPTIONS):
        raise InvalidOptions(
            f"{name} must not be stored in the options: put it in an environment variable "
            f"and give that variable's name in {name}_env"
        )


def clean_connection_options(
    options: Mapping[str, Any], *, default_scopes: Sequence[str], own: Iterable[str] = ()
) -> dict[str, Any]:
    """Validate the options every API Pix adapter shares and return them
    normalised; ``own`` names the adapter's other options (anything else is
    refused, so a typo or a stray secret is caught when staff save)."""
    refuse_literal_secrets(options)
    unknown = set(options) - CONNECTION_OPTIONS - set(own)
    if unknown:
        raise InvalidOptions(f"unknown options: {', '.join(sorted(unknown))}")
    clean: dict[str, Any] = {
        "base_url": _https_url(options, "base_url"),
        "token_url": _https_url(options, "token_url"),
    }
    client_id = options.get("client_id")
    client_id_env = env_name(options, "client_id_env")
    if client_id is not None and (not isinstance(client_id, str) or not client_id):
        raise InvalidOptions("client_id must be a non-empty string")
    if bool(client_id) == bool(client_id_env):
        raise InvalidOptions("give exactly one of client_id or client_id_env")
    if client_id:
        clean["client_id"] = client_id  # an identifier, not a secret
    else:
        clean["client_id_env"] = client_id_env
    clean["client_secret_env"] = env_name(options, "client_secret_env", required=True)
    clean |= _tls_options(options)

    scopes = options.get("scopes", list(default_scopes))
    if not isinstance(scopes, list) or not all(isinstance(s, str) and s and " " not in s for s in scopes):
        raise InvalidOptions("scopes must be a list of scope names (empty: none sent)")
    clean["scopes"] = scopes
    token_auth = options.get("token_auth", "basic")
    if token_auth not in ("basic", "body"):
        raise InvalidOptions("token_auth must be basic or body")
    clean["token_auth"] = token_auth
    token_body = options.get("token_body", "form")
    if token_body not in ("form", "json"):
        raise InvalidOptions("token_body must be form or json")
    clean["token_body"] = token_body
    retries = options.get("max_retries", 1)
    if not isinstance(retries, int) or isinstance(retries, bool) or not 0 <= retries <= 3:
        raise InvalidOptions("max_retries must be an integer from 0 to 3")
    clean["max_retries"] = retries
    return clean


def _tls_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """mTLS certificate and key, and the PSP's CA: each a file path or the
    name of a variable holding PEM text."""
    cert_path, cert_env = options.get("cert_path"), env_name(options, "cert_pem_env")
    if bool(cert_path) == bool(cert_env):
        raise InvalidOptions("mTLS: give exactly one of cert_path or cert_pem_env")
    key_path, key_env = options.get("key_path"), env_name(options, "key_pem_env")
    if key_path and key_env:
        raise InvalidOptions("mTLS: give at most one of key_path or key_pem_env (none when the certificate has it)")
    ca_path, ca_env = options.get("ca_bundle_path"), env_name(options, "ca_bundle_pem_env")
    if ca_path and ca_env:
        raise InvalidOptions("give at most one of ca_bundle_path or ca_bundle_pem_env")
    for name, value in (("cert_path", cert_path), ("key_path", key_path), ("ca_bundle_path", ca_path)):
        if value is not None and value != "" and (not isinstance(value, str) or not os.path.isabs(value)):
            raise InvalidOptions(f"{name} must be an absolute file path")
    given = (
        ("cert_path", cert_path),
        ("cert_pem_env", cert_env),
        ("key_path", key_path),
        ("key_pem_env", key_env),
        ("ca_bundle_path", ca_path),
        ("ca_bundle_pem_env", ca_env),
    )
    return {name: value for name, value in given if value}


def clean_pix_key(options: Mapping[str, Any], *, what: str) -> str:
    """Option ``chave``, the account's Pix key at the PSP; ``what`` says whose."""
    chave = options.get("chave")
    if not isinstance(chave, str) or not 1 <= len(chave) <= 77:
        raise InvalidOptions(f"chave is required: {what} (at most 77 characters)")
    return chave


def clean_notification_token_env(options: Mapping[str, Any]) -> dict[str, str]:
    """Option ``notification_token_env`` (the variable holding the secret
    segment of the notification URL) when given; empty when not."""
    token_env = env_name(options, "notification_token_env")
    return {"notification_token_env": token_env} if token_env else {}


#: ``DadosBancariosRecebedor.tipoConta`` of the API Pix.
ACCOUNT_TYPES = ("CORRENTE", "POUPANCA", "PAGAMENTO")
RECEIVER_ACCOUNT_OPTIONS = ("receiver_account", "receiver_account_type", "receiver_branch")


def clean_receiver_account(options: Mapping[str, Any]) -> dict[str, str]:
    """Options ``receiver_account`` (``conta``, 1-20 digits),
    ``receiver_account_type`` (``tipoConta``: CORRENTE, the default, POUPANCA
    or PAGAMENTO) and ``receiver_branch`` (``agencia``, at most 4, optional):
    the receiving account a Pix Automático cycle (``cobr``) names in its
    ``recebedor``. All optional as a whole: without ``receiver_account`` the
    acquirer cannot create cycles, and says so when asked to."""
    account = options.get("receiver_account")
    kind = options.get("receiver_account_type")
    branch = options.get("receiver_branch")
    if account is None or account == "":
        if kind or branch:
            raise InvalidOptions("receiver_account_type and receiver_branch need receiver_account")
        return {}
    # Digits only, check digit included, as the DICT and the SPI write an account number.
    if not isinstance(account, str) or not account.isascii() or not account.isdigit() or len(account) > 20:
        raise InvalidOptions("receiver_account must be the account number (1-20 digits, check digit included)")
    clean = {"receiver_account": account, "receiver_account_type": kind or "CORRENTE"}
    if clean["receiver_account_type"] not in ACCOUNT_TYPES:
        raise InvalidOptions(f"receiver_account_type must be one of {', '.join(ACCOUNT_TYPES)}")
    if branch is not None and branch != "":
        if not isinstance(branch, str) or not branch.isascii() or not branch.isdigit() or len(branch) > 4:
            raise InvalidOptions("receiver_branch must be the branch number (1-4 digits)")
        clean["receiver_branch"] = branch
    return clean
