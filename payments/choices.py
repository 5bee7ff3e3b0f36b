"""A charge's statuses and the sources of its changes: what every model of
charges names (``payments.models`` and ``payments.late_models``, which
``payments.models`` registers), in a module of its own so that neither
models module imports the other for them."""

from __future__ import annotations

from django.db import models


class ChargeStatus(models.TextChoices):
    PENDING = "pending", "Pendente"
    PAID = "paid", "Paga"
    FAILED = "failed", "Falhou"
    CANCELED = "canceled", "Cancelada"
    REFUNDED = "refunded", "Estornada"
    CHARGEBACK = "chargeback", "Contestada"


class ChargeKind(models.TextChoices):
    """An immediate charge (API Pix ``cob``: checkout) or a due-date charge
    (``cobv``: invoices, payable after its due date with fine and interest;
    its terms in ``payments.due_models.DueCharge``)."""

    IMMEDIATE = "immediate", "Imediata"
    DUE = "due", "Com vencimento"
    #: A cycle of a Pix Automático recurrence (``cobr``; recurrences.models.Cycle):
    #: settled by the payer's PSP on its due date, without the payer acting.
    RECURRING = "recurring", "Pix Automático"


class ChargeSource(models.TextChoices):
    """Who caused a change of a charge (``ChargeTransition.Source``)."""

    ACQUIRER = "acquirer", "Adquirente"
    SANDBOX = "sandbox", "Sandbox"
    STAFF = "staff", "Equipe"
    EXPIRY = "expiry", "Expiração"
    RECONCILIATION = "reconciliation", "Conciliação"
    #: The account itself, through the API (POST /api/due-charges/{id}/cancel).
    MERCHANT = "merchant", "Conta (API)"
