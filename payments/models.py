"""PIX charges (cash-in), the attempts made at acquirers, and their history."""

from __future__ import annotations

import uuid

from django.db import models
from django.db.models import F, Q

from accounts.models import Account, PaymentMethod
from acquirers.models import Acquirer
from core.indexes import record_listing_indexes


class ChargeStatus(models.TextChoices):
    PENDING = "pending", "Pendente"
    PAID = "paid", "Paga"
    FAILED = "failed", "Falhou"
    CANCELED = "canceled", "Cancelada"
    REFUNDED = "refunded", "Estornada"
    CHARGEBACK = "chargeback", "Contestada"


class Charge(models.Model):
    """A charge exists once an acquirer accepted it: a client that got a 201
    has a row, one that got a 400 has only attempts."""

    Status = ChargeStatus

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    account = models.ForeignKey(Account, on_delete=models.PROTECT, related_name="charges")
    payment_method = models.CharField(max_length=16, choices=PaymentMethod.choices, default=PaymentMethod.PIX)
    amount = models.BigIntegerField()
    platform_tax = models.BigIntegerField()
    liquid_amount = models.BigIntegerField()
    status = models.CharField(max_length=16, choices=ChargeStatus.choices, default=ChargeStatus.PENDING)
    # Bumped by every transition; names the ledger cause of each one so a
    # charge can go paid → chargeback → paid → chargeback without collisions.
    version = models.PositiveIntegerField(default=0)

    txid = models.CharField(max_length=35, unique=True)
    emv = models.CharField(max_length=512)
    acquirer = models.ForeignKey(Acquirer, on_delete=models.PROTECT, related_name="charges")
    provider_charge_id = models.CharField(max_length=100, blank=True)
    # NULL, not "", until paid: the unique constraint must ignore unpaid charges.
    e2e_id = models.CharField(max_length=64, null=True, blank=True)  # noqa: DJ001

    buyer_name = models.CharField(max_length=255)
    buyer_document = models.CharField(max_length=14, db_index=True)
    buyer_phone = models.CharField(max_length=20)
    buyer_address = models.JSONField(default=dict, blank=True)
    postback_url = models.URLField(max_length=2000, blank=True)
    metadata = models.JSONField(default=dict, blank=True)

    expires_at = models.DateTimeField()
    paid_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "cobrança"
        ordering = ["-created_at", "-id"]
        # One per back-office action that moves money (payments.admin).
        permissions = [
            ("refund_charge", "Can refund charges"),
            ("mark_charge_chargeback", "Can mark charges as charged back (MED)"),
            ("request_chargeback_resolution", "Can request resolving a chargeback in the account's favour"),
        ]
        indexes = [
            # Listings (GET /transactions): one index per filter, each
            # answering the COUNT and the page's keys by itself.
            *record_listing_indexes("charge"),
            # The expiry sweep reads only pending charges.
            models.Index(fields=["expires_at"], name="charge_pending_expiry", condition=Q(status="pending")),
            # The back office's overview (observability.selectors): the last
            # 7 days by day and status as an index-only scan, and the open
            # chargebacks from a small partial index.
            models.Index(fields=["created_at"], include=["status", "amount"], name="charge_overview_day"),
            models.Index(fields=["created_at"], name="charge_chargeback_open", condition=Q(status="chargeback")),
        ]
        constraints = [
            models.CheckConstraint(condition=Q(amount__gt=0), name="charge_amount_positive"),
            models.CheckConstraint(condition=Q(platform_tax__gte=0), name="charge_tax_non_negative"),
            models.CheckConstraint(
                condition=Q(liquid_amount=F("amount") - F("platform_tax")), name="charge_liquid_is_amount_minus_tax"
            ),
            models.UniqueConstraint(fields=["e2e_id"], condition=Q(e2e_id__isnull=False), name="charge_unique_e2e"),
        ]

    def __str__(self) -> str:
        return f"{self.id} {self.amount} {self.status}"


