"""A charge cancelled here and what its acquirer still does with it: the ask
to withdraw it there (``payments.cancellation``) and a Pix received anyway
(``payments.late_payments``). Imported by ``payments.models``."""

from __future__ import annotations

from django.db import models
from django.db.models import F, Q

from accounts.models import Account, MoneyActionRequest
from acquirers.models import Acquirer
from core.money import brl
from payments.choices import ChargeSource, ChargeStatus


class ChargeCancellation(models.Model):
    """Asking the acquirer to withdraw a charge cancelled here (by staff or
    by expiry), until it answers for certain (``payments.cancellation``).

    One per charge. An unclear answer (timeout, 5xx, a charge it does not
    know yet) is asked again with growing backoff until ``give_up_at``; then
    it waits for staff, on the overview."""

    class State(models.TextChoices):
        PENDING = "pending", "Aguardando a adquirente"
        DONE = "done", "Removida na adquirente"
        PAID_THERE = "paid_there", "Paga na adquirente antes de ser removida"
        UNSUPPORTED = "unsupported", "A adquirente não cancela: vale a expiração dela"
        GAVE_UP = "gave_up", "Sem resposta definitiva da adquirente"

    charge = models.OneToOneField(
        "payments.Charge",
        on_delete=models.CASCADE,
        primary_key=True,
        related_name="cancellation",
        verbose_name="cobrança",
    )
    acquirer = models.ForeignKey(Acquirer, on_delete=models.PROTECT, related_name="+", verbose_name="adquirente")
    state = models.CharField("situação", max_length=16, choices=State.choices, default=State.PENDING)
    attempts = models.PositiveIntegerField("pedidos feitos", default=0)
    last_error = models.CharField("último erro", max_length=500, blank=True)
    requested_at = models.DateTimeField("pedido em")
    next_attempt_at = models.DateTimeField("próximo pedido em", null=True, blank=True)
    give_up_at = models.DateTimeField(
        "desiste em", help_text="Sem resposta definitiva até aqui, o cancelamento fica para a equipe."
    )
    finished_at = models.DateTimeField("concluído em", null=True, blank=True)

    class Meta:
        verbose_name = "cancelamento na adquirente"
        verbose_name_plural = "cancelamentos na adquirente"
        ordering = ["-requested_at"]
        permissions = [("retry_chargecancellation", "Pode pedir de novo o cancelamento na adquirente")]
        indexes = [
            # Beat's sweep of asks whose task was lost, and the overview's count.
            models.Index(fields=["next_attempt_at"], name="cancellation_due", condition=Q(state="pending")),
            models.Index(fields=["requested_at"], name="cancellation_gave_up", condition=Q(state="gave_up")),
        ]

    def __str__(self) -> str:
        return f"Cancelamento na adquirente ({self.get_state_display().lower()})"


class LatePayment(models.Model):
    """A Pix received for a charge that is cancelled (or failed) here: by the
    acquirer's notification, a status poll, or the daily reconciliation.
    Never refused silently: kept with its evidence until staff resolve it by
    maker-checker (``payments.late_payments``), crediting the account or
    returning it to the payer. One per end-to-end id: the same Pix seen again
    is the same record."""

    class Status(models.TextChoices):
        OPEN = "open", "Aguardando decisão"
        CREDITED = "credited", "Creditado à conta"
        RETURNING = "returning", "Devolução em andamento"
        RETURNED = "returned", "Devolvido ao pagador"

    id = models.BigAutoField(primary_key=True)
    charge = models.ForeignKey(
        "payments.Charge", on_delete=models.PROTECT, related_name="late_payments", verbose_name="cobrança"
    )
    account = models.ForeignKey(Account, on_delete=models.PROTECT, related_name="+", verbose_name="conta")
    acquirer = models.ForeignKey(Acquirer, on_delete=models.PROTECT, related_name="+", verbose_name="adquirente")
    e2e_id = models.CharField("ID end-to-end (E2E)", max_length=64)
    amount = models.BigIntegerField("valor recebido", help_text="Em centavos: o valor do Pix.")
    platform_tax = models.BigIntegerField("taxa da plataforma", help_text="Em centavos, pela tarifa da conta.")
    liquid_amount = models.BigIntegerField("valor líquido", help_text="Em centavos: o que um crédito lança na conta.")
    charge_status = models.CharField(
        "status da cobrança", max_length=16, choices=ChargeStatus.choices, help_text="Quando o Pix chegou."
    )
    source = models.CharField("visto por", max_length=16, choices=ChargeSource.choices)
    paid_at = models.DateTimeField("pago em", null=True, blank=True, help_text="Segundo a adquirente.")
    payer_info = models.CharField(
        "informação do pagador", max_length=500, blank=True, help_text="O que a adquirente diz de quem pagou."
    )
    raw = models.JSONField("registro da adquirente", default=dict, blank=True)
    status = models.CharField("situação", max_length=16, choices=Status.choices, default=Status.OPEN)
    created_at = models.DateTimeField("registrado em", auto_now_add=True)
    resolved_at = models.DateTimeField("resolvido em", null=True, blank=True)
    # What the acquirer says went back to the payer other than by a return of
    # ours (a devolução made there, or MED): never credited (payments.late_evidence).
    returned_there = models.BigIntegerField(
        "devolvido na adquirente",
        default=0,
        help_text="Em centavos: o que a adquirente diz ter voltado ao pagador sem devolução nossa (lá ou por MED).",
    )
    returned_there_at = models.DateTimeField("devolução vista em", null=True, blank=True)
    returned_there_evidence = models.JSONField("registro da devolução na adquirente", default=dict, blank=True)

    class Meta:
        verbose_name = "pagamento após cancelamento"
        verbose_name_plural = "pagamentos após cancelamento"
        ordering = ["-created_at", "-id"]
        permissions = [
            ("request_late_payment_resolution", "Pode pedir para creditar ou devolver um pagamento após cancelamento")
        ]
        indexes = [models.Index(fields=["created_at"], name="late_payment_open", condition=Q(status="open"))]
        constraints = [
            models.UniqueConstraint(fields=["e2e_id"], name="late_payment_unique_e2e"),
            models.CheckConstraint(condition=Q(amount__gt=0), name="late_payment_amount_positive"),
            models.CheckConstraint(condition=Q(platform_tax__gte=0), name="late_payment_tax_non_negative"),
            models.CheckConstraint(condition=Q(returned_there__gte=0), name="late_payment_returned_non_negative"),
            models.CheckConstraint(
                condition=Q(liquid_amount=F("amount") - F("platform_tax")), name="late_payment_liquid_is_net"
            ),
            models.CheckConstraint(
                condition=Q(status="open", resolved_at__isnull=True)
                | (~Q(status="open") & Q(resolved_at__isnull=False)),
                name="late_payment_resolution_recorded",
            ),
        ]

    def __str__(self) -> str:
        return f"Pagamento após cancelamento {brl(self.amount)} ({self.get_status_display().lower()})"


