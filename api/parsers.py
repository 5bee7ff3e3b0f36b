"""JSON parsers that only accept a JSON object as a request body.

Decisions §1: a body that is not a JSON object is a 400 "Corpo da requisição
inválido.". The second parser takes any content type, so a client that forgot
``Content-Type: application/json`` (curl -d) is parsed the same way instead
of getting a 415. It is a sibling of :class:`JSONObjectParser`, not a
subclass, so that the OpenAPI schema (``PARSER_WHITELIST`` matches
subclasses) documents ``application/json`` only: a client that sends YAML or
a form as ``*/*`` would be told it may, and then get a 400.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import IO, Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser


class _ObjectOnly(JSONParser):
    def parse(
        self, stream: IO[Any], media_type: str | None = None, parser_context: Mapping[str, Any] | None = None
    ) -> Any:
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            # json gives up on a body nested deeper than the interpreter's
            # recursion limit (``[[[[…``); DRF only expects ValueError.
            raise ParseError() from None
        if not isinstance(data, dict):
            raise ParseError()
        return data


class JSONObjectParser(_ObjectOnly):
    pass


class AnyContentJSONObjectParser(_ObjectOnly):
    media_type = "*/*"
