"""The per-credential cap on concurrent CSV exports (issue 29 §3): at most
``API_EXPORTS_PER_CREDENTIAL`` at once, a 429 in the envelope past it, and
a slot given back however a response ends (read to the end, client gone
mid-file or before it, an error mid-file or before the first row), or, if
its process died, expired by Redis."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from django.http import StreamingHttpResponse
from rest_framework.test import APIClient

from accounts.models import Account, ApiCredential
from accounts.services import credential_issue
from api import exports as api_exports
from api.exports import EXPORT_SLOTS, CsvExportApi
from core import exports as core_exports
from core.redis import client as redis_client
from core.slots import Slot, slot_keys, slot_take
from tests.conftest import client_for
from tests.factories import WithdrawalFactory
from tests.helpers import SAO_PAULO
from tests.platform.test_deployment import PROD_ENV, ROOT, _run
from tests.realworld import free_port, wait_for

pytestmark = pytest.mark.django_db

CAP = 2
URL = "/api/withdrawals.csv"
MARCH = {"created_at_start": "2025-03-01 00:00:00", "created_at_end": "2025-03-31 23:59:59"}
TOO_MANY = {
    "success": False,
    "message": "Limite de exportações simultâneas atingido para esta credencial. "
    "Aguarde o término de uma exportação em andamento e tente novamente.",
    "data": None,
}


@pytest.fixture(autouse=True)
def cap(settings: Any) -> None:
    settings.API_EXPORTS_PER_CREDENTIAL = CAP


@pytest.fixture
def account(account: Account) -> Account:
    for day in range(1, 6):
        WithdrawalFactory(account=account, created_at=dt.datetime(2025, 3, day, 12, tzinfo=SAO_PAULO))
    return account


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """A row per batch and a chunk per line: an export of 5 rows is 6 writes."""
    monkeypatch.setattr(api_exports, "CSV_CHUNK", 1)
    monkeypatch.setattr(core_exports, "CHUNK_BYTES", 1)


def credential(account: Account) -> tuple[APIClient, str]:
    issued = credential_issue(account=account, permission=ApiCredential.Permission.CASHOUT)
    return client_for(issued), issued.credential.public_key


def held(public_key: str) -> int:
    """Export slots of the credential held in Redis now."""
    return int(redis_client(settings.REDIS_URL, timeout=2).exists(*slot_keys(EXPORT_SLOTS, public_key, CAP)))


def streamed(response: Any) -> Iterator[bytes]:
    assert response.status_code == 200, response.content
    assert isinstance(response, StreamingHttpResponse)
    return iter(response.streaming_content)  # type: ignore[arg-type]


def test_past_its_cap_a_credential_is_refused_until_an_export_ends(account: Account) -> None:
    api, public_key = credential(account)
    first, second = api.get(URL, MARCH), api.get(URL, MARCH)  # being sent: not read yet
    assert held(public_key) == CAP

    refused = api.get(URL, MARCH)
    assert refused.status_code == 429
    assert refused.json() == TOO_MANY
    assert refused["Retry-After"] == "10"
    # Per credential: another of the same account exports meanwhile.
    other, _ = credential(account)
    assert len(b"".join(streamed(other.get(URL, MARCH))).splitlines()) == 1 + 5

    assert len(b"".join(streamed(first)).splitlines()) == 1 + 5  # the first ends
    assert held(public_key) == 1
    assert len(b"".join(streamed(api.get(URL, MARCH))).splitlines()) == 1 + 5
    b"".join(streamed(second))
    assert held(public_key) == 0


# Transactional: closing a response, as the server does, gives the thread's
# connection back (request_finished), which a test case's transaction forbids.
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("small_chunks")
def test_the_slot_is_given_back_when_the_client_goes_mid_file_or_before_it(account: Account) -> None:
    api, public_key = credential(account)
    mid_file = api.get(URL, MARCH)
    chunks = streamed(mid_file)
    next(chunks), next(chunks)
    assert held(public_key) == 1
    mid_file.close()  # what the server does when the client has gone (or the send timeout cut it)
    assert held(public_key) == 0

    never_read = api.get(URL, MARCH)
    assert held(public_key) == 1
    never_read.close()
    assert held(public_key) == 0


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("small_chunks")
def test_the_slot_is_given_back_after_an_error_mid_file_or_before_the_first_row(
    account: Account, monkeypatch: pytest.MonkeyPatch
) -> None:
    api, public_key = credential(account)
    fail_after = {"rows": 2}

    def failing(self: CsvExportApi, records: Iterator[Any]) -> Iterator[list[Any]]:
        for n, record in enumerate(records):
            if n == fail_after["rows"]:
                raise RuntimeError("the database went away")
            yield [record.pk]

    monkeypatch.setattr(CsvExportApi, "export_rows", failing)
    broken = api.get(URL, MARCH)
    with pytest.raises(RuntimeError):
        for _ in streamed(broken):
            pass
    broken.close()  # what the server does after the error
    assert held(public_key) == 0

    # Failing on the first row: inside the view, the API's 500 envelope.
    fail_after["rows"] = 0
    api.raise_request_exception = False
    failed = api.get(URL, MARCH)
    assert failed.status_code == 500
    assert failed.json() == {"success": False, "message": "Erro interno do servidor.", "data": None}
    assert held(public_key) == 0


@pytest.mark.usefixtures("small_chunks")
def test_an_export_being_read_keeps_renewing_its_slot(
    account: Account, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long export's lease is extended as it goes (every EXPORT_SEND_TIMEOUT
    seconds of writing; here at every write): a slow but steady reader never
    loses its slot to the lease, a dead process's ends soon."""
    monkeypatch.setattr(core_exports, "send_timeout_seconds", lambda: 0.0)
    api, public_key = credential(account)
    chunks = streamed(api.get(URL, MARCH))
    next(chunks)
    redis = redis_client(settings.REDIS_URL, timeout=2)
    [key] = [k for k in slot_keys(EXPORT_SLOTS, public_key, CAP) if redis.exists(k)]
    redis.pexpire(key, 1000)  # as if most of its lease had passed
    next(chunks)
    assert redis.pttl(key) > 50_000
    assert len(list(chunks)) == 3  # the first chunk held the header and the first row
    assert held(public_key) == 0