class LatePaymentResolution(models.Model):
    """How a late payment was resolved, once approved by a second staff
    member: credited, or returned to the payer (a devolução with an id of
    its own). At most one that did not fail per late payment (a database
    constraint): the money goes one way, once. A return the acquirer says
    it did not make fails, and the late payment waits for a decision again
    (a refusal after an ask left unanswered only once the acquirer confirms
    it has no such devolução: ``unclear_at``)."""

    class Kind(models.TextChoices):
        CREDIT = "credit", "Crédito à conta"
        RETURN = "return", "Devolução ao pagador"

    class Status(models.TextChoices):
        PROCESSING = "processing", "Em andamento na adquirente"
        DONE = "done", "Concluída"
        FAILED = "failed", "Não realizada"

    id = models.BigAutoField(primary_key=True)
    late_payment = models.ForeignKey(
        LatePayment, on_delete=models.PROTECT, related_name="resolutions", verbose_name="pagamento após cancelamento"
    )
    kind = models.CharField("tipo", max_length=8, choices=Kind.choices)
    status = models.CharField("situação", max_length=16, choices=Status.choices)
    approval_request = models.ForeignKey(
        MoneyActionRequest, on_delete=models.PROTECT, null=True, blank=True, related_name="+", verbose_name="pedido"
    )
    actor = models.CharField("aprovado por", max_length=300)
    reason = models.TextField("motivo")
    attempts = models.PositiveIntegerField("pedidos à adquirente", default=0)
    last_error = models.CharField("último erro", max_length=500, blank=True)
    unclear_at = models.DateTimeField(
        "último pedido sem resposta em",
        null=True,
        blank=True,
        help_text="A adquirente pode ter feito a devolução: recusa ou não encontrada depois disso não é final.",
    )
    failure_reason = models.CharField("motivo da recusa", max_length=500, blank=True)
    created_at = models.DateTimeField("criada em", auto_now_add=True)
    finished_at = models.DateTimeField("concluída em", null=True, blank=True)

    class Meta:
        verbose_name = "resolução de pagamento após cancelamento"
        verbose_name_plural = "resoluções de pagamentos após cancelamento"
        ordering = ["late_payment", "id"]
        constraints = [
            # Exactly one way for the money: a second credit or return is refused here too.
            models.UniqueConstraint(
                fields=["late_payment"], condition=~Q(status="failed"), name="late_payment_one_resolution"
            ),
            models.CheckConstraint(
                condition=Q(kind="return") | Q(status="done"), name="late_payment_credit_is_immediate"
            ),
        ]
        indexes = [models.Index(fields=["created_at"], name="late_return_processing", condition=Q(status="processing"))]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} ({self.get_status_display().lower()})"

    @property
    def refund_id(self) -> str:
        """The devolução id: its own, so a return asked again is the same
        devolução at the acquirer (never repaid twice), and a new return
        after one that failed is another."""
        return f"L{self.late_payment_id}R{self.pk}"
