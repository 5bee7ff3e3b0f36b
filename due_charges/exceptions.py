"""Errors of /api/due-charges, with their pt-BR texts."""

from core.exceptions import NotFoundError

DUE_CHARGE_NOT_FOUND = "Cobrança com vencimento não encontrada."
CREATED = "Cobrança com vencimento criada com sucesso."
CANCELED = "Cobrança com vencimento cancelada."
ALREADY_CANCELED = "A cobrança com vencimento já estava cancelada."


class DueChargeNotFound(NotFoundError):
    """Unknown id, malformed id, another account's charge, or an immediate charge."""

    default_message = DUE_CHARGE_NOT_FOUND
