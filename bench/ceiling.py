"""The ceiling the charge endpoints are measured against: a bare DRF view
doing one primary-key read, served by the same gunicorn, through the same
middleware, renderer and exception handler, returning the same fields as
``GET /api/transactions/{id}``. What the real endpoints cost beyond it
(authentication, permissions, the rate limit's Redis round trip, validation,
serializers, the acquirer, the writes) is what their ratio shows."""

from __future__ import annotations

from typing import ClassVar

from rest_framework.permissions import AllowAny, BasePermission
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from payments.models import Charge
from payments.serializers import ChargeSerializer


class CeilingView(APIView):
    authentication_classes: ClassVar[list[type]] = []  # type: ignore[misc]
    permission_classes: ClassVar[list[type[BasePermission]]] = [AllowAny]  # type: ignore[misc]
    throttle_classes: ClassVar[list[type]] = []  # type: ignore[misc]

    def get(self, request: Request, charge_id: str) -> Response:
        row = Charge.objects.filter(pk=charge_id).values(*ChargeSerializer.Meta.fields).first()
        return Response({"success": True, "message": "ok", "data": row}, status=200 if row else 404)
