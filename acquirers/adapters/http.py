"""HTTP for acquirer APIs in the API Pix style: mTLS, OAuth2 client
credentials, RFC 7807 problems.

Generic over providers that follow Banco Central's API Pix conventions and
their dialects (one base URL, one token URL, scopes, client authentication
by HTTP Basic or in the body). An adapter validates its options with
:func:`clean_connection_options`, builds an :class:`ApiClient` with
:func:`client_for` and calls :meth:`ApiClient.request`.

- **mTLS on every call**, the token request included: certificate and key
  come from files or from PEM text in environment variables (written once per
  process to private temporary files, because TLS libraries load keys from
  files). The PSP's CA may be a file, PEM in the environment, or the system's.
- **Secrets never live in the options**: options hold environment variable
  *names*; a literal secret is refused, so the admin never shows one.
- **OAuth2 client credentials**: the token is cached in Django's cache (Redis),
  shared by every web and worker process, until shortly before it expires;
  one process fetches it while the others wait briefly (``cache.add`` lock),
  so a cold start does not stampede the PSP. A 401 drops it and retries once
  (the PSP rejected the call before processing it, so this is safe for any
  method).
- **Retries only where safe**: the caller marks a call idempotent (GET, a PUT
  with our own id, the cancel PATCH); only those are retried, on connection
  failures, 429 and 5xx, within the call's time budget. A POST never is.
- **Answers**: a 2xx must be a JSON object; a problem (RFC 7807) or any other
  error status maps to :class:`AcquirerDeclined` (4xx refusals) or
  :class:`AcquirerUnavailable` (5xx, 429, connection; 504 and read timeouts
  are :class:`AcquirerTimeout`: the PSP may have acted); anything else is
  :class:`InvalidResponse`. JSON errors in a PSP's own dialect (Efí's
  ``{"nome", "mensagem"}``) are quoted in the message (:func:`plain_error`).
- **Base URLs are staff-configured and may be private** (a PSP reached over a
  private link), so there is no address filter as for webhooks; but only
  https is accepted and redirects are never followed (one could carry the
  bearer token away).
"""

from __future__ import annotations

import atexit
import base64
import hashlib
import hmac
import json
import logging
import os
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import quote, urlencode, urlsplit

import requests
import urllib3.exceptions
from django.conf import settings
from django.core.cache import cache

from acquirers.adapters.base import (
    NOTIFICATION_TOKEN_HEADER,
    AcquirerConfig,
    AcquirerDeclined,
    AcquirerTimeout,
    AcquirerUnavailable,
    InvalidNotification,
    InvalidOptions,
    InvalidResponse,
    UnreadableNotification,
)

logger = logging.getLogger(__name__)

#: Largest answer read from a PSP; anything longer is not an API Pix answer.
MAX_BODY_BYTES = 1024 * 1024
#: A token is dropped this long before the PSP says it expires (at most 10 % of its life).
TOKEN_EXPIRY_MARGIN = 60.0
#: Longest a process waits for another one that is fetching the token.
TOKEN_LOCK_WAIT = 2.0
_RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")

# --------------------------------------------------------------------------- errors


@dataclass(frozen=True)
class Problem:
    """An RFC 7807 problem as the API Pix writes it."""

    type: str = ""
    title: str = ""
    status: int | None = None
    detail: str = ""
    correlation_id: str = ""
    violations: tuple[str, ...] = ()

    @property
    def kind(self) -> str:
        """The last segment of ``type`` (``CobOperacaoInvalida``)."""
        return self.type.rstrip("/").rsplit("/", 1)[-1]

    def describe(self) -> str:
        text = " - ".join(p for p in (self.kind, self.title, self.detail) if p)
        if self.violations:
            text += " [" + "; ".join(self.violations) + "]"
        if self.correlation_id:
            text += f" (correlationId {self.correlation_id})"
        return text


class _HttpErrorMixin:
    status: int | None
    problem: Problem | None

    def _init_http(self, status: int | None, problem: Problem | None) -> None:
        self.status = status
        self.problem = problem


class HttpDeclined(AcquirerDeclined, _HttpErrorMixin):
    """The PSP refused the call (a 4xx): a definitive answer."""

    def __init__(self, message: str, *, status: int | None = None, problem: Problem | None = None) -> None:
        super().__init__(message)
        self._init_http(status, problem)


