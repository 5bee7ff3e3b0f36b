"""The anchor's one view: a primary-key read through the connection's
cursor, returned as JSON by a DRF Response in the service's envelope."""

from __future__ import annotations

import uuid

from django.db import connection
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from bench.anchor import COLUMNS, TABLE

SQL = f"SELECT {', '.join(COLUMNS)} FROM {TABLE} WHERE id = %s"  # noqa: S608 - constants


class AnchorView(APIView):
    def get(self, request: Request, charge_id: uuid.UUID) -> Response:
        with connection.cursor() as cursor:
            cursor.execute(SQL, [charge_id])
            row = cursor.fetchone()
        if row is None:
            return Response({"success": False, "message": "not found", "data": None}, status=404)
        return Response({"success": True, "message": "ok", "data": dict(zip(COLUMNS, row, strict=True))})
