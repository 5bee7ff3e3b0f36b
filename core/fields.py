"""Serializer fields shared by the APIs."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any
from urllib.parse import urlsplit

from django.core.validators import URLValidator
from rest_framework import serializers

_ISO_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
DATE_FORMAT_MESSAGE = "Informe uma data válida no formato AAAA-MM-DD."


class IsoDateField(serializers.DateField):
    """Exactly ``YYYY-MM-DD``: DRF's own also takes one-digit months and days."""

    default_error_messages = {"invalid": DATE_FORMAT_MESSAGE, "datetime": DATE_FORMAT_MESSAGE}

    def to_internal_value(self, value: Any) -> dt.date:
        if not isinstance(value, str) or not _ISO_DATE.fullmatch(value):
            self.fail("invalid")
        return super().to_internal_value(value)


class StrictIntegerField(serializers.IntegerField):
    """A JSON integer and nothing else: ``"100"``, ``100.5`` and ``true`` are
    refused (decisions §1), where DRF would coerce them."""

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictDecimalField(serializers.DecimalField):
    """A JSON number only (not a string, not a boolean)."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, bool) or not isinstance(data, int | float):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictBooleanField(serializers.BooleanField):
    """``true`` or ``false`` only: DRF alone would take ``"yes"``, ``1`` and ``"on"``."""

    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            self.fail("invalid", input=data)
        return data


class StrictCharField(serializers.CharField):
    """A JSON string only: DRF alone would turn ``123`` into ``"123"``. Text
    the database cannot store is refused here, before anything else happens:
    U+0000 (DRF's own check) and lone surrogates (``"\\ud800"`` is valid JSON,
    not UTF-8)."""

    default_error_messages = {"surrogate": "O texto não pode conter caracteres substitutos (U+D800 a U+DFFF)."}

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        if any("\ud800" <= char <= "\udfff" for char in data):
            self.fail("surrogate")
        return super().to_internal_value(data)


class StrictChoiceField(serializers.ChoiceField):
    """A JSON string among the choices: DRF alone would match ``1`` to ``"1"``."""

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, str):
            self.fail("invalid_choice", input=data)
        return super().to_internal_value(data)


class StrictRegexField(serializers.RegexField):
    """A JSON string matching the pattern (a JSON number is not text)."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return str(super().to_internal_value(data))


class HttpUrlField(StrictCharField):
    """An absolute ``http``/``https`` URL (DRF's URLField also takes ``ftp``)."""

    default_error_messages = {"invalid_url": "Informe uma URL http ou https válida."}

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.validators.append(URLValidator(schemes=["http", "https"], message=self.error_messages["invalid_url"]))

    def to_internal_value(self, data: Any) -> str:
        value = super().to_internal_value(data)
        try:
            port = urlsplit(value).port  # URLValidator lets 99999 through
        except ValueError:
            self.fail("invalid_url")
        if port == 0:
            self.fail("invalid_url")
        return value


class OutputSerializer(serializers.ModelSerializer[Any]):
    """A ModelSerializer that only writes records out, and builds its fields
    once per class instead of once per instance: DRF deep-copies and
    re-derives every model field for each serializer it creates, a tenth of
    a key-authenticated read's CPU (py-spy under ``make bench``). The
    representation is DRF's own (``Serializer.to_representation``, per field),
    so every value reads exactly as before. Fields that use the serializer's
    context cannot be shared, so none may be declared here."""

    def to_representation(self, instance: Any) -> dict[str, Any]:
        fields = type(self).__dict__.get("_shared_fields")
        if fields is None:
            # Bound to a throwaway instance: output fields only need their name and source.
            fields = [field for field in type(self)().fields.values() if not field.write_only]
            type(self)._shared_fields = fields  # type: ignore[attr-defined]
        out: dict[str, Any] = {}
        for field in fields:
            attribute = field.get_attribute(instance)
            out[field.field_name] = None if attribute is None else field.to_representation(attribute)
        return out


class SharedFieldsSerializer(serializers.Serializer[Any]):
    """A request body serializer whose fields are built once per class and
    shared by every instance, in every thread. DRF deep-copies the declared
    fields for each serializer it creates (each ``Field.__deepcopy__`` runs the
    field's ``__init__`` again): 14 % of a charge's CPU (``python -m
    bench.profile post``). Sharing is safe for what validation does with
    them: fields keep no state of a call (the value and the errors travel in
    arguments and exceptions, the validated data on this instance), and
    nothing declared here may read the serializer's context or ``partial``
    (they would see the class's prototype, built without either)."""

    @property
    def fields(self) -> Any:
        cls = type(self)
        shared = cls.__dict__.get("_shared_fields")
        if shared is None:
            prototype = cls.__new__(cls)
            serializers.Serializer.__init__(prototype)
            # DRF's own cached property, computed once on the prototype.
            shared = serializers.Serializer.__dict__["fields"].__get__(prototype, cls)
            cls._shared_fields = shared  # type: ignore[attr-defined]
        return shared
