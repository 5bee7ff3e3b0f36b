"""What the fake PSPs (``fake_psp``: Banco Central's API Pix; ``fake_efi``:
Efí's send-Pix API) share: the certificates, an mTLS HTTP server on
loopback that records every call, queued fault modes, the OAuth2 client
credentials token endpoint and the callbacks they POST to our service.

Each fake subclasses :class:`FakeServer` (its state and test API) and
:class:`FakeHandler` (its routes and answers).
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import enum
import json
import secrets
import select
import socket
import ssl
import string
import threading
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar, Generic, Self, TypeVar

import requests
import trustme

_ALNUM = string.ascii_letters + string.digits
TOKEN_PATH = "/oauth/token"


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def new_e2e_id(ispb: str) -> str:
    """``E`` + ISPB + ``yyyyMMddHHmm`` (UTC) + 11 random characters."""
    moment = dt.datetime.now(dt.UTC)
    return f"E{ispb}{moment:%Y%m%d%H%M}" + "".join(secrets.choice(_ALNUM) for _ in range(11))


@dataclass
class Call:
    operation: str
    method: str
    path: str
    body: Any
    client_cert: dict[str, Any] | None
    query: str = ""


# --------------------------------------------------------------------------- certificates


@dataclass(frozen=True)
class Pki:
    """The PSP's CA and server certificate, the CA that signs our client
    certificates, our client certificate, and one from a CA nobody trusts."""

    psp_ca: trustme.CA
    server: trustme.LeafCert
    client_ca: trustme.CA
    client: trustme.LeafCert
    rogue: trustme.LeafCert

    @classmethod
    def create(cls) -> Pki:
        psp_ca, client_ca, rogue_ca = trustme.CA(), trustme.CA(), trustme.CA()
        return cls(
            psp_ca=psp_ca,
            server=psp_ca.issue_cert("127.0.0.1", "localhost"),
            client_ca=client_ca,
            client=client_ca.issue_cert("pix-service.test", common_name="pix-service"),
            rogue=rogue_ca.issue_cert("intruder.test", common_name="intruder"),
        )

    @staticmethod
    def cert_pem(leaf: trustme.LeafCert) -> str:
        return b"".join(blob.bytes() for blob in leaf.cert_chain_pems).decode()

    @staticmethod
    def key_pem(leaf: trustme.LeafCert) -> str:
        return leaf.private_key_pem.bytes().decode()


# --------------------------------------------------------------------------- the server

FaultT = TypeVar("FaultT", bound=enum.StrEnum)


@dataclass
class FakeServer(Generic[FaultT]):
    pki: Pki
    client_id: str
    client_secret: str
    #: The account's Pix key at the PSP.
    chave: str
    #: Where callbacks go (our notification URL; the PSP appends /pix).
    webhook_url: str = ""
    token_ttl: int = 3600
    #: How late a TIMEOUT fault answers.
    delay: float = 3.0
    #: A DRIP fault sends a byte this often, for at most ``drip_lifetime`` seconds.
    drip_interval: float = 0.2
    drip_lifetime: float = 10.0

    #: TLS connections accepted, and late or drip-fed answers the client hung up on.
    connections: int = 0
    hung_up: int = 0

    tokens: set[str] = field(default_factory=set)
    token_requests: int = 0
    calls: list[Call] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    callbacks: list[tuple[dict[str, Any], int]] = field(default_factory=list)
    faults: dict[str, list[FaultT]] = field(default_factory=dict)
    lock: threading.RLock = field(default_factory=threading.RLock)
    stopping: threading.Event = field(default_factory=threading.Event)
    url: str = ""

    #: Operations faults can target.
    operations: ClassVar[tuple[str, ...]] = ()

    def handler(self) -> type[FakeHandler]:
        """The request handler of this fake."""
        raise NotImplementedError

    def warm_up(self) -> None:
        """Work done before the server takes its first request, not during it."""

    # ------------------------------------------------------------------ test API

    def fail(self, operation: str, *faults: FaultT) -> None:
        """The next calls of ``operation`` get these faults, in order; then normal service."""
        assert operation in self.operations, operation
        with self.lock:
            self.faults.setdefault(operation, []).extend(faults)

    def calls_of(self, operation: str) -> list[Call]:
        with self.lock:
            return [c for c in self.calls if c.operation == operation]

    def next_fault(self, operation: str) -> FaultT | None:
        with self.lock:
            queue = self.faults.get(operation)
            return queue.pop(0) if queue else None

    def post_callback(self, payload: Any, *, url: str | None = None, suffix: str = "/pix") -> int:
        """POST a callback body to ``url`` (by default ``webhook_url``) +
        ``suffix`` as the PSP would (``/pix``; Pix Automático's ``/rec`` and
        ``/cobr``), straight to our server (mTLS belongs to the edge), and
        return our status code."""
        target = (url or self.webhook_url).rstrip("/") + suffix
        response = requests.post(target, json=payload, timeout=30)
        with self.lock:
            self.callbacks.append((payload, response.status_code))
        return response.status_code

    # ------------------------------------------------------------------ lifecycle

    @contextlib.contextmanager
    def running(self) -> Iterator[Self]:
        self.warm_up()
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.pki.server.configure_cert(context)
        self.pki.client_ca.configure_trust(context)
        context.verify_mode = ssl.CERT_REQUIRED  # mTLS: no client certificate, no conversation
        fake = self
        handler = self.handler()
        open_connections: set[ssl.SSLSocket] = set()

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            request_queue_size = 128  # many callers connecting at once are queued, not refused

            def finish_request(self, request: Any, client_address: Any) -> None:
                # Answers leave in two writes (headers, then body): with Nagle's
                # algorithm on, the body would wait for the client's delayed ACK
                # of the headers (up to 40 ms on Linux). Real servers turn it off.
                request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                # The TLS handshake happens here, on the request's own thread,
                # so a client that never finishes it cannot stall the others.
                try:
                    tls = context.wrap_socket(request, server_side=True)
                except (ssl.SSLError, OSError) as exc:
                    with fake.lock:
                        fake.calls.append(Call("tls_refused", "", "", repr(exc), None))
                    return
                with fake.lock:
                    open_connections.add(tls)
                    fake.connections += 1
                try:
                    handler(tls, client_address, self)
                finally:
                    with fake.lock:
                        open_connections.discard(tls)
                    with contextlib.suppress(OSError):
                        tls.close()

        server = Server(("127.0.0.1", 0), handler)
        server.fake = fake  # type: ignore[attr-defined]
        self.url = f"https://127.0.0.1:{server.server_address[1]}"
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self.stopping.set()
            server.shutdown()
            server.server_close()
            # Kept-alive connections end with this fake: a client's pool must
            # never reach it again (a later fake may get the same port).
            with self.lock:
                for connection in list(open_connections):
                    with contextlib.suppress(OSError):
                        connection.shutdown(socket.SHUT_RDWR)


@dataclass(frozen=True)
class Incoming:
    """A request as read off the wire."""

    method: str
    path: str
    query: str
    raw: bytes
    #: The body as JSON, or as text when it is not JSON; None when empty.
    body: Any
    peer: Any


class FakeHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as real PSPs (and the client's pooling) expect
    timeout = 30  # an idle kept-alive connection ends, and its thread with it
    server: Any

    def log_message(self, format: str, *args: Any) -> None:
        pass

    @property
    def fake(self) -> FakeServer[Any]:
        return self.server.fake

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_GET(self) -> None:
        self._handle("GET")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    def _handle(self, method: str) -> None:
        raise NotImplementedError

    # ------------------------------------------------------------------ plumbing

    def _receive(self, method: str) -> Incoming:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        parts = urllib.parse.urlsplit(self.path)
        peer = self.connection.getpeercert() if isinstance(self.connection, ssl.SSLSocket) else None
        try:
            parsed: Any = json.loads(raw) if raw else None
        except ValueError:
            parsed = raw.decode(errors="replace")
        return Incoming(method, parts.path, parts.query, raw, parsed, peer)

    def _record(self, operation: str | None, incoming: Incoming) -> None:
        """Every call is recorded; one without our client certificate is a violation."""
        fake = self.fake
        with fake.lock:
            fake.calls.append(
                Call(
                    operation or "unknown",
                    incoming.method,
                    incoming.path,
                    incoming.body,
                    incoming.peer,
                    incoming.query,
                )
            )
        if not incoming.peer:
            fake.violations.append(f"{incoming.method} {incoming.path} without a client certificate")

    def _media_type(self) -> str:
        return (self.headers.get("Content-Type") or "").split(";")[0]

    def _hang_up(self) -> None:
        """Close the connection without an answer."""
        self.close_connection = True
        self.connection.close()

    def _linger(self, seconds: float) -> None:
        """Wait ``seconds`` before answering, noting in ``hung_up`` a client
        that closes the connection meanwhile (it sends nothing else while it
        waits for the answer: a readable socket is its end)."""
        fake = self.fake
        ends = time.monotonic() + seconds
        noted = False
        while not fake.stopping.is_set() and (left := ends - time.monotonic()) > 0:
            readable, _, _ = select.select([self.connection], [], [], min(left, 0.05))
            if readable and not noted:
                noted = True
                with fake.lock:
                    fake.hung_up += 1
            if noted:
                fake.stopping.wait(max(0.0, ends - time.monotonic()))

    def _drip(self) -> None:
        """A status line, then a header that never ends: one byte per tick,
        each well within any read timeout, until the client hangs up (counted
        in ``hung_up``) or ``drip_lifetime`` passes."""
        fake = self.fake
        self.close_connection = True
        ends = time.monotonic() + fake.drip_lifetime
        answer = b"HTTP/1.1 200 OK\r\nX-Drip: "
        sent = 0
        try:
            while time.monotonic() < ends:
                self.connection.sendall(answer[sent : sent + 1] if sent < len(answer) else b"a")
                sent += 1
                if fake.stopping.wait(fake.drip_interval):
                    return
        except OSError:
            with fake.lock:
                fake.hung_up += 1

    def _send_garbage(self, method: str) -> None:
        """A 2xx that is not JSON."""
        self._send_raw(201 if method == "PUT" else 200, b"<html>oops</html>", "text/html")

    def _send_raw(self, status: int, data: bytes, content_type: str) -> None:
        with contextlib.suppress(OSError):
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    # ------------------------------------------------------------------ OAuth2 client credentials (RFC 6749 §4.4)

    def _token_form(self, raw: bytes) -> tuple[list[str], str]:
        """Departures of the token request's body from this PSP's form, and
        the scope to grant."""
        raise NotImplementedError

    def _token(self, raw: bytes) -> None:
        fake = self.fake
        with fake.lock:
            fake.token_requests += 1
        fault = fake.next_fault("token")
        if fault == "unavailable":
            self._send_raw(503, b'{"error":"temporarily_unavailable"}', "application/json")
            return
        errors, scope = self._token_form(raw)
        auth = self.headers.get("Authorization") or ""
        try:
            pair = base64.b64decode(auth.removeprefix("Basic ")).decode()
            client_id, secret = (urllib.parse.unquote(p) for p in pair.split(":", 1))
        except ValueError:
            client_id = secret = ""
        if errors:
            fake.violations.extend(errors)
        if errors or (client_id, secret) != (fake.client_id, fake.client_secret):
            self._send_raw(401, b'{"error":"invalid_client"}', "application/json")
            return
        token = secrets.token_urlsafe(24)
        with fake.lock:
            fake.tokens.add(token)
        body = {"access_token": token, "token_type": "Bearer", "expires_in": fake.token_ttl, "scope": scope}
        self._send_raw(200, json.dumps(body).encode(), "application/json")
