"""Webhooks: the account's endpoints, the events written with every status
change (a transactional outbox), and their deliveries and attempts."""

from __future__ import annotations

import uuid

from django.db import models
from django.db.models import Q

from accounts.models import Account
from core.tokens import new_webhook_code, new_webhook_secret
from webhooks.readable import event_status_label


class WebhookEndpoint(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    account = models.ForeignKey(
        Account, on_delete=models.CASCADE, related_name="webhook_endpoints", verbose_name="conta"
    )
    ref = models.CharField(
        "referência",
        max_length=64,
        blank=True,
        help_text="Referência do operador (pix_bootstrap); única por conta quando preenchida.",
    )
    url = models.URLField("URL", max_length=2000)
    description = models.CharField("descrição", max_length=200, blank=True)
    # Sent as X-Webhook-Code so receivers can recognise us cheaply.
    code = models.CharField(
        "código", max_length=64, default=new_webhook_code, help_text="Enviado no cabeçalho X-Webhook-Code."
    )
    # Standard Webhooks signing secret; needed in clear to sign, shown once.
    secret = models.CharField("segredo de assinatura", max_length=100, default=new_webhook_secret)
    # During a rotation both secrets sign, so receivers can switch without a gap.
    previous_secret = models.CharField("segredo anterior", max_length=100, blank=True)
    previous_secret_expires_at = models.DateTimeField("segredo anterior válido até", null=True, blank=True)
    is_active = models.BooleanField("ativo", default=True)
    disabled_at = models.DateTimeField("desativado em", null=True, blank=True)
    disabled_reason = models.CharField("motivo da desativação", max_length=200, blank=True)
    # Start of the current run of failed deliveries; cleared by any success.
    failing_since = models.DateTimeField("falhando desde", null=True, blank=True)
    deleted_at = models.DateTimeField("excluído em", null=True, blank=True)
    created_at = models.DateTimeField("criado em", auto_now_add=True)
    updated_at = models.DateTimeField("atualizado em", auto_now=True)

    class Meta:
        verbose_name = "endpoint de webhook"
        verbose_name_plural = "endpoints de webhook"
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["account", "ref"], condition=~models.Q(ref=""), name="webhook_unique_ref_per_account"
            ),
        ]

    def __str__(self) -> str:
        return self.url


class EventType(models.TextChoices):
    TRANSACTION = "transaction", "Transação"
    WITHDRAWAL = "withdrawal", "Saque"
    # A MED infraction (infractions app): opened, deadline near, closed, returned.
    INFRACTION = "infraction", "Infração MED"
    # A due-date charge (payments.due_models) changed status; a batch of them finished.
    DUE_CHARGE = "due_charge", "Cobrança com vencimento"
    DUE_CHARGE_BATCH = "due_charge_batch", "Lote de cobranças com vencimento"
    # Pix Automático (recurrences app): a recurrence's authorisation changed; a cycle changed.
    RECURRENCE = "recurrence", "Recorrência (Pix Automático)"
    RECURRENCE_CYCLE = "recurrence_cycle", "Ciclo de recorrência (Pix Automático)"
    # A batch of withdrawals finished (each item also sends its own ``withdrawal`` events).
    PAYOUT_BATCH = "payout_batch", "Lote de saques"


class WebhookEvent(models.Model):
    """One status change of a charge or withdrawal, written in the same
    database transaction as the change itself."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="webhook_events", verbose_name="conta")
    event_type = models.CharField("tipo de evento", max_length=16, choices=EventType.choices)
    record_id = models.UUIDField("ID do registro", db_index=True, help_text="A transação ou o saque do evento.")
    status = models.CharField("status", max_length=16)
    data = models.JSONField("dados")
    created_at = models.DateTimeField("criado em", auto_now_add=True)

    class Meta:
        verbose_name = "evento de webhook"
        verbose_name_plural = "eventos de webhook"
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["account", "-created_at"], name="event_account_recent")]

    def __str__(self) -> str:
        return f"{self.get_event_type_display()} {self.record_id} → {event_status_label(self.event_type, self.status)}"

    def body(self) -> dict[str, object]:
        """The spec's body envelope."""
        return {"id": str(self.id), "event_type": self.event_type, "data": self.data}


class WebhookDelivery(models.Model):
    """One event to one destination (an endpoint, or the charge's postback URL)."""

    class Status(models.TextChoices):
        PENDING = "pending", "Pendente"
        SUCCEEDED = "succeeded", "Entregue"
        FAILED = "failed", "Falhou"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    event = models.ForeignKey(WebhookEvent, on_delete=models.CASCADE, related_name="deliveries", verbose_name="evento")
    endpoint = models.ForeignKey(
        WebhookEndpoint,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="deliveries",
        verbose_name="endpoint",
        help_text="Vazio: a URL de postback da cobrança.",
    )
    url = models.URLField("URL", max_length=2000)
    status = models.CharField("status", max_length=16, choices=Status.choices, default=Status.PENDING)
    # Attempts in the current round: a redelivery starts the schedule again.
    attempt_count = models.PositiveIntegerField("tentativas nesta rodada", default=0)
    next_attempt_at = models.DateTimeField("próxima tentativa", null=True, blank=True)
    # A worker holds a delivery while it sends; the relay leaves it alone until then.
    leased_until = models.DateTimeField("reservada até", null=True, blank=True)
    last_attempt_at = models.DateTimeField("última tentativa", null=True, blank=True)
    last_status_code = models.PositiveIntegerField("último código HTTP", null=True, blank=True)
    last_error = models.CharField("último erro", max_length=500, blank=True)
    created_at = models.DateTimeField("criada em", auto_now_add=True)
    updated_at = models.DateTimeField("atualizada em", auto_now=True)

    class Meta:
        verbose_name = "entrega de webhook"
        verbose_name_plural = "entregas de webhook"
        ordering = ["-created_at"]
        indexes = [
            # The relay's scan: only pending rows, by due time.
            models.Index(fields=["next_attempt_at"], name="delivery_due", condition=Q(status="pending")),
            models.Index(fields=["endpoint", "-created_at"], name="delivery_endpoint_recent"),
            # The back office's overview counts failed deliveries (they are kept).
            models.Index(fields=["created_at"], name="delivery_failed", condition=Q(status="failed")),
        ]
        constraints = [
            models.CheckConstraint(
                condition=~Q(status="pending") | Q(next_attempt_at__isnull=False), name="delivery_pending_has_due_time"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.event_id} → {self.url} ({self.get_status_display()})"

    @property
    def is_postback(self) -> bool:
        return self.endpoint_id is None


class WebhookAttempt(models.Model):
    delivery = models.ForeignKey(
        WebhookDelivery, on_delete=models.CASCADE, related_name="attempts", verbose_name="entrega"
    )
    number = models.PositiveIntegerField("número")
    attempted_at = models.DateTimeField("tentada em")
    status_code = models.PositiveIntegerField("código HTTP", null=True, blank=True)
    latency_ms = models.PositiveIntegerField("latência (ms)")
    response_body = models.TextField("corpo da resposta", blank=True)
    error = models.CharField("erro", max_length=500, blank=True)
    succeeded = models.BooleanField("sucesso")

    class Meta:
        verbose_name = "tentativa de entrega"
        verbose_name_plural = "tentativas de entrega"
        ordering = ["delivery", "number"]
        constraints = [models.UniqueConstraint(fields=["delivery", "number"], name="attempt_unique_number")]

    def __str__(self) -> str:
        # What failed reads on the attempt's row (webhooks.readable), not in its name.
        return f"Tentativa {self.number}" + (f" (HTTP {self.status_code})" if self.status_code else "")
