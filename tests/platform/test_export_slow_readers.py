"""A client that stops reading an export pins nothing (issue 29 §3).

gunicorn as deployed (gthread), a pool of only 2 PostgreSQL connections
that a request waits at most 2 s for. Two clients with one merchant's key
ask for a withdrawals CSV of a few MB, read the response's headers and stop
reading, their sockets left open (their receive buffers made small, so the
server's writes block at once). Before the fix each export kept its pooled
connection (a server-side cursor) for as long as the socket stayed open:
the pool was full and every other tenant's request got a 500 after the
pool's timeout. Now rows are read in keyset batches with the connection
given back between them, so other accounts are served throughout; a third
export of the same credential is refused (429, the per-credential cap);
after the send timeout the stalled responses are cut, their sockets closed
and their slots given back, and the merchant exports again."""

from __future__ import annotations

import functools
import socket
import urllib.parse
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
from django.db import connection

from accounts.models import Account, ApiCredential
from accounts.services import credential_issue
from core.gunicorn_logging import SEND_TIMEOUT_WARNING
from tests.factories import AccountFactory, WithdrawalFactory
from tests.realworld import POOL_OF_TWO, WebServer, run_concurrently, wait_for, web_server
from withdrawals.models import Withdrawal

# gunicorn is another process: it sees only committed rows.
pytestmark = pytest.mark.django_db(transaction=True)

SEND_TIMEOUT = 4
#: Rows of the big export: ~150 bytes each, some 6 MB, far past what the
#: kernel's socket buffers hold on either side.
ROWS = 40_000
MARCH = {"created_at_start": "2025-03-01 00:00:00", "created_at_end": "2025-03-31 23:59:59"}
EXPORT = "/api/withdrawals.csv?" + urllib.parse.urlencode(MARCH)
TOO_MANY = {
    "success": False,
    "message": "Limite de exportações simultâneas atingido para esta credencial. "
    "Aguarde o término de uma exportação em andamento e tente novamente.",
    "data": None,
}


@pytest.fixture
def web(transactional_db: Any, tmp_path: Path) -> Iterator[WebServer]:
    env = {**POOL_OF_TWO, "API_EXPORTS_PER_CREDENTIAL": "2", "EXPORT_SEND_TIMEOUT": str(SEND_TIMEOUT)}
    # The deployed configuration (its logger), with one worker of 8 threads.
    config = ("--config", "config/gunicorn.conf.py")
    with web_server(str(connection.settings_dict["NAME"]), tmp_path, env=env, threads=8, args=config) as server:
        yield server


@pytest.fixture
def sockets() -> Iterator[list[socket.socket]]:
    """The slow readers' sockets, closed however the test ends (a stalled
    response keeps a gunicorn thread until its client goes)."""
    opened: list[socket.socket] = []
    yield opened
    for sock in opened:
        sock.close()


def keys(account: Account) -> dict[str, str]:
    issued = credential_issue(account=account, permission=ApiCredential.Permission.ALL)
    return {"X-Public-Key": issued.credential.public_key, "X-Secret-Key": issued.secret_key}


def many_withdrawals(account: Account, count: int) -> None:
    """``count`` withdrawals spread over March 2025, in a few statements."""
    template = WithdrawalFactory.build(account=account, pix_key_type="email")
    rows = []
    for n in range(count):
        row = Withdrawal(**{f.attname: getattr(template, f.attname) for f in Withdrawal._meta.concrete_fields})
        row.pk = uuid.uuid4()
        row.idempotency_id = f"slow{n:028d}"
        row.pix_key = f"pagamentos.fornecedor.{n:08d}@empresa-de-exemplo-com-nome-longo.com.br"
        rows.append(row)
    Withdrawal.objects.bulk_create(rows, batch_size=5000)
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE withdrawals_withdrawal SET created_at = "
            "timestamptz '2025-03-02 00:00:00-03' + random() * interval '25 days' WHERE account_id = %s",
            [account.pk],
        )


