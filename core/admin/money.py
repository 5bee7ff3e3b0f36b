"""Money in the back office as staff read and type it: ``R$ 1.234,56``
columns and reais inputs for the centavos the models store."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest

from core.money import brl


def money(field: str, description: str) -> Callable[[Any, Any], str]:
    """A list or detail column showing ``field`` (centavos) as ``R$ 1.234,56``,
    sorted by the stored integer. Use as a ModelAdmin attribute:
    ``amount_brl = money("amount", "Valor")``."""

    @admin.display(description=description, ordering=field)
    def column(modeladmin: Any, record: Any) -> str:
        value = getattr(record, field)
        return "—" if value is None else brl(value)

    column.__name__ = f"{field}_brl"
    return column


_REAIS = re.compile(r"^-?\d+(?:[.,]\d{1,2})?$")


def parse_reais(text: str) -> int:
    """``"1.234,56"``, ``"R$ 1234,56"``, ``"1234.56"``, ``"12"`` → centavos.

    A comma is always the decimal mark when present (dots before it group
    thousands); without a comma a dot followed by one or two digits at the end
    is the decimal mark, any other dot groups thousands ("1.234" is R$ 1.234,00).
    More than two decimals is refused, never rounded: money is not guessed."""
    value = text.strip().removeprefix("R$").strip().replace(" ", "")
    if "," in value or not re.search(r"\.\d{1,2}$", value):
        value = value.replace(".", "")
    if not _REAIS.match(value):
        raise ValueError(text)
    negative = value.startswith("-")
    whole, _, cents = value.lstrip("-").replace(",", ".").partition(".")
    centavos = int(whole) * 100 + int((cents + "00")[:2])
    return -centavos if negative else centavos


class ReaisField(forms.CharField):
    """A form field for a centavos column that staff fill in reais
    (``1.234,56``); the model still receives and validates integer centavos."""

    default_error_messages = {
        "invalid": "Informe um valor em reais, por exemplo 1.234,56 (no máximo dois decimais).",
    }

    def __init__(self, **kwargs: Any) -> None:
        kwargs.pop("max_length", None)
        kwargs.pop("min_value", None)
        kwargs.pop("max_value", None)
        kwargs.pop("step_size", None)
        super().__init__(**kwargs)
        self.widget.attrs.setdefault("inputmode", "decimal")
        self.widget.attrs.setdefault("placeholder", "0,00")

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool):
            return brl(value).replace("R$ ", "")
        return value

    def to_python(self, value: Any) -> int | None:  # type: ignore[override]
        text = super().to_python(value)
        if text is None or text in self.empty_values:
            return None
        try:
            return parse_reais(text)
        except ValueError:
            raise forms.ValidationError(self.error_messages["invalid"], code="invalid") from None

    def has_changed(self, initial: Any, data: Any) -> bool:
        try:
            return bool(self.to_python(data) != initial)
        except forms.ValidationError:
            return True


class ReaisFieldsMixin:
    """ModelAdmin mixin: the centavos fields named in ``reais_fields`` are
    typed in reais on the change form (label, help text and required-ness
    stay the model's; a note says the unit)."""

    reais_fields: tuple[str, ...] = ()

    def formfield_for_dbfield(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name in self.reais_fields:
            help_text = str(db_field.help_text or "")
            return ReaisField(
                label=str(db_field.verbose_name).capitalize(),
                required=not db_field.blank,
                help_text=f"{help_text} Em reais, por exemplo 1.234,56.".strip(),
            )
        return super().formfield_for_dbfield(db_field, request, **kwargs)  # type: ignore[misc]
