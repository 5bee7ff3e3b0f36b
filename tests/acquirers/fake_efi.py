"""A fake of Efí's "send Pix" API (the part ``efi_pix`` uses), on loopback,
behind mTLS (certificates from ``fake_psp.Pki``, made with trustme).

Efí publishes no OpenAPI document for these endpoints, so requests are
checked here, strictly, against the fields Efí's documentation gives; every
departure is recorded in :attr:`FakeEfi.violations` and the fixture fails the
test on any:

- ``POST /oauth/token``: HTTP Basic ``client_id:client_secret``, JSON body
  exactly ``{"grant_type": "client_credentials"}``;
- ``PUT /v3/gn/pix/{idEnvio}`` (``^[a-zA-Z0-9]{1,35}$``): JSON body with
  exactly ``valor`` (``^\\d{1,10}\\.\\d{2}$``, > 0), ``pagador`` (``chave``, the
  account's key; optional ``infoPagador`` ≤ 140) and ``favorecido``
  (``chave`` ≤ 77; optional ``cpf``/``cnpj``); answers 201 ``EM_PROCESSAMENTO``;
  a reused ``idEnvio`` is a 409 ``id_envio_duplicado`` (as documented);
- ``GET /v2/gn/pix/enviados/id-envio/{idEnvio}``: no body; the send, or a 404
  problem ``PixEnviadoNaoEncontrado``;
- every call with our client certificate, every API call with a token this
  fake issued.

Errors are Efí's own ``{"nome", "mensagem"}``, except the lookup's 404.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import enum
import json
import re
import secrets
import socket
import ssl
import string
import threading
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import requests

from tests.acquirers.fake_psp import Call, Pki

EFI_ISPB = "09089356"
_ALNUM = string.ascii_letters + string.digits
_ID_ENVIO = re.compile(r"^[a-zA-Z0-9]{1,35}$")
_VALOR = re.compile(r"^\d{1,10}\.\d{2}$")
SEND_PREFIX = "/v3/gn/pix/"
STATUS_PREFIX = "/v2/gn/pix/enviados/id-envio/"
OPERATIONS = ("token", "send", "status")


class EfiFault(enum.StrEnum):
    TIMEOUT = "timeout"  # act (record the send), then answer after ``FakeEfi.delay``: too late
    LOST_ANSWER = "lost_answer"  # act, then 500: the answer is lost on the way
    UNAVAILABLE = "unavailable"  # 503, nothing done
    ERROR = "error"  # 500 erro_aplicacao, nothing done
    DECLINED = "declined"  # 422 pagamento_negado, nothing recorded
    INSUFFICIENT = "insufficient"  # 400 saldo_insuficiente, nothing recorded
    FORBIDDEN = "forbidden"  # 403 (scope missing): no answer about the send
    NOT_FOUND_HTML = "not_found_html"  # a 404 that is not Efí's (a proxy's page)
    GARBAGE = "garbage"  # a 2xx that is not JSON
    RESET = "reset"  # close the connection without an answer


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def new_e2e_id() -> str:
    moment = dt.datetime.now(dt.UTC)
    return f"E{EFI_ISPB}{moment:%Y%m%d%H%M}" + "".join(secrets.choice(_ALNUM) for _ in range(11))


def efi_error(nome: str, mensagem: str) -> dict[str, str]:
    return {"nome": nome, "mensagem": mensagem}


NOT_FOUND_PROBLEM = {
    "type": "https://pix.bcb.gov.br/api/v2/error/PixEnviadoNaoEncontrado",
    "title": "Não Encontrado",
    "status": 404,
    "detail": "Pix enviado não encontrado para o idEnvio informado.",
}

_FAULT_ANSWERS: dict[EfiFault, tuple[int, dict[str, Any]]] = {
    EfiFault.UNAVAILABLE: (503, efi_error("servico_indisponivel", "Serviço temporariamente indisponível")),
    EfiFault.ERROR: (500, efi_error("erro_aplicacao", "Ocorreu um erro ao validar a chave")),
    EfiFault.DECLINED: (422, efi_error("pagamento_negado", "Pagamento negado por análises")),
    EfiFault.INSUFFICIENT: (400, efi_error("saldo_insuficiente", "Saldo insuficiente para realizar o envio")),
    EfiFault.FORBIDDEN: (403, efi_error("acesso_negado", "Escopo gn.pix.send.read não liberado")),
}


@dataclass
class FakeEfi:
    pki: Pki
    client_id: str
    client_secret: str
    #: The paying account's key: a send from another key is refused (chave_invalida).
    chave: str
    #: Where callbacks go (our notification URL; Efí appends /pix).
    webhook_url: str = ""
    token_ttl: int = 3600
    #: How late a TIMEOUT fault answers.
    delay: float = 3.0
    #: What a new send becomes right after its 201 EM_PROCESSAMENTO answer:
    #: "processing" (until :meth:`settle`), "paid" (REALIZADO) or "failed" (NAO_REALIZADO).
    outcome: str = "processing"

    sends: dict[str, dict[str, Any]] = field(default_factory=dict)
    tokens: set[str] = field(default_factory=set)
    token_requests: int = 0
    calls: list[Call] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    callbacks: list[tuple[dict[str, Any], int]] = field(default_factory=list)
    faults: dict[str, list[EfiFault]] = field(default_factory=dict)
    lock: threading.RLock = field(default_factory=threading.RLock)
    stopping: threading.Event = field(default_factory=threading.Event)
    url: str = ""

    # ------------------------------------------------------------------ test API

    @property
    def base_url(self) -> str:
        return self.url

    def fail(self, operation: str, *faults: EfiFault) -> None:
        """The next calls of ``operation`` get these faults, in order; then normal service."""
        assert operation in OPERATIONS, operation
        with self.lock:
            self.faults.setdefault(operation, []).extend(faults)

    def calls_of(self, operation: str) -> list[Call]:
        with self.lock:
            return [c for c in self.calls if c.operation == operation]

    def settle(self, id_envio: str, status: str = "REALIZADO", *, notify: bool = False) -> int | None:
        """The send reaches its final status; with ``notify``, the callback
        goes to ``webhook_url + "/pix"`` and our status code is returned."""
        with self.lock:
            _finish(self.sends[id_envio], status)
        return self.notify([id_envio]) if notify else None

    def callback_body(self, ids: list[str]) -> dict[str, Any]:
        """The ``{webhookUrl}/pix`` callback for these sends, as documented."""
        entries = []
        with self.lock:
            for id_envio in ids:
                send = self.sends[id_envio]
                extras: dict[str, Any] = {"idEnvio": id_envio}
                if "gnExtras" in send:
                    extras |= send["gnExtras"]
                entries.append(
                    {
                        "endToEndId": send["endToEndId"],
                        "chave": send["chave"],
                        "tipo": "SOLICITACAO",
                        "status": send["status"],
                        "valor": send["valor"],
                        "horario": send["horario"].get("liquidacao"),
                        "gnExtras": extras,
                    }
                )
        return {"pix": entries}

    def notify(self, ids: list[str]) -> int:
        return self.post_callback(self.callback_body(ids))

    def post_callback(self, payload: Any, *, url: str | None = None) -> int:
        """POST a callback body as Efí would (straight to our server: mTLS
        belongs to the edge) and return our status code."""
        target = (url or self.webhook_url).rstrip("/") + "/pix"
        response = requests.post(target, json=payload, timeout=30)
        with self.lock:
            self.callbacks.append((payload, response.status_code))
        return response.status_code

    # ------------------------------------------------------------------ lifecycle

    @contextlib.contextmanager
    def running(self) -> Iterator[FakeEfi]:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.pki.server.configure_cert(context)
        self.pki.client_ca.configure_trust(context)
        context.verify_mode = ssl.CERT_REQUIRED  # mTLS: no client certificate, no conversation
        fake = self
        open_connections: set[ssl.SSLSocket] = set()

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def finish_request(self, request: Any, client_address: Any) -> None:
                # The TLS handshake on the request's own thread: a stalled client stalls nobody else.
                try:
                    tls = context.wrap_socket(request, server_side=True)
                except (ssl.SSLError, OSError) as exc:
                    with fake.lock:
                        fake.calls.append(Call("tls_refused", "", "", repr(exc), None))
                    return
                with fake.lock:
                    open_connections.add(tls)
                try:
                    Handler(tls, client_address, self)
                finally:
                    with fake.lock:
                        open_connections.discard(tls)
                    with contextlib.suppress(OSError):
                        tls.close()

        server = Server(("127.0.0.1", 0), Handler)
        server.efi = fake  # type: ignore[attr-defined]
        self.url = f"https://127.0.0.1:{server.server_address[1]}"
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self.stopping.set()
            server.shutdown()
            server.server_close()
            # Kept-alive connections end with this fake: a later one may get the same port.
            with self.lock:
                for connection in list(open_connections):
                    with contextlib.suppress(OSError):
                        connection.shutdown(socket.SHUT_RDWR)

    def next_fault(self, operation: str) -> EfiFault | None:
        with self.lock:
            queue = self.faults.get(operation)
            return queue.pop(0) if queue else None


def _finish(send: dict[str, Any], status: str) -> None:
    assert status in ("REALIZADO", "NAO_REALIZADO"), status
    send["status"] = status
    if status == "REALIZADO":
        send["horario"]["liquidacao"] = now_iso()
    else:
        send["gnExtras"] = {
            "erro": {
                "codigo": "AC03",
                "origem": "PSP do usuário recebedor",
                "motivo": "Número da agência e/ou conta transacional do usuário recebedor inexistente ou inválido",
            }
        }


def _operation(method: str, path: str) -> tuple[str | None, str]:
    if path == "/oauth/token" and method == "POST":
        return "token", ""
    if path.startswith(SEND_PREFIX) and method == "PUT":
        return "send", path[len(SEND_PREFIX) :]
    if path.startswith(STATUS_PREFIX) and method == "GET":
        return "status", path[len(STATUS_PREFIX) :]
    return None, ""


def send_body_errors(body: Any) -> list[str]:
    """Departures of a send body from Efí's documented fields (key transfers)."""
    if not isinstance(body, dict):
        return ["body is not a JSON object"]
    errors = []
    if set(body) != {"valor", "pagador", "favorecido"}:
        errors.append(f"body fields {sorted(body)}, expected valor, pagador, favorecido")
    amount = body.get("valor")
    if not isinstance(amount, str) or not _VALOR.match(amount) or int(amount.replace(".", "")) <= 0:
        errors.append(f"valor {amount!r} is not a positive decimal with 2 places")
    pagador = body.get("pagador")
    if not isinstance(pagador, dict) or not set(pagador) <= {"chave", "infoPagador"} or "chave" not in pagador:
        errors.append(f"pagador {pagador!r}: chave and optional infoPagador only")
    elif not isinstance(pagador.get("infoPagador", ""), str) or len(pagador.get("infoPagador", "")) > 140:
        errors.append("pagador.infoPagador is not text of at most 140 characters")
    favorecido = body.get("favorecido")
    if not isinstance(favorecido, dict) or not set(favorecido) <= {"chave", "cpf", "cnpj"} or "chave" not in favorecido:
        errors.append(f"favorecido {favorecido!r}: chave (and optional cpf/cnpj) only")
    elif not isinstance(favorecido["chave"], str) or not 1 <= len(favorecido["chave"]) <= 77:
        errors.append("favorecido.chave is not a key of at most 77 characters")
    return errors


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 30
    server: Any

    def log_message(self, format: str, *args: Any) -> None:
        pass

    @property
    def efi(self) -> FakeEfi:
        return self.server.efi

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_GET(self) -> None:
        self._handle("GET")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    def _handle(self, method: str) -> None:
        efi = self.efi
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        path = urllib.parse.urlsplit(self.path).path
        peer = self.connection.getpeercert() if isinstance(self.connection, ssl.SSLSocket) else None
        operation, id_envio = _operation(method, path)
        try:
            parsed: Any = json.loads(raw) if raw else None
        except ValueError:
            parsed = raw.decode(errors="replace")
        with efi.lock:
            efi.calls.append(Call(operation or "unknown", method, path, parsed, peer))
        if not peer:
            efi.violations.append(f"{method} {path} without a client certificate")
        if operation == "token":
            self._token(raw)
            return
        if operation is None:
            efi.violations.append(f"{method} {path}: not an operation efi_pix should use")
            self._send(404, efi_error("rota_nao_encontrada", "Rota não encontrada"))
            return
        errors = []
        if not _ID_ENVIO.match(id_envio):
            errors.append(f"idEnvio {id_envio!r} does not match ^[a-zA-Z0-9]{{1,35}}$")
        if operation == "send":
            if (self.headers.get("Content-Type") or "").split(";")[0] != "application/json":
                errors.append("send body is not application/json")
            errors += send_body_errors(parsed)
        elif raw:
            errors.append("status lookup with a body")
        if errors:
            efi.violations.extend(f"{method} {path}: {e}" for e in errors)
            self._send(400, efi_error("valor_invalido", "; ".join(errors)[:500]))
            return
        token = (self.headers.get("Authorization") or "").removeprefix("Bearer ")
        if token not in efi.tokens:
            self._send(401, efi_error("nao_autorizado", "Token inválido ou expirado"))
            return
        fault = efi.next_fault(operation)
        if fault is EfiFault.RESET:
            self.close_connection = True
            self.connection.close()
            return
        if fault in _FAULT_ANSWERS:
            self._send(*_FAULT_ANSWERS[fault])
            return
        if fault is EfiFault.NOT_FOUND_HTML:
            self._send_raw(404, b"<html><body>404 Not Found</body></html>", "text/html")
            return
        if fault is EfiFault.GARBAGE:
            self._send_raw(201 if method == "PUT" else 200, b"<html>oops</html>", "text/html")
            return
        status, body = self._send_pix(id_envio, parsed) if operation == "send" else self._status(id_envio)
        if fault is EfiFault.TIMEOUT:
            efi.stopping.wait(efi.delay)
        if fault is EfiFault.LOST_ANSWER:
            self._send(500, efi_error("erro_aplicacao", "Erro interno"))
            return
        self._send(status, body)

    def _send(self, status: int, body: dict[str, Any]) -> None:
        self._send_raw(status, json.dumps(body, ensure_ascii=False).encode(), "application/json")

    def _send_raw(self, status: int, data: bytes, content_type: str) -> None:
        with contextlib.suppress(OSError):
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    # ------------------------------------------------------------------ OAuth2, Efí's form

    def _token(self, raw: bytes) -> None:
        efi = self.efi
        with efi.lock:
            efi.token_requests += 1
        fault = efi.next_fault("token")
        if fault is EfiFault.UNAVAILABLE:
            self._send_raw(503, b'{"error":"temporarily_unavailable"}', "application/json")
            return
        errors = []
        if (self.headers.get("Content-Type") or "").split(";")[0] != "application/json":
            errors.append("token request is not JSON (Efí's form)")
        try:
            fields = json.loads(raw)
        except ValueError:
            fields = None
        if fields != {"grant_type": "client_credentials"}:
            errors.append(f"token body is {fields!r}, expected exactly grant_type client_credentials")
        auth = self.headers.get("Authorization") or ""
        try:
            pair = base64.b64decode(auth.removeprefix("Basic ")).decode()
            client_id, secret = (urllib.parse.unquote(p) for p in pair.split(":", 1))
        except ValueError:
            client_id = secret = ""
        if errors:
            efi.violations.extend(errors)
        if errors or (client_id, secret) != (efi.client_id, efi.client_secret):
            self._send_raw(401, b'{"error":"invalid_client"}', "application/json")
            return
        token = secrets.token_urlsafe(24)
        with efi.lock:
            efi.tokens.add(token)
        body = {"access_token": token, "token_type": "Bearer", "expires_in": efi.token_ttl, "scope": "pix.send"}
        self._send_raw(200, json.dumps(body).encode(), "application/json")

    # ------------------------------------------------------------------ send and lookup

    def _send_pix(self, id_envio: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        efi = self.efi
        with efi.lock:
            if id_envio in efi.sends:
                return 409, efi_error(
                    "id_envio_duplicado", "O id de envio informado já foi utilizado em outro pagamento"
                )
            if body["pagador"]["chave"] != efi.chave:
                return 400, efi_error("chave_invalida", "A chave informada não faz referência à conta Efí autenticada")
            send: dict[str, Any] = {
                "endToEndId": new_e2e_id(),
                "idEnvio": id_envio,
                "valor": body["valor"],
                "chave": efi.chave,
                "status": "EM_PROCESSAMENTO",
                "horario": {"solicitacao": now_iso()},
                "favorecido": {"chave": body["favorecido"]["chave"]},
            }
            if "infoPagador" in body["pagador"]:
                send["infoPagador"] = body["pagador"]["infoPagador"]
            efi.sends[id_envio] = send
            answer = {
                "idEnvio": id_envio,
                "e2eId": send["endToEndId"],
                "valor": send["valor"],
                "horario": {"solicitacao": send["horario"]["solicitacao"]},
                "status": "EM_PROCESSAMENTO",
            }
            if efi.outcome != "processing":
                _finish(send, "REALIZADO" if efi.outcome == "paid" else "NAO_REALIZADO")
            return 201, answer

    def _status(self, id_envio: str) -> tuple[int, dict[str, Any]]:
        with self.efi.lock:
            send = self.efi.sends.get(id_envio)
            if send is None:
                return 404, NOT_FOUND_PROBLEM
            return 200, json.loads(json.dumps(send))
