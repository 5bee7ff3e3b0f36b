"""A call past its deadline is cut at the socket (``core.deadline``,
``core.http``): it ends at the deadline as a timeout, the acquirer sees the
connection closed, and nothing of it outlives the call — no thread, no
descriptor — however many callers a drip-feeding acquirer holds at once.

The acquirer is the fake API Pix PSP on loopback (mTLS), answering one
header byte every 0.2 s for ever: every read gets a byte well within the
read timeout, so only the deadline can end the call.
"""

from __future__ import annotations

import gc
import os
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import psutil
import pytest
from django.conf import settings

from acquirers import adapters, calls
from acquirers.adapters.apipix.client import client_for
from acquirers.adapters.base import AcquirerAdapter, PayoutRequest, PayoutStatus
from acquirers.adapters.sandbox import SandboxAdapter
from acquirers.calls import Outcome
from acquirers.models import Acquirer
from acquirers.tasks import cancel_charge_at_acquirer
from tests.acquirers.conftest import warm_up
from tests.acquirers.fake_psp import FakePsp, Fault
from tests.factories import AcquirerFactory
from tests.realworld import run_concurrently, wait_for

# The callers are threads of their own, each on its own database connection.
pytestmark = pytest.mark.django_db(transaction=True)

CONCURRENT = 40
#: The acquirer's deadline (connect + read): 1.5 s; a byte every 0.2 s never trips the read timeout.
CONNECT_MS, READ_MS = 500, 1000
DEADLINE = (CONNECT_MS + READ_MS) / 1000
CPF = "52998224725"


@pytest.fixture
def dripping(make_bacen_acquirer: Callable[..., Acquirer]) -> Acquirer:
    acquirer = make_bacen_acquirer("drips", connect_timeout_ms=CONNECT_MS, read_timeout_ms=READ_MS)
    warm_up(acquirer)
    return acquirer


def lookup(acquirer: Acquirer) -> calls.Call[object]:
    return calls.call(acquirer, "charge_status", lambda adapter: adapter.charge_status(uuid.uuid4().hex))


def token(adapter: AcquirerAdapter) -> str:
    """What a call does before it reaches the PSP: the shared token."""
    return client_for(adapter.config, adapter.options).access_token(time.monotonic() + 5)


def open_fds() -> int:
    """Descriptors of this process, less its Redis connections and its
    Unix-domain sockets: those pools grow to the callers' concurrency and
    stay (bounded and shared by design). The embedded engines are reached
    over Unix sockets, which name no peer to tell Redis's from PostgreSQL's;
    what a cut call could leak is a TCP socket to the acquirer, or a file."""
    redis_port = urlsplit(settings.REDIS_URL).port or 6379
    process = psutil.Process()
    pooled = sum(1 for c in process.net_connections(kind="inet") if c.raddr and c.raddr[1] == redis_port)
    unix = len(process.net_connections(kind="unix"))
    return len(os.listdir("/proc/self/fd")) - pooled - unix


def collected_fds() -> int:
    """Open descriptors once garbage is collected: a TLS handshake cut
    before it began (the socket already shut down) raises in CPython's
    ``SSLSocket._create`` without closing it, and the socket goes with the
    traceback that refers to it, at the next collection."""
    gc.collect()
    return open_fds()


def connections_to(psp: FakePsp) -> int:
    port = urlsplit(psp.url).port
    return sum(1 for c in psutil.Process().net_connections() if c.raddr and c.raddr[1] == port)


def test_a_drip_fed_call_is_cut_at_its_deadline(fake_psp: FakePsp, dripping: Acquirer) -> None:
    fake_psp.fail("cob.get", Fault.DRIP)

    done = lookup(dripping)

    assert done.outcome is Outcome.TIMEOUT
    assert done.error_class == "DeadlineExceeded"
    assert abs(done.latency_ms / 1000 - DEADLINE) <= 0.5
    # The acquirer's side: the connection was closed under its answer.
    wait_for(lambda: fake_psp.hung_up == 1, timeout=5)


def test_a_reused_keep_alive_connection_is_cut_too(fake_psp: FakePsp, dripping: Acquirer) -> None:
    assert lookup(dripping).outcome is not Outcome.TIMEOUT  # answered: its connection stays in the pool
    connections = fake_psp.connections
    fake_psp.fail("cob.get", Fault.DRIP)

    done = lookup(dripping)

    assert fake_psp.connections == connections  # the kept-alive connection served it
    assert done.outcome is Outcome.TIMEOUT
    assert abs(done.latency_ms / 1000 - DEADLINE) <= 0.5
    wait_for(lambda: fake_psp.hung_up == 1, timeout=5)


