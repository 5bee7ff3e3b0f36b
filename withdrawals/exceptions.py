"""Errors of withdrawals, with decisions §5's exact texts."""

from pix_service.exceptions import BusinessRuleError, ConflictError, NotFoundError

PER_REQUEST_LIMIT = "O valor excede o limite por solicitação de saque."
DAILY_LIMIT = "O valor excede o limite diário de saques."
INSUFFICIENT_BALANCE = "Saldo insuficiente para realizar o saque."
WITHDRAWAL_NOT_FOUND = "Saque não encontrado."
BELOW_MINIMUM = "O valor mínimo para saque é de R$ {amount}."
NOTHING_LEFT_AFTER_FEE = "O valor do saque não cobre a taxa de saque."


class WithdrawalNotFound(NotFoundError):
    """Unknown id, malformed id, or another account's withdrawal."""

    default_message = WITHDRAWAL_NOT_FOUND


class WithdrawalTransitionNotAllowed(ConflictError):
    """The withdrawal's status does not allow the requested change."""

    default_code = "transition_not_allowed"


__all__ = ["BusinessRuleError", "WithdrawalNotFound", "WithdrawalTransitionNotAllowed"]
