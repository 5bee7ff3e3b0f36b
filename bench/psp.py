"""A lean API Pix PSP for the isolation benchmarks, in a process of its own
(so its CPU is not counted in the server's): the part of Banco Central's API
Pix the ``bacen_pix`` adapter uses to create a charge, behind mTLS as a real
PSP, answering after a chosen delay.

The delay is in the base URL: an acquirer whose ``base_url`` is
``https://127.0.0.1:PORT/d300/api`` is a PSP answering in 300 ms, so one
process serves the instant and the slow acquirers alike. Unlike
``tests/acquirers/fake_psp.py`` nothing is validated against the OpenAPI
document (that costs milliseconds of CPU per call, which would be taken from
the server measured); the contract tests do that.

    python -m bench.psp --cert C --key K --client-ca CA   # prints "port N", serves until killed
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import secrets
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import trustme

from acquirers import brcode

ROOT = Path(__file__).resolve().parent.parent
TOKEN_PATH = "/oauth/token"  # noqa: S105 - a path
_COB = re.compile(r"^/d(\d{1,6})/api/cob/([A-Za-z0-9]{26,35})$")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the adapter's pooled sessions expect
    timeout = 120

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _answer(self, status: int, body: dict[str, Any], content_type: str = "application/json") -> None:
        data = json.dumps(body).encode()
        # The caller may have hung up at its deadline: nothing to answer then.
        with contextlib.suppress(OSError):
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def do_POST(self) -> None:
        self._body()
        if self.path != TOKEN_PATH:
            self._answer(404, {"title": "Não encontrado", "status": 404}, "application/problem+json")
            return
        token = {"access_token": secrets.token_urlsafe(24), "token_type": "Bearer", "expires_in": 3600}
        self._answer(200, token)

    def do_PUT(self) -> None:
        raw = self._body()
        match = _COB.match(self.path)
        if match is None or not (self.headers.get("Authorization") or "").startswith("Bearer "):
            self._answer(404, {"title": "Não encontrado", "status": 404}, "application/problem+json")
            return
        time.sleep(int(match.group(1)) / 1000)
        body = json.loads(raw)
        txid = match.group(2)
        location = f"pix.benchpsp.test/qr/v2/{secrets.token_hex(16)}"
        amount = int(body["valor"]["original"].replace(".", ""))
        emv = brcode.encode_dynamic(
            location=location, amount=amount, merchant_name="BENCH PSP", merchant_city="SAO PAULO"
        )
        created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        cob = {
            "calendario": {"criacao": created, "expiracao": body["calendario"].get("expiracao", 86400)},
            "txid": txid,
            "revisao": 0,
            "location": location,
            "status": "ATIVA",
            "valor": {"original": body["valor"]["original"]},
            "chave": body["chave"],
            "pixCopiaECola": emv,
        }
        self._answer(201, cob)

    def do_GET(self) -> None:
        self._answer(404, {"title": "Cobrança não encontrada", "status": 404}, "application/problem+json")


def serve(cert: str, key: str, client_ca: str) -> None:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    context.load_verify_locations(client_ca)
    context.verify_mode = ssl.CERT_REQUIRED  # mTLS, as a real PSP

    class Server(ThreadingHTTPServer):
        daemon_threads = True
        request_queue_size = 1024

        def finish_request(self, request: Any, client_address: Any) -> None:
            # An answer leaves in two writes (headers, then body): with Nagle's
            # algorithm on, the body waits for the client's ACK of the headers,
            # which Linux delays up to 40 ms. Real servers turn it off, so does this.
            request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            # The handshake on the connection's own thread: one slow client stalls no other.
            try:
                tls = context.wrap_socket(request, server_side=True)
            except (ssl.SSLError, OSError):
                return
            try:
                Handler(tls, client_address, self)
            finally:
                with contextlib.suppress(OSError):
                    tls.close()

    server = Server(("127.0.0.1", 0), Handler)
    print(f"port {server.server_address[1]}", flush=True)
    server.serve_forever(poll_interval=0.2)


@dataclass(frozen=True)
class Psp:
    url: str
    #: Options of a ``bacen_pix`` acquirer at this PSP, without the delay (see :meth:`options`).
    folder: Path
    client_secret_env: str

    def options(self, delay_ms: int) -> dict[str, Any]:
        return {
            "base_url": f"{self.url}/d{delay_ms}/api",
            "token_url": self.url + TOKEN_PATH,
            "client_id": "bench-isolation",
            "client_secret_env": self.client_secret_env,
            "cert_path": str(self.folder / "client.pem"),
            "key_path": str(self.folder / "client.key"),
            "ca_bundle_path": str(self.folder / "ca.pem"),
            "chave": "7d9f0335-8dcc-4054-9bf9-0dbd61d36906",
        }


@contextlib.contextmanager
def running(folder: Path, env: dict[str, str], client_secret_env: str) -> Iterator[Psp]:
    """The PSP in its own process, with certificates made here (in ``folder``):
    the server's, signed by a CA the service trusts, and the service's client
    certificate. ``env[client_secret_env]`` is set to a new client secret."""
    psp_ca, client_ca = trustme.CA(), trustme.CA()
    server, client = psp_ca.issue_cert("127.0.0.1"), client_ca.issue_cert("pix-service.bench")
    server.cert_chain_pems[0].write_to_path(str(folder / "server.pem"))
    for blob in server.cert_chain_pems[1:]:
        blob.write_to_path(str(folder / "server.pem"), append=True)
    server.private_key_pem.write_to_path(str(folder / "server.key"))
    client.cert_chain_pems[0].write_to_path(str(folder / "client.pem"))
    client.private_key_pem.write_to_path(str(folder / "client.key"))
    psp_ca.cert_pem.write_to_path(str(folder / "ca.pem"))
    client_ca.cert_pem.write_to_path(str(folder / "client-ca.pem"))
    env[client_secret_env] = secrets.token_urlsafe(24)
    command = [
        sys.executable, "-m", "bench.psp",
        "--cert", str(folder / "server.pem"), "--key", str(folder / "server.key"),
        "--client-ca", str(folder / "client-ca.pem"),
    ]  # fmt: skip
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line.startswith("port "):
            raise RuntimeError(f"the bench PSP did not start: {line!r}")
        port = int(line.split()[1])
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass
        yield Psp(f"https://127.0.0.1:{port}", folder, client_secret_env)
    finally:
        process.terminate()
        process.wait(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--client-ca", required=True)
    args = parser.parse_args()
    serve(args.cert, args.key, args.client_ca)


if __name__ == "__main__":
    main()
