"""Errors of acquirers: the spec's rules for an account's acquirer list
(the selection API and a charge's override share them), and the answers to
an acquirer's callback."""

from core.exceptions import NotFoundError, PixServiceError, ValidationFailed

ACQUIRER_RULES_MESSAGE = "Erro de validação"
NO_ACQUIRER_AVAILABLE = "Nenhuma das adquirentes informadas está disponível para seleção nesta conta."
DUPLICATE_PRIORITY = "Não é permitido informar a mesma prioridade mais de uma vez."
DUPLICATE_ACQUIRER = "Não é permitido repetir a mesma adquirente em prioridades diferentes."
BOTH_OVERRIDE_FORMS = "Informe apenas um dos campos: acquirer_key ou acquirers."
ACQUIRER_UNAVAILABLE = "Adquirente indisponível para seleção nesta conta."


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


class UnknownNotificationRecord(NotFoundError):
    """An event about a kind of record no installed app handles: news of a
    record we do not have, like an unknown txid (the notification is stored
    as failed, the other events of its body still apply)."""

    default_message = "Registro da notificação não encontrado."


class NotificationUnreadable(PixServiceError):
    """Authentic, but the body is not a notification the adapter understands."""

    status_code = 400
    default_message = "Notificação ilegível."
    default_code = "notification_unreadable"


class NotificationNotConfirmed(PixServiceError):
    """The adapter could not confirm the news with the acquirer (it did not
    answer): kept as received, and the acquirer's retry will try again."""

    status_code = 503
    default_message = "Notificação não confirmada na adquirente. Tente novamente."
    default_code = "notification_not_confirmed"


class NotificationRejected(PixServiceError):
    """The acquirer's adapter could not authenticate or read the notification."""

    status_code = 401
    default_message = "Notificação não autenticada."
    default_code = "notification_rejected"
