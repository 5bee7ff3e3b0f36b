"""Serializer fields shared by the APIs."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers


class StrictIntegerField(serializers.IntegerField):
    """A JSON integer and nothing else: ``"100"``, ``100.5`` and ``true`` are
    refused (decisions §1), where DRF would coerce them."""

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictBooleanField(serializers.BooleanField):
    """A JSON boolean and nothing else (no ``"yes"``, ``1``)."""

    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            self.fail("invalid", input=data)
        return data


class StrictCharField(serializers.CharField):
    """A JSON string: numbers are not silently turned into text."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictRegexField(serializers.RegexField):
    """A JSON string matching the pattern (a JSON number is not text)."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return str(super().to_internal_value(data))


class HttpUrlField(serializers.URLField):
    """An absolute http(s) URL."""

    default_error_messages = {"invalid": "Informe uma URL http ou https válida."}

    def to_internal_value(self, data: Any) -> str:
        value = super().to_internal_value(data)
        if not value.lower().startswith(("http://", "https://")):
            self.fail("invalid")
        return value
