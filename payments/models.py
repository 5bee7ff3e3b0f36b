"""PIX charges (cash-in), the attempts made at acquirers, and their history."""

from __future__ import annotations

import uuid

from django.db import models
from django.db.models import F, Q

from accounts.models import Account, PaymentMethod
from acquirers.models import Acquirer
from core.indexes import record_listing_indexes
from core.money import brl
from payments.choices import ChargeKind, ChargeSource
from payments.choices import ChargeStatus as ChargeStatus  # callers name it with the models


class Charge(models.Model):
    """A charge exists once an acquirer accepted it: a client that got a 201
    has a row, one that got a 400 has only attempts.

    Fields the API serializes (payments.serializers.ChargeSerializer) keep
    Django's default verbose name and no help text: both would become the
    OpenAPI schema's title and description. payments.admin labels them."""

    Status = ChargeStatus

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    account = models.ForeignKey(Account, on_delete=models.PROTECT, related_name="charges", verbose_name="conta")
    payment_method = models.CharField(max_length=16, choices=PaymentMethod.choices, default=PaymentMethod.PIX)
    # Immediate (cob) or with a due date (cobv: its terms in DueCharge, ``charge.due``).
    kind = models.CharField(
        "tipo", max_length=10, choices=ChargeKind.choices, default=ChargeKind.IMMEDIATE, db_default="immediate"
    )
    amount = models.BigIntegerField()
    platform_tax = models.BigIntegerField()
    liquid_amount = models.BigIntegerField()
    status = models.CharField(max_length=16, choices=ChargeStatus.choices, default=ChargeStatus.PENDING)
    # Bumped by every transition; names the ledger cause of each one so a
    # charge can go paid → chargeback → paid → chargeback without collisions.
    version = models.PositiveIntegerField(
        "versão", default=0, help_text="Quantas mudanças de status a cobrança já teve."
    )

    txid = models.CharField("txid", max_length=35, unique=True)
    emv = models.CharField("Pix copia e cola (EMV)", max_length=512)
    acquirer = models.ForeignKey(Acquirer, on_delete=models.PROTECT, related_name="charges", verbose_name="adquirente")
    provider_charge_id = models.CharField("id na adquirente", max_length=100, blank=True)
    # NULL, not "", until paid: the unique constraint must ignore unpaid charges.
    e2e_id = models.CharField(max_length=64, null=True, blank=True)  # noqa: DJ001

    buyer_name = models.CharField("nome do pagador", max_length=255)
    buyer_document = models.CharField("CPF/CNPJ do pagador", max_length=14, db_index=True)
    buyer_phone = models.CharField("telefone do pagador", max_length=20)
    buyer_address = models.JSONField("endereço do pagador", default=dict, blank=True)
    postback_url = models.URLField(
        "URL de notificação", max_length=2000, blank=True, help_text="Para onde vão os webhooks desta cobrança."
    )
    metadata = models.JSONField("metadados", default=dict, blank=True)

    # An open MED infraction names this charge (infractions app): only the
    # infraction's own changes move it until it closes, and no refund starts
    # (the payer would be repaid twice).
    med_open = models.BooleanField(
        "infração MED em aberto",
        default=False,
        # Also the database's: rows inserted by hand (benchmarks, plan tests) need no value.
        db_default=False,
        help_text="Só a infração muda esta cobrança até ser encerrada.",
    )

    expires_at = models.DateTimeField()
    paid_at = models.DateTimeField(null=True, blank=True)
    # The status poll's last read of a pending charge (payments.status_polling):
    # the least recently read come first, so every pending charge gets its turn.
    polled_at = models.DateTimeField("consultada na adquirente em", null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField("atualizada em", auto_now=True)

    class Meta:
        verbose_name = "cobrança"
        verbose_name_plural = "cobranças"
        ordering = ["-created_at", "-id"]
        # One per back-office action that moves money (payments.admin).
        permissions = [
            ("refund_charge", "Pode estornar cobranças"),
            ("mark_charge_chargeback", "Pode marcar cobranças como contestadas (MED)"),
            ("request_chargeback_resolution", "Pode pedir a resolução de uma contestação a favor da conta"),
        ]
        indexes = [
            # Listings (GET /transactions): one index per filter, each
            # answering the COUNT and the page's keys by itself.
            *record_listing_indexes("charge"),
            # GET /api/due-charges: an account's due-date charges newest
            # first, by status too, without walking its immediate ones.
            models.Index(
                fields=["account", "-created_at", "-id"],
                include=["status"],
                condition=Q(kind="due"),
                name="charge_due_list_recent",
            ),
            models.Index(
                fields=["account", "status", "-created_at", "-id"],
                condition=Q(kind="due"),
                name="charge_due_list_status",
            ),
            # The expiry sweep reads only pending charges.
            models.Index(fields=["expires_at"], name="charge_pending_expiry", condition=Q(status="pending")),
            # The status poll reads pending charges never read first, then the least recently read.
            models.Index(
                F("polled_at").asc(nulls_first=True),
                F("created_at"),
                name="charge_pending_poll",
                condition=Q(status="pending"),
            ),
            # The back office's overview (observability.selectors): the last
            # 7 days by day and status as an index-only scan, and the open
            # chargebacks from a small partial index.
            models.Index(fields=["created_at"], include=["status", "amount"], name="charge_overview_day"),
            models.Index(fields=["created_at"], name="charge_chargeback_open", condition=Q(status="chargeback")),
            # Reconciliation reads an acquirer's charges paid in a day.
            models.Index(
                fields=["acquirer", "paid_at"], name="charge_acquirer_paid_at", condition=Q(paid_at__isnull=False)
            ),
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
        return f"Cobrança {brl(self.amount)} ({ChargeStatus(self.status).label.lower()})"


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
        Charge,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        related_name="attempts",
        db_index=True,
        verbose_name="cobrança",
    )
    account = models.ForeignKey(Account, on_delete=models.PROTECT, related_name="+", verbose_name="conta")
    acquirer = models.ForeignKey(
        Acquirer, on_delete=models.PROTECT, related_name="charge_attempts", verbose_name="adquirente"
    )
    position = models.PositiveSmallIntegerField("ordem", help_text="1 é a primeira adquirente tentada.")
    outcome = models.CharField("resultado", max_length=20, choices=Outcome.choices)
    error_class = models.CharField("tipo de erro", max_length=100, blank=True)
    error_message = models.CharField("mensagem de erro", max_length=500, blank=True)
    latency_ms = models.PositiveIntegerField("latência (ms)")
    created_at = models.DateTimeField("quando", auto_now_add=True)

    class Meta:
        verbose_name = "tentativa na adquirente"
        verbose_name_plural = "tentativas nas adquirentes"
        ordering = ["charge_id", "position"]
        indexes = [models.Index(fields=["acquirer", "-created_at"], name="attempt_acquirer_recent")]

    def __str__(self) -> str:
        return f"Tentativa {self.position} na adquirente {self.acquirer_id}: {self.get_outcome_display()}"


class ChargeTransition(models.Model):
    """Audit trail: every status change, who caused it, and when."""

    Source = ChargeSource

    charge = models.ForeignKey(Charge, on_delete=models.CASCADE, related_name="transitions", verbose_name="cobrança")
    from_status = models.CharField("de", max_length=16, choices=ChargeStatus.choices)
    to_status = models.CharField("para", max_length=16, choices=ChargeStatus.choices)
    source = models.CharField("origem", max_length=16, choices=Source.choices)
    actor = models.CharField("quem", max_length=150, blank=True)
    created_at = models.DateTimeField("quando", auto_now_add=True)

    class Meta:
        verbose_name = "mudança de status"
        verbose_name_plural = "mudanças de status"
        ordering = ["charge", "id"]

    def __str__(self) -> str:
        return f"{self.get_from_status_display()} → {self.get_to_status_display()}"


class ChargeRefund(models.Model):
    """A refund whose amount is reserved: asked by the merchant through the
    API (reserved at the request, before the acquirer is called) or by staff
    and answered "processing" by the acquirer. Its amount is reserved at
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

    class Source(models.TextChoices):
        STAFF = "staff", "Equipe"
        API = "api", "API"

    class ReleaseCheck(models.TextChoices):
        """What the acquirer finally said of a refund a chargeback released
        while it was processing there (payments.refunds_released)."""

        PENDING = "pending", "Consultando a adquirente"
        NOT_MADE = "not_made", "Não feita na adquirente"
        MADE = "made", "Feita na adquirente (o pagador recebeu o MED e o estorno)"

    charge = models.ForeignKey(Charge, on_delete=models.PROTECT, related_name="refunds", verbose_name="cobrança")
    amount = models.BigIntegerField("valor", help_text="Centavos reservados: o valor líquido da cobrança.")
    status = models.CharField("status", max_length=16, choices=Status.choices, default=Status.PROCESSING)
    source = models.CharField("origem", max_length=8, choices=Source.choices, default=Source.STAFF)
    reason = models.CharField("motivo", max_length=140, blank=True, help_text="O motivo informado pelo lojista.")
    failure_reason = models.CharField(
        "motivo da recusa", max_length=500, blank=True, help_text="O que a adquirente disse ao não devolver."
    )
    created_at = models.DateTimeField("criado em", auto_now_add=True)
    finished_at = models.DateTimeField("concluído em", null=True, blank=True)
    # The last ask the acquirer may have received without answering it (a
    # timeout, a 5xx): until DEVOLUCAO_GRACE after it, a refusal or "not
    # found" is not "not made" (payments.devolucao_answers).
    unclear_at = models.DateTimeField(
        "último pedido sem resposta em",
        null=True,
        blank=True,
        help_text="A adquirente pode ter feito a devolução: recusa ou não encontrada depois disso não é final.",
    )
    # Released (a chargeback took the money) while the acquirer may still
    # make it: asked about until its answer is final, so the payer is never
    # repaid twice unseen. Blank for a refund no chargeback released.
    release_check = models.CharField(
        "após a contestação", max_length=16, choices=ReleaseCheck.choices, blank=True, default=""
    )
    release_checked_at = models.DateTimeField("resposta final em", null=True, blank=True)

    class Meta:
        verbose_name = "estorno"
        verbose_name_plural = "estornos"
        ordering = ["charge", "id"]
        indexes = [
            # The refund sweep reads the released refunds still being asked about.
            models.Index(
                fields=["created_at"], name="charge_refund_release_pending", condition=Q(release_check="pending")
            ),
        ]
        constraints = [
            models.CheckConstraint(condition=Q(amount__gt=0), name="charge_refund_amount_positive"),
            models.UniqueConstraint(
                fields=["charge"], condition=Q(status="processing"), name="charge_refund_one_processing"
            ),
        ]

    def __str__(self) -> str:
        return f"Estorno {brl(self.amount)} ({self.get_status_display().lower()})"


# Cancellation at the acquirer, late payments and due-date charges' terms:
# models of their own modules (this one is full), registered with the app from here.
from payments.due_models import DueCharge as DueCharge  # noqa: E402
from payments.late_models import ChargeCancellation as ChargeCancellation  # noqa: E402
from payments.late_models import LatePayment as LatePayment  # noqa: E402
from payments.late_models import LatePaymentResolution as LatePaymentResolution  # noqa: E402
