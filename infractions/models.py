"""MED infractions, the defence a merchant (or staff on its behalf) sends,
and the deadline notices already given."""

from __future__ import annotations

import uuid

from django.db import models
from django.db.models import F, Q

from accounts.models import Account
from acquirers.models import Acquirer
from core.money import brl
from infractions.choices import InfractionSource, InfractionStatus
from payments.models import Charge


class Infraction(models.Model):
    """One MED infraction on a Pix received for a charge, as its acquirer
    reported it (``(acquirer, external_id)`` is one infraction however often
    it is seen). Amounts are centavos.

    ``hold``: the block mirrored on the merchant's balance when it opened,
    ``min(blocked_amount, charge.liquid_amount)``; ``hold_covered`` of it was
    debited (a ``med_hold`` entry), the rest was more than the balance had
    and is kept back from withdrawals and refunds instead
    (``AccountBalance.hold_uncovered``). ``returned_amount`` is what the
    acquirer says went back to the payer; ``debited_amount`` what the
    merchant was debited for it (``med_return`` entries: at most the
    charge's ``liquid_amount``; the platform's fee is not returned to it)."""

    Status = InfractionStatus
    Source = InfractionSource

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    acquirer = models.ForeignKey(Acquirer, on_delete=models.PROTECT, related_name="+", verbose_name="adquirente")
    external_id = models.CharField("id na adquirente", max_length=100)
    # Null when the disputed Pix matches no charge of ours (staff look at it).
    account = models.ForeignKey(
        Account, on_delete=models.PROTECT, null=True, blank=True, related_name="infractions", verbose_name="conta"
    )
    charge = models.ForeignKey(
        Charge, on_delete=models.PROTECT, null=True, blank=True, related_name="infractions", verbose_name="cobrança"
    )
    e2e_id = models.CharField("e2e id do Pix contestado", max_length=64)
    status = models.CharField("situação", max_length=16, choices=InfractionStatus.choices)
    source = models.CharField("origem", max_length=16, choices=InfractionSource.choices)
    reason = models.CharField("motivo", max_length=500, blank=True)

    amount = models.BigIntegerField("valor contestado")
    blocked_amount = models.BigIntegerField("valor bloqueado na adquirente", default=0)
    hold = models.BigIntegerField("bloqueio no saldo", default=0)
    hold_covered = models.BigIntegerField("bloqueio coberto pelo saldo", default=0)
    hold_released = models.BooleanField("bloqueio liberado", default=False)
    # This infraction set its charge's ``med_open`` (the first one on a paid
    # charge): it alone moves the charge, and clears the mark when it closes.
    holds_charge = models.BooleanField("suspende a cobrança", default=False)
    returned_amount = models.BigIntegerField("devolvido ao pagador", default=0)
    debited_amount = models.BigIntegerField("debitado da conta", default=0)
    # Why no block was mirrored although the acquirer blocked (charge not paid here, another infraction...).
    note = models.CharField("observação", max_length=300, blank=True)

    opened_at = models.DateTimeField("aberta em")
    defense_deadline = models.DateTimeField("prazo de defesa", null=True, blank=True)
    closed_at = models.DateTimeField("encerrada em", null=True, blank=True)

    defense_text = models.TextField("defesa", blank=True)
    defense_by = models.CharField("defesa enviada por", max_length=150, blank=True)
    defense_submitted_at = models.DateTimeField("defesa recebida em", null=True, blank=True)
    defense_sent_at = models.DateTimeField("defesa entregue à adquirente em", null=True, blank=True)
    defense_error = models.CharField("falha ao entregar a defesa", max_length=500, blank=True)
    # A second staff member approved letting the money go back without a defence.
    defense_waived_at = models.DateTimeField("devolução aceita sem defesa em", null=True, blank=True)

    raw = models.JSONField("registro da adquirente", default=dict, blank=True)
    created_at = models.DateTimeField("registrada em", auto_now_add=True)
    updated_at = models.DateTimeField("atualizada em", auto_now=True)

    class Meta:
        verbose_name = "infração MED"
        verbose_name_plural = "infrações MED"
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["account", "-created_at", "-id"], name="infraction_account_recent"),
            # The back office's queue and the deadline notices: open ones by deadline.
            models.Index(
                fields=["defense_deadline"], name="infraction_open_deadline", condition=Q(closed_at__isnull=True)
            ),
        ]
        constraints = [
            models.UniqueConstraint(fields=["acquirer", "external_id"], name="infraction_unique_external"),
            models.CheckConstraint(
                condition=Q(amount__gt=0)
                & Q(blocked_amount__gte=0)
                & Q(hold__gte=0)
                & Q(hold_covered__gte=0, hold_covered__lte=F("hold"))
                & Q(returned_amount__gte=0)
                & Q(debited_amount__gte=0),
                name="infraction_amounts_valid",
            ),
        ]
        permissions = [
            ("defend_infraction", "Pode enviar a defesa de uma infração em nome da conta"),
            ("request_infraction_action", "Pode pedir o registro de uma infração ou aceitar uma devolução"),
            ("approve_infraction_action", "Pode aprovar o registro de uma infração ou a aceitação de uma devolução"),
        ]

    def __str__(self) -> str:
        return f"Infração {self.external_id} ({brl(self.amount)}, {self.get_status_display().lower()})"

    @property
    def is_closed(self) -> bool:
        return self.closed_at is not None

    @property
    def hold_uncovered(self) -> int:
        return self.hold - self.hold_covered


class DefenseAttachment(models.Model):
    """A file sent with a defence (size-capped by the API: INFRACTION_DEFENSE_MAX_BYTES)."""

    infraction = models.ForeignKey(
        Infraction, on_delete=models.CASCADE, related_name="attachments", verbose_name="infração"
    )
    name = models.CharField("nome", max_length=200)
    content_type = models.CharField("tipo", max_length=100)
    size = models.PositiveIntegerField("tamanho (bytes)")
    content = models.BinaryField("conteúdo")
    created_at = models.DateTimeField("enviado em", auto_now_add=True)

    class Meta:
        verbose_name = "anexo da defesa"
        verbose_name_plural = "anexos da defesa"
        ordering = ["infraction", "id"]

    def __str__(self) -> str:
        return self.name


class DeadlineNotice(models.Model):
    """An ``infraction.deadline`` webhook given ``hours`` before the deadline: once each."""

    infraction = models.ForeignKey(Infraction, on_delete=models.CASCADE, related_name="notices")
    hours = models.PositiveSmallIntegerField("horas antes do prazo")
    created_at = models.DateTimeField("avisado em", auto_now_add=True)

    class Meta:
        verbose_name = "aviso de prazo"
        verbose_name_plural = "avisos de prazo"
        constraints = [models.UniqueConstraint(fields=["infraction", "hours"], name="deadline_notice_once")]

    def __str__(self) -> str:
        return f"{self.hours} h"


# What staff ask for about infractions (maker-checker): a module of its own,
# registered with this app's models from here.
from infractions.staff_models import InfractionRequest as InfractionRequest  # noqa: E402
