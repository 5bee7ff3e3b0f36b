"""Prometheus metrics: what operators alert on.

Counters and histograms are recorded where things happen (requests, the
acquirer chain, payouts, webhook deliveries); the webhook backlog and the
workers' heartbeats are read when ``/metrics`` is scraped, from the database
and Redis, so every web process reports the same truth.

With ``PROMETHEUS_MULTIPROC_DIR`` set (``make run``, compose), gunicorn's
workers and the Celery worker write their samples to files there and
``/metrics`` on any web process sums them (prometheus_client's multiprocess
mode); without it, each process reports its own.
"""

from __future__ import annotations

import hmac
import os
import time
from collections.abc import Callable, Iterator

from django.conf import settings
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
    multiprocess,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

# Seconds; acquirer deadlines and webhook timeouts sit in the upper buckets.
_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

REQUEST_LATENCY = Histogram(
    "pix_http_request_duration_seconds",
    "HTTP request latency by route pattern, method and status code.",
    ["route", "method", "status"],
    buckets=_BUCKETS,
)
CHARGES = Counter(
    "pix_charges_total",
    "Charge creations by the acquirer that took them and outcome (created, rejected).",
    ["acquirer", "outcome"],
)
CHARGE_STATUS_CHANGES = Counter(
    "pix_charge_status_changes_total",
    "Charge status changes by acquirer and the status reached.",
    ["acquirer", "status"],
)
ACQUIRER_ATTEMPT_LATENCY = Histogram(
    "pix_acquirer_attempt_duration_seconds",
    "Calls to acquirers by acquirer, operation and outcome.",
    ["acquirer", "operation", "outcome"],
    buckets=_BUCKETS,
)
ACQUIRER_FALLBACKS = Counter(
    "pix_acquirer_fallbacks_total",
    "Times a chain moved past an acquirer to the next one.",
    ["acquirer", "operation"],
)
ACQUIRER_CIRCUIT_OPENS = Counter(
    "pix_acquirer_circuit_opens_total",
    "Times an acquirer's circuit breaker opened (a failed half-open probe opens it again and counts).",
    ["acquirer"],
)
ACQUIRER_CIRCUIT_SKIPS = Counter(
    "pix_acquirer_circuit_skips_total",
    "Times a chain passed an acquirer over because its circuit was open.",
    ["acquirer", "operation"],
)
PAYOUTS = Counter(
    "pix_payouts_total",
    "Payout runs by acquirer and outcome (paid, processing, failed, undetermined, deferred).",
    ["acquirer", "outcome"],
)
WITHDRAWAL_STATUS_CHANGES = Counter(
    "pix_withdrawal_status_changes_total",
    "Withdrawal status changes by the status reached.",
    ["status"],
)
WEBHOOK_DELIVERIES = Counter(
    "pix_webhook_delivery_attempts_total",
    "Webhook delivery attempts by outcome (succeeded, retry, failed, skipped).",
    ["outcome"],
)


def on_commit(record: Callable[[], None]) -> None:
    """Count a change only once it is committed: a rolled-back transaction
    changed nothing, so it must not show in the figures either."""
    transaction.on_commit(record)


_acquirer_keys: dict[int, str] = {}


def acquirer_key(acquirer_id: int | None) -> str:
    """An acquirer's key for a label, cached per process (keys are few and
    the label must not cost a query on every change)."""
    if acquirer_id is None:
        return "none"
    key = _acquirer_keys.get(acquirer_id)
    if key is None:
        from acquirers.models import Acquirer

        key = Acquirer.objects.filter(pk=acquirer_id).values_list("key", flat=True).first() or "unknown"
        _acquirer_keys[acquirer_id] = key
    return key


# --------------------------------------------------------------------------- read at scrape time


