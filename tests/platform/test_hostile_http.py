"""Hostile HTTP against the deployed process: gunicorn with the project's
config (config/gunicorn.conf.py) and its access log on.

- A body past ``API_MAX_BODY_BYTES`` is a 413 in the envelope, and the
  client's keep-alive connection serves its next request (it was a 500, and
  the next request on the connection was dropped).
- The secret segment of an acquirer notification URL never reaches
  gunicorn's access log.
"""

from __future__ import annotations

import http.client
import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from django.db import connection

from accounts.services import credential_issue
from payments.models import Charge, ChargeAttempt
from tests.factories import AccountFactory, AcquirerFactory
from tests.realworld import WebServer, redis_server, wait_for, web_server

TOO_LARGE = {"success": False, "message": "Corpo da requisição muito grande.", "data": None}
TOKEN = "tok3n-0f-the-psp-9d8c7b6a5f4e3d2c1b0a"

# gunicorn is another process: it sees only committed rows.
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def web(django_db_setup: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebServer]:
    tmp = tmp_path_factory.mktemp("web")
    with (
        redis_server(tmp) as broker,
        web_server(
            str(connection.settings_dict["NAME"]),
            tmp,
            env={"CELERY_BROKER_URL": broker.url},
            args=["--config", "config/gunicorn.conf.py", "--access-logfile", "-"],
        ) as server,
    ):
        yield server


def keep_alive(server: WebServer) -> http.client.HTTPConnection:
    host, port = server.url.removeprefix("http://").split(":")
    return http.client.HTTPConnection(host, int(port), timeout=30)


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/api/transactions"),
        ("POST", "/api/withdrawals"),
        ("POST", "/api/webhooks"),
        ("PUT", "/api/pix-cash-in/acquirers"),
        ("POST", "/api/acquirers/any/notifications"),
    ],
)
def test_a_body_of_megabytes_is_a_413_and_the_connection_serves_the_next_request(
    web: WebServer, method: str, path: str
) -> None:
    issued = credential_issue(account=AccountFactory())
    keys = {"X-Public-Key": issued.credential.public_key, "X-Secret-Key": issued.secret_key}
    body = json.dumps({"amount": 1000, "metadata": {"x": "a" * (4 * 1024 * 1024)}}).encode()
    conn = keep_alive(web)
    try:
        conn.request(method, path, body=body, headers={**keys, "Content-Type": "application/json"})
        response = conn.getresponse()
        assert (response.status, json.loads(response.read())) == (413, TOO_LARGE)
        assert response.getheader("Connection") != "close"
        socket_before = conn.sock

        conn.request("GET", "/api/withdrawals/balance", headers=keys)
        after = conn.getresponse()
        assert after.status == 200, after.read()
        assert json.loads(after.read())["success"] is True
        assert conn.sock is socket_before  # the same connection, not a reconnect
    finally:
        conn.close()
    assert "Traceback" not in web.output()


def test_the_notification_token_never_reaches_the_access_log(web: WebServer) -> None:
    paths = [f"/api/acquirers/nope/notifications/{TOKEN}", f"/api/acquirers/nope/notifications/{TOKEN}/pix?x=1"]
    conn = keep_alive(web)
    try:
        for path in paths:
            conn.request("POST", path, body=b"{}", headers={"Content-Type": "application/json"})
            response = conn.getresponse()
            assert response.status == 404
            response.read()
    finally:
        conn.close()

    # Not vacuous: both requests were logged, path and all.
    def logged() -> list[str] | None:
        lines = [line for line in web.output().splitlines() if "/notifications/" in line]
        return lines if len(lines) == 2 else None

    lines = wait_for(logged)
    assert all("/api/acquirers/nope/notifications/[redacted]" in line for line in lines), lines
    assert TOKEN not in web.output()


def test_metadata_nested_930_levels_is_a_422_before_any_acquirer(web: WebServer) -> None:
    # Within the parser's limit in a gunicorn thread; was a 500 from the
    # INSERT after the acquirer had issued the code.
    AcquirerFactory(key="hostile_ok", default_priority=1)
    issued = credential_issue(account=AccountFactory())
    metadata = '{"deep":' + "[" * 929 + "]" * 929 + "}"
    body = (
        '{"payment_method": "pix", "amount": 1000, "buyer": {"buyer_name": "Fulano", "buyer_document":'
        f' "52998224725", "buyer_phone": "11999998888"}}, "metadata": {metadata}}}'
    )
    response = requests.post(
        f"{web.url}/api/transactions",
        data=body,
        headers={
            "X-Public-Key": issued.credential.public_key,
            "X-Secret-Key": issued.secret_key,
            "Content-Type": "application/json",
        },
        timeout=30,
    )
    assert response.status_code == 422, response.content
    assert list(response.json()["data"]["errors"]) == ["metadata"]
    assert not ChargeAttempt.objects.exists()
    assert not Charge.objects.exists()


def test_static_files_served_are_not_access_logged_but_their_errors_are(web: WebServer) -> None:
    # A page of the admin or of Swagger UI fetches a dozen: make run's banner
    # (the demo's keys) was buried under them.
    assert requests.get(f"{web.url}/static/admin/css/base.css", timeout=10).status_code == 200
    assert requests.get(f"{web.url}/static/admin/css/nope-{uuid.uuid4().hex}.css", timeout=10).status_code == 404
    assert requests.get(f"{web.url}/api/health?from=static-test", timeout=10).status_code == 200

    def logged() -> list[str] | None:
        lines = web.output().splitlines()
        return lines if any("/api/health?from=static-test" in line for line in lines) else None

    lines = wait_for(logged)
    assert any("/static/admin/css/nope-" in line and " 404 " in line for line in lines), lines
    assert not any("/static/admin/css/base.css" in line for line in lines)
