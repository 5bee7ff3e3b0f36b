"""What an operator sees: /metrics (off unless a token is set, then only
with it) and the figures it carries after real work; liveness and readiness
(database, broker, a worker's heartbeat) as a probe sees them."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import transaction
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families
from rest_framework.test import APIClient

from accounts.models import Account, LedgerEntry
from accounts.services import ledger_post
from config.celery import app
from observability import heartbeat
from tests.factories import AccountFactory, AcquirerFactory
from tests.realworld import CeleryWorker, Receiver, celery_broker, redis_server, wait_for
from webhooks.delivery import delivery_attempt
from webhooks.models import WebhookDelivery
from webhooks.services import endpoint_create
from withdrawals import services as withdrawal_services
from withdrawals.payouts import withdrawal_process
from withdrawals.services import withdrawal_request

pytestmark = pytest.mark.django_db

TOKEN = "scrape-me-" + "x" * 22
BUYER = {"buyer_name": "Maria da Silva", "buyer_document": "52998224725", "buyer_phone": "11987654321"}


@pytest.fixture
def metrics_on(settings: Any) -> None:
    settings.METRICS_TOKEN = TOKEN


def scrape() -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    response = Client().get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=")
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(response.content.decode())
        for sample in family.samples
    }


def value(samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def delta(name: str, **labels: str) -> Callable[[], float]:
    """The change of one sample from now until the returned function is called."""
    before = value(scrape(), name, **labels)
    return lambda: value(scrape(), name, **labels) - before


# --------------------------------------------------------------------------- protection


def test_metrics_are_off_without_a_token(settings: Any) -> None:
    settings.METRICS_TOKEN = ""
    response = Client().get("/metrics", headers={"Authorization": "Bearer "})
    assert response.status_code == 404
    assert b"pix_" not in response.content


@pytest.mark.parametrize("authorization", [None, "Bearer wrong", f"Basic {TOKEN}", f"Bearer {TOKEN}x"])
def test_metrics_need_the_bearer_token(metrics_on: None, authorization: str | None) -> None:
    headers = {"Authorization": authorization} if authorization else {}
    response = Client().get("/metrics", headers=headers)
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == 'Bearer realm="metrics"'
    assert b"pix_" not in response.content


# --------------------------------------------------------------------------- figures after real work


@pytest.fixture
def merchant(db: Any) -> tuple[Account, APIClient]:
    from accounts.services import credential_issue
    from tests.conftest import client_for

    account = AccountFactory(withdrawal_fee_fixed=0, withdrawal_fee_bps=0)
    return account, client_for(credential_issue(account=account))


def test_requests_are_timed_by_route_and_status(metrics_on: None, merchant: tuple[Account, APIClient]) -> None:
    _, api = merchant
    route = "api/transactions/<str:charge_id>"
    not_found = delta("pix_http_request_duration_seconds_count", route=route, method="GET", status="404")
    api.get(f"/api/transactions/{uuid.uuid4()}")
    api.get(f"/api/transactions/{uuid.uuid4()}")
    assert not_found() == 2
    # A made-up method or path never mints a series of its own.
    unmatched = delta("pix_http_request_duration_seconds_count", route="unmatched", method="other", status="404")
    APIClient().generic("BREW", "/nowhere/42")
    assert unmatched() == 1


def test_charges_by_acquirer_and_outcome_with_fallbacks_and_attempt_latency(
    metrics_on: None, merchant: tuple[Account, APIClient], django_capture_on_commit_callbacks: Any
) -> None:
    _, api = merchant
    AcquirerFactory(key="metrics_down", options={"charge": "fail"}, default_priority=1)
    AcquirerFactory(key="metrics_up", default_priority=2)
    created = delta("pix_charges_total", acquirer="metrics_up", outcome="created")
    fallbacks = delta("pix_acquirer_fallbacks_total", acquirer="metrics_down", operation="create_charge")
    failed_calls = delta(
        "pix_acquirer_attempt_duration_seconds_count",
        acquirer="metrics_down",
        operation="create_charge",
        outcome="unavailable",
    )
    paid = delta("pix_charge_status_changes_total", acquirer="metrics_up", status="paid")

    with django_capture_on_commit_callbacks(execute=True):
        response = api.post("/api/transactions", {"payment_method": "pix", "amount": 1000, "buyer": BUYER}, "json")
    assert response.status_code == 201
    with django_capture_on_commit_callbacks(execute=True):
        assert api.post(f"/api/sandbox/transactions/{response.json()['data']['id']}/pay").status_code == 200

    assert (created(), fallbacks(), failed_calls(), paid()) == (1, 1, 1, 1)


def test_a_rolled_back_change_is_not_counted(
    metrics_on: None, merchant: tuple[Account, APIClient], django_capture_on_commit_callbacks: Any
) -> None:
    """Status changes count on commit only: a rolled-back one changed nothing."""
    from payments.services import charge_transition

    _, api = merchant
    AcquirerFactory(key="metrics_rollback", default_priority=1)
    with django_capture_on_commit_callbacks(execute=True):
        response = api.post("/api/transactions", {"payment_method": "pix", "amount": 1000, "buyer": BUYER}, "json")
    assert response.status_code == 201
    charge_id = response.json()["data"]["id"]
    paid = delta("pix_charge_status_changes_total", acquirer="metrics_rollback", status="paid")

    def pay_then_roll_back() -> None:
        with transaction.atomic():
            assert charge_transition(charge_id=charge_id, to_status="paid", source="acquirer")
            raise RuntimeError("roll back")

    with django_capture_on_commit_callbacks(execute=True), pytest.raises(RuntimeError):
        pay_then_roll_back()
    assert paid() == 0

    with django_capture_on_commit_callbacks(execute=True):
        assert charge_transition(charge_id=charge_id, to_status="paid", source="acquirer")
    assert paid() == 1


def test_a_charge_no_acquirer_took_counts_as_rejected(
    metrics_on: None, merchant: tuple[Account, APIClient], django_capture_on_commit_callbacks: Any
) -> None:
    _, api = merchant
    AcquirerFactory(key="metrics_only_down", options={"charge": "fail"}, default_priority=1)
    rejected = delta("pix_charges_total", acquirer="none", outcome="rejected")
    with django_capture_on_commit_callbacks(execute=True):
        response = api.post("/api/transactions", {"payment_method": "pix", "amount": 1000, "buyer": BUYER}, "json")
    assert response.json()["message"] == "Erro ao processar o pagamento. Tente novamente mais tarde."
    assert rejected() == 1


def test_payout_outcomes_and_withdrawal_changes(
    metrics_on: None,
    merchant: tuple[Account, APIClient],
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Any,
) -> None:
    account, _ = merchant
    # The test drives processing itself; nothing goes to the broker.
    monkeypatch.setattr(withdrawal_services, "_enqueue_processing", lambda *args, **kwargs: None)
    acquirer = AcquirerFactory(key="metrics_payout", default_priority=1)
    with transaction.atomic():
        ledger_post(account_id=account.pk, amount=10_000, kind=LedgerEntry.Kind.CHARGE_PAID, reference="seed")
    paid = delta("pix_payouts_total", acquirer=acquirer.key, outcome="paid")
    sends = delta(
        "pix_acquirer_attempt_duration_seconds_count", acquirer=acquirer.key, operation="payout_send", outcome="paid"
    )
    reached_paid = delta("pix_withdrawal_status_changes_total", status="paid")

    with django_capture_on_commit_callbacks(execute=True):
        withdrawal = withdrawal_request(account=account, amount=5000, key_type="cpf", key_value="52998224725")
    with django_capture_on_commit_callbacks(execute=True):
        assert withdrawal_process(withdrawal_id=withdrawal.pk) == "approved"
    with django_capture_on_commit_callbacks(execute=True):
        assert withdrawal_process(withdrawal_id=withdrawal.pk) == "paid"

    assert (paid(), sends(), reached_paid()) == (1, 1, 1)


def test_webhook_backlog_and_delivery_outcomes(
    metrics_on: None, merchant: tuple[Account, APIClient], receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    from webhooks import services as webhook_services

    account, api = merchant
    monkeypatch.setattr(webhook_services, "_enqueue", lambda *args, **kwargs: None)
    AcquirerFactory(key="metrics_hooks", default_priority=1)
    endpoint_create(account=account, url=receiver.url)
    backlog_before = value(scrape(), "pix_webhook_backlog")
    succeeded = delta("pix_webhook_delivery_attempts_total", outcome="succeeded")

    response = api.post("/api/transactions", {"payment_method": "pix", "amount": 1000, "buyer": BUYER}, "json")
    assert api.post(f"/api/sandbox/transactions/{response.json()['data']['id']}/pay").status_code == 200
    assert value(scrape(), "pix_webhook_backlog") == backlog_before + 1

    delivery = WebhookDelivery.objects.get(event__record_id=response.json()["data"]["id"])
    assert delivery_attempt(delivery_id=delivery.pk) == "succeeded"
    assert value(scrape(), "pix_webhook_backlog") == backlog_before
    assert succeeded() == 1


def test_samples_of_several_processes_are_summed(tmp_path: Path) -> None:
    """``make run`` and compose give web and worker one PROMETHEUS_MULTIPROC_DIR:
    what a worker process counts shows on the web process's /metrics."""
    env = {
        **os.environ,
        "PROMETHEUS_MULTIPROC_DIR": str(tmp_path),
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
    }
    count = textwrap.dedent(
        """
        import django; django.setup()
        from core import metrics
        metrics.PAYOUTS.labels("multi", "paid").inc()
        """
    )
    for _ in range(2):  # two "worker" processes
        subprocess.run([sys.executable, "-c", count], env=env, check=True, timeout=60)
    read = textwrap.dedent(
        """
        import django; django.setup()
        from prometheus_client import CollectorRegistry, generate_latest, multiprocess
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        print(generate_latest(registry).decode())
        """
    )
    out = subprocess.run([sys.executable, "-c", read], env=env, check=True, timeout=60, capture_output=True, text=True)
    assert 'pix_payouts_total{acquirer="multi",outcome="paid"} 2.0' in out.stdout


