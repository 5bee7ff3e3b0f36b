"""Errors of charges, with the spec's exact texts."""

__all__ = [
    "AcquirerRuleViolation",
    "AllAcquirersFailed",
    "BusinessRuleError",
    "ChargeNotFound",
    "TransitionNotAllowed",
    "reject_repeats",
]

from core.exceptions import BusinessRuleError, ConflictError, NotFoundError, ValidationFailed

METHOD_NOT_ENABLED = "Este método de pagamento não está habilitado para sua conta."
AMOUNT_ABOVE_MAX = "O valor máximo permitido para transações é de R$ 3.000,00."
NET_BELOW_MIN = "O valor da transação deve resultar em pelo menos R$ 0,10 após as taxas."
ALL_ACQUIRERS_FAILED = "Erro ao processar o pagamento. Tente novamente mais tarde."
CREATE_INTERNAL_ERROR = "Ocorreu um erro ao criar o pagamento."
CHARGE_NOT_FOUND = "Transação não encontrada."

ACQUIRER_RULES_MESSAGE = "Erro de validação"
NO_ACQUIRER_AVAILABLE = "Nenhuma das adquirentes informadas está disponível para seleção nesta conta."
DUPLICATE_PRIORITY = "Não é permitido informar a mesma prioridade mais de uma vez."
DUPLICATE_ACQUIRER = "Não é permitido repetir a mesma adquirente em prioridades diferentes."
BOTH_OVERRIDE_FORMS = "Informe apenas um dos campos: acquirer_key ou acquirers."
ACQUIRER_UNAVAILABLE = "Adquirente indisponível para seleção nesta conta."


class ChargeNotFound(NotFoundError):
    """Unknown id, malformed id, or another account's charge."""

    default_message = CHARGE_NOT_FOUND


class AcquirerRuleViolation(ValidationFailed):
    """An acquirer rule of the spec, reported under the ``acquirers`` key."""

    def __init__(self, message: str) -> None:
        super().__init__({"acquirers": [message]}, message=ACQUIRER_RULES_MESSAGE)


def reject_repeats(*, priorities: list[int], keys: list[str]) -> None:
    """The spec's rules for an acquirer list (override or PUT): no priority
    twice, no acquirer under two priorities."""
    if len(set(priorities)) != len(priorities):
        raise AcquirerRuleViolation(DUPLICATE_PRIORITY)
    if len(set(keys)) != len(keys):
        raise AcquirerRuleViolation(DUPLICATE_ACQUIRER)


class AllAcquirersFailed(BusinessRuleError):
    """Every acquirer of the chain failed, or the chain was empty."""

    default_message = ALL_ACQUIRERS_FAILED
    default_code = "acquirers_failed"


class TransitionNotAllowed(ConflictError):
    """The charge's current status does not allow the requested change."""

    default_code = "transition_not_allowed"
