"""PIX withdrawals (cash-out), their payout attempts and history."""

from __future__ import annotations

import uuid
from typing import ClassVar

from django.db import models
from django.db.models import F, Q

from accounts.models import Account
from acquirers.models import Acquirer
from core.indexes import record_listing_indexes
from core.money import brl


class WithdrawalStatus(models.TextChoices):
    PENDING = "pending", "Pendente"
    APPROVED = "approved", "Aprovado"
    PAID = "paid", "Pago"
    FAILED = "failed", "Falhou"
    CANCELED = "canceled", "Cancelado"
    REFUNDED = "refunded", "Devolvido"


#: Withdrawals that never moved money do not use the day's limit (decisions §5).
NOT_COUNTED = (WithdrawalStatus.FAILED, WithdrawalStatus.CANCELED)


class PixKeyType(models.TextChoices):
    CPF = "cpf", "CPF"
    CNPJ = "cnpj", "CNPJ"
    EMAIL = "email", "E-mail"
    PHONE = "phone", "Telefone"
    RANDOM = "random", "Aleatória (EVP)"


class HoldReason(models.TextChoices):
    """Why an approved withdrawal is not being sent (the money stays debited)."""

    ACCOUNT_BLOCKED = "account_blocked", "Conta bloqueada"
    ACCOUNT_NOT_APPROVED = "account_not_approved", "Conta não aprovada"
    # Its payout runs kept dying with their worker process (settings.PAYOUT_MAX_LOST_RUNS
    # in a row): not run again until staff resume it (withdrawals.runs).
    PAYOUT_INTERRUPTED = "payout_interrupted", "Processamento interrompido repetidamente"


class PayeeCheck(models.TextChoices):
    """What the payee check (withdrawals.payees) found of the key's owner."""

    MATCHED = "matched", "Confere"
    MISMATCH = "mismatch", "Não confere"
    NOT_FOUND = "not_found", "Chave não encontrada"


class PayoutBatch(models.Model):
    """Payouts posted together with one ``Idempotency-Key`` and, when the
    account needs approval, approved together (withdrawals.batches). Each
    item is a :class:`Withdrawal` of its own (``batch``, ``batch_index``):
    its own debit, webhook and payout; the batch only groups them."""

    class Status(models.TextChoices):
        AWAITING_APPROVAL = "awaiting_approval", "Aguardando aprovação"
        PROCESSING = "processing", "Em processamento"
        COMPLETED = "completed", "Concluído"
        CANCELED = "canceled", "Cancelado"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    account = models.ForeignKey(Account, on_delete=models.PROTECT, related_name="payout_batches", verbose_name="conta")
    status = models.CharField("situação", max_length=20, choices=Status.choices)
    description = models.CharField("descrição", max_length=140, blank=True)
    item_count = models.PositiveIntegerField("itens")
    total_amount = models.BigIntegerField("valor total")
    total_debit = models.BigIntegerField("débito total", help_text="O que saiu do saldo com o lote.")
    decided_by = models.CharField("decidido por", max_length=150, blank=True)
    decided_at = models.DateTimeField("decidido em", null=True, blank=True)
    completed_at = models.DateTimeField("concluído em", null=True, blank=True)
    created_at = models.DateTimeField("criado em", auto_now_add=True)
    updated_at = models.DateTimeField("atualizado em", auto_now=True)

    class Meta:
        verbose_name = "lote de saques"
        verbose_name_plural = "lotes de saques"
        ordering = ["-created_at", "-id"]
        permissions = [
            ("approve_payout_batch", "Pode aprovar ou recusar lotes de saques (os Pix são enviados)"),
        ]
        indexes = [
            models.Index(fields=["account", "-created_at", "-id"], name="payout_batch_account_recent"),
            models.Index(fields=["created_at"], name="payout_batch_open", condition=~Q(status="completed")),
        ]
        constraints = [
            models.CheckConstraint(condition=Q(item_count__gte=1), name="payout_batch_not_empty"),
        ]

    def __str__(self) -> str:
        return f"Lote de {self.item_count} saques ({self.Status(self.status).label.lower()})"