class HttpNotFound(HttpDeclined):
    """404: the PSP does not know the resource (yet)."""


class HttpUnavailable(AcquirerUnavailable, _HttpErrorMixin):
    """Connection failure, 5xx, 429, or credentials the PSP refuses.
    ``retryable`` is False when trying again cannot help (TLS certificates)."""

    def __init__(
        self, message: str, *, status: int | None = None, problem: Problem | None = None, retryable: bool = True
    ) -> None:
        super().__init__(message)
        self._init_http(status, problem)
        self.retryable = retryable


class HttpTimeout(AcquirerTimeout, _HttpErrorMixin):
    """No complete answer in time, or a 504: the PSP may have acted."""

    def __init__(self, message: str, *, status: int | None = None, problem: Problem | None = None) -> None:
        super().__init__(message)
        self._init_http(status, problem)


# --------------------------------------------------------------------------- options

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
    """Validate the options every :class:`ApiClient` adapter shares and return
    them normalised; ``own`` names the adapter's other options (anything else
    is refused, so a typo or a stray secret is caught when staff save)."""
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
    for name, value in (
        ("cert_path", cert_path),
        ("cert_pem_env", cert_env),
        ("key_path", key_path),
        ("key_pem_env", key_env),
        ("ca_bundle_path", ca_path),
        ("ca_bundle_pem_env", ca_env),
    ):
        if value:
            clean[name] = value

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


# --------------------------------------------------------------------------- client


