"""Project-wide records."""

from __future__ import annotations

from django.db import models

from accounts.models import Account


class IdempotencyRecord(models.Model):
    """The first response to an ``Idempotency-Key`` (decisions §7), replayed
    to repeats of the same request for 24 h."""

    class State(models.TextChoices):
        IN_FLIGHT = "in_flight", "Em processamento"
        DONE = "done", "Concluída"

    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=255)
    endpoint = models.CharField(max_length=100)
    request_hash = models.CharField(max_length=64)
    state = models.CharField(max_length=10, choices=State.choices, default=State.IN_FLIGHT)
    response_status = models.PositiveIntegerField(null=True, blank=True)
    response_body = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        verbose_name = "chave de idempotência"
        constraints = [models.UniqueConstraint(fields=["account", "endpoint", "key"], name="idempotency_unique_key")]

    def __str__(self) -> str:
        return f"{self.account_id} {self.endpoint} {self.key}"
