"""Outbound HTTP for webhooks and postbacks, safe against SSRF.

``requests-hardened`` resolves the host, refuses loopback, private,
link-local, CGNAT, ULA, multicast and reserved addresses, connects to the
address it checked (no second DNS lookup an attacker could race) and never
follows redirects. ``WEBHOOKS_ALLOW_PRIVATE_NETWORKS`` turns the address
filter off for development and tests only.

Socket timeouts bound each read, not the exchange: a receiver that drips one
byte a second would hold the call for ever. Its total deadline is enforced
at the socket (:mod:`core.deadline`): the process's watchdog shuts the
connection down at the deadline, so the blocked read in the calling thread
fails at once and nothing outlives the call.
"""

from __future__ import annotations

import ipaddress
import socket
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

import requests
import urllib3
from django.conf import settings
from requests_hardened import Config, Manager
from requests_hardened.ip_filter import EXTRA_BLOCKED_NET_RANGES

from core import deadline, http

RESPONSE_BODY_LIMIT = 4096

URL_NOT_ALLOWED = "URL não permitida: o endereço é local, privado ou reservado."
URL_INVALID = "Informe uma URL http ou https válida."
URL_HTTPS_REQUIRED = "A URL deve usar https: os eventos levam dados do pagador."


@dataclass(frozen=True)
class HttpResult:
    status_code: int | None
    latency_ms: int
    body: str = ""
    error: str = ""
    retry_after: float | None = None

    @property
    def succeeded(self) -> bool:
        # Any 2xx; a 3xx is a failure because redirects are never followed.
        return self.status_code is not None and 200 <= self.status_code < 300


def _manager() -> Manager:
    return Manager(
        Config(
            ip_filter_enable=not settings.WEBHOOKS_ALLOW_PRIVATE_NETWORKS,
            ip_filter_allow_loopback_ips=False,
            never_redirect=True,
            default_timeout=(settings.WEBHOOK_CONNECT_TIMEOUT, settings.WEBHOOK_TIMEOUT),
            user_agent_override=settings.WEBHOOK_USER_AGENT,
        )
    )


def post(url: str, body: bytes, headers: dict[str, str]) -> HttpResult:
    """POST and report; never raises for network or HTTP failures. The whole
    exchange, connection included, must end within the total timeout: a
    receiver that answers later, however slowly it drips, failed the attempt
    and its connection is closed at the deadline."""
    if not settings.WEBHOOKS_ALLOW_PRIVATE_NETWORKS and urlsplit(url).scheme != "https":
        # Stored before https was required, or by a path that skipped the
        # check: the payload (PIX keys) never leaves in clear text.
        return HttpResult(status_code=None, latency_ms=0, error=URL_HTTPS_REQUIRED)
    started = time.monotonic()
    budget = settings.WEBHOOK_TIMEOUT
    timed_out = f"Timeout: no complete answer within {budget:.0f}s"
    with deadline.scope(budget) as cutoff:
        try:
            result = _post(url, body, headers, started)
        except (requests.RequestException, urllib3.exceptions.HTTPError, OSError) as exc:
            latency_ms = int((time.monotonic() - started) * 1000)
            if cutoff.expired:
                return HttpResult(status_code=None, latency_ms=latency_ms, error=timed_out)
            return HttpResult(status_code=None, latency_ms=latency_ms, error=_describe(exc)[:500])
        if cutoff.fired:
            # The cut can read as the end of an answer (a dripped header ended
            # by the closed connection): nothing read then counts.
            return HttpResult(status_code=None, latency_ms=result.latency_ms, error=timed_out)
        return result


def _post(url: str, body: bytes, headers: dict[str, str], started: float) -> HttpResult:
    with _manager().get_session() as session:
        # The hardened adapters keep their address filter; their pools become cuttable.
        http.watch(session)
        response = session.post(url, data=body, headers=headers, stream=True)
        try:
            chunks: list[bytes] = []
            size = 0
            # Keep at most 4 KiB of the answer; the cutoff ends a slow one.
            for chunk in response.iter_content(1024):
                chunks.append(chunk)
                size += len(chunk)
                if size >= RESPONSE_BODY_LIMIT:
                    break
            text = b"".join(chunks)[:RESPONSE_BODY_LIMIT].decode("utf-8", errors="replace")
        finally:
            response.close()
    return HttpResult(
        status_code=response.status_code,
        latency_ms=int((time.monotonic() - started) * 1000),
        body=text,
        retry_after=_retry_after(response),
    )


def _retry_after(response: requests.Response) -> float | None:
    if response.status_code not in (429, 503):
        return None
    value = response.headers.get("Retry-After", "")
    if value.strip().isascii() and value.strip().isdigit():
        return float(value.strip())
    try:
        from email.utils import parsedate_to_datetime

        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def _describe(exc: BaseException) -> str:
    name = type(exc).__name__
    if name == "InvalidIPAddress":
        return "blocked: destination address is not public"
    return f"{name}: {exc}"


def _forbidden(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return (not ip.is_global) or ip.is_multicast or any(ip in net for net in EXTRA_BLOCKED_NET_RANGES)


def url_refusal(url: str) -> str | None:
    """Why ``url`` may not be registered, or None. Names that do not resolve
    now are accepted; every delivery checks the address again. Where private
    networks are refused (production), so is plain http: payloads carry PIX
    keys (CPF, phone, e-mail)."""
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:  # out of 0-65535
        return URL_INVALID
    if parts.scheme not in ("http", "https") or not parts.hostname or port == 0:
        return URL_INVALID
    if settings.WEBHOOKS_ALLOW_PRIVATE_NETWORKS:
        return None
    if _resolves_to_a_forbidden_address(parts.hostname, port or 443):
        return URL_NOT_ALLOWED
    if parts.scheme != "https":
        return URL_HTTPS_REQUIRED
    return None


def _resolves_to_a_forbidden_address(hostname: str, port: int) -> bool:
    try:
        infos = socket.getaddrinfo(hostname, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        return False
    return any(_forbidden(ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])) for info in infos)
