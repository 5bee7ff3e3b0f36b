"""JSON parsers that only accept a JSON object as a request body.

Decisions §1: a body that is not a JSON object is a 400 "Corpo da requisição
inválido.". The second parser takes any content type, so a client that forgot
``Content-Type: application/json`` (curl -d) is parsed the same way instead
of getting a 415.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import IO, Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser


class JSONObjectParser(JSONParser):
    def parse(
        self, stream: IO[Any], media_type: str | None = None, parser_context: Mapping[str, Any] | None = None
    ) -> Any:
        data = super().parse(stream, media_type, parser_context)
        if not isinstance(data, dict):
            raise ParseError()
        return data


class AnyContentJSONObjectParser(JSONObjectParser):
    media_type = "*/*"