class Withdrawal(models.Model):
    """``total_debit`` left the balance when the withdrawal was accepted:
    ``amount`` with ``discount_fee`` (the fee comes out of the transfer),
    ``amount + fee`` without it.

    Fields the API serializes (withdrawals.serializers) keep Django's default
    verbose name and no help text: both would become the OpenAPI schema's
    title and description. withdrawals.admin labels them."""

    Status = WithdrawalStatus

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    account = models.ForeignKey(Account, on_delete=models.PROTECT, related_name="withdrawals", verbose_name="conta")
    amount = models.BigIntegerField()
    fee = models.BigIntegerField("taxa")
    discount_fee = models.BooleanField(
        "taxa descontada do valor", help_text="Sim: a taxa sai do valor enviado; não: é debitada além do valor."
    )
    total_debit = models.BigIntegerField("débito total", help_text="O que saiu do saldo da conta com o pedido.")
    liquid_amount = models.BigIntegerField()
    pix_key_type = models.CharField(max_length=8, choices=PixKeyType.choices)
    pix_key = models.CharField(max_length=77)
    status = models.CharField(max_length=16, choices=WithdrawalStatus.choices, default=WithdrawalStatus.PENDING)
    # Bumped by every transition; names the ledger cause of each one.
    version = models.PositiveIntegerField("versão", default=0, help_text="Quantas mudanças de status o saque já teve.")

    # Sent with every payout so an acquirer never pays the same withdrawal twice.
    idempotency_id = models.CharField(
        "id de idempotência", max_length=35, unique=True, help_text="Enviado em cada pagamento à adquirente."
    )
    acquirer = models.ForeignKey(
        Acquirer,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="payouts",
        verbose_name="adquirente que pagou",
    )
    provider_payout_id = models.CharField("id na adquirente", max_length=100, blank=True)
    e2e_id = models.CharField(max_length=64, null=True, blank=True)  # noqa: DJ001 - NULL until paid (unique)
    failure_reason = models.CharField("motivo da falha", max_length=500, blank=True)
    # A worker holds the payout while it talks to acquirers; only the holder
    # (its token) lets go of it.
    payout_leased_until = models.DateTimeField("em processamento até", null=True, blank=True)
    payout_lease_token = models.CharField("token do processamento", max_length=32, blank=True)
    # The acquirer that was sent the payout and has not refused it for good:
    # only its answer may settle the payout (README, "Money safety").
    payout_owner = models.ForeignKey(
        Acquirer,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="owned_payouts",
        verbose_name="adquirente responsável",
        help_text="A que recebeu o pagamento e não o recusou: só a resposta dela liquida o saque.",
    )
    payout_owner_since = models.DateTimeField("responsável desde", null=True, blank=True)
    # Since when the owner has not said where the payout stands (an unclear
    # send, then "not found" or no answer). Past the settle window the payout
    # waits for staff ("pagamentos indeterminados").
    payout_unclear_since = models.DateTimeField(
        "indeterminado desde",
        null=True,
        blank=True,
        help_text="Desde quando a adquirente não diz se pagou (envio sem resposta clara ou consulta sem resultado).",
    )
    # Set while an approved withdrawal is not sent because of its account.
    hold_reason = models.CharField("retido por", max_length=24, choices=HoldReason.choices, blank=True)
    held_since = models.DateTimeField("retido desde", null=True, blank=True)

    # The payee check (withdrawals.payees): the document the merchant expects
    # the key to belong to, and what the lookup found of its owner.
    payee_document = models.CharField(
        "documento esperado do recebedor",
        max_length=14,
        blank=True,
        db_default="",
        help_text="CPF/CNPJ informado no pedido.",
    )
    payee_check = models.CharField(
        "verificação do recebedor", max_length=12, choices=PayeeCheck.choices, blank=True, default="", db_default=""
    )
    payee_name = models.CharField("nome do titular da chave", max_length=140, blank=True, default="", db_default="")
    payee_document_masked = models.CharField(
        "documento do titular (mascarado)", max_length=18, blank=True, default="", db_default=""
    )
    payee_ispb = models.CharField("ISPB do banco do titular", max_length=8, blank=True, default="", db_default="")
    payee_bank = models.CharField("banco do titular", max_length=100, blank=True, default="", db_default="")
    payee_checked_at = models.DateTimeField("consultado em", null=True, blank=True)

    # Sent on this America/Sao_Paulo day, not before (withdrawals.schedule);
    # its amount counts on that day's limit.
    scheduled_for = models.DateField("agendado para", null=True, blank=True)
    # The merchant's own reference (batch items, reconciliation on their side).
    external_id = models.CharField("referência do cliente", max_length=64, blank=True, default="", db_default="")
    batch = models.ForeignKey(
        PayoutBatch,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="items",
        verbose_name="lote",
    )
    batch_index = models.PositiveIntegerField("posição no lote", null=True, blank=True)

    approved_at = models.DateTimeField("aprovado em", null=True, blank=True)
    paid_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField("atualizado em", auto_now=True)

    class Meta:
        verbose_name = "saque"
        verbose_name_plural = "saques"
        ordering = ["-created_at", "-id"]
        # One per back-office action that moves money (withdrawals.admin).
        permissions = [
            ("approve_withdrawal", "Pode aprovar saques (o Pix é enviado)"),
            ("cancel_withdrawal", "Pode cancelar saques pendentes (o débito é devolvido)"),
            ("request_withdrawal_return", "Pode pedir para marcar um saque como devolvido pelo destino"),
            (
                "request_undetermined_payout_failure",
                "Pode pedir para falhar um pagamento indeterminado (o débito é devolvido)",
            ),
        ]
        indexes = [
            # Listings (GET /withdrawals), as for charges: any combination of
            # filters answered from one index; the day's sum of the withdrawal
            # limit (account, created_at, status, amount) is an index-only
            # scan of the first (withdrawal_list_recent).
            *record_listing_indexes("withdrawal"),
            # Beat polls payouts stuck in approved.
            models.Index(fields=["updated_at"], name="withdrawal_approved", condition=Q(status="approved")),
            # The back office's overview (observability.selectors): the last
            # 7 days by day and status, and the pending ones (approval queue).
            models.Index(fields=["created_at"], include=["status", "amount"], name="withdrawal_overview_day"),
            # Account first: a merchant's own "pending" listing reads it by
            # account (tests/perf/test_listing_plans.py), the overview whole.
            # It ends with the listing's order keys, as the listing indexes
            # do, so that listing's page keys come from it alone.
            models.Index(
                fields=["account", "created_at", "id"], name="withdrawal_pending_keys", condition=Q(status="pending")
            ),
            # Staff's queue of undetermined payouts.
            models.Index(
                fields=["payout_unclear_since"],
                name="withdrawal_undetermined",
                condition=Q(payout_unclear_since__isnull=False),
            ),
            # The daily limit's sum for a day also reads the withdrawals scheduled
            # for it (withdrawals.limits); beat sends the day's (withdrawals.schedule).
            models.Index(
                fields=["account", "scheduled_for"],
                include=["status", "amount"],
                name="withdrawal_scheduled",
                condition=Q(scheduled_for__isnull=False),
            ),
            models.Index(
                fields=["scheduled_for"],
                name="withdrawal_scheduled_waiting",
                condition=Q(scheduled_for__isnull=False, status__in=["pending", "approved"]),
            ),
            # Reconciliation reads the payouts an acquirer made in a day.
            models.Index(
                fields=["acquirer", "paid_at"], name="withdrawal_acquirer_paid_at", condition=Q(paid_at__isnull=False)
            ),
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
            models.UniqueConstraint(
                fields=["batch", "batch_index"], condition=Q(batch__isnull=False), name="withdrawal_unique_batch_index"
            ),
        ]

    def __str__(self) -> str:
        return f"Saque {brl(self.amount)} ({WithdrawalStatus(self.status).label.lower()})"


