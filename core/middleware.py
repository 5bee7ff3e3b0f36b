"""Request id: accepted from a trusted-looking ``X-Request-ID`` or generated,
set on every log line of the request and echoed in the response header.
API answers are never cached: they carry balances, payer data and, once,
secrets. Request bodies under /api/ are capped before anything reads them."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse, UnreadablePostError

from core.exceptions import BODY_TOO_LARGE_MESSAGE, envelope
from core.logging import request_id_var

# A caller-supplied id is echoed and logged, so it must be short and inert.
_SAFE_REQUEST_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


class RequestIdMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        incoming = request.headers.get("X-Request-ID", "")
        request_id = incoming if _SAFE_REQUEST_ID.match(incoming) else uuid.uuid4().hex
        request.request_id = request_id  # type: ignore[attr-defined]
        token = request_id_var.set(request_id)
        try:
            response = self.get_response(request)
        finally:
            request_id_var.reset(token)
        response["X-Request-ID"] = request_id
        if request.path.startswith("/api/") and not response.has_header("Cache-Control"):
            response["Cache-Control"] = "no-store"
        return response


#: An oversized body up to this size is read and thrown away before the 413,
#: so the client's keep-alive connection stays usable: gunicorn itself drains
#: only 64 KiB of an unread body and closes the connection past that, which
#: the client sees as its next request dropped. A larger one is not worth
#: reading: gunicorn closes that connection.
DRAIN_MAX_BYTES = 16 * 1024 * 1024
_CHUNK = 64 * 1024


class RequestBodyLimitMiddleware:
    """A body above ``API_MAX_BODY_BYTES`` under /api/ is a 413 in the error
    envelope, decided from its Content-Length: it is never kept in memory,
    parsed, authenticated or stored. (Django reads a body without
    Content-Length as empty, so there is no other way past the limit.)"""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path.startswith("/api/"):
            try:
                length = int(request.META.get("CONTENT_LENGTH") or 0)
            except ValueError:
                length = 0  # gunicorn refuses a malformed Content-Length before we see it
            if length > settings.API_MAX_BODY_BYTES:
                if length <= DRAIN_MAX_BYTES:
                    try:
                        while request.read(_CHUNK):
                            pass
                    except UnreadablePostError:
                        pass  # the client went away: nobody reads the answer
                return JsonResponse(envelope(BODY_TOO_LARGE_MESSAGE), status=413)
        return self.get_response(request)
