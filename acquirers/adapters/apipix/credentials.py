"""Cleaned options resolved against the environment: the client secret and
the mTLS identity every call (the token request included) presents.

Certificate and key come from files or from PEM text in environment variables
(written once per process to private temporary files, because TLS libraries
load keys from files). The PSP's CA may be a file, PEM in the environment, or
the system's.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from acquirers.adapters.apipix.options import TokenAuth, TokenBody
from acquirers.adapters.base import AcquirerConfig, AcquirerUnavailable


def read_env(name: str, what: str) -> str:
    """A secret from the environment; missing is an outage of this acquirer
    (misconfigured), not a bug: the chain moves on and the message says why."""
    value = os.environ.get(name, "")
    if not value:
        raise AcquirerUnavailable(f"{what}: environment variable {name} is not set")
    return value


# --------------------------------------------------------------------------- PEM files

_pem_lock = threading.Lock()
_pem_dir: str | None = None
_pem_files: dict[str, str] = {}


def _remove_pem_dir() -> None:
    if _pem_dir:
        shutil.rmtree(_pem_dir, ignore_errors=True)


def pem_file(text: str, what: str) -> str:
    """A private (0600, in a 0700 directory) file holding ``text``, one per
    distinct content per process, removed when the process exits."""
    global _pem_dir
    if "\n" not in text and "\\n" in text:
        text = text.replace("\\n", "\n")  # PEM pasted into a one-line .env value
    if "-----BEGIN " not in text:
        raise AcquirerUnavailable(f"{what}: the environment variable does not hold PEM text")
    digest = hashlib.sha256(text.encode()).hexdigest()
    with _pem_lock:
        if digest in _pem_files and os.path.exists(_pem_files[digest]):
            return _pem_files[digest]
        if _pem_dir is None or not os.path.isdir(_pem_dir):
            _pem_dir = tempfile.mkdtemp(prefix="pix-acquirer-tls-")
            atexit.register(_remove_pem_dir)
        path = os.path.join(_pem_dir, f"{digest[:32]}.pem")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(text if text.endswith("\n") else text + "\n")
        _pem_files[digest] = path
        return path


def _file_or_env(options: Mapping[str, Any], path_option: str, env_option: str, what: str) -> str | None:
    path = options.get(path_option)
    if path:
        if not os.path.isfile(path):
            raise AcquirerUnavailable(f"{what}: {path_option} {path} is not a readable file")
        return str(path)
    env = options.get(env_option)
    if env:
        return pem_file(read_env(env, what), what)
    return None


# --------------------------------------------------------------------------- settings


@dataclass(frozen=True)
class ApiSettings:
    """Everything an :class:`~acquirers.adapters.apipix.client.ApiClient`
    needs, secrets resolved."""

    acquirer_key: str
    base_url: str
    token_url: str
    client_id: str
    client_secret: str = field(repr=False)
    cert_file: str
    key_file: str | None
    verify: str | bool  # CA bundle path, or True for the system's
    scopes: tuple[str, ...]
    token_auth: TokenAuth
    token_body: TokenBody
    connect_timeout: float
    read_timeout: float
    max_retries: int

    @property
    def budget(self) -> float:
        """Default wall-clock budget of one logical call (token, retries included)."""
        return self.connect_timeout + self.read_timeout


def settings_for(config: AcquirerConfig, options: Mapping[str, Any]) -> ApiSettings:
    """Resolve cleaned options (see
    :func:`~acquirers.adapters.apipix.options.clean_connection_options`) against
    the environment. Raises :class:`AcquirerUnavailable` when something is missing."""
    what = f"acquirer {config.key}"
    client_id = options.get("client_id") or read_env(options["client_id_env"], what)
    cert = _file_or_env(options, "cert_path", "cert_pem_env", f"{what} client certificate")
    assert cert is not None  # clean_connection_options requires one
    ca = _file_or_env(options, "ca_bundle_path", "ca_bundle_pem_env", f"{what} CA bundle")
    return ApiSettings(
        acquirer_key=config.key,
        base_url=options["base_url"],
        token_url=options["token_url"],
        client_id=client_id,
        client_secret=read_env(options["client_secret_env"], what),
        cert_file=cert,
        key_file=_file_or_env(options, "key_path", "key_pem_env", f"{what} client key"),
        verify=ca or True,
        scopes=tuple(options.get("scopes", ())),
        token_auth=options.get("token_auth", "basic"),
        token_body=options.get("token_body", "form"),
        connect_timeout=config.connect_timeout,
        read_timeout=config.read_timeout,
        max_retries=int(options.get("max_retries", 1)),
    )
