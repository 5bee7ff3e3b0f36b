"""One logical call to an API Pix acquirer: mTLS on every connection, the
bearer token from :mod:`.auth`, retries only where safe, answers mapped to
adapter errors.

- **A 401 drops the token and retries once** (the PSP rejected the call before
  processing it, so this is safe for any method).
- **Retries only where safe**: the caller marks a call idempotent (GET, a PUT
  with our own id, the cancel PATCH); only those are retried, on connection
  failures, 429 and 5xx, within the call's time budget. A POST never is.
- **Answers**: a 2xx must be a JSON object; an error status is mapped by
  :func:`.problems.raise_for_status`; anything else is :class:`InvalidResponse`.
- **Redirects are never followed** (one could carry the bearer token away),
  nor are proxies or netrc from the environment used on money calls.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import requests
import urllib3.exceptions
from django.conf import settings

from acquirers.adapters.apipix import auth
from acquirers.adapters.apipix.credentials import ApiSettings, settings_for
from acquirers.adapters.apipix.problems import HttpTimeout, HttpUnavailable, json_object, raise_for_status
from acquirers.adapters.base import AcquirerConfig, InvalidResponse
from core import deadline as cutoff
from core import http

logger = logging.getLogger(__name__)

#: Largest answer read from a PSP; anything longer is not an API Pix answer.
MAX_BODY_BYTES = 1024 * 1024
_RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})


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
    handshakes) are reused, and no session is shared between threads. Its
    connections, new or reused, are cut at the call's deadline (core.http)."""
    pool: dict[tuple[Any, ...], requests.Session] = getattr(_sessions, "pool", None) or {}
    _sessions.pool = pool
    key = (api.acquirer_key, api.cert_file, api.key_file, api.verify)
    session = pool.get(key)
    if session is None:
        session = http.session()
        session.cert = (api.cert_file, api.key_file) if api.key_file else api.cert_file
        session.verify = api.verify
        session.trust_env = False  # no proxies or netrc from the environment on money calls
        session.headers["User-Agent"] = f"PixService/{settings.SERVICE_VERSION}"
        pool[key] = session
    return session


