"""Text staff type that ends up on one line of something others read (the
greeting of a claim e-mail, a CSV cell, a log line): no line breaks, tabs or
other control characters, which a crafted form POST could otherwise slip in
to add lines of instructions of its own."""

from __future__ import annotations

import unicodedata

from django.core.exceptions import ValidationError

#: Unicode's control characters (\r, \n, \t, NUL, ESC...) and its line and paragraph separators.
_BREAKING = frozenset({"Cc", "Zl", "Zp"})
CONTROL_CHARACTERS = "Use uma única linha, sem quebras de linha, tabulações nem outros caracteres de controle."


def has_control_characters(value: str) -> bool:
    return any(unicodedata.category(char) in _BREAKING for char in value)


def single_line(value: str) -> str:
    """``value`` with every control character replaced by a space: what a
    value stored before the check is shown as where it must stay one line."""
    return "".join(" " if unicodedata.category(char) in _BREAKING else char for char in value)


def validate_single_line(value: str) -> None:
    """A field validator (models, forms, serializers): refuses control characters with a pt-BR message."""
    if has_control_characters(value):
        raise ValidationError(CONTROL_CHARACTERS, code="control_characters")
