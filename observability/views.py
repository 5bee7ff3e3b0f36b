"""Project-level endpoints and the Django-level error pages of the API."""

from __future__ import annotations

import logging
import threading
from typing import Any

from celery import current_app
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.views import defaults
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.utils import extend_schema, inline_serializer
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from api.base import API_METHODS, ServiceAPIView
from core.exceptions import INTERNAL_ERROR_MESSAGE, NOT_FOUND_MESSAGE, envelope
from observability.sql import database_answers

logger = logging.getLogger(__name__)


def _database_ok() -> bool:
    try:
        database_answers()
        return True
    except Exception:
        logger.warning("health: database unreachable", exc_info=True)
        return False


class _BrokerProbe:
    """One broker connection per process, kept between readiness checks: a
    probe that connected on every call cost the broker a connection per
    orchestrator poll. Each check is still a round trip (PING), bounded by
    2 s; a connection that died meanwhile is replaced once before the broker
    is called unreachable."""

    TIMEOUT = 2.0

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._connection: Any = None
        self._url = ""

    def ok(self) -> bool:
        # The project's app (config.celery), the current one once Django has
        # loaded: observability sits below config and does not import it.
        app = current_app
        url = str(app.conf.broker_write_url)
        with self._lock:
            if self._url != url:
                self._drop()  # the broker moved (tests do it): the old connection is not it
            reused = self._connection is not None
            for attempt in (1, 2):
                try:
                    self._ping(app, url)
                    return True
                except Exception:
                    self._drop()
                    if attempt == 2 or not reused:
                        logger.warning("health: broker unreachable", exc_info=True)
                        return False
        return False  # pragma: no cover - the loop returns

    def _ping(self, app: Any, url: str) -> None:
        if self._connection is None:
            timeouts = {"socket_timeout": self.TIMEOUT, "socket_connect_timeout": self.TIMEOUT}
            self._connection, self._url = app.connection_for_write(url, transport_options=timeouts), url
        self._connection.ensure_connection(max_retries=1, timeout=self.TIMEOUT)
        # Connected is not alive: a connection Redis dropped still says connected.
        client = getattr(self._connection.default_channel, "client", None)
        if client is not None:
            client.ping()

    def _drop(self) -> None:
        if self._connection is not None:
            try:
                self._connection.release()
            except Exception:  # it is being thrown away anyway
                logger.debug("health: closing the broker connection failed", exc_info=True)
        self._connection, self._url = None, ""


_broker_probe = _BrokerProbe()


def _broker_ok() -> bool:
    return _broker_probe.ok()


def _worker_ok() -> bool:
    from observability import heartbeat

    try:
        return bool(heartbeat.alive())
    except Exception:
        logger.warning("health: worker heartbeats unreadable", exc_info=True)
        return False


def _health_response(name: str, checks: dict[str, serializers.Field[Any, Any, Any, Any]]) -> dict[int, object]:
    def body(suffix: str) -> object:
        return inline_serializer(
            f"{name}{suffix}",
            {
                "success": serializers.BooleanField(),
                "message": serializers.CharField(),
                "data": inline_serializer(f"{name}{suffix}Data", checks),
            },
        )

    return {200: body(""), 503: body("Down")}


class HealthView(ServiceAPIView):
    """Liveness: this process answers. Touches nothing else, so a database
    outage never makes an orchestrator restart healthy web processes."""

    authentication_classes: list[type] = []
    permission_classes = [AllowAny]
    throttle_classes: list[type] = []

    @extend_schema(
        tags=["health"],
        summary="Liveness",
        auth=[],
        responses={200: _health_response("Health", {"status": serializers.CharField()})[200]},
    )
    def get(self, request: Request) -> Response:
        return Response({"success": True, "message": "OK", "data": {"status": "ok"}})


class ReadinessView(ServiceAPIView):
    """Readiness: the database and the broker answer and at least one Celery
    worker beat recently (without one, payouts and webhooks would stall)."""

    authentication_classes: list[type] = []
    permission_classes = [AllowAny]
    throttle_classes: list[type] = []

    @extend_schema(
        tags=["health"],
        summary="Readiness",
        auth=[],
        responses=_health_response(
            "Readiness",
            {
                "database": serializers.CharField(),
                "broker": serializers.CharField(),
                "worker": serializers.CharField(),
            },
        ),
    )
    def get(self, request: Request) -> Response:
        checks = {
            "database": "ok" if _database_ok() else "unreachable",
            "broker": "ok" if _broker_ok() else "unreachable",
            "worker": "ok" if _worker_ok() else "no recent heartbeat",
        }
        ready = all(value == "ok" for value in checks.values())
        return Response(
            {"success": ready, "message": "OK" if ready else "Serviço indisponível.", "data": checks},
            status=200 if ready else 503,
        )


class _JsonErrors:
    """Errors in the JSON envelope from a view whose renderers are not JSON
    (the schema's YAML, Swagger UI's HTML)."""

    def finalize_response(self, request: Request, response: Any, *args: Any, **kwargs: Any) -> Any:
        response = super().finalize_response(request, response, *args, **kwargs)  # type: ignore[misc]
        if isinstance(response, Response) and response.status_code >= 400:
            response.accepted_renderer = JSONRenderer()
            response.accepted_media_type = "application/json"
        return response


class SchemaView(_JsonErrors, SpectacularAPIView):
    """``/api/schema/``, built once per process: building it walks every view
    (~170 ms of CPU) and it changes only with the code, while anyone may ask."""

    http_method_names = API_METHODS
    _built: Any = None
    _lock = threading.Lock()

    def _get_schema_response(self, request: Request) -> Response:
        # One schema: no API versions, one language (a ?lang= or ?version= would
        # otherwise be a cache key of the caller's choosing).
        if SchemaView._built is None:
            with SchemaView._lock:  # concurrent first requests build it once
                if SchemaView._built is None:
                    generator = self.generator_class(urlconf=self.urlconf, api_version=None, patterns=self.patterns)
                    SchemaView._built = generator.get_schema(request=request, public=self.serve_public)  # type: ignore[no-untyped-call]
        filename = self._get_filename(request, None)  # type: ignore[no-untyped-call]
        return Response(data=SchemaView._built, headers={"Content-Disposition": f'inline; filename="{filename}"'})


class DocsView(_JsonErrors, SpectacularSwaggerView):
    """Swagger UI (``/api/docs/``)."""

    http_method_names = API_METHODS


# CSRF-exempt: an unknown POST must get the 404 envelope, not Django's CSRF page.
@csrf_exempt
def api_not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if not request.path.startswith("/api/"):
        return defaults.page_not_found(request, exception or Http404())
    return JsonResponse(envelope(NOT_FOUND_MESSAGE), status=404)


def server_error(request: HttpRequest) -> HttpResponse:
    if not request.path.startswith("/api/"):
        return defaults.server_error(request)
    return JsonResponse(envelope(INTERNAL_ERROR_MESSAGE), status=500)
