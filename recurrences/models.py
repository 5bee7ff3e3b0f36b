"""Pix Automático: a payer's standing authorisation (:class:`Recurrence`,
API Pix ``/rec``) and its cycles (:class:`Cycle`), each charged as a
``cobr`` whose money is a :class:`payments.models.Charge` of kind
``recurring`` (fee, ledger, statement, settlement, refunds, MED and
reconciliation as any charge).

The recurrence stays at the acquirer that holds its ``idRec``: the payer
authorised that PSP's recurrence, and no other PSP can charge it
(docs/api/recurrences.md, "Routing").
"""

from __future__ import annotations

import uuid

from django.db import models

from accounts.models import Account
from acquirers.models import Acquirer


class RecurrenceStatus(models.TextChoices):
    """The authorisation's state (API Pix ``StatusRec``)."""

    CREATED = "created", "Aguardando autorização"
    APPROVED = "approved", "Autorizada"
    REJECTED = "rejected", "Rejeitada"
    EXPIRED = "expired", "Expirada"
    CANCELLED = "cancelled", "Cancelada"
    #: Ours (API Pix has no such status): its last cycle ended and none is left to
    #: open (``dataFinal`` passed). No longer live: a new one may take its contract.
    COMPLETED = "completed", "Concluída"


#: Statuses a recurrence never leaves.
RECURRENCE_ENDED = (
    RecurrenceStatus.REJECTED,
    RecurrenceStatus.EXPIRED,
    RecurrenceStatus.CANCELLED,
    RecurrenceStatus.COMPLETED,
)


class Journey(models.TextChoices):
    """How the payer authorises (``ativacao.tipoJornada``)."""

    PUSH = "push", "Solicitação ao banco do pagador (Jornada 1)"
    QR = "qr", "QR Code da recorrência (Jornada 2)"


class CancelledBy(models.TextChoices):
    NONE = "", "—"
    MERCHANT = "merchant", "Conta (API)"
    PAYER = "payer", "Pagador"
    PAYER_PSP = "payer_psp", "PSP do pagador"
    RECEIVER_PSP = "receiver_psp", "PSP recebedor"
    STAFF = "staff", "Equipe"


class Periodicity(models.TextChoices):
    WEEKLY = "weekly", "Semanal"
    MONTHLY = "monthly", "Mensal"
    QUARTERLY = "quarterly", "Trimestral"
    SEMIANNUAL = "semiannual", "Semestral"
    YEARLY = "yearly", "Anual"


class RetryPolicy(models.TextChoices):
    NONE = "none", "Não permite retentativas"
    THREE_IN_SEVEN_DAYS = "3_in_7_days", "Até 3 retentativas em 7 dias"


class Recurrence(models.Model):
    """One payer's authorisation to be charged every cycle.

    ``terms`` is the source of the schedule and amounts (API Pix ``/rec``
    shapes, :class:`payments.recurrence_terms.RecurrenceTerms`); the debtor's
    document and the contract are copied out of it because one live
    recurrence per (account, debtor, contract) is a rule of ours (a create
    whose answer was lost is found at the acquirer by them)."""

    Status = RecurrenceStatus

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    account = models.ForeignKey(Account, on_delete=models.PROTECT, related_name="recurrences", verbose_name="conta")
    acquirer = models.ForeignKey(
        Acquirer, on_delete=models.PROTECT, related_name="recurrences", verbose_name="adquirente"
    )
    id_rec = models.CharField("idRec", max_length=35, unique=True)
    status = models.CharField(
        "status", max_length=10, choices=RecurrenceStatus.choices, default=RecurrenceStatus.CREATED
    )
    journey = models.CharField("jornada", max_length=4, choices=Journey.choices)
    #: RecurrenceTerms.to_api(): vinculo, calendario, valor, politicaRetentativa.
    terms = models.JSONField("termos (API Pix)")
    debtor_document = models.CharField("CPF/CNPJ do devedor", max_length=14)
    contract = models.CharField("contrato", max_length=35)
    # The push journey's destination: the payer's bank (ispb, branch, account), as asked.
    payer_bank = models.JSONField("banco do pagador (solicitação)", default=dict, blank=True)
    # The payer's PSP once known (the acquirer says it on approval): outcomes are shown per bank.
    payer_ispb = models.CharField("ISPB do PSP pagador", max_length=8, blank=True, db_index=True)
    push_request_id = models.CharField("idSolicRec", max_length=35, blank=True)
    push_status = models.CharField("status da solicitação", max_length=10, blank=True)
    location = models.CharField("location do QR", max_length=255, blank=True)
    emv = models.CharField("Pix copia e cola da recorrência", max_length=512, blank=True)
    cancelled_by = models.CharField(
        "cancelada por", max_length=12, choices=CancelledBy.choices, default=CancelledBy.NONE, blank=True
    )
    status_reason = models.CharField("motivo", max_length=500, blank=True)
    postback_url = models.URLField(
        "URL de notificação", max_length=2000, blank=True, help_text="Para onde vão os webhooks desta recorrência."
    )
    metadata = models.JSONField("metadados", default=dict, blank=True)
    # The next cycle the schedule opens (recurrences.cycles.cycles_open): set
    # on approval to the first cycle still chargeable, advanced under the
    # recurrence's lock, so each cycle is considered once.
    next_index = models.PositiveIntegerField("próximo ciclo a abrir", null=True, blank=True)
    # The day that cycle's window opens: the beat looks only at recurrences whose day has come.
    next_open_on = models.DateField("próxima abertura de ciclo em", null=True, blank=True)
    # Cancelled here, not yet confirmed by the acquirer (PATCH /rec asked until it answers).
    cancel_pending = models.BooleanField("cancelamento a confirmar na adquirente", default=False)
    # The sync's last read at the acquirer: the least recently read first.
    synced_at = models.DateTimeField("consultada na adquirente em", null=True, blank=True, editable=False)
    approved_at = models.DateTimeField("autorizada em", null=True, blank=True)
    ended_at = models.DateTimeField("encerrada em", null=True, blank=True)
    created_at = models.DateTimeField("criada em", auto_now_add=True)
    updated_at = models.DateTimeField("atualizada em", auto_now=True)

    class Meta:
        verbose_name = "recorrência (Pix Automático)"
        verbose_name_plural = "recorrências (Pix Automático)"
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["account", "-created_at"], name="rec_account_created"),
            # The schedule and the sync look at live recurrences only.
            models.Index(
                fields=["synced_at"],
                name="rec_live_synced",
                condition=models.Q(status__in=["created", "approved"]),
            ),
            models.Index(fields=["next_open_on"], name="rec_next_open", condition=models.Q(status="approved")),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["account", "debtor_document", "contract"],
                condition=models.Q(status__in=["created", "approved"]),
                name="rec_one_live_per_contract",
            ),
            models.CheckConstraint(
                condition=models.Q(status__in=["created", "approved"], ended_at__isnull=True)
                | models.Q(status__in=["rejected", "expired", "cancelled", "completed"], ended_at__isnull=False),
                name="rec_ended_at_when_ended",
            ),
        ]

    def __str__(self) -> str:
        return f"Recorrência {self.id_rec}"


