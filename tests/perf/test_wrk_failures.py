"""The isolation bench's rows say how they failed, not only how often:
wrk, run for real against a loopback server that refuses some requests
with the API's error envelope, reports its failed answers by status and
message, and those add up to wrk's own non-2xx count."""

from __future__ import annotations

import http.server
import json
import shutil
import threading
from collections.abc import Iterator

import pytest

from bench import wrk
from tests.realworld import serving

pytestmark = pytest.mark.skipif(shutil.which("wrk") is None, reason="wrk is not installed (make bench installs it)")

BUSY = "Adquirente ocupado: tente de novo em instantes."


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    served = 0
    lock = threading.Lock()

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        with _Handler.lock:
            _Handler.served += 1
            n = _Handler.served
        if self.path == "/missing":
            status, body = 404, {"success": False, "message": "Não encontrado."}
        elif n % 3 == 0:
            status, body = 503, {"success": False, "message": BUSY}
        elif n % 3 == 1:
            status, body = 201, {"success": True, "message": "ok"}
        else:
            status, body = 500, {"detail": "no envelope"}
        data = json.dumps(body, ensure_ascii=False).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    with serving(_Handler, on_stop=lambda: None) as port:
        yield f"http://127.0.0.1:{port}"


def _load(base: str, **options: object) -> wrk.Load:
    load = wrk.Load("t", base, "/charges", {"Content-Type": "application/json"}, "{}", threads=2, connections=2)
    load.seconds = 1
    for key, value in options.items():
        setattr(load, key, value)
    return load


def test_failed_answers_are_counted_by_status_and_message(server: str) -> None:
    result = wrk.run(_load(server, count_failures=True))

    assert result.non_2xx > 0
    assert set(result.failures) == {f"503 {BUSY}", "500"}
    assert sum(result.failures.values()) == result.non_2xx
    assert result.requests - result.non_2xx > 0  # the 201s are not counted as failures


def test_a_rotation_counts_its_failures_too(server: str) -> None:
    rotation = [
        wrk.Request("POST", "/charges", {"Content-Type": "application/json"}, "{}"),
        wrk.Request("POST", "/missing", {"Content-Type": "application/json"}, "{}"),
    ]
    result = wrk.run(_load(server, rotation=rotation, count_failures=True))

    assert "404 Não encontrado." in result.failures
    assert sum(result.failures.values()) == result.non_2xx


def test_combined_rounds_sum_their_failures(server: str) -> None:
    rounds = [wrk.run(_load(server, count_failures=True)) for _ in range(2)]
    combined = wrk.combine("both", rounds)

    assert combined.failures[f"503 {BUSY}"] == sum(r.failures[f"503 {BUSY}"] for r in rounds)
    assert combined.non_2xx == sum(r.non_2xx for r in rounds)


def test_without_the_option_nothing_is_counted(server: str) -> None:
    result = wrk.run(_load(server))

    assert result.non_2xx > 0
    assert result.failures == {}
