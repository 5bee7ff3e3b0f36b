"""The service's errors and the contract's envelope and messages.

Business code raises :class:`PixServiceError` subclasses; the one handler
that turns them (and DRF's own exceptions) into responses is
:func:`api.errors.api_exception_handler`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rest_framework.settings import api_settings

VALIDATION_MESSAGE = "Erro de validação nos dados fornecidos"
AUTH_ERROR = "Credenciais inválidas"
INVALID_BODY_MESSAGE = "Corpo da requisição inválido."
NON_FIELD_ERRORS: str = api_settings.NON_FIELD_ERRORS_KEY
INTERNAL_ERROR_MESSAGE = "Erro interno do servidor."
NOT_FOUND_MESSAGE = "Recurso não encontrado."
METHOD_NOT_ALLOWED_MESSAGE = "Método não permitido."
THROTTLED_MESSAGE = "Limite de requisições excedido. Tente novamente em instantes."
BODY_TOO_LARGE_MESSAGE = "Corpo da requisição muito grande."
TOO_MANY_EXPORTS_MESSAGE = (
    "Limite de exportações simultâneas atingido para esta credencial. "
    "Aguarde o término de uma exportação em andamento e tente novamente."
)


class PixServiceError(Exception):
    """Root of every error the service raises on purpose.

    ``message`` is what the client reads (Portuguese, exact per the spec);
    ``code`` is a stable machine name for logs and tests.
    """

    status_code = 400
    default_message = "Não foi possível processar a requisição."
    default_code = "error"

    def __init__(self, message: str | None = None, *, code: str | None = None) -> None:
        self.message = message or self.default_message
        self.code = code or self.default_code
        super().__init__(self.message)


class BusinessRuleError(PixServiceError):
    """A valid request that the rules of the account or product refuse (400)."""

    default_code = "business_rule"


class ValidationFailed(PixServiceError):
    """Field errors found by a service rather than a serializer (422).

    ``errors`` maps dotted field names to lists of messages.
    """

    status_code = 422
    default_message = VALIDATION_MESSAGE
    default_code = "validation"

    def __init__(self, errors: Mapping[str, list[str]], message: str | None = None) -> None:
        super().__init__(message)
        self.errors = dict(errors)


class NotFoundError(PixServiceError):
    """The record does not exist or belongs to another account (404)."""

    status_code = 404
    default_message = NOT_FOUND_MESSAGE
    default_code = "not_found"


class AccessDenied(PixServiceError):
    """The caller is known but may not do this (403)."""

    status_code = 403
    default_code = "forbidden"


class ConflictError(PixServiceError):
    """The request clashes with one still being processed (409)."""

    status_code = 409
    default_code = "conflict"


class BodyTooLarge(PixServiceError):
    """The request body is larger than ``API_MAX_BODY_BYTES`` (413)."""

    status_code = 413
    default_message = BODY_TOO_LARGE_MESSAGE
    default_code = "body_too_large"


class TooManyExports(PixServiceError):
    """The credential already has ``API_EXPORTS_PER_CREDENTIAL`` CSV exports
    being sent (429, with a ``Retry-After`` of :attr:`retry_after` seconds:
    a slot frees when one of them ends, a time nobody knows)."""

    status_code = 429
    default_message = TOO_MANY_EXPORTS_MESSAGE
    default_code = "too_many_exports"
    retry_after = 10


class InsufficientBalance(BusinessRuleError):
    """A debit would take the balance below zero where that is not allowed."""

    default_message = "Saldo insuficiente para realizar o saque."
    default_code = "insufficient_balance"


def envelope(message: str, data: Any = None) -> dict[str, Any]:
    return {"success": False, "message": message, "data": data}