def test_many_drip_fed_calls_leave_no_thread_or_descriptor_behind(
    fake_psp: FakePsp, dripping: Acquirer, settings: Any
) -> None:
    # Every call reaches the PSP: the bulkheads (tests/acquirers/test_bulkheads.py) are not under test here.
    settings.ACQUIRER_MAX_IN_FLIGHT = settings.OUTBOUND_POOL_RECONCILE = 2 * CONCURRENT
    # A first round as many at once, up to the PSP: the Redis pools (the
    # breaker, the shared token) reach their size and the watchdog runs.
    # It must succeed: a round that failed warmed nothing, and left the
    # timed round to open those connections under its deadline.
    warmed = run_concurrently([lambda: calls.call(dripping, "charge_status", token) for _ in range(CONCURRENT)])
    assert [getattr(r, "outcome", r) for r in warmed] == [Outcome.OK] * CONCURRENT
    threads, fds, kept_alive = threading.active_count(), open_fds(), connections_to(fake_psp)
    fake_psp.fail("cob.get", *[Fault.DRIP] * CONCURRENT)

    started = time.monotonic()
    results = run_concurrently([lambda: lookup(dripping) for _ in range(CONCURRENT)])
    elapsed = time.monotonic() - started

    assert [r.outcome for r in results] == [Outcome.TIMEOUT] * CONCURRENT, [r.error_message for r in results]
    # Each was cut at its deadline, none before it. The forty callers then
    # unwind one after another (under the GIL, on two CPUs the whole suite
    # shares): the last gets its thread back later than the first by what
    # that costs on a busy machine, not by anything left waiting on the PSP.
    latencies = sorted(r.latency_ms for r in results)
    assert latencies[0] >= DEADLINE * 1000, latencies
    assert latencies[CONCURRENT // 2] <= (DEADLINE + 0.5) * 1000, " ".join(map(str, latencies))
    assert elapsed < DEADLINE + 2, " ".join(map(str, latencies))
    # Every connection was closed: the acquirer saw each hang up, and its
    # threads (in this process too) ended with them.
    wait_for(lambda: fake_psp.hung_up == CONCURRENT, timeout=10)
    wait_for(lambda: threading.active_count() <= threads, timeout=10)
    del results  # what the calls raised, tracebacks and all
    wait_for(lambda: collected_fds() <= fds, timeout=10)
    assert connections_to(fake_psp) == kept_alive  # warm_up's, from this thread
    assert watchdogs() == 1  # one for the process, not one per call


def watchdogs() -> int:
    return [thread.name for thread in threading.enumerate()].count("deadline-watchdog")


def test_the_sandbox_simulated_timeout_ends_at_the_deadline() -> None:
    acquirer = AcquirerFactory(options={"payout": "timeout"}, connect_timeout_ms=100, read_timeout_ms=200)
    request = PayoutRequest(
        withdrawal_id=uuid.uuid4(), idempotency_id=uuid.uuid4().hex, amount=500, key_type="cpf", key_value=CPF
    )

    done = calls.call(acquirer, "payout_send", lambda adapter: adapter.create_payout(request))

    assert (done.outcome, done.error_class) == (Outcome.TIMEOUT, "DeadlineExceeded")
    assert 290 <= done.latency_ms < 500  # left alone, the sandbox waits 0.8 s
    # As a real acquirer may: it made the transfer although we heard nothing.
    adapter = adapters.build(acquirer)
    assert isinstance(adapter, SandboxAdapter)
    assert adapter.get_payout_status(request.idempotency_id).status is PayoutStatus.PAID


def test_the_cancel_task_is_a_guarded_call_cut_at_its_deadline(fake_psp: FakePsp, dripping: Acquirer) -> None:
    """The best-effort cancel after a timed-out charge goes through the one
    guarded call too: cut at the deadline, then raised for Celery to retry."""
    fake_psp.fail("cob.patch", Fault.DRIP)
    started = time.monotonic()

    with pytest.raises(calls.DeadlineExceeded):
        cancel_charge_at_acquirer(dripping.pk, uuid.uuid4().hex)  # the task's body, on this thread

    assert abs(time.monotonic() - started - DEADLINE) <= 0.5
    wait_for(lambda: fake_psp.hung_up == 1, timeout=5)