class PayoutAttempt(models.Model):
    """One call to one acquirer about one payout: a send, or a status query."""

    class Action(models.TextChoices):
        SEND = "send", "Envio"
        STATUS = "status", "Consulta"
        # An acquirer's news kept as evidence, not applied (a "failed" while
        # the payout was unsettled); no call was made.
        NOTICE = "notice", "Aviso"

    withdrawal = models.ForeignKey(
        Withdrawal, on_delete=models.CASCADE, related_name="payout_attempts", verbose_name="saque"
    )
    acquirer = models.ForeignKey(
        Acquirer, on_delete=models.PROTECT, related_name="payout_attempts", verbose_name="adquirente"
    )
    action = models.CharField("chamada", max_length=8, choices=Action.choices)
    # A failed call: acquirers.calls.Outcome (as a charge's attempt). An answered
    # one: the payout's status there (paid, processing, failed, not_found).
    outcome = models.CharField(
        "resultado", max_length=20, help_text="O status do pagamento na adquirente, ou o erro da chamada."
    )
    error_class = models.CharField("tipo de erro", max_length=100, blank=True)
    error_message = models.CharField("mensagem de erro", max_length=500, blank=True)
    latency_ms = models.PositiveIntegerField("latência (ms)")
    # This answer was definitive (refused, failed): the acquirer is done with
    # the payout and the chain may move on.
    released = models.BooleanField(
        "liberado", default=False, help_text="Resposta definitiva: a adquirente não pagará; a próxima pode tentar."
    )
    # What a call abandoned at its deadline finally returned or raised, on rows from
    # before calls were cut at the socket (core.deadline); nothing writes them now.
    late_outcome = models.CharField("resposta tardia", max_length=20, blank=True)
    late_detail = models.CharField("detalhe da resposta tardia", max_length=500, blank=True)
    late_at = models.DateTimeField("resposta tardia em", null=True, blank=True)
    created_at = models.DateTimeField("quando", auto_now_add=True)

    class Meta:
        verbose_name = "tentativa de pagamento"
        verbose_name_plural = "tentativas de pagamento"
        ordering = ["withdrawal", "id"]

    def __str__(self) -> str:
        return f"{self.get_action_display()} na adquirente {self.acquirer_id}: {self.outcome}"


