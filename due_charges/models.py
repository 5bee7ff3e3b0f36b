"""Batches of due-date charges (one request, up to 1,000 charges).

A batch's items are processed after the request answered (202): each one
becomes a :class:`payments.models.Charge` of kind ``due`` or ``failed`` with
its reasons. The charge's id is allocated with the item, before any
acquirer is called: it is the charge's primary key and the source of its
txid, so an item retried after a lost answer asks the acquirer for the same
cobv (an idempotent PUT) and never creates a second one.

Idempotency of the request itself is the API's (``api.idempotency``), as
for ``POST /api/transactions``: no key is stored here.
"""

from __future__ import annotations

import uuid

from django.db import models
from django.utils import timezone

from accounts.models import Account
from acquirers.models import Acquirer


class BatchStatus(models.TextChoices):
    PROCESSING = "processing", "Em processamento"
    DONE = "done", "Concluído"


class ItemStatus(models.TextChoices):
    PENDING = "pending", "Pendente"
    CREATED = "created", "Criada"
    FAILED = "failed", "Falhou"


class DueChargeBatch(models.Model):
    """The counts by item status are derived from the items (one aggregate,
    at most 1,000 rows): a stored counter would be one more thing to keep
    right under concurrent workers."""

    Status = BatchStatus

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    account = models.ForeignKey(
        Account, on_delete=models.PROTECT, related_name="due_charge_batches", verbose_name="conta"
    )
    status = models.CharField("status", max_length=12, choices=BatchStatus.choices, default=BatchStatus.PROCESSING)
    total = models.PositiveIntegerField("itens")
    description = models.CharField("descrição", max_length=140, blank=True)
    postback_url = models.URLField(
        "URL de notificação", max_length=2000, blank=True, help_text="Para onde vai o webhook do lote concluído."
    )
    # lotecobv: the lote's numeric id at the acquirer that received it (API
    # Pix names lotes by an integer we choose); null when the items went one
    # by one.
    lote_id = models.BigIntegerField("id do lote na adquirente", null=True, blank=True, unique=True)
    lote_acquirer = models.ForeignKey(
        Acquirer,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="+",
        verbose_name="adquirente do lote",
    )
    # Sends of the lote whose answer was unclear (a timeout, a 5xx) or that
    # found its acquirer open or busy: bounded (``batch_lotes.LOTE_SENDS``).
    lote_sends = models.PositiveSmallIntegerField("envios do lote sem resposta clara", default=0)
    # The acquirer of a lote given up without a clear answer: it may hold
    # some of the lote's cobv, so an item stored at another acquirer asks it
    # to withdraw its own (and one stored there takes the lote's, same txid).
    lote_abandoned_at = models.ForeignKey(
        Acquirer,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="+",
        verbose_name="adquirente do lote abandonado",
    )
    # When the PSP accepted the lote (its PUT answered 202): from then on the
    # lote is read back, never sent again.
    lote_sent_at = models.DateTimeField("lote enviado em", null=True, blank=True)
    # The batch's work last moved: handed to workers, an item settled or
    # handed back, the lote sent or read. Stamped explicitly (``updated_at``
    # misses every ``.update()``); the sweep takes up only batches idle for
    # longer than a claim's lease (``due_charges.batches.batches_stalled``).
    progress_at = models.DateTimeField("última atividade em", default=timezone.now)
    created_at = models.DateTimeField("criado em", auto_now_add=True)
    updated_at = models.DateTimeField("atualizado em", auto_now=True)
    finished_at = models.DateTimeField("concluído em", null=True, blank=True)

    class Meta:
        verbose_name = "lote de cobranças com vencimento"
        verbose_name_plural = "lotes de cobranças com vencimento"
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["account", "-created_at"], name="due_batch_account_created"),
            # The sweep looks for unfinished batches only.
            models.Index(
                fields=["progress_at"],
                name="due_batch_idle",
                condition=models.Q(status="processing"),
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(total__gte=1) & models.Q(total__lte=1000), name="due_batch_total_range"
            ),
            models.CheckConstraint(
                condition=models.Q(status="processing", finished_at__isnull=True)
                | models.Q(status="done", finished_at__isnull=False),
                name="due_batch_finished_when_done",
            ),
        ]

    def __str__(self) -> str:
        return f"Lote {self.id} ({self.total} cobranças)"


class DueChargeBatchItem(models.Model):
    Status = ItemStatus

    batch = models.ForeignKey(DueChargeBatch, on_delete=models.CASCADE, related_name="items", verbose_name="lote")
    position = models.PositiveIntegerField("posição", help_text="Índice do item na lista enviada, a partir de 0.")
    # Allocated with the item: the created charge's id, and its txid's source.
    charge_id = models.UUIDField("id da cobrança", default=uuid.uuid4, unique=True, editable=False)
    status = models.CharField("status", max_length=10, choices=ItemStatus.choices, default=ItemStatus.PENDING)
    # {field: [messages]} in pt-BR, the API's 422 shape; empty unless failed.
    errors = models.JSONField("erros", default=dict, blank=True)
    # The item as validated (the body of POST /api/due-charges); {} when it failed validation.
    request = models.JSONField("requisição validada", default=dict, blank=True)
    attempts = models.PositiveSmallIntegerField(
        "tentativas", default=0, help_text="Quantas vezes a criação na adquirente foi tentada."
    )
    created_at = models.DateTimeField("criado em", auto_now_add=True)
    updated_at = models.DateTimeField("atualizado em", auto_now=True)

    class Meta:
        verbose_name = "item de lote de cobranças"
        verbose_name_plural = "itens de lote de cobranças"
        ordering = ["batch", "position"]
        constraints = [
            models.UniqueConstraint(fields=["batch", "position"], name="due_batch_item_position_unique"),
        ]
        indexes = [models.Index(fields=["batch", "status"], name="due_batch_item_status")]

    def __str__(self) -> str:
        return f"Item {self.position} do lote {self.batch_id}"
