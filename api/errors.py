"""The one handler that turns every error into the contract's envelopes.

Business code raises :class:`core.exceptions.PixServiceError` subclasses;
DRF's own exceptions (validation, parse, auth, 404, 405, throttling) and
anything unexpected are mapped here too, so no other code builds an error body.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.http import Http404
from rest_framework import exceptions as drf
from rest_framework.response import Response

from core.exceptions import (
    AUTH_ERROR,
    INTERNAL_ERROR_MESSAGE,
    INVALID_BODY_MESSAGE,
    METHOD_NOT_ALLOWED_MESSAGE,
    NON_FIELD_ERRORS,
    NOT_FOUND_MESSAGE,
    THROTTLED_MESSAGE,
    VALIDATION_MESSAGE,
    BodyTooLarge,
    PixServiceError,
    ValidationFailed,
    envelope,
)

logger = logging.getLogger("pix_service.errors")


def flatten_errors(detail: Any, prefix: str = "") -> dict[str, list[str]]:
    """DRF's nested error structure → ``{"buyer.buyer_document": [...], "acquirers.0.priority": [...]}``."""
    out: dict[str, list[str]] = {}
    if isinstance(detail, Mapping):
        for key, value in detail.items():
            # DRF files "buyer is not an object" under buyer.non_field_errors;
            # clients expect the field's own name.
            name = prefix if (prefix and key == NON_FIELD_ERRORS) else (f"{prefix}.{key}" if prefix else str(key))
            out.update(flatten_errors(value, name))
    elif isinstance(detail, list | tuple):
        if all(not isinstance(item, Mapping | list | tuple) for item in detail):
            if detail:
                out[prefix or "non_field_errors"] = [str(item) for item in detail]
        else:
            for index, item in enumerate(detail):
                if item:
                    out.update(flatten_errors(item, f"{prefix}.{index}" if prefix else str(index)))
    else:
        out[prefix or "non_field_errors"] = [str(detail)]
    return out


def _view_attr(context: Mapping[str, Any], name: str, default: str) -> str:
    view = context.get("view")
    value = getattr(view, name, None) if view is not None else None
    return value if isinstance(value, str) else default


def api_exception_handler(exc: Exception, context: Mapping[str, Any]) -> Response:
    """DRF ``EXCEPTION_HANDLER``: every error of every API view goes through here."""
    # Imported here: rest_framework.views imports the authentication classes,
    # which import this module.
    from rest_framework.views import set_rollback

    set_rollback()
    headers: dict[str, str] = {}

    if isinstance(exc, RequestDataTooBig):
        # Django's own cap (DATA_UPLOAD_MAX_MEMORY_SIZE), should it ever be
        # below ours: the same answer, not a 500.
        exc = BodyTooLarge()

    if isinstance(exc, PixServiceError):
        data = {"errors": exc.errors} if isinstance(exc, ValidationFailed) else None
        retry_after = getattr(exc, "retry_after", None)
        if retry_after is not None:
            headers["Retry-After"] = str(retry_after)
        return Response(envelope(exc.message, data), status=exc.status_code, headers=headers)

    if isinstance(exc, drf.NotAuthenticated | drf.AuthenticationFailed):
        auth_header = getattr(exc, "auth_header", None)
        if auth_header:
            headers["WWW-Authenticate"] = str(auth_header)
        return Response({"error": AUTH_ERROR, "message": str(exc.detail)}, status=401, headers=headers)

    if isinstance(exc, drf.PermissionDenied | DjangoPermissionDenied):
        detail = getattr(exc, "detail", None) or "Acesso negado."
        return Response(envelope(str(detail)), status=403)

    if isinstance(exc, drf.ValidationError):
        return Response(
            envelope(
                _view_attr(context, "validation_message", VALIDATION_MESSAGE), {"errors": flatten_errors(exc.detail)}
            ),
            status=422,
        )

    if isinstance(exc, drf.ParseError | drf.UnsupportedMediaType):
        return Response(envelope(INVALID_BODY_MESSAGE), status=400)

    if isinstance(exc, drf.NotFound | Http404):
        return Response(envelope(_view_attr(context, "not_found_message", NOT_FOUND_MESSAGE)), status=404)

    if isinstance(exc, drf.MethodNotAllowed):
        return Response(envelope(METHOD_NOT_ALLOWED_MESSAGE), status=405)

    if isinstance(exc, drf.Throttled):
        wait = getattr(exc, "wait", None)
        if wait is not None:
            headers["Retry-After"] = str(max(1, math.ceil(wait)))
        return Response(envelope(THROTTLED_MESSAGE), status=429, headers=headers)

    if isinstance(exc, drf.APIException):
        return Response(envelope(str(exc.detail)), status=exc.status_code)

    # Anything else is a bug: log it with its trace (the request id rides on
    # the log record), never show it to the client.
    logger.exception("unhandled error in %s", type(context.get("view")).__name__)
    return Response(envelope(_internal_error_message(context)), status=500)


def _internal_error_message(context: Mapping[str, Any]) -> str:
    """A view may name its own 500 message per method (``POST /transactions``
    has one in the spec); everything else gets the generic one."""
    messages = getattr(context.get("view"), "internal_error_messages", None) or {}
    method = getattr(context.get("request"), "method", "")
    return str(messages.get(method, INTERNAL_ERROR_MESSAGE))