class StateCollector(Collector):
    """Gauges read from the database and Redis when scraped."""

    def collect(self) -> Iterator[Metric]:
        from django.db.models import Count, Min

        from pix_service import heartbeat
        from webhooks.models import WebhookDelivery

        # Uses the partial index on pending deliveries.
        pending = WebhookDelivery.objects.filter(status=WebhookDelivery.Status.PENDING).aggregate(
            count=Count("pk"), oldest=Min("next_attempt_at")
        )
        backlog = GaugeMetricFamily("pix_webhook_backlog", "Webhook deliveries pending (due or scheduled).")
        backlog.add_metric([], pending["count"])
        yield backlog
        overdue = GaugeMetricFamily(
            "pix_webhook_backlog_oldest_due_seconds",
            "How long the oldest pending delivery has been due (0 when none is overdue).",
        )
        oldest = pending["oldest"]
        overdue.add_metric([], max(0.0, (timezone.now() - oldest).total_seconds()) if oldest else 0.0)
        yield overdue

        workers = GaugeMetricFamily("pix_workers_alive", "Celery workers whose heartbeat is recent.")
        try:
            workers.add_metric([], len(heartbeat.alive()))
        except Exception:  # noqa: BLE001 - Redis down: report no workers rather than fail the scrape
            workers.add_metric([], 0)
        yield workers

        yield from _circuit_gauges()


#: ``pix_acquirer_circuit_state`` values: alert on ``== 2``.
CIRCUIT_STATE_VALUES = {"closed": 0, "half_open": 1, "open": 2}


def _circuit_gauges() -> Iterator[Metric]:
    """Each acquirer's breaker, from Redis (one round trip for all of them).
    Redis down: no samples, rather than a made-up "closed"."""
    from acquirers import health
    from acquirers.models import Acquirer

    state = GaugeMetricFamily(
        "pix_acquirer_circuit_state",
        "Circuit breaker of each acquirer: 0 closed, 1 half-open (cool-down over, probing), 2 open (skipped).",
        labels=["acquirer"],
    )
    failures = GaugeMetricFamily(
        "pix_acquirer_consecutive_failures",
        "Unavailability failures in a row of each acquirer (a decline is an answer, not a failure).",
        labels=["acquirer"],
    )
    acquirers = list(Acquirer.objects.only("pk", "key", "created_at"))
    found = health.snapshots(acquirers) or {}
    for acquirer in acquirers:
        if acquirer.pk in found:
            state.add_metric([acquirer.key], CIRCUIT_STATE_VALUES[found[acquirer.pk].state])
            failures.add_metric([acquirer.key], found[acquirer.pk].failures)
    yield state
    yield failures


class _ThisProcess(Collector):
    def collect(self) -> Iterator[Metric]:
        yield from REGISTRY.collect()


def exposition() -> bytes:
    registry = CollectorRegistry()
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    else:
        registry.register(_ThisProcess())
    registry.register(StateCollector())
    return generate_latest(registry)


def metrics_view(request: HttpRequest) -> HttpResponse:
    """``GET /metrics``. Off (404) unless ``METRICS_TOKEN`` is set; then the
    scraper must send ``Authorization: Bearer <token>``."""
    token = settings.METRICS_TOKEN
    if not token:
        return HttpResponse(status=404)
    presented = request.headers.get("Authorization", "")
    if not hmac.compare_digest(presented.encode(), f"Bearer {token}".encode()):
        response = HttpResponse(status=401)
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    return HttpResponse(exposition(), content_type=CONTENT_TYPE_LATEST)


_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


class MetricsMiddleware:
    """Request latency by route pattern (never the raw path: ids would make
    a series per record)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        started = time.perf_counter()
        response = self.get_response(request)
        match = getattr(request, "resolver_match", None)
        route = match.route if match is not None else "unmatched"
        # Clients choose the method: an unknown one must not mint a series.
        method = request.method if request.method in _METHODS else "other"
        REQUEST_LATENCY.labels(route=route, method=method, status=str(response.status_code)).observe(
            time.perf_counter() - started
        )
        return response