class CycleStatus(models.TextChoices):
    """Where a cycle's charging stands. Its money is its charge's
    (``Cycle.charge``): paid, refunded, charged back are read there."""

    #: Its cobr is being asked for (or its answer was unclear): the charge does not exist yet.
    SCHEDULED = "scheduled", "Agendado"
    #: Variable amount: waiting for the merchant's amount.
    AWAITING_AMOUNT = "awaiting_amount", "Aguardando valor"
    #: The cobr is at the acquirer: the payer's PSP settles it on the due date.
    ACTIVE = "active", "Ativo"
    #: Its last attempt was refused; another is scheduled (``next_retry_on``).
    RETRYING = "retrying", "Em retentativa"
    PAID = "paid", "Pago"
    #: Refused for good (no retry left, or the policy allows none).
    FAILED = "failed", "Falhou"
    CANCELLED = "cancelled", "Cancelado"
    #: Its creation window passed without a cobr (no amount in time, acquirer down): staff act.
    MISSED = "missed", "Perdido"


#: Statuses a cycle never leaves.
CYCLE_ENDED = (CycleStatus.PAID, CycleStatus.FAILED, CycleStatus.CANCELLED, CycleStatus.MISSED)


class Cycle(models.Model):
    """Cycle ``index`` of a recurrence (0 is ``dataInicial``'s), created once:
    unique per (recurrence, index), its txid derived from both, so two beats,
    a killed worker or a retry racing a late payment never charge a cycle
    twice."""

    Status = CycleStatus

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    recurrence = models.ForeignKey(
        Recurrence, on_delete=models.PROTECT, related_name="cycles", verbose_name="recorrência"
    )
    index = models.PositiveIntegerField("ciclo", help_text="0 é o da data inicial.")
    due_date = models.DateField("vencimento")
    amount = models.BigIntegerField("valor", null=True, blank=True, help_text="Centavos; vazio até a conta informar.")
    status = models.CharField("status", max_length=16, choices=CycleStatus.choices, default=CycleStatus.SCHEDULED)
    txid = models.CharField("txid", max_length=35, unique=True)
    charge = models.OneToOneField(
        "payments.Charge",
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="cycle",
        verbose_name="cobrança",
    )
    # Retries asked for (POST /cobr/{txid}/retentativa/{data}): the policy counts them.
    retries = models.PositiveSmallIntegerField("retentativas", default=0)
    next_retry_on = models.DateField("próxima retentativa em", null=True, blank=True)
    # Settlement dates already tried: a retry must fall on a new day.
    tried_on = models.JSONField("datas tentadas", default=list, blank=True)
    failure_reason = models.CharField("motivo da última recusa", max_length=500, blank=True)
    # Sends of the cobr (PUT /cobr/{txid}), counted before each call.
    sends = models.PositiveSmallIntegerField("envios", default=0)
    # The last send's outcome is not known (no answer, a worker killed): the
    # acquirer may hold the cobr. Cleared by a clear answer or a read that
    # finds it or says it is not there; an ended cycle's is read by the round.
    send_unclear = models.BooleanField("envio sem resposta clara", default=False)
    synced_at = models.DateTimeField("consultado na adquirente em", null=True, blank=True, editable=False)
    created_at = models.DateTimeField("criado em", auto_now_add=True)
    updated_at = models.DateTimeField("atualizado em", auto_now=True)

    class Meta:
        verbose_name = "ciclo"
        verbose_name_plural = "ciclos"
        ordering = ["recurrence", "index"]
        constraints = [
            models.UniqueConstraint(fields=["recurrence", "index"], name="cycle_once_per_index"),
            models.CheckConstraint(
                condition=models.Q(amount__isnull=True) | models.Q(amount__gt=0), name="cycle_amount_positive"
            ),
        ]
        indexes = [
            models.Index(
                fields=["due_date"],
                name="cycle_open_due",
                condition=models.Q(status__in=["scheduled", "awaiting_amount", "active", "retrying"]),
            ),
        ]

    def __str__(self) -> str:
        return f"Ciclo {self.index + 1} de {self.recurrence_id}"
