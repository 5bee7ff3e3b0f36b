"""An infraction's statuses, what a merchant and staff read of them."""

from __future__ import annotations

from django.db import models


class InfractionStatus(models.TextChoices):
    """Where an infraction stands (the acquirer's word: Efí's ABERTA,
    EM_DEFESA, ACEITA, REJEITADA; CANCELED when the payer's PSP withdrew it)."""

    OPEN = "open", "Aberta"
    IN_DEFENSE = "in_defense", "Em defesa"
    ACCEPTED = "accepted", "Aceita (valor devolvido ao pagador)"
    REJECTED = "rejected", "Rejeitada (valor liberado)"
    CANCELED = "canceled", "Cancelada"


CLOSED = frozenset({InfractionStatus.ACCEPTED, InfractionStatus.REJECTED, InfractionStatus.CANCELED})
OPEN = frozenset({InfractionStatus.OPEN, InfractionStatus.IN_DEFENSE})


class InfractionSource(models.TextChoices):
    """How the infraction reached us: the acquirer's API (listing or
    notification), or staff registering what an acquirer without one
    reported by other means (approved by a second staff member)."""

    ACQUIRER = "acquirer", "Adquirente"
    STAFF = "staff", "Equipe (registro aprovado)"
