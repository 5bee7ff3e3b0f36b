"""Errors of webhook management."""

from core.exceptions import NotFoundError, ValidationFailed

ENDPOINT_NOT_FOUND = "Webhook não encontrado."
EVENT_NOT_FOUND = "Evento não encontrado."


class EndpointNotFound(NotFoundError):
    """Unknown, malformed, deleted or another account's endpoint id."""

    default_message = ENDPOINT_NOT_FOUND


class EventNotFound(NotFoundError):
    """Unknown, malformed or another account's event id."""

    default_message = EVENT_NOT_FOUND


def endpoint_limit_message(limit: int) -> str:
    return f"Limite de {limit} endpoints de webhook por conta atingido."


class EndpointLimitReached(ValidationFailed):
    """The account already has ``WEBHOOK_MAX_ENDPOINTS_PER_ACCOUNT`` endpoints
    (deleted ones not counted): 422 under ``webhooks``."""

    default_code = "webhook_endpoint_limit"

    def __init__(self, limit: int) -> None:
        super().__init__({"webhooks": [endpoint_limit_message(limit)]})
        self.limit = limit
