"""PIX withdrawals (cash-out), their payout attempts and history."""

from __future__ import annotations

import uuid

from django.db import models
from django.db.models import F, Q

from accounts.models import Account
from acquirers.models import Acquirer


class WithdrawalStatus(models.TextChoices):
    PENDING = "pending", "Pendente"
    APPROVED = "approved", "Aprovado"
    PAID = "paid", "Pago"
    FAILED = "failed", "Falhou"
    CANCELED = "canceled", "Cancelado"
    REFUNDED = "refunded", "Devolvido"


class PixKeyType(models.TextChoices):
    CPF = "cpf", "CPF"
    CNPJ = "cnpj", "CNPJ"
    EMAIL = "email", "E-mail"
    PHONE = "phone", "Telefone"
    RANDOM = "random", "Aleatória (EVP)"


class Withdrawal(models.Model):
    """``total_debit`` left the balance when the withdrawal was accepted:
    ``amount`` with ``discount_fee`` (the fee comes out of the transfer),
    ``amount + fee`` without it."""

    Status = WithdrawalStatus

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    account = models.ForeignKey(Account, on_delete=models.PROTECT, related_name="withdrawals")
    amount = models.BigIntegerField()
    fee = models.BigIntegerField()
    discount_fee = models.BooleanField()
    total_debit = models.BigIntegerField()
    liquid_amount = models.BigIntegerField()
    pix_key_type = models.CharField(max_length=8, choices=PixKeyType.choices)
    pix_key = models.CharField(max_length=77)
    status = models.CharField(max_length=16, choices=WithdrawalStatus.choices, default=WithdrawalStatus.PENDING)
    # Bumped by every transition; names the ledger cause of each one.
    version = models.PositiveIntegerField(default=0)

    # Sent with every payout so an acquirer never pays the same withdrawal twice.
    idempotency_id = models.CharField(max_length=35, unique=True)
    acquirer = models.ForeignKey(Acquirer, on_delete=models.PROTECT, null=True, blank=True, related_name="payouts")
    provider_payout_id = models.CharField(max_length=100, blank=True)
    e2e_id = models.CharField(max_length=64, null=True, blank=True)  # noqa: DJ001 - NULL until paid (unique)
    failure_reason = models.CharField(max_length=500, blank=True)
    # A worker holds the payout while it talks to acquirers.
    payout_leased_until = models.DateTimeField(null=True, blank=True)

    approved_at = models.DateTimeField(null=True, blank=True)
    paid_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "saque"
        ordering = ["-created_at", "-id"]
        indexes = [
            # Listings (GET /withdrawals), as for charges (payments.models):
            # one account, newest first, any combination of filters answered
            # from one index; the day's sum of the withdrawal limit (account,
            # created_at, status, amount) is an index-only scan of the first.
            models.Index(
                fields=["account", "-created_at", "-id"],
                include=["status", "amount", "paid_at"],
                name="withdrawal_list_recent",
            ),
            models.Index(
                fields=["account", "status", "-created_at", "-id"],
                include=["amount", "paid_at"],
                name="withdrawal_list_status",
            ),
            models.Index(
                fields=["account", "paid_at"],
                include=["status", "amount", "created_at", "id"],
                condition=Q(paid_at__isnull=False),
                name="withdrawal_list_paid_at",
            ),
            models.Index(
                fields=["account", "amount"],
                include=["status", "paid_at", "created_at", "id"],
                name="withdrawal_list_amount",
            ),
            # Beat polls payouts stuck in approved.
            models.Index(fields=["updated_at"], name="withdrawal_approved", condition=Q(status="approved")),
        ]
        constraints = [
            models.CheckConstraint(condition=Q(amount__gt=0), name="withdrawal_amount_positive"),
            models.CheckConstraint(condition=Q(fee__gte=0), name="withdrawal_fee_non_negative"),
            models.CheckConstraint(condition=Q(liquid_amount__gte=1), name="withdrawal_liquid_positive"),
            models.CheckConstraint(
                condition=(Q(discount_fee=True) & Q(total_debit=F("amount")) & Q(liquid_amount=F("amount") - F("fee")))
                | (Q(discount_fee=False) & Q(total_debit=F("amount") + F("fee")) & Q(liquid_amount=F("amount"))),
                name="withdrawal_fee_arithmetic",
            ),
            models.UniqueConstraint(fields=["e2e_id"], condition=Q(e2e_id__isnull=False), name="withdrawal_unique_e2e"),
        ]

    def __str__(self) -> str:
        return f"{self.id} {self.amount} {self.status}"


class PayoutAttempt(models.Model):
    """One call to one acquirer about one payout: a send, or a status query."""

    class Action(models.TextChoices):
        SEND = "send", "Envio"
        STATUS = "status", "Consulta"

    withdrawal = models.ForeignKey(Withdrawal, on_delete=models.CASCADE, related_name="payout_attempts")
    acquirer = models.ForeignKey(Acquirer, on_delete=models.PROTECT, related_name="payout_attempts")
    action = models.CharField(max_length=8, choices=Action.choices)
    # paid / processing / declined / not_found / unavailable / timeout / error
    outcome = models.CharField(max_length=20)
    error_class = models.CharField(max_length=100, blank=True)
    error_message = models.CharField(max_length=500, blank=True)
    latency_ms = models.PositiveIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = "tentativa de pagamento"
        ordering = ["withdrawal", "id"]

    def __str__(self) -> str:
        return f"{self.withdrawal_id} {self.action} @{self.acquirer_id}: {self.outcome}"


class WithdrawalTransition(models.Model):
    class Source(models.TextChoices):
        SYSTEM = "system", "Sistema"
        ACQUIRER = "acquirer", "Adquirente"
        SANDBOX = "sandbox", "Sandbox"
        STAFF = "staff", "Equipe"

    withdrawal = models.ForeignKey(Withdrawal, on_delete=models.CASCADE, related_name="transitions")
    from_status = models.CharField(max_length=16, choices=WithdrawalStatus.choices)
    to_status = models.CharField(max_length=16, choices=WithdrawalStatus.choices)
    source = models.CharField(max_length=16, choices=Source.choices)
    actor = models.CharField(max_length=150, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = "mudança de status do saque"
        ordering = ["withdrawal", "id"]

    def __str__(self) -> str:
        return f"{self.withdrawal_id}: {self.from_status} → {self.to_status}"
