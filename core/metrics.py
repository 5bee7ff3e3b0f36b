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

import time
from collections.abc import Callable

from django.db import transaction
from django.http import HttpRequest, HttpResponse
from prometheus_client import (
    Counter,
    Gauge,
    Histogram,
)

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
    "Calls not made to an acquirer, by reason: its circuit was open (circuit_open) or its cap or the "
    "purpose's pool of calls in flight was full (busy).",
    ["acquirer", "operation", "reason"],
)
OUTBOUND_IN_FLIGHT = Gauge(
    "pix_outbound_in_flight",
    "Outbound calls in flight by bulkhead (a purpose's pool, or acquirer:<key>), summed over live processes.",
    ["pool"],
    multiprocess_mode="livesum",
)
OUTBOUND_REJECTED = Counter(
    "pix_outbound_rejected_total",
    "Outbound calls refused because their bulkhead was full, by bulkhead.",
    ["pool"],
)
PAYOUTS = Counter(
    "pix_payouts_total",
    "Payout runs by acquirer and outcome (paid, processing, failed, undetermined, deferred).",
    ["acquirer", "outcome"],
)
PAYEE_LOOKUPS = Counter(
    "pix_payee_lookups_total",
    "Payee checks' DICT lookups by acquirer and result (found, not_found, unclear; cached: answered from the "
    "cache, no acquirer called).",
    ["acquirer", "result"],
)
WITHDRAWAL_STATUS_CHANGES = Counter(
    "pix_withdrawal_status_changes_total",
    "Withdrawal status changes by the status reached.",
    ["status"],
)
WEBHOOK_DELIVERIES = Counter(
    "pix_webhook_delivery_attempts_total",
    "Webhook delivery runs by outcome (succeeded, retry, failed, skipped; deferred: the destination was at its "
    "cap of concurrent deliveries, nothing was sent and no attempt counted).",
    ["outcome"],
)


def on_commit(record: Callable[[], None]) -> None:
    """Count a change only once it is committed: a rolled-back transaction
    changed nothing, so it must not show in the figures either."""
    transaction.on_commit(record)


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