def test_an_unreleased_slot_expires_by_redis_clock() -> None:
    """A holder whose process died never releases: its lease ends in Redis."""
    owner = f"pk_test_{uuid.uuid4().hex}"
    dead = slot_take("test-slots", owner, cap=1, lease_seconds=0.3)
    assert dead is not None
    assert dead.key is not None
    assert slot_take("test-slots", owner, cap=1, lease_seconds=60) is None
    later = wait_for(lambda: slot_take("test-slots", owner, cap=1, lease_seconds=60), timeout=10)
    assert isinstance(later, Slot)
    later.release()


def test_a_live_holder_renews_its_lease_and_a_lost_one_frees_nobody_else() -> None:
    owner = f"pk_test_{uuid.uuid4().hex}"
    redis = redis_client(settings.REDIS_URL, timeout=2)
    holder = slot_take("test-slots", owner, cap=1, lease_seconds=60)
    assert holder is not None
    assert holder.key is not None
    redis.pexpire(holder.key, 1000)  # as if most of its lease had passed
    holder.renew_if_due(every=0)
    assert redis.pttl(holder.key) > 50_000

    # Its lease lapses (a stall longer than it) and another takes the slot:
    # the first holder neither extends nor frees the newcomer's slot.
    key = holder.key
    redis.delete(key)
    newcomer = slot_take("test-slots", owner, cap=1, lease_seconds=60)
    assert newcomer is not None
    assert newcomer.key == key
    holder.renew_if_due(every=0)
    holder.release()
    assert redis.get(key) == newcomer.token.encode()
    newcomer.release()
    assert not redis.exists(key)


def test_without_redis_exports_go_on_uncounted(account: Account, settings: Any) -> None:
    api, _ = credential(account)
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"
    responses = [api.get(URL, MARCH) for _ in range(CAP + 1)]
    assert [len(b"".join(streamed(r)).splitlines()) for r in responses] == [1 + 5] * (CAP + 1)


@pytest.mark.parametrize("value", ["0", "-5", "0.5"])
def test_a_send_timeout_under_a_second_is_refused_at_start(value: str) -> None:
    """No timeout ("0" was documented as "never") blocked a stalled export's
    thread forever while its slot's lease ended, so the credential's cap
    stopped counting it. Every settings module refuses it when loaded
    (gunicorn and Celery run no system checks)."""
    production = _run({**PROD_ENV, "EXPORT_SEND_TIMEOUT": value}, "check")
    base = {k: v for k, v in os.environ.items() if k not in PROD_ENV}
    local = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=ROOT,
        env={**base, "DJANGO_SETTINGS_MODULE": "config.settings.local", "EXPORT_SEND_TIMEOUT": value},
        capture_output=True,
        text=True,
        timeout=60,
    )
    for result in (production, local):
        assert result.returncode != 0
        assert "ImproperlyConfigured: EXPORT_SEND_TIMEOUT=" in result.stderr
        assert "must be at least 1 second" in result.stderr
    assert _run({**PROD_ENV, "EXPORT_SEND_TIMEOUT": "1"}, "check").returncode == 0


def test_the_send_timeout_is_never_under_a_second_in_a_running_process(settings: Any) -> None:
    settings.EXPORT_SEND_TIMEOUT = 0
    assert core_exports.send_timeout_seconds() == 1.0
    settings.EXPORT_SEND_TIMEOUT = 30
    assert core_exports.send_timeout_seconds() == 30.0
