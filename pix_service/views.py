"""Project-level endpoints and the Django-level error pages of the API."""

from __future__ import annotations

import logging
from typing import Any

from django.db import connection
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.views import defaults
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from pix_service.exceptions import INTERNAL_ERROR_MESSAGE, NOT_FOUND_MESSAGE, envelope

logger = logging.getLogger(__name__)


def _database_ok() -> bool:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return True
    except Exception:
        logger.warning("health: database unreachable", exc_info=True)
        return False


def _broker_ok() -> bool:
    from pix_service.celery import app

    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
        return True
    except Exception:
        logger.warning("health: broker unreachable", exc_info=True)
        return False


def _worker_ok() -> bool:
    from pix_service import heartbeat

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


class HealthView(APIView):
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


class ReadinessView(APIView):
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