@dataclass(frozen=True)
class ApiSettings:
    """Everything an :class:`ApiClient` needs, secrets resolved."""

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
    """Resolve cleaned options (see :func:`clean_connection_options`) against
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


@dataclass(frozen=True)
class ApiResponse:
    status: int
    data: dict[str, Any]
    headers: Mapping[str, str]


@dataclass(frozen=True)
class _Raw:
    status: int
    body: bytes
    headers: Mapping[str, str]


_sessions = threading.local()


def _session(api: ApiSettings) -> requests.Session:
    """One session per thread and TLS identity: connections (and their TLS
    handshakes) are reused, and no session is shared between threads."""
    pool: dict[tuple[Any, ...], requests.Session] = getattr(_sessions, "pool", None) or {}
    _sessions.pool = pool
    key = (api.acquirer_key, api.cert_file, api.key_file, api.verify)
    session = pool.get(key)
    if session is None:
        session = requests.Session()
        session.cert = (api.cert_file, api.key_file) if api.key_file else api.cert_file
        session.verify = api.verify
        session.trust_env = False  # no proxies or netrc from the environment on money calls
        session.headers["User-Agent"] = f"PixService/{settings.SERVICE_VERSION}"
        pool[key] = session
    return session


class ApiClient:
    """Calls to one acquirer's API. Cheap to build; see the module docstring."""

    def __init__(self, api: ApiSettings, *, sleep: Callable[[float], None] = time.sleep) -> None:
        self.api = api
        self._sleep = sleep

    # ------------------------------------------------------------------ public

    def request(
        self,
        method: str,
        path: str,
        *,
        idempotent: bool,
        json_body: Mapping[str, Any] | None = None,
        budget: float | None = None,
    ) -> ApiResponse:
        """Call ``base_url + path`` with a bearer token; return the 2xx JSON
        answer or raise an adapter error (see the module docstring)."""
        deadline = time.monotonic() + (budget if budget is not None else self.api.budget)
        url = self.api.base_url + path
        body = json.dumps(json_body, ensure_ascii=False).encode() if json_body is not None else None
        retries = 0
        reauthenticated = False
        while True:
            token = self.access_token(deadline)
            headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
            if body is not None:
                headers["Content-Type"] = "application/json"
            try:
                raw = self._send(method, url, headers=headers, body=body, deadline=deadline)
            except (HttpTimeout, HttpUnavailable) as exc:
                if idempotent and retries < self.api.max_retries and self._can_retry(exc, deadline):
                    retries += 1
                    self._backoff(retries, deadline, None)
                    continue
                raise
            if raw.status == 401 and not reauthenticated:
                # Expired or revoked early: the PSP processed nothing, so retry once with a new token.
                self.drop_token(token)
                reauthenticated = True
                continue
            if raw.status in _RETRYABLE_STATUS and idempotent and retries < self.api.max_retries:
                wait = self._retry_after(raw)
                if self._remaining(deadline) > (wait or 0.0) + 0.05:
                    retries += 1
                    self._backoff(retries, deadline, wait)
                    continue
            return self._interpret(method, path, raw)

    def access_token(self, deadline: float) -> str:
        """A valid token: from the shared cache, or fetched (one process at a time)."""
        key = self._token_key()
        token = _cache_get(key)
        if token:
            return token
        lock = key + ":lock"
        holder = _cache_add(lock, timeout=int(TOKEN_LOCK_WAIT * 5))
        if not holder:
            # Another process is fetching: wait for its token rather than fetch a second one.
            wait_until = min(deadline, time.monotonic() + TOKEN_LOCK_WAIT)
            while time.monotonic() < wait_until:
                self._sleep(0.05)
                token = _cache_get(key)
                if token:
                    return token
        try:
            token, ttl = self._fetch_token(deadline)
            if ttl >= 1:
                _cache_set(key, token, ttl)
            return token
        finally:
            if holder:
                _cache_delete(lock)

    def drop_token(self, token: str) -> None:
        """Forget ``token`` unless another process already replaced it."""
        key = self._token_key()
        if _cache_get(key) == token:
            _cache_delete(key)

    # ------------------------------------------------------------------ token

    def _token_key(self) -> str:
        identity = "|".join((self.api.token_url, self.api.client_id, " ".join(self.api.scopes)))
        return f"acquirer-token:{self.api.acquirer_key}:{hashlib.sha256(identity.encode()).hexdigest()[:32]}"

    def _fetch_token(self, deadline: float) -> tuple[str, float]:
        """OAuth2 client credentials (RFC 6749 §4.4), over the same mTLS session.
        Not retried: it is a POST, and the chain or the task retries anyway."""
        fields = {"grant_type": "client_credentials"}
        if self.api.scopes:
            fields["scope"] = " ".join(self.api.scopes)
        headers = {"Accept": "application/json"}
        if self.api.token_auth == "basic":  # noqa: S105 - a mode's name, not a password
            # RFC 6749 §2.3.1: each part form-encoded before the Basic encoding.
            pair = f"{quote(self.api.client_id, safe='')}:{quote(self.api.client_secret, safe='')}"
            headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
        else:
            fields |= {"client_id": self.api.client_id, "client_secret": self.api.client_secret}
        if self.api.token_body == "json":  # noqa: S105 - a format's name, not a password
            body = json.dumps(fields).encode()
            headers["Content-Type"] = "application/json"
        else:
            body = urlencode(fields).encode()
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        raw = self._send("POST", self.api.token_url, headers=headers, body=body, deadline=deadline)
        if raw.status != 200:
            reason = _oauth_error(raw.body)
            raise HttpUnavailable(f"token request refused: HTTP {raw.status} {reason}".strip(), status=raw.status)
        data = _json_object(raw.body, "token answer")
        token = data.get("access_token")
        if not isinstance(token, str) or not token:
            raise InvalidResponse("token answer without access_token")
        token_type = str(data.get("token_type", "Bearer"))
        if token_type.lower() != "bearer":
            raise InvalidResponse(f"token answer: unsupported token_type {token_type!r}")
        expires_in = data.get("expires_in")
        lifetime = float(expires_in) if isinstance(expires_in, int | float) and expires_in > 0 else 60.0
        return token, lifetime - min(TOKEN_EXPIRY_MARGIN, lifetime * 0.1)

    # ------------------------------------------------------------------ transport

    @staticmethod
    def _remaining(deadline: float) -> float:
        return deadline - time.monotonic()

    def _send(self, method: str, url: str, *, headers: dict[str, str], body: bytes | None, deadline: float) -> _Raw:
        remaining = self._remaining(deadline)
        if remaining <= 0.01:
            raise HttpTimeout(f"{method} {_path(url)}: no time left in the call's budget")
        timeout = (min(self.api.connect_timeout, remaining), min(self.api.read_timeout, remaining))
        started = time.monotonic()
        try:
            response = _session(self.api).request(
                method, url, headers=headers, data=body, timeout=timeout, stream=True, allow_redirects=False
            )
            try:
                chunks: list[bytes] = []
                size = 0
                for chunk in response.iter_content(16384):
                    chunks.append(chunk)
                    size += len(chunk)
                    if size > MAX_BODY_BYTES:
                        raise InvalidResponse(f"{method} {_path(url)}: answer larger than {MAX_BODY_BYTES} bytes")
                    if time.monotonic() > deadline:
                        raise HttpTimeout(f"{method} {_path(url)}: answer not complete within the budget")
            finally:
                response.close()
        except requests.exceptions.SSLError as exc:
            # Certificates (ours refused, theirs untrusted): nothing a retry fixes.
            raise HttpUnavailable(f"{method} {_path(url)}: TLS failure: {exc}", retryable=False) from None
        except requests.exceptions.ConnectTimeout:
            raise HttpUnavailable(f"{method} {_path(url)}: connect timeout") from None
        except requests.exceptions.ReadTimeout:
            raise HttpTimeout(f"{method} {_path(url)}: read timeout") from None
        except requests.exceptions.ConnectionError as exc:
            if exc.args and isinstance(exc.args[0], urllib3.exceptions.ReadTimeoutError):
                raise HttpTimeout(f"{method} {_path(url)}: read timeout") from None
            raise HttpUnavailable(f"{method} {_path(url)}: connection failed: {type(exc).__name__}") from None
        except requests.RequestException as exc:
            raise HttpUnavailable(f"{method} {_path(url)}: {type(exc).__name__}: {exc}") from None
        latency = int((time.monotonic() - started) * 1000)
        logger.info(
            "acquirer %s: %s %s -> %s in %d ms",
            self.api.acquirer_key,
            method,
            _path(url),
            response.status_code,
            latency,
        )
        return _Raw(response.status_code, b"".join(chunks), dict(response.headers))

    def _can_retry(self, exc: HttpTimeout | HttpUnavailable, deadline: float) -> bool:
        return getattr(exc, "retryable", True) and self._remaining(deadline) > 0.1

    def _backoff(self, attempt: int, deadline: float, wait: float | None) -> None:
        delay = wait if wait is not None else 0.1 * 2 ** (attempt - 1)
        self._sleep(max(0.0, min(delay, self._remaining(deadline) - 0.05)))

    @staticmethod
    def _retry_after(raw: _Raw) -> float | None:
        value = {k.lower(): v for k, v in raw.headers.items()}.get("retry-after", "").strip()
        return float(value) if value.isascii() and value.isdigit() else None

    def _interpret(self, method: str, path: str, raw: _Raw) -> ApiResponse:
        where = f"{method} {path}"
        if 200 <= raw.status < 300:
            data = {} if raw.status == 204 or not raw.body.strip() else _json_object(raw.body, where)
            return ApiResponse(raw.status, data, raw.headers)
        if 300 <= raw.status < 400:
            raise InvalidResponse(f"{where}: HTTP {raw.status} redirect refused")
        problem = parse_problem(raw.body)
        text = f"{where}: HTTP {raw.status}" + (f" {problem.describe()}" if problem else plain_error(raw.body))
        if raw.status == 404:
            raise HttpNotFound(text, status=raw.status, problem=problem)
        if raw.status == 504 or raw.status == 408:
            raise HttpTimeout(text, status=raw.status, problem=problem)
        if raw.status in (401, 425, 429) or raw.status >= 500:
            raise HttpUnavailable(text, status=raw.status, problem=problem)
        if 400 <= raw.status < 500:
            raise HttpDeclined(text, status=raw.status, problem=problem)
        raise InvalidResponse(f"{where}: unexpected HTTP {raw.status}")


