"""Payment providers (acquirers) and which of them each account may use.

Behaviour (adapters, the chain) arrives with the cash-in issue; the data is
here because operators configure it from day one (``pix_bootstrap``).
"""

from __future__ import annotations

from decimal import Decimal

from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from django.db.models import Q

from accounts.models import Account
from core.snapshots import WatchedQuerySet

ACQUIRER_KEY_PATTERN = r"^[a-z0-9_]+$"
acquirer_key_validator = RegexValidator(ACQUIRER_KEY_PATTERN, "Use apenas letras minúsculas, números e _.")


class Acquirer(models.Model):
    key = models.CharField(max_length=64, unique=True, validators=[acquirer_key_validator])
    name = models.CharField(max_length=100)
    nominal = models.CharField(max_length=200, blank=True)
    adapter = models.CharField(max_length=64, default="sandbox")
    options = models.JSONField(default=dict, blank=True)
    enabled = models.BooleanField(default=True)
    max_ticket = models.BigIntegerField("ticket máximo (centavos)", default=300_000)
    conversion_percent = models.DecimalField(
        max_digits=5,
        decimal_places=2,
        default=Decimal("0"),
        validators=[MinValueValidator(Decimal("0")), MaxValueValidator(Decimal("100"))],
    )
    is_new = models.BooleanField(default=False)
    default_priority = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text="Position in the platform default chain; empty = not in it."
    )
    connect_timeout_ms = models.PositiveIntegerField(default=3000)
    read_timeout_ms = models.PositiveIntegerField(default=10000)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    # Chains are read from snapshots (core.snapshots): writes to these models drop them.
    objects = WatchedQuerySet["Acquirer"].as_manager()

    class Meta:
        verbose_name = "adquirente"
        ordering = ["key"]
        permissions = [("reset_circuit_breaker", "Can reset the acquirer's circuit breaker")]
        constraints = [
            models.CheckConstraint(condition=Q(max_ticket__gte=0), name="acquirer_max_ticket_non_negative"),
            models.CheckConstraint(condition=Q(key__regex=ACQUIRER_KEY_PATTERN), name="acquirer_key_pattern"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.key})"

    @property
    def deadline_seconds(self) -> float:
        """The whole budget of one call (connect + read): the hard deadline
        the chain and the payout path enforce around the adapter."""
        return (self.connect_timeout_ms + self.read_timeout_ms) / 1000


class AcquirerGrant(models.Model):
    """Staff made this acquirer available to this account."""

    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="acquirer_grants")
    acquirer = models.ForeignKey(Acquirer, on_delete=models.PROTECT, related_name="grants")
    created_at = models.DateTimeField(auto_now_add=True)

    objects = WatchedQuerySet["AcquirerGrant"].as_manager()

    class Meta:
        verbose_name = "adquirente liberada"
        constraints = [models.UniqueConstraint(fields=["account", "acquirer"], name="grant_unique")]

    def __str__(self) -> str:
        return f"{self.account_id} → {self.acquirer_id}"


class AcquirerSlot(models.Model):
    """One position (1 primary, 2 secondary, 3 tertiary) of an account's chain.

    ``cashin`` slots are the account's active acquirers (the API edits them);
    ``cashout`` slots are the staff-configured payout chain.
    """

    class Purpose(models.TextChoices):
        CASHIN = "cashin", "Cash-in"
        CASHOUT = "cashout", "Cash-out"

    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="acquirer_slots")
    acquirer = models.ForeignKey(Acquirer, on_delete=models.PROTECT, related_name="slots")
    purpose = models.CharField(max_length=8, choices=Purpose.choices)
    priority = models.PositiveSmallIntegerField()

    objects = WatchedQuerySet["AcquirerSlot"].as_manager()

    class Meta:
        verbose_name = "posição de adquirente"
        ordering = ["account", "purpose", "priority"]
        constraints = [
            models.CheckConstraint(condition=Q(priority__gte=1, priority__lte=3), name="slot_priority_1_to_3"),
            models.UniqueConstraint(fields=["account", "purpose", "priority"], name="slot_unique_priority"),
            models.UniqueConstraint(fields=["account", "purpose", "acquirer"], name="slot_unique_acquirer"),
        ]

    def __str__(self) -> str:
        return f"{self.account_id} {self.purpose} #{self.priority}: {self.acquirer_id}"


class InboundNotification(models.Model):
    """An acquirer's notification exactly as received, stored before anything
    is verified or processed, so nothing an acquirer tells us is ever lost."""

    class Status(models.TextChoices):
        RECEIVED = "received", "Recebida"
        PROCESSED = "processed", "Processada"
        REJECTED = "rejected", "Rejeitada"
        FAILED = "failed", "Falhou"

    acquirer = models.ForeignKey(Acquirer, on_delete=models.PROTECT, related_name="notifications")
    headers = models.JSONField(default=dict)
    body = models.TextField()
    remote_addr = models.GenericIPAddressField(null=True, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.RECEIVED)
    error = models.TextField(blank=True)
    received_at = models.DateTimeField(auto_now_add=True)
    processed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "notificação recebida"
        ordering = ["-received_at"]

    def __str__(self) -> str:
        return f"{self.acquirer_id} {self.received_at:%Y-%m-%d %H:%M:%S} {self.status}"