def client_for(config: AcquirerConfig, options: Mapping[str, Any]) -> ApiClient:
    """An :class:`ApiClient` for an acquirer whose options were cleaned by
    :func:`acquirers.adapters.apipix.options.clean_connection_options`."""
    return ApiClient(settings_for(config, options))


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
        shown_path: str = "",
    ) -> ApiResponse:
        """Call ``base_url + path`` with a bearer token; return the 2xx JSON
        answer or raise an adapter error (see the module docstring).
        ``shown_path``: what logs and error messages name instead of ``path``
        (a path carrying personal data, such as a CPF key)."""
        seconds = budget if budget is not None else self.api.budget
        # Socket timeouts bound each read, not the exchange: the budget is cut
        # at the socket too, also for calls outside acquirers.calls.call (the
        # lookups confirming an inbound notification). Inside a call's own
        # scope the earlier deadline wins.
        with cutoff.scope(seconds):
            return self._request(
                method, path, json_body=json_body, idempotent=idempotent, seconds=seconds, shown_path=shown_path
            )

    def _request(
        self,
        method: str,
        path: str,
        *,
        json_body: Mapping[str, Any] | None,
        idempotent: bool,
        seconds: float,
        shown_path: str = "",
    ) -> ApiResponse:
        deadline = time.monotonic() + seconds
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
                raw = self._send(method, url, headers=headers, body=body, deadline=deadline, shown_path=shown_path)
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
            return self._interpret(method, shown_path or path, raw)

    def access_token(self, deadline: float) -> str:
        """A valid token: from the shared cache, or fetched (one process at a time)."""
        key = auth.token_key(self.api)
        token = auth.cache_get(key)
        if token:
            return token
        lock = key + ":lock"
        holder = auth.cache_add(lock, timeout=int(auth.TOKEN_LOCK_WAIT * 5))
        if not holder:
            # Another process is fetching: wait for its token rather than fetch a second one.
            wait_until = min(deadline, time.monotonic() + auth.TOKEN_LOCK_WAIT)
            while time.monotonic() < wait_until:
                self._sleep(0.05)
                token = auth.cache_get(key)
                if token:
                    return token
        try:
            token, ttl = self._fetch_token(deadline)
            if ttl >= 1:
                auth.cache_set(key, token, ttl)
            return token
        finally:
            if holder:
                auth.cache_delete(lock)

    def drop_token(self, token: str) -> None:
        """Forget ``token`` unless another process already replaced it."""
        key = auth.token_key(self.api)
        if auth.cache_get(key) == token:
            auth.cache_delete(key)

    def _fetch_token(self, deadline: float) -> tuple[str, float]:
        """Over the same mTLS session as the calls. Not retried: it is a POST,
        and the chain or the task retries anyway."""
        headers, body = auth.token_request(self.api)
        raw = self._send("POST", self.api.token_url, headers=headers, body=body, deadline=deadline)
        return auth.token_from_answer(raw.status, raw.body)

    # ------------------------------------------------------------------ transport

    @staticmethod
    def _remaining(deadline: float) -> float:
        return deadline - time.monotonic()

    def _send(
        self,
        method: str,
        url: str,
        *,
        headers: dict[str, str],
        body: bytes | None,
        deadline: float,
        shown_path: str = "",
    ) -> _Raw:
        shown = shown_path or _path(url)
        remaining = self._remaining(deadline)
        if remaining <= 0.01:
            raise HttpTimeout(f"{method} {shown}: no time left in the call's budget")
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
                        raise InvalidResponse(f"{method} {shown}: answer larger than {MAX_BODY_BYTES} bytes")
                    if time.monotonic() > deadline:
                        raise HttpTimeout(f"{method} {shown}: answer not complete within the budget")
            finally:
                response.close()
        except requests.RequestException as exc:
            failure = _failure(method, url, exc)
            if shown_path:  # the exchange's own message may name the URL
                failure.args = (str(failure).replace(_path(url), shown_path),)
            raise failure from None
        latency = int((time.monotonic() - started) * 1000)
        logger.info(
            "acquirer %s: %s %s -> %s in %d ms",
            self.api.acquirer_key,
            method,
            shown,
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

    @staticmethod
    def _interpret(method: str, path: str, raw: _Raw) -> ApiResponse:
        where = f"{method} {path}"
        if 200 <= raw.status < 300:
            data = {} if raw.status == 204 or not raw.body.strip() else json_object(raw.body, where)
            return ApiResponse(raw.status, data, raw.headers)
        raise_for_status(where, raw.status, raw.body)


def _path(url: str) -> str:
    return urlsplit(url).path


def _failure(method: str, url: str, exc: requests.RequestException) -> HttpTimeout | HttpUnavailable:
    """What a failed exchange means for the caller. A connection cut at the
    deadline (core.deadline) is a timeout whatever error the cut surfaced
    as: the request may have reached the PSP, which may act on it."""
    where = f"{method} {_path(url)}"
    active = cutoff.current()
    if active is not None and active.expired:
        return HttpTimeout(f"{where}: cut at the call's deadline")
    if isinstance(exc, requests.exceptions.SSLError):
        # Certificates (ours refused, theirs untrusted): nothing a retry fixes.
        return HttpUnavailable(f"{where}: TLS failure: {exc}", retryable=False)
    if isinstance(exc, requests.exceptions.ConnectTimeout):
        return HttpUnavailable(f"{where}: connect timeout")
    if isinstance(exc, requests.exceptions.ReadTimeout) or (
        isinstance(exc, requests.exceptions.ConnectionError)
        and exc.args
        and isinstance(exc.args[0], urllib3.exceptions.ReadTimeoutError)
    ):
        return HttpTimeout(f"{where}: read timeout")
    if isinstance(exc, requests.exceptions.ConnectionError):
        return HttpUnavailable(f"{where}: connection failed: {type(exc).__name__}")
    return HttpUnavailable(f"{where}: {type(exc).__name__}: {exc}")