class WithdrawalTransition(models.Model):
    class Source(models.TextChoices):
        SYSTEM = "system", "Sistema"
        ACQUIRER = "acquirer", "Adquirente"
        SANDBOX = "sandbox", "Sandbox"
        STAFF = "staff", "Equipe"

    withdrawal = models.ForeignKey(
        Withdrawal, on_delete=models.CASCADE, related_name="transitions", verbose_name="saque"
    )
    from_status = models.CharField("de", max_length=16, choices=WithdrawalStatus.choices)
    to_status = models.CharField("para", max_length=16, choices=WithdrawalStatus.choices)
    source = models.CharField("origem", max_length=16, choices=Source.choices)
    actor = models.CharField("quem", max_length=150, blank=True)
    created_at = models.DateTimeField("quando", auto_now_add=True)

    class Meta:
        verbose_name = "mudança de status do saque"
        verbose_name_plural = "mudanças de status do saque"
        ordering = ["withdrawal", "id"]

    def __str__(self) -> str:
        return f"{self.get_from_status_display()} → {self.get_to_status_display()}"


class UndeterminedPayoutManager(models.Manager["UndeterminedPayout"]):
    def get_queryset(self) -> models.QuerySet[UndeterminedPayout]:
        return super().get_queryset().filter(status=WithdrawalStatus.APPROVED, payout_unclear_since__isnull=False)


class UndeterminedPayout(Withdrawal):
    """Staff's queue: approved withdrawals whose acquirer has not said where
    the payout stands (README, "Money safety")."""

    objects: ClassVar[UndeterminedPayoutManager] = UndeterminedPayoutManager()

    class Meta:
        proxy = True
        verbose_name = "pagamento indeterminado"
        verbose_name_plural = "pagamentos indeterminados"
