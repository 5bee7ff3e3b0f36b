"""Request id: accepted from a trusted-looking ``X-Request-ID`` or generated,
set on every log line of the request and echoed in the response header.
API answers are never cached: they carry balances, payer data and, once,
secrets. Request bodies under /api/ are capped before anything reads them."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from typing import Any, cast

from django.conf import settings
from django.core import checks
from django.core.exceptions import MiddlewareNotUsed
from django.core.handlers.exception import convert_exception_to_response
from django.http import HttpRequest, HttpResponse, JsonResponse, UnreadablePostError
from django.utils.module_loading import import_string

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
    Content-Length as empty, so there is no other way past the limit.)
    The routes of ``API_MAX_BODY_BYTES_BY_PATH`` may take more (a MED
    defence's files)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        self.larger: list[tuple[re.Pattern[str], int]] = [
            (re.compile(pattern), max(int(limit), int(settings.API_MAX_BODY_BYTES)))
            for pattern, limit in getattr(settings, "API_MAX_BODY_BYTES_BY_PATH", {}).items()
        ]

    def _limit(self, path: str) -> int:
        for pattern, limit in self.larger:
            if pattern.match(path):
                return limit
        return int(settings.API_MAX_BODY_BYTES)

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path.startswith("/api/"):
            try:
                length = int(request.META.get("CONTENT_LENGTH") or 0)
            except ValueError:
                length = 0  # gunicorn refuses a malformed Content-Length before we see it
            if length > settings.API_MAX_BODY_BYTES and length > self._limit(request.path):
                if length <= DRAIN_MAX_BYTES:
                    try:
                        while request.read(_CHUNK):
                            pass
                    except UnreadablePostError:
                        pass  # the client went away: nobody reads the answer
                return JsonResponse(envelope(BODY_TOO_LARGE_MESSAGE), status=413)
        return self.get_response(request)


def is_machine_api(path: str) -> bool:
    """Key-authenticated routes: under /api/, except the pages people open in
    a browser (Swagger UI and the schema it loads)."""
    return path.startswith("/api/") and not path.startswith(("/api/docs", "/api/schema"))


class SiteOnlyMiddleware:
    """Runs ``SITE_MIDDLEWARE`` (static files, sessions, Django auth,
    messages, django-axes: what the admin and the browser pages need) around
    every request except the key-authenticated API's, which needs none of it
    (py-spy: 7 % of a key-authenticated read's CPU).

    The wrapped middleware is built as Django builds its chain (each layer
    turns an exception into a response, ``MiddlewareNotUsed`` leaves it out)
    and keeps its order and hooks: its ``process_view``, ``process_exception``
    and ``process_template_response`` are called from here, in the order
    Django would, for the requests it wraps. Test clients go through this
    too, so tests see the chain that is deployed.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        handler: Callable[[HttpRequest], Any] = get_response
        wrapped: list[Any] = []
        for path in reversed(settings.SITE_MIDDLEWARE):
            try:
                instance = import_string(path)(handler)
            except MiddlewareNotUsed:
                continue
            wrapped.insert(0, instance)
            handler = convert_exception_to_response(instance)
        # Synchronous throughout (WSGI): every layer answers with a response.
        self.site = cast(Callable[[HttpRequest], HttpResponse], handler)
        self._view_hooks = [m.process_view for m in wrapped if hasattr(m, "process_view")]
        self._exception_hooks = [m.process_exception for m in reversed(wrapped) if hasattr(m, "process_exception")]
        self._template_hooks = [
            m.process_template_response for m in reversed(wrapped) if hasattr(m, "process_template_response")
        ]

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if is_machine_api(request.path_info):
            return self.get_response(request)
        return self.site(request)

    def process_view(self, request: HttpRequest, view: Callable[..., Any], args: Any, kwargs: Any) -> Any:
        if is_machine_api(request.path_info):
            return None
        for hook in self._view_hooks:
            response = hook(request, view, args, kwargs)
            if response is not None:
                return response
        return None

    def process_exception(self, request: HttpRequest, exception: Exception) -> Any:
        if is_machine_api(request.path_info):
            return None
        for hook in self._exception_hooks:
            response = hook(request, exception)
            if response is not None:
                return response
        return None

    def process_template_response(self, request: HttpRequest, response: Any) -> Any:
        if is_machine_api(request.path_info):
            return response
        for hook in self._template_hooks:
            response = hook(request, response)
        return response


#: What the admin and django-axes require, which their own checks look for in
#: MIDDLEWARE only (so they are silenced in the settings, and checked here).
SITE_REQUIRED = (
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # The back office's second factor: without it no staff session is ever verified.
    "django_otp.middleware.OTPMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "axes.middleware.AxesMiddleware",
)


def check_site_middleware(**_: Any) -> list[checks.CheckMessage]:
    """The silenced admin.E408-E410 and axes.W002, against SITE_MIDDLEWARE (in order), and
    django-otp's middleware after Django's authentication."""
    site = list(getattr(settings, "SITE_MIDDLEWARE", []))
    problems: list[checks.CheckMessage] = []
    if "core.middleware.SiteOnlyMiddleware" not in settings.MIDDLEWARE:
        problems.append(checks.Error("core.middleware.SiteOnlyMiddleware is not in MIDDLEWARE", id="core.E001"))
    positions = [site.index(path) if path in site else -1 for path in SITE_REQUIRED]
    if -1 in positions or positions != sorted(positions) or positions[-1] != len(site) - 1:
        problems.append(
            checks.Error(
                f"SITE_MIDDLEWARE must hold {', '.join(SITE_REQUIRED)} in this order, axes last",
                id="core.E002",
            )
        )
    return problems
