"""Reconciliation with acquirers: one run per acquirer and day
(:mod:`reconciliation.run`) and the items it, or a released refund's check,
found for staff. The tables keep the names they had when these models lived
in ``payments`` (moved without copying a row)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from accounts.models import MoneyActionRequest
from acquirers.models import Acquirer


class ReconciliationRun(models.Model):
    """One reconciliation of an acquirer's day (America/Sao_Paulo): its
    listings against our charges and payouts. One row per acquirer and day:
    a rerun (on demand, or beat's retry) recomputes the same row."""

    class Status(models.TextChoices):
        RUNNING = "running", "Em andamento"
        DONE = "done", "Concluída"
        FAILED = "failed", "Falhou"
        SKIPPED = "skipped", "Não suportada pela adquirente"

    acquirer = models.ForeignKey(
        Acquirer, on_delete=models.PROTECT, related_name="reconciliation_runs", verbose_name="adquirente"
    )
    day = models.DateField("dia", help_text="Dia (horário de Brasília) conciliado.")
    window_start = models.DateTimeField("início da janela")
    window_end = models.DateTimeField("fim da janela")
    status = models.CharField("situação", max_length=16, choices=Status.choices, default=Status.RUNNING)
    started_at = models.DateTimeField("iniciada em")
    finished_at = models.DateTimeField("terminada em", null=True, blank=True)
    executions = models.PositiveIntegerField("execuções", default=0, help_text="Quantas vezes o dia foi conciliado.")
    matched_count = models.PositiveIntegerField("conferidos", default=0)
    matched_amount = models.BigIntegerField("valor conferido", default=0, help_text="Em centavos.")
    unmatched_count = models.PositiveIntegerField("divergentes", default=0)
    unmatched_amount = models.BigIntegerField("valor divergente", default=0, help_text="Em centavos.")
    healed_count = models.PositiveIntegerField(
        "corrigidos", default=0, help_text="Pagos na adquirente e pendentes aqui: o evento confirmado foi aplicado."
    )
    error = models.CharField("erro", max_length=500, blank=True)

    class Meta:
        db_table = "payments_reconciliationrun"
        verbose_name = "conciliação com adquirente"
        verbose_name_plural = "conciliações com adquirentes"
        ordering = ["-day", "acquirer_id"]
        constraints = [
            models.UniqueConstraint(fields=["acquirer", "day"], name="reconciliation_run_one_per_day"),
            models.CheckConstraint(condition=Q(matched_amount__gte=0), name="reconciliation_matched_non_negative"),
            models.CheckConstraint(condition=Q(unmatched_amount__gte=0), name="reconciliation_unmatched_non_negative"),
        ]

    def __str__(self) -> str:
        return f"Conciliação de {self.day:%d/%m/%Y} ({self.get_status_display().lower()})"


class ReconciliationItem(models.Model):
    """A mismatch found by reconciliation, with what each side says, until
    staff resolve it (or the run healed it). Unique per acquirer, kind and
    key (the e2e id, else our reference): a rerun finds it again, it does
    not add another."""

    class Kind(models.TextChoices):
        PAID_THERE_NOT_HERE = "paid_there_not_here", "Paga na adquirente, pendente ou falha aqui"
        PAID_HERE_UNKNOWN_THERE = "paid_here_unknown_there", "Paga aqui, desconhecida na adquirente"
        AMOUNT_DIFFERS = "amount_differs", "Valores diferentes"
        PAYOUT_SENT_THERE_FAILED_HERE = "payout_sent_there_failed_here", "Pix enviado na adquirente, saque falho aqui"
        PAYOUT_FAILED_THERE_PAID_HERE = (
            "payout_failed_there_paid_here",
            "Pix não realizado na adquirente, saque pago aqui",
        )
        REFUND_DIFFERS = "refund_differs", "Devolução em um lado só"
        UNKNOWN_HERE = "unknown_here", "Registro da adquirente sem correspondente aqui"
        DUPLICATE_E2E = "duplicate_e2e", "Registro repetido (e2e id ou id de envio já visto)"
        PARTIAL_RETURN = "partial_return", "Pix creditado integralmente, devolvido em parte na adquirente"
        REFUNDED_THERE_CHARGEBACK_HERE = (
            "refunded_there_chargeback_here",
            "Devolvida na adquirente, contestada (MED) aqui",
        )
        RECORD_FAILED = "record_failed", "Registro que a conciliação não conseguiu conferir"

    class Direction(models.TextChoices):
        RECEIVED = "received", "Recebido (cobrança)"
        SENT = "sent", "Enviado (saque)"

    class Status(models.TextChoices):
        OPEN = "open", "Aberto"
        HEALED = "healed", "Corrigido automaticamente"
        AWAITING_APPROVAL = "awaiting_approval", "Aguardando aprovação"
        RESOLVED = "resolved", "Resolvido"

    class Resolution(models.TextChoices):
        HEALED = "healed", "Evento confirmado aplicado pela conciliação"
        ACKNOWLEDGED = "acknowledged", "Ciente, sem movimentação de saldo"
        MONEY_ACTION = "money_action", "Movimentação de saldo pedida (aprovação)"

    # None: found outside a daily run (the check of a refund a chargeback released).
    run = models.ForeignKey(
        ReconciliationRun,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="items",
        verbose_name="conciliação",
    )
    acquirer = models.ForeignKey(
        Acquirer, on_delete=models.PROTECT, related_name="reconciliation_items", verbose_name="adquirente"
    )
    kind = models.CharField("tipo", max_length=40, choices=Kind.choices)
    direction = models.CharField("sentido", max_length=16, choices=Direction.choices)
    key = models.CharField("chave", max_length=100, help_text="O e2e id, ou nossa referência quando não há.")
    reference = models.CharField("referência", max_length=64, blank=True, help_text="txid ou id de idempotência.")
    e2e_id = models.CharField("e2e id", max_length=64, blank=True)
    target_type = models.CharField("tipo do registro", max_length=40, blank=True)
    target_id = models.CharField("registro", max_length=64, blank=True)
    ours_status = models.CharField("situação aqui", max_length=32, blank=True)
    ours_amount = models.BigIntegerField("valor aqui", null=True, blank=True, help_text="Em centavos.")
    theirs_status = models.CharField("situação na adquirente", max_length=32, blank=True)
    theirs_amount = models.BigIntegerField("valor na adquirente", null=True, blank=True, help_text="Em centavos.")
    theirs_raw = models.JSONField("registro da adquirente", default=dict, blank=True)
    # The evidence of a payer repaid twice (refunded there, charged back
    # here): the most the acquirer ever said went back, by MED and by refund.
    # Blank: it said nothing. A redébito takes only what exceeds the Pix.
    returned_by_med = models.BigIntegerField(
        "devolvido pelo MED", null=True, blank=True, help_text="Em centavos, segundo a adquirente."
    )
    returned_by_refund = models.BigIntegerField(
        "devolvido por estorno", null=True, blank=True, help_text="Em centavos, segundo a adquirente."
    )
    detail = models.CharField("detalhe", max_length=500, blank=True)
    status = models.CharField("situação", max_length=20, choices=Status.choices, default=Status.OPEN)
    resolution = models.CharField("resolução", max_length=20, choices=Resolution.choices, blank=True)
    reason = models.TextField("motivo", blank=True)
    resolved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="+",
        verbose_name="resolvido por",
    )
    resolved_at = models.DateTimeField("resolvido em", null=True, blank=True)
    approval_request = models.ForeignKey(
        MoneyActionRequest,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="+",
        verbose_name="pedido de aprovação",
    )
    created_at = models.DateTimeField("encontrado em", auto_now_add=True)
    last_seen_at = models.DateTimeField("visto por último em")

    class Meta:
        db_table = "payments_reconciliationitem"
        verbose_name = "divergência de conciliação"
        verbose_name_plural = "divergências de conciliação"
        ordering = ["-created_at", "-id"]
        permissions = [("resolve_reconciliationitem", "Pode resolver divergências de conciliação")]
        constraints = [
            models.UniqueConstraint(fields=["acquirer", "kind", "key"], name="reconciliation_item_unique"),
        ]
        indexes = [models.Index(fields=["status", "-created_at"], name="reconciliation_item_status")]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} ({self.key})"