# --------------------------------------------------------------------------- health


def test_liveness_touches_nothing(django_assert_num_queries: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(app.conf, "broker_url", "redis://127.0.0.1:1/0")
    with django_assert_num_queries(0):
        response = APIClient().get("/api/health")
    assert response.status_code == 200
    assert response.json() == {"success": True, "message": "OK", "data": {"status": "ok"}}


@pytest.fixture
def heartbeats(settings: Any) -> Iterator[str]:
    """A heartbeat set of this test's own, so other suites' workers don't count."""
    key = settings.WORKER_HEARTBEAT_KEY = f"pix-test:workers:{uuid.uuid4().hex}"
    client = heartbeat._redis()  # before a test points REDIS_URL elsewhere
    yield key
    client.delete(key)


def ready() -> tuple[int, dict[str, Any]]:
    response = APIClient().get("/api/health/ready")
    return response.status_code, response.json()


def test_ready_when_database_broker_and_a_recent_worker_answer(heartbeats: str) -> None:
    heartbeat.beat("worker-1@host")
    assert ready() == (
        200,
        {"success": True, "message": "OK", "data": {"database": "ok", "broker": "ok", "worker": "ok"}},
    )


def test_not_ready_without_a_recent_worker_heartbeat(heartbeats: str, settings: Any) -> None:
    import time

    heartbeat.beat("stale@host", at=time.time() - settings.WORKER_HEARTBEAT_MAX_AGE - 1)
    status, body = ready()
    assert status == 503
    assert body == {
        "success": False,
        "message": "Serviço indisponível.",
        "data": {"database": "ok", "broker": "ok", "worker": "no recent heartbeat"},
    }


def test_not_ready_with_the_broker_unreachable(heartbeats: str, monkeypatch: pytest.MonkeyPatch) -> None:
    heartbeat.beat("worker-1@host")
    monkeypatch.setattr(app.conf, "broker_url", "redis://127.0.0.1:1/0")
    status, body = ready()
    assert status == 503
    assert body["data"] == {"database": "ok", "broker": "unreachable", "worker": "ok"}


def test_readiness_keeps_one_broker_connection_and_still_notices_an_outage(heartbeats: str, tmp_path: Path) -> None:
    # It opened a broker connection on every call: one per orchestrator poll.
    heartbeat.beat("worker-1@host")
    with redis_server(tmp_path) as broker, celery_broker(broker.url):
        observer = broker.client()

        def accepted() -> int:
            return int(observer.info("stats")["total_connections_received"])

        before = accepted()
        assert [ready()[1]["data"]["broker"] for _ in range(10)] == ["ok"] * 10
        assert accepted() - before <= 2  # the probe's connection (and its pool's), not ten

        broker.stop()
        started = time.monotonic()
        status, body = ready()
        assert (status, body["data"]["broker"]) == (503, "unreachable")
        assert time.monotonic() - started < 10

        broker.start()
        assert ready()[1]["data"]["broker"] == "ok"  # a new connection replaces the dead one


def test_not_ready_with_redis_unreachable_for_heartbeats(heartbeats: str, settings: Any) -> None:
    heartbeat.beat("worker-1@host")
    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    status, body = ready()
    assert status == 503
    assert body["data"]["worker"] == "no recent heartbeat"


@pytest.mark.django_db(transaction=True)
def test_a_real_worker_beats(celery_worker_process: CeleryWorker, metrics_on: None) -> None:
    name = f"{celery_worker_process.queue}@localhost"
    wait_for(lambda: name in heartbeat.alive())
    assert ready()[0] == 200
    assert value(scrape(), "pix_workers_alive") >= 1
