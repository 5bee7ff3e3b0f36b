"""What every account-facing API view shares: the base class, the success
envelope, the listing GET, and the OpenAPI description of the envelopes and
error statuses."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar, TypeVar

import django_filters
from django.db.models import QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiCallback,
    OpenApiExample,
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_view,
    inline_serializer,
)
from rest_framework import serializers
from rest_framework.exceptions import ParseError
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts import exceptions as auth_msg
from accounts.permissions import ACCOUNT_API
from api.listing import filter_and_paginate
from api.listing_statements import Scope
from api.schema import AMOUNT_FILTER, PAGE_PARAMETERS, TEXT_FILTER, AccountAutoSchema, timestamp_parameter

#: Every method but OPTIONS: DRF's answer to it described the view to anyone
#: (its docstring, the fields it takes). It is a 405 like any method a view lacks.
API_METHODS = [method for method in APIView.http_method_names if method != "options"]


class ServiceAPIView(APIView):
    """Base of every API view (see :data:`API_METHODS`)."""

    http_method_names = API_METHODS


class AccountAPIView(ServiceAPIView):
    """Authenticated by key pair; 401 → credential permission → approved →
    not blocked (decisions §2). Subclasses set ``required_permission``
    (``cashin``, ``cashout`` or ``any``) and may append feature checks."""

    permission_classes: ClassVar[list[type[BasePermission]]] = list(ACCOUNT_API)  # type: ignore[misc]
    required_permission: ClassVar[str]
    schema = AccountAutoSchema()

    @staticmethod
    def json_body(request: Request) -> Any:
        """The parsed JSON object. DRF reads an empty body as ``{}``; decisions
        §1 calls that "not a JSON object" (400), so it is refused here, after
        the auth and permission checks that must answer first."""
        if not request.body.strip():
            raise ParseError()
        return request.data


def ok(data: Any, message: str, status: int = 200) -> Response:
    return Response({"success": True, "message": message, "data": data}, status=status)


# --------------------------------------------------------------------------- OpenAPI


#: Where events go, for the docs: a literal, as OpenAPI's callback key wants
#: an expression or a URL, and the endpoints are registered apart.
WEBHOOK_ENDPOINT_URL = "https://your-webhook-endpoint.example/events"


def event_callbacks(event_type: str, body: type[serializers.Serializer[Any]], *, postback: bool = False) -> list[Any]:
    """The webhook a change of this record sends, as OpenAPI callbacks of the
    operation that creates it: to every active endpoint of the account
    (``POST /api/webhooks``) and, for a charge, to its ``postback_url``."""
    operation = extend_schema(
        summary=f"`{event_type}` event",
        description=(
            "Sent on every status change, to every active webhook endpoint of the account"
            + (" and to the charge's `postback_url`" if postback else "")
            + ". Signed as Standard Webhooks: `webhook-id` (the event id, the same on every attempt), "
            "`webhook-timestamp` and `webhook-signature` (`v1,` + base64 HMAC-SHA256 of "
            "`id.timestamp.body` with the endpoint's secret). Any 2xx acknowledges it; anything else, "
            "or no answer in time, is retried (docs/webhooks.md: Webhooks for receivers)."
        ),
        # By media type: the mocked view drf-spectacular builds for a callback
        # parses with DRF's JSONParser, which PARSER_WHITELIST leaves out.
        request={"application/json": body},
        responses={200: OpenApiResponse(description="Any 2xx acknowledges the event.")},
    )
    callbacks = [OpenApiCallback(f"{event_type} event", WEBHOOK_ENDPOINT_URL, operation)]
    if postback:
        callbacks.append(
            OpenApiCallback(f"{event_type} event (postback_url)", "{$request.body#/postback_url}", operation)
        )
    return callbacks


def success_envelope(name: str, data: serializers.Field[Any, Any, Any, Any]) -> Any:
    return inline_serializer(
        name, {"success": serializers.BooleanField(default=True), "message": serializers.CharField(), "data": data}
    )


def created(name: str, data: serializers.Field[Any, Any, Any, Any], description: str, example: Any) -> OpenApiResponse:
    """A 201 in the success envelope, with what the demo answers as its example (the app's examples.py)."""
    return OpenApiResponse(success_envelope(name, data), description=description, examples=[example])


class PaginationSerializer(serializers.Serializer[Any]):
    current_page = serializers.IntegerField()
    last_page = serializers.IntegerField()
    per_page = serializers.IntegerField()
    total = serializers.IntegerField()


def listing_envelope(name: str, collection: str, item: serializers.BaseSerializer[Any]) -> Any:
    """``{success, message, data: {<collection>: [...], pagination}}``."""
    return success_envelope(
        name, inline_serializer(f"{name}Data", {collection: item, "pagination": PaginationSerializer()})
    )


class _ErrorEnvelope(serializers.Serializer[Any]):
    success = serializers.BooleanField(default=False)
    message = serializers.CharField()
    data = serializers.JSONField(allow_null=True, default=None, help_text="Always null.")  # type: ignore[assignment]


class _ValidationErrors(serializers.Serializer[Any]):
    errors = serializers.DictField(  # type: ignore[assignment]
        child=serializers.ListField(child=serializers.CharField()),
        help_text="Field name (dotted for nested fields, e.g. `buyer.buyer_document`) → messages.",
    )


class _ValidationEnvelope(serializers.Serializer[Any]):
    success = serializers.BooleanField(default=False)
    message = serializers.CharField()
    data = _ValidationErrors()  # type: ignore[assignment]


class _AuthError(serializers.Serializer[Any]):
    error = serializers.CharField()
    message = serializers.CharField()


def error_response(description: str, message: str) -> OpenApiResponse:
    """An error-envelope response with its one example."""
    return OpenApiResponse(
        _ErrorEnvelope,
        description=description,
        examples=[OpenApiExample(description, value={"success": False, "message": message, "data": None})],
    )


AUTH_ERRORS: dict[int, OpenApiResponse] = {
    401: OpenApiResponse(
        _AuthError,
        description="Missing, unknown, wrong or revoked credentials.",
        examples=[
            OpenApiExample(
                "Missing headers", value={"error": "Credenciais inválidas", "message": auth_msg.MISSING_CREDENTIALS}
            ),
            OpenApiExample(
                "Unknown or inactive key",
                value={"error": "Credenciais inválidas", "message": auth_msg.INVALID_CREDENTIALS},
            ),
        ],
    ),
    403: OpenApiResponse(
        _ErrorEnvelope,
        description="Credential without permission, account not approved, or account blocked (checked in this order).",
        examples=[
            OpenApiExample("No permission", value={"success": False, "message": auth_msg.NO_PERMISSION, "data": None}),
            OpenApiExample("Not approved", value={"success": False, "message": auth_msg.NOT_APPROVED, "data": None}),
            OpenApiExample("Blocked", value={"success": False, "message": auth_msg.BLOCKED, "data": None}),
        ],
    ),
    413: error_response(
        "The body is larger than the service accepts (`API_MAX_BODY_BYTES`, 256 KiB by default).",
        "Corpo da requisição muito grande.",
    ),
    429: error_response(
        "Rate limit exceeded (`Retry-After` says when to retry).",
        "Limite de requisições excedido. Tente novamente em instantes.",
    ),
    500: error_response("Unexpected error; never carries a trace.", "Erro interno do servidor."),
}


def business_errors(description: str, messages: dict[str, str]) -> OpenApiResponse:
    """A 400 with one example per message it may carry: the invalid body
    first, then each business rule, in the order the endpoint checks them."""
    examples = {"Invalid body": "Corpo da requisição inválido.", **messages}
    return OpenApiResponse(
        _ErrorEnvelope,
        description=description,
        examples=[
            OpenApiExample(name, value={"success": False, "message": message, "data": None})
            for name, message in examples.items()
        ],
    )


def error_examples(description: str, messages: dict[str, str]) -> OpenApiResponse:
    """An error-envelope response with one example per message it may carry."""
    return OpenApiResponse(
        _ErrorEnvelope,
        description=description,
        examples=[
            OpenApiExample(name, value={"success": False, "message": message, "data": None})
            for name, message in messages.items()
        ],
    )


VALIDATION_ERROR = OpenApiResponse(_ValidationEnvelope, description="Invalid fields, one entry per field.")
BAD_BODY = error_response(
    "The body is not a JSON object, or a business rule refused the request.", "Corpo da requisição inválido."
)
INVALID_BODY = error_response("The body is not a JSON object.", "Corpo da requisição inválido.")


LISTING_PARAMETERS = [
    OpenApiParameter("id", OpenApiTypes.UUID, description="Exact id."),
    OpenApiParameter("e2e_id", {**TEXT_FILTER, "maxLength": 64}, description="Exact end-to-end id."),
    OpenApiParameter("amount_min", AMOUNT_FILTER, description="Centavos, inclusive."),
    OpenApiParameter("amount_max", AMOUNT_FILTER, description="Centavos, inclusive."),
    timestamp_parameter("paid_at_start", "`YYYY-MM-DD HH:mm:ss`, America/Sao_Paulo, inclusive."),
    timestamp_parameter("paid_at_end", "`YYYY-MM-DD HH:mm:ss`, America/Sao_Paulo, inclusive."),
    timestamp_parameter("created_at_start", "`YYYY-MM-DD HH:mm:ss`, America/Sao_Paulo, inclusive."),
    timestamp_parameter("created_at_end", "`YYYY-MM-DD HH:mm:ss`, America/Sao_Paulo, inclusive."),
    *PAGE_PARAMETERS,
]

IDEMPOTENCY_HEADER = OpenApiParameter(
    "Idempotency-Key",
    {"type": "string", "minLength": 1, "maxLength": 255},
    location=OpenApiParameter.HEADER,
    required=False,
    description=(
        "1-255 characters. The same key with the same body within 24 h replays the first response "
        "(header `Idempotent-Replayed: true`); with another body → 422 under `idempotency_key`; "
        "while the first is still running → 409."
    ),
)
IDEMPOTENCY_RESPONSES = [
    (
        409,
        error_response(
            "A request with this Idempotency-Key is still running.",
            "Uma requisição com esta chave de idempotência ainda está em processamento.",
        ),
    )
]


def not_found(message: str) -> OpenApiResponse:
    return error_response("Unknown id, malformed id, or another account's record.", message)


def responses(success: dict[Any, Any], *extra: tuple[int, OpenApiResponse]) -> dict[Any, Any]:
    """Success responses + the auth errors every account endpoint can return + ``extra``."""
    out: dict[Any, Any] = dict(success)
    out.update(AUTH_ERRORS)
    out.update(dict(extra))
    return out


# --------------------------------------------------------------------------- listings


# The GET of a listing (decisions §3): the records ``listing_queryset``
# returns, filtered by ``filterset_class`` and paged newest first, answered as
# ``{<collection>: [...], "pagination": {...}}``. Mixed into an account API
# view and documented by ``listing_schema``. (Comments, not docstrings:
# drf-spectacular shows a view's inherited docstrings as its description.)
class ListingMixin:
    filterset_class: ClassVar[type[django_filters.FilterSet]]
    item_serializer: ClassVar[type[serializers.BaseSerializer[Any]]]
    collection: ClassVar[str]
    listed_message: ClassVar[str]
    #: The OpenAPI component of the 200 body.
    schema_name: ClassVar[str]

    def listing_queryset(self, request: Request, **kwargs: Any) -> QuerySet[Any]:
        # The account's records (the URL's kwargs given); 404s are raised here.
        raise NotImplementedError

    def listing_scope(self, request: Request, **kwargs: Any) -> Scope[Any] | None:
        # The account's records as a shape whose count and page compile once
        # (api.listing_statements), used instead of listing_queryset; None: not one.
        return None

    def get(self, request: Request, **kwargs: Any) -> Response:
        records = self.listing_scope(request, **kwargs) or self.listing_queryset(request, **kwargs)
        items, pagination = filter_and_paginate(self.filterset_class, records, request.query_params)
        data = self.item_serializer(items, many=True).data
        return ok({self.collection: data, "pagination": pagination}, self.listed_message)


L = TypeVar("L", bound=ListingMixin)


def listing_schema(
    *,
    extra_responses: Sequence[tuple[int, OpenApiResponse]] = (),
    example: OpenApiExample | None = None,
    **operation: Any,
) -> Callable[[type[L]], type[L]]:
    """Class decorator: the OpenAPI operation of a :class:`ListingMixin`
    view's GET. ``operation`` as for ``extend_schema`` (tags, summary,
    parameters...); the responses are the listing envelope (with
    ``example``, when given), the auth errors, ``extra_responses`` and the
    422 of an invalid parameter."""

    def attach(view: type[L]) -> type[L]:
        envelope = listing_envelope(view.schema_name, view.collection, view.item_serializer(many=True))
        if example is not None:
            envelope = OpenApiResponse(envelope, description="The page.", examples=[example])
        answers = responses({200: envelope}, *extra_responses, (422, VALIDATION_ERROR))
        return extend_schema_view(get=extend_schema(responses=answers, **operation))(view)

    return attach