def _json_dict(body: bytes) -> dict[str, Any] | None:
    """``body`` as a JSON object; None when it is not JSON or not an object."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
    return data if isinstance(data, dict) else None


def parse_problem(body: bytes) -> Problem | None:
    """The RFC 7807 problem in ``body``, or None when it is not one."""
    data = _json_dict(body)
    if data is None or not ({"type", "title"} & data.keys()):
        return None
    violations: list[str] = []
    for item in data.get("violacoes") or []:
        if isinstance(item, dict):
            reason, prop = str(item.get("razao", "")), str(item.get("propriedade", ""))
            violations.append(f"{prop}: {reason}" if prop else reason)
    status = data.get("status")
    return Problem(
        type=str(data.get("type", ""))[:200],
        title=str(data.get("title", ""))[:200],
        status=status if isinstance(status, int) else None,
        detail=str(data.get("detail", ""))[:500],
        correlation_id=str(data.get("correlationId", ""))[:100],
        violations=tuple(v[:200] for v in violations[:10]),
    )


#: Fields of JSON errors that are not RFC 7807 (a PSP's own dialect, e.g. Efí's
#: ``{"nome", "mensagem"}``), quoted in error messages so attempts say why.
PLAIN_ERROR_FIELDS = ("nome", "mensagem", "error", "error_description", "code", "message")


def plain_error(body: bytes) -> str:
    """`` name - message`` of a JSON error object in a non-RFC 7807 dialect;
    empty when the body is not one (the status alone is then the message)."""
    data = _json_dict(body)
    if data is None:
        return ""
    parts = [str(data[k])[:200] for k in PLAIN_ERROR_FIELDS if isinstance(data.get(k), str | int) and data[k] != ""]
    return (" " + " - ".join(parts)) if parts else ""


def _oauth_error(body: bytes) -> str:
    data = _json_dict(body)
    if data is None:
        return ""
    return " ".join(str(data[k])[:200] for k in ("error", "error_description") if data.get(k))


def _json_object(body: bytes, where: str) -> dict[str, Any]:
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise InvalidResponse(f"{where}: answer is not JSON") from None
    if not isinstance(data, dict):
        raise InvalidResponse(f"{where}: answer is not a JSON object")
    return data


def _path(url: str) -> str:
    return urlsplit(url).path


def client_for(config: AcquirerConfig, options: Mapping[str, Any]) -> ApiClient:
    """An :class:`ApiClient` for an acquirer whose options were cleaned by
    :func:`clean_connection_options`."""
    return ApiClient(settings_for(config, options))


# --------------------------------------------------------------------------- notifications
# The ``{webhookUrl}/pix`` callback of the API Pix (and of Efí's extension).


def verify_notification_token(config: AcquirerConfig, options: Mapping[str, Any], headers: Mapping[str, str]) -> None:
    """The URL's secret segment (handed over by the view in
    :data:`NOTIFICATION_TOKEN_HEADER`), compared in constant time with the
    variable named by ``notification_token_env``; InvalidNotification if not."""
    env = options.get("notification_token_env")
    if not env:
        raise InvalidNotification("this acquirer has no notification_token_env: notifications are refused")
    expected = read_env(env, f"acquirer {config.key} notification token")
    presented = next((v for k, v in headers.items() if k.lower() == NOTIFICATION_TOKEN_HEADER.lower()), "")
    if not hmac.compare_digest(presented.encode(), expected.encode()):
        raise InvalidNotification("wrong or missing notification token")


def callback_entries(body: bytes, *, most: int) -> list[dict[str, Any]] | None:
    """The ``pix`` entries of a callback body, at most ``most`` of them; None
    when the body has no ``pix`` (nothing to confirm). UnreadableNotification
    when malformed."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise UnreadableNotification(f"body is not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise UnreadableNotification("body is not a JSON object")
    if "pix" not in data:
        return None
    entries = data["pix"]
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise UnreadableNotification("pix is not a list of objects")
    if len(entries) > most:
        raise UnreadableNotification(f"more than {most} Pix in one callback")
    return entries


# --------------------------------------------------------------------------- cache
# The token cache is an optimisation: with Redis down, every call fetches its
# own token rather than failing the charge.


def _cache_get(key: str) -> str | None:
    try:
        value = cache.get(key)
    except Exception:
        logger.warning("token cache unavailable (get)", exc_info=True)
        return None
    return value if isinstance(value, str) else None


def _cache_set(key: str, value: str, ttl: float) -> None:
    try:
        cache.set(key, value, int(ttl))
    except Exception:
        logger.warning("token cache unavailable (set)", exc_info=True)


def _cache_add(key: str, *, timeout: int) -> bool:
    try:
        return bool(cache.add(key, "1", timeout))
    except Exception:
        logger.warning("token cache unavailable (add)", exc_info=True)
        return True  # fetch ourselves


def _cache_delete(key: str) -> None:
    try:
        cache.delete(key)
    except Exception:
        logger.warning("token cache unavailable (delete)", exc_info=True)
