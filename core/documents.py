"""Brazilian taxpayer documents (CPF, CNPJ numeric and alphanumeric), checked
by their check digits with validate-docbr."""

from __future__ import annotations

import re

from validate_docbr import CNPJ, CPF

_cpf, _cnpj = CPF(), CNPJ()
_FORMATTING = re.compile(r"[.\-/\s]")
_ALLOWED = re.compile(r"^[0-9A-Z]+$")


def normalize_cpf(value: str) -> str | None:
    """Digits of a valid CPF (formatting accepted), else None."""
    digits = _FORMATTING.sub("", value or "")
    return digits if len(digits) == 11 and digits.isascii() and digits.isdigit() and _cpf.validate(digits) else None


def normalize_cnpj(value: str) -> str | None:
    """The 14 characters of a valid CNPJ, numeric or alphanumeric, upper-cased, else None."""
    chars = _FORMATTING.sub("", (value or "").upper())
    return chars if len(chars) == 14 and _ALLOWED.match(chars) and _cnpj.validate(chars) else None


def normalize_document(value: str) -> str | None:
    """A valid CPF or CNPJ without formatting, else None."""
    return normalize_cpf(value) or normalize_cnpj(value)


def format_document(value: str) -> str:
    """``11222333000181`` → ``11.222.333/0001-81``; ``52998224725`` →
    ``529.982.247-25``; anything else as stored (for staff's screens)."""
    if len(value) == 14:
        return f"{value[:2]}.{value[2:5]}.{value[5:8]}/{value[8:12]}-{value[12:]}"
    if len(value) == 11 and value.isdigit():
        return f"{value[:3]}.{value[3:6]}.{value[6:9]}-{value[9:]}"
    return value


def bare_document(value: str) -> str:
    """A CPF/CNPJ as stored: no dots, dashes, slashes or spaces, upper-cased
    (not checked; ``*`` of a masked one kept)."""
    return _FORMATTING.sub("", value or "").upper()


def mask_document(value: str, *, cnpj_in_full: bool = False) -> str:
    """A CPF or CNPJ (digits, ``*`` where already masked, formatting
    accepted) masked and formatted as PSPs show them: ``***.456.789-**``,
    ``**.345.678/0001-**`` (``cnpj_in_full``: a company's document, public,
    formatted whole). Anything else is returned as given ("" stays "")."""
    chars = bare_document(value)
    if len(chars) == 11:
        return f"***.{chars[3:6]}.{chars[6:9]}-**"
    if len(chars) == 14:
        return format_document(chars) if cnpj_in_full else f"**.{chars[2:5]}.{chars[5:8]}/{chars[8:12]}-**"
    return value or ""
