"""``/metrics``: the counters of :mod:`core.metrics` plus gauges read from
the database and Redis when scraped (webhook backlog, workers alive,
circuit breakers), so every web process reports the same truth."""

from __future__ import annotations

import hmac
import os
from collections.abc import Iterator

from django.conf import settings
from django.db.models import Count, Min
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest, multiprocess
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from acquirers import breaker
from acquirers.models import Acquirer
from observability import heartbeat, selectors
from webhooks.models import WebhookDelivery

# --------------------------------------------------------------------------- read at scrape time


class StateCollector(Collector):
    """Gauges read from the database and Redis when scraped."""

    def collect(self) -> Iterator[Metric]:
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
        yield from _infraction_gauges()


#: ``pix_acquirer_circuit_state`` values: alert on ``== 2``.
CIRCUIT_STATE_VALUES = {"closed": 0, "half_open": 1, "open": 2}


def _circuit_gauges() -> Iterator[Metric]:
    """Each acquirer's breaker, from Redis (one round trip for all of them).
    Redis down: no samples, rather than a made-up "closed"."""
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
    found = breaker.snapshots(acquirers) or {}
    for acquirer in acquirers:
        if acquirer.pk in found:
            state.add_metric([acquirer.key], CIRCUIT_STATE_VALUES[found[acquirer.pk].state])
            failures.add_metric([acquirer.key], found[acquirer.pk].failures)
    yield state
    yield failures


def _infraction_gauges() -> Iterator[Metric]:
    """MED infractions: alert on ``pix_infractions_deadline_near > 0`` (a
    defence deadline ends within 24 h and nobody defended or waived it)."""
    found = selectors.infractions()
    near = GaugeMetricFamily(
        "pix_infractions_deadline_near",
        "Open MED infractions whose defence deadline ends within 24 h with no defence sent nor waived.",
    )
    near.add_metric([], found.deadline_near)
    yield near
    open_ = GaugeMetricFamily("pix_infractions_open", "Open MED infractions (their money blocked or marked).")
    open_.add_metric([], found.open)
    yield open_


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