@dataclass
class SlowReader:
    """An HTTP/1.1 client that reads a response's status line and headers and
    then stops reading, its socket left open."""

    sock: socket.socket
    head: bytes

    @classmethod
    def open(cls, web: WebServer, path: str, headers: dict[str, str], sockets: list[socket.socket]) -> SlowReader:
        url = urllib.parse.urlsplit(web.url)
        sock = socket.socket()
        sockets.append(sock)
        # A small receive buffer (set before connecting: it sets the window
        # offered): the server's writes block after a few KB, not MB.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.settimeout(30)
        sock.connect((url.hostname, url.port))
        lines = [f"GET {path} HTTP/1.1", f"Host: {url.netloc}", *(f"{k}: {v}" for k, v in headers.items())]
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        head = b""
        while not head.endswith(b"\r\n\r\n"):
            byte = sock.recv(1)
            assert byte, head
            head += byte
        return cls(sock, head)

    def rest(self) -> bytes:
        """Everything the server still sends until it closes the connection."""
        body = b""
        try:
            while chunk := self.sock.recv(65536):
                body += chunk
        except ConnectionResetError:
            pass
        self.sock.close()
        return body


def test_readers_that_stop_reading_pin_no_connection_and_are_cut_after_the_send_timeout(
    web: WebServer, sockets: list[socket.socket]
) -> None:
    merchant, others = AccountFactory(), [AccountFactory(), AccountFactory()]
    many_withdrawals(merchant, ROWS)
    for other in others:
        WithdrawalFactory(account=other, created_at=Withdrawal.objects.filter(account=merchant)[0].created_at)
    merchant_keys, other_keys = keys(merchant), [keys(other) for other in others]
    assert requests.get(f"{web.url}/api/withdrawals/balance", headers=other_keys[0], timeout=10).status_code == 200

    readers = [SlowReader.open(web, EXPORT, merchant_keys, sockets) for _ in range(2)]
    assert [reader.head.split(b"\r\n")[0] for reader in readers] == [b"HTTP/1.1 200 OK"] * 2

    # The pool has 2 connections and two exports stalled on their clients:
    # other accounts are served all the same, each request well within the
    # pool's 2 s timeout.
    def other_request(n: int) -> requests.Response:
        path = ("/api/withdrawals/balance", "/api/withdrawals", "/api/statement")[n % 3]
        return requests.get(f"{web.url}{path}", headers=other_keys[n % 2], timeout=30)

    served = run_concurrently([functools.partial(other_request, n) for n in range(6)])
    statuses = [r.status_code if isinstance(r, requests.Response) else repr(r) for r in served]
    assert statuses == [200] * 6, web.output()[-3000:]

    # The merchant's credential holds its 2 export slots: a third is refused.
    third = requests.get(f"{web.url}{EXPORT}", headers=merchant_keys, timeout=30)
    assert third.status_code == 429
    assert third.json() == TOO_MANY
    assert int(third.headers["Retry-After"]) >= 1

    # After the send timeout both stalled responses are cut and their slots
    # given back: two exports of the same credential are served, whole.
    def two_whole_exports() -> bool:
        answers = run_concurrently([lambda: requests.get(f"{web.url}{EXPORT}", headers=merchant_keys, timeout=60)] * 2)
        if any(isinstance(a, requests.Response) and a.status_code == 429 for a in answers):
            return False
        assert [a.status_code for a in answers] == [200, 200], answers
        assert [a.text.count("\n") for a in answers] == [ROWS + 1] * 2
        return True

    wait_for(two_whole_exports, timeout=SEND_TIMEOUT + 60, interval=0.5)

    # Their connections were closed by the server mid-file: what was still in
    # flight arrives, then the end of the connection, never the chunked
    # body's last chunk (a zero-size chunk after the previous chunk's CRLF:
    # a chunk whose CSV line ends in "0" ends in "0\r\n\r\n" too).
    for reader in readers:
        body = reader.rest()
        assert not body.endswith(b"\r\n0\r\n\r\n")
        assert len(body) < ROWS * 100
    assert "PoolTimeout" not in web.output()
    # Each cut is one warning line, not a traceback.
    assert web.output().count(SEND_TIMEOUT_WARNING) == 2, web.output()[-3000:]
    assert "Traceback" not in web.output()
