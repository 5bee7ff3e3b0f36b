"""Errors of webhook management."""

from core.exceptions import NotFoundError

ENDPOINT_NOT_FOUND = "Webhook não encontrado."
EVENT_NOT_FOUND = "Evento não encontrado."


class EndpointNotFound(NotFoundError):
    """Unknown, malformed, deleted or another account's endpoint id."""

    default_message = ENDPOINT_NOT_FOUND


class EventNotFound(NotFoundError):
    """Unknown, malformed or another account's event id."""

    default_message = EVENT_NOT_FOUND
