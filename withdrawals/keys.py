"""Destination PIX keys: validation and the stored form of each type (decisions §5)."""

from __future__ import annotations

import re
import uuid

from django.core.exceptions import ValidationError
from django.core.validators import validate_email

from core.documents import normalize_cnpj, normalize_cpf

MAX_KEY_LENGTH = 77
INVALID_KEY = "Chave PIX inválida para o tipo informado."

_PHONE = re.compile(r"^(?:\+?55)?([1-9][0-9])(9?[0-9]{8})$")
_EVP = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def _email(value: str) -> str | None:
    lowered = value.strip().lower()
    if len(lowered) > MAX_KEY_LENGTH:
        return None
    try:
        validate_email(lowered)
    except ValidationError:
        return None
    return lowered


def _phone(value: str) -> str | None:
    compact = re.sub(r"[\s()\-]", "", value)
    match = _PHONE.match(compact)
    if not match:
        return None
    area, number = match.groups()
    # Mobile numbers have 9 digits starting with 9; landlines 8 digits.
    if len(number) == 9 and not number.startswith("9"):
        return None
    return f"+55{area}{number}"


def _random(value: str) -> str | None:
    lowered = value.strip().lower()
    if not _EVP.match(lowered):
        return None
    return str(uuid.UUID(lowered))


_NORMALIZERS = {
    "cpf": normalize_cpf,
    "cnpj": normalize_cnpj,
    "email": _email,
    "phone": _phone,
    "random": _random,
}


def normalize_key(key_type: str, value: str) -> str | None:
    """The key as stored (CPF digits, CNPJ upper-case, e-mail lower-case,
    phone ``+55…``, EVP lower-case), or None when it does not fit its type."""
    if len(value) > MAX_KEY_LENGTH:
        return None
    normalized = _NORMALIZERS[key_type](value)
    return normalized if normalized is not None and len(normalized) <= MAX_KEY_LENGTH else None