class ChargeAttempt(models.Model):
    """One try at one acquirer while creating a charge.

    ``charge`` carries no database constraint: attempts of a creation that
    failed everywhere are kept (for support and metrics) although no charge
    row was ever written.
    """

    class Outcome(models.TextChoices):
        OK = "ok", "Aceita"
        UNAVAILABLE = "unavailable", "Indisponível"
        TIMEOUT = "timeout", "Tempo esgotado"
        DECLINED = "declined", "Recusada"
        INVALID_RESPONSE = "invalid_response", "Resposta inválida"
        ERROR = "error", "Erro"
        # Not called: its circuit breaker was open (acquirers.breaker).
        CIRCUIT_OPEN = "circuit_open", "Pulada (circuito aberto)"
        # Not called: its cap, or this process's pool, of calls in flight was full (acquirers.capacity).
        BUSY = "busy", "Pulada (ocupada)"

    charge = models.ForeignKey(
        Charge, on_delete=models.DO_NOTHING, db_constraint=False, related_name="attempts", db_index=True
    )
    account = models.ForeignKey(Account, on_delete=models.PROTECT, related_name="+")
    acquirer = models.ForeignKey(Acquirer, on_delete=models.PROTECT, related_name="charge_attempts")
    position = models.PositiveSmallIntegerField()
    outcome = models.CharField(max_length=20, choices=Outcome.choices)
    error_class = models.CharField(max_length=100, blank=True)
    error_message = models.CharField(max_length=500, blank=True)
    latency_ms = models.PositiveIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = "tentativa na adquirente"
        ordering = ["charge_id", "position"]
        indexes = [models.Index(fields=["acquirer", "-created_at"], name="attempt_acquirer_recent")]

    def __str__(self) -> str:
        return f"{self.charge_id} #{self.position} {self.acquirer_id}: {self.outcome}"


class ChargeTransition(models.Model):
    """Audit trail: every status change, who caused it, and when."""

    class Source(models.TextChoices):
        ACQUIRER = "acquirer", "Adquirente"
        SANDBOX = "sandbox", "Sandbox"
        STAFF = "staff", "Equipe"
        EXPIRY = "expiry", "Expiração"

    charge = models.ForeignKey(Charge, on_delete=models.CASCADE, related_name="transitions")
    from_status = models.CharField(max_length=16, choices=ChargeStatus.choices)
    to_status = models.CharField(max_length=16, choices=ChargeStatus.choices)
    source = models.CharField(max_length=16, choices=Source.choices)
    actor = models.CharField(max_length=150, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = "mudança de status"
        ordering = ["charge", "id"]

    def __str__(self) -> str:
        return f"{self.charge_id}: {self.from_status} → {self.to_status}"


class ChargeRefund(models.Model):
    """A refund the acquirer answered "processing". Its amount is reserved at
    once (a ``refund_hold`` ledger entry: the available balance drops, so a
    withdrawal cannot use it), released if the refund fails, and replaced by
    the refund itself when the charge becomes refunded; each in the
    transaction that changes this row's status, under the charge's lock."""

    class Status(models.TextChoices):
        PROCESSING = "processing", "Em processamento"
        DONE = "done", "Realizada"
        FAILED = "failed", "Não realizada"
        # The charge left "paid" another way (a chargeback took the money).
        RELEASED = "released", "Reserva liberada"

    charge = models.ForeignKey(Charge, on_delete=models.PROTECT, related_name="refunds")
    amount = models.BigIntegerField(help_text="Centavos reserved: the charge's liquid amount.")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PROCESSING)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "estorno em processamento"
        verbose_name_plural = "estornos em processamento"
        ordering = ["charge", "id"]
        constraints = [
            models.CheckConstraint(condition=Q(amount__gt=0), name="charge_refund_amount_positive"),
            models.UniqueConstraint(
                fields=["charge"], condition=Q(status="processing"), name="charge_refund_one_processing"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.charge_id}: {self.amount} {self.status}"
