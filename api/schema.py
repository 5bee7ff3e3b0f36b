"""What drf-spectacular cannot infer from our serializers, so that the
OpenAPI schema at ``/api/schema/`` says exactly what the API does (a
schemathesis run in CI holds it to that).

The extensions here register themselves when this module is imported;
:mod:`api.base`, which every account-facing view imports, does it.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from drf_spectacular.extensions import OpenApiSerializerExtension, OpenApiSerializerFieldExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiParameter

from api.listing import MAX_PER_PAGE

#: The OpenAPI ``format`` of every timestamp the API returns and every time
#: filter it takes: ``YYYY-MM-DD HH:mm:ss`` in America/Sao_Paulo (decisions
#: §1). A named format, not the exact calendar regex (TIMESTAMP_PATTERN, 304
#: characters that Swagger UI printed under every field): the fuzz run
#: generates values of this format with a strategy of its own
#: (tests/fuzz/hooks.py), and the filters still refuse what is not a real time.
TIMESTAMP_FORMAT = "local-datetime"
TIMESTAMP_SCHEMA: dict[str, Any] = {"type": "string", "format": TIMESTAMP_FORMAT, "example": "2025-01-31 14:05:09"}


def drop_field_titles(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """drf-spectacular postprocessing hook: no ``title`` on a property.

    drf-spectacular makes one of a model field's verbose name, which is the
    back office's pt-BR label ("Próxima tentativa"); the API's documentation
    is English and names each property by its key, with a description where
    one is needed."""
    for component in result.get("components", {}).get("schemas", {}).values():
        for prop in component.get("properties", {}).values():
            prop.pop("title", None)
    return result


def enum_descriptions(descriptions: Mapping[str, str]) -> Callable[..., dict[str, Any]]:
    """A drf-spectacular postprocessing hook giving these enum components
    (by name) their English descriptions: drf-spectacular would list the
    models' pt-BR labels. Each app builds its own beside its views (e.g.
    ``payments.examples.describe_enums``) and config/settings lists them."""

    def describe_enums(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        schemas = result.get("components", {}).get("schemas", {})
        for name, description in descriptions.items():
            if name in schemas:
                schemas[name]["description"] = description
        return result

    return describe_enums


# What str.strip() removes (Python's whitespace, which is not ECMA's \s).
_SPACE = r"\t-\r\u001c-\u0020\u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
#: A free-text filter: something left once stripped (blank is a 422), and no
#: U+0000 (Django's fields refuse it).
TEXT_FILTER: dict[str, Any] = {"type": "string", "pattern": rf"^[^\u0000]*[^\u0000{_SPACE}][^\u0000]*$"}
#: An amount filter: any integer (a bound past every amount matches nothing, as
#: it should, rather than failing: tests/withdrawals/test_listing.py).
AMOUNT_FILTER: dict[str, Any] = {"type": "integer"}


class TimestampFieldSchema(OpenApiSerializerFieldExtension):  # type: ignore[no-untyped-call]
    """``DateTimeField`` renders ``REST_FRAMEWORK["DATETIME_FORMAT"]``
    (``YYYY-MM-DD HH:mm:ss``, America/Sao_Paulo; decisions §1), not the
    ISO 8601 ``date-time`` drf-spectacular assumes."""

    target_class = "rest_framework.fields.DateTimeField"
    match_subclasses = True

    def map_serializer_field(self, auto_schema: AutoSchema, direction: str) -> dict[str, Any]:
        if direction == "response":
            return dict(TIMESTAMP_SCHEMA)
        # No request field takes a timestamp today; keep DRF's input reading documented as is.
        schema: dict[str, Any] = auto_schema._map_serializer_field(  # type: ignore[no-untyped-call]
            self.target, direction, bypass_extensions=True
        )
        return schema


# Mixin for request serializers whose view or service enforces rules the
# fields alone do not show (one field of two, bounds checked by a service).
# ``openapi_extra`` is merged into the serializer's request schema:
# ``properties`` per property, every other keyword as is. (A comment, not a
# docstring: drf-spectacular would show an inherited docstring as the
# description of every serializer using the mixin.)
class SchemaExtras:
    openapi_extra: ClassVar[dict[str, Any]] = {}


class SchemaExtrasExtension(OpenApiSerializerExtension):  # type: ignore[no-untyped-call]
    target_class = "api.schema.SchemaExtras"
    match_subclasses = True

    def map_serializer(self, auto_schema: AutoSchema, direction: str) -> dict[str, Any]:
        schema: dict[str, Any] = auto_schema._map_basic_serializer(self.target, direction)  # type: ignore[no-untyped-call]
        if direction != "request":
            return schema
        extra = copy.deepcopy(self.target.openapi_extra)
        for name, keywords in extra.pop("properties", {}).items():
            schema["properties"][name].update(keywords)
        schema.update(extra)
        return schema


RESPONSE_HEADERS = [
    OpenApiParameter(
        "X-Request-ID",
        str,
        OpenApiParameter.HEADER,
        required=True,
        response=True,
        description="The request's id (yours when it is `[A-Za-z0-9._-]{1,64}`), also on every log line.",
    ),
    OpenApiParameter(
        "Retry-After",
        int,
        OpenApiParameter.HEADER,
        required=True,
        response=[429],
        description="Seconds until the rate limit window ends.",
    ),
]


class AccountAutoSchema(AutoSchema):
    """The schema class of the account API views: the response headers
    every answer carries, and required request bodies.

    Their request bodies are read by ``AccountAPIView.json_body()``, which
    refuses a missing body (400, decisions §1) even where no single field is
    required (``PUT /pix-cash-in/acquirers``: one field of two)."""

    def get_override_parameters(self) -> list[Any]:
        return [*super().get_override_parameters(), *RESPONSE_HEADERS]

    def _get_request_body(self, direction: str = "request") -> dict[str, Any] | None:
        body: dict[str, Any] | None = super()._get_request_body(direction)  # type: ignore[no-untyped-call]
        if body:
            body["required"] = True
        return body


def uuid_path(name: str, description: str = "") -> OpenApiParameter:
    """A path id: any other text is a 404, as an unknown id is."""
    return OpenApiParameter(name, {"type": "string", "format": "uuid"}, OpenApiParameter.PATH, description=description)


def timestamp_parameter(name: str, description: str) -> OpenApiParameter:
    return OpenApiParameter(name, dict(TIMESTAMP_SCHEMA), description=description)


PAGE_PARAMETERS = [
    OpenApiParameter("page", {"type": "integer", "minimum": 1}, description="Page, default 1."),
    OpenApiParameter(
        "per_page",
        {"type": "integer", "minimum": 1, "maximum": MAX_PER_PAGE},
        description=f"Page size, 1..{MAX_PER_PAGE}, default 15.",
    ),
]
