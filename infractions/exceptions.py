"""What the infractions API and back office answer when they refuse (pt-BR, the contract's envelope)."""

from __future__ import annotations

from core.exceptions import ConflictError, NotFoundError

INFRACTION_NOT_FOUND = "Infração não encontrada."
DEFENSE_CLOSED = "Esta infração já foi encerrada: não aceita mais defesa."
DEFENSE_ALREADY_SENT = "Esta infração já tem uma defesa."
DEFENSE_WAIVED = "A devolução desta infração foi aceita sem defesa."
DEFENSE_DEADLINE_PASSED = "O prazo de defesa desta infração terminou."


class InfractionNotFound(NotFoundError):
    default_message = INFRACTION_NOT_FOUND


class DefenseNotAllowed(ConflictError):
    """A defence the infraction's state refuses (409): closed, already defended, past its deadline."""
