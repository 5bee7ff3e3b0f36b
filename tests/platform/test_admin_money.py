"""Money as staff read and type it in the back office (core.admin.money)."""

from __future__ import annotations

import re

import pytest
from django import forms

from core.admin.money import ReaisField, parse_reais


@pytest.mark.parametrize(
    ("typed", "centavos"),
    [
        ("1.234,56", 123456),
        ("R$ 1.234,56", 123456),
        ("1234,56", 123456),
        ("1234.56", 123456),
        ("12", 1200),
        ("0,5", 50),
        ("1.234", 123400),
        ("1.234.567,89", 123456789),
        ("-3,00", -300),
    ],
)
def test_reais_typed_the_brazilian_way_become_centavos(typed: str, centavos: int) -> None:
    assert parse_reais(typed) == centavos


@pytest.mark.parametrize("typed", ["12,345", "abc", "1,2,3", "1,234.56", "", "R$"])
def test_anything_else_is_refused_never_rounded(typed: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(typed)}$"):
        parse_reais(typed)


def test_the_form_field_shows_reais_and_gives_centavos() -> None:
    field = ReaisField(required=True)
    assert field.prepare_value(123456) == "1.234,56"
    assert field.clean("1.234,56") == 123456
    with pytest.raises(forms.ValidationError, match="Informe um valor em reais"):
        field.clean("12,345")
    assert not field.has_changed(123456, "1.234,56")
    assert field.has_changed(123456, "1.234,57")
