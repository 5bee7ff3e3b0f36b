"""Payment providers (acquirers) and which of them each account may use.

Behaviour (adapters, the chain) arrives with the cash-in issue; the data is
here because operators configure it from day one (``pix_bootstrap``).
"""

from __future__ import annotations

from decimal import Decimal

from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from django.db.models import Q

from accounts.models import Account
from core.snapshots import WatchedQuerySet

ACQUIRER_KEY_PATTERN = r"^[a-z0-9_]+$"
acquirer_key_validator = RegexValidator(ACQUIRER_KEY_PATTERN, "Use apenas letras minúsculas, números e _.")
#: The listing's conversion of an acquirer with neither a staff value nor a
#: measurement on a large enough sample: what it showed before either existed.
CONVERSION_DEFAULT = Decimal("0")


def _percent_or_null(field: str) -> Q:
    return Q(**{f"{field}__isnull": True}) | Q(**{f"{field}__gte": 0, f"{field}__lte": 100})


class Acquirer(models.Model):
    key = models.CharField(
        "chave",
        max_length=64,
        unique=True,
        validators=[acquirer_key_validator],
        help_text="Identificador usado pela API; letras minúsculas, números e _.",
    )
    name = models.CharField("nome", max_length=100)
    nominal = models.CharField(
        "razão social", max_length=200, blank=True, help_text="Nome nominal mostrado aos clientes na API."
    )
    adapter = models.CharField("adaptador", max_length=64, default="sandbox")
    options = models.JSONField(
        "opções", default=dict, blank=True, help_text="Configuração do adaptador (inclui credenciais do provedor)."
    )
    enabled = models.BooleanField("ativa", default=True)
    max_ticket = models.BigIntegerField(
        "ticket máximo", default=300_000, help_text="Maior valor de uma cobrança por esta adquirente."
    )
    # The listing's conversion (interface spec: ``conversion_percent``) is
    # measured from the charges (payments.conversion, beat); staff may still
    # set it. See :attr:`conversion_percent` for which one the API shows.
    conversion_percent_override = models.DecimalField(
        "conversão definida pela equipe (%)",
        help_text=(
            "De 0 a 100. Preenchida, é a conversão mostrada aos clientes na API no lugar da medida; "
            "vazia, a API mostra a conversão medida (ou 0 enquanto não houver amostra suficiente)."
        ),
        max_digits=5,
        decimal_places=2,
        null=True,
        blank=True,
        default=None,
        validators=[MinValueValidator(Decimal("0")), MaxValueValidator(Decimal("100"))],
    )
    # Written only by the measurement (editable=False: not in any form).
    conversion_measured_percent = models.DecimalField(
        "conversão medida (%)",
        help_text="Cobranças pagas ÷ cobranças criadas na janela; vazia abaixo da amostra mínima.",
        max_digits=5,
        decimal_places=2,
        null=True,
        blank=True,
        editable=False,
    )
    conversion_sample = models.PositiveIntegerField(
        "amostra da conversão",
        default=0,
        editable=False,
        help_text="Cobranças contadas na última medição.",
    )
    conversion_measured_at = models.DateTimeField("conversão medida em", null=True, blank=True, editable=False)
    is_new = models.BooleanField("nova", default=False, help_text="Marcada como recém-oferecida na API.")
    default_priority = models.PositiveSmallIntegerField(
        "prioridade padrão",
        null=True,
        blank=True,
        help_text="Posição na cadeia padrão da plataforma; vazio = fora dela.",
    )
    connect_timeout_ms = models.PositiveIntegerField("tempo limite de conexão (ms)", default=3000)
    read_timeout_ms = models.PositiveIntegerField("tempo limite de leitura (ms)", default=10000)
    created_at = models.DateTimeField("criada em", auto_now_add=True)
    updated_at = models.DateTimeField("atualizada em", auto_now=True)

    # Chains are read from snapshots (core.snapshots): writes to these models drop them.
    objects = WatchedQuerySet["Acquirer"].as_manager()

    class Meta:
        verbose_name = "adquirente"
        verbose_name_plural = "adquirentes"
        ordering = ["key"]
        permissions = [("reset_circuit_breaker", "Pode resetar o circuit breaker da adquirente")]
        constraints = [
            models.CheckConstraint(condition=Q(max_ticket__gte=0), name="acquirer_max_ticket_non_negative"),
            models.CheckConstraint(condition=Q(key__regex=ACQUIRER_KEY_PATTERN), name="acquirer_key_pattern"),
            models.CheckConstraint(
                condition=_percent_or_null("conversion_percent_override"), name="acquirer_conversion_override_0_100"
            ),
            models.CheckConstraint(
                condition=_percent_or_null("conversion_measured_percent"), name="acquirer_conversion_measured_0_100"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.key})"

    @property
    def conversion_source(self) -> str:
        """Where :attr:`conversion_percent` comes from: "override" (staff),
        "measured", or "default" (neither: :data:`CONVERSION_DEFAULT`)."""
        if self.conversion_percent_override is not None:
            return "override"
        if self.conversion_measured_percent is not None:
            return "measured"
        return "default"

    @property
    def conversion_percent(self) -> Decimal:
        """The conversion the API listing shows: staff's value if set, else
        the measured one, else :data:`CONVERSION_DEFAULT`."""
        if self.conversion_percent_override is not None:
            return self.conversion_percent_override
        if self.conversion_measured_percent is not None:
            return self.conversion_measured_percent
        return CONVERSION_DEFAULT

    @property
    def deadline_seconds(self) -> float:
        """The whole budget of one call (connect + read): the hard deadline
        the chain and the payout path enforce around the adapter."""
        return (self.connect_timeout_ms + self.read_timeout_ms) / 1000


class AcquirerGrant(models.Model):
    """Staff made this acquirer available to this account."""

    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="acquirer_grants", verbose_name="conta")
    acquirer = models.ForeignKey(Acquirer, on_delete=models.PROTECT, related_name="grants", verbose_name="adquirente")
    created_at = models.DateTimeField("liberada em", auto_now_add=True)

    objects = WatchedQuerySet["AcquirerGrant"].as_manager()

    class Meta:
        verbose_name = "liberação de adquirente"
        verbose_name_plural = "liberações de adquirente"
        constraints = [models.UniqueConstraint(fields=["account", "acquirer"], name="grant_unique")]

    def __str__(self) -> str:
        return f"{self.account_id} → {self.acquirer_id}"


class AcquirerSlot(models.Model):
    """One position (1 primary, 2 secondary, 3 tertiary) of an account's chain.

    ``cashin`` slots are the account's active acquirers (the API edits them);
    ``cashout`` slots are the staff-configured payout chain.
    """

    class Purpose(models.TextChoices):
        CASHIN = "cashin", "Cobranças (cash-in)"
        CASHOUT = "cashout", "Saques (cash-out)"

    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="acquirer_slots", verbose_name="conta")
    acquirer = models.ForeignKey(Acquirer, on_delete=models.PROTECT, related_name="slots", verbose_name="adquirente")
    purpose = models.CharField("finalidade", max_length=8, choices=Purpose.choices)
    priority = models.PositiveSmallIntegerField("prioridade", help_text="1 primária, 2 secundária, 3 terciária.")

    objects = WatchedQuerySet["AcquirerSlot"].as_manager()

    class Meta:
        verbose_name = "posição de adquirente"
        verbose_name_plural = "posições de adquirente"
        ordering = ["account", "purpose", "priority"]
        constraints = [
            models.CheckConstraint(condition=Q(priority__gte=1, priority__lte=3), name="slot_priority_1_to_3"),
            models.UniqueConstraint(fields=["account", "purpose", "priority"], name="slot_unique_priority"),
            models.UniqueConstraint(fields=["account", "purpose", "acquirer"], name="slot_unique_acquirer"),
        ]

    def __str__(self) -> str:
        return f"{self.account_id} {self.purpose} #{self.priority}: {self.acquirer_id}"


class InboundNotification(models.Model):
    """An acquirer's notification exactly as received, stored before anything
    is verified or processed, so nothing an acquirer tells us is ever lost."""

    class Status(models.TextChoices):
        RECEIVED = "received", "Recebida"
        PROCESSED = "processed", "Processada"
        REJECTED = "rejected", "Rejeitada"
        FAILED = "failed", "Falhou"

    acquirer = models.ForeignKey(
        Acquirer, on_delete=models.PROTECT, related_name="notifications", verbose_name="adquirente"
    )
    headers = models.JSONField("cabeçalhos", default=dict)
    body = models.TextField("corpo")
    remote_addr = models.GenericIPAddressField("endereço de origem", null=True, blank=True)
    status = models.CharField("status", max_length=16, choices=Status.choices, default=Status.RECEIVED)
    error = models.TextField("erro", blank=True)
    received_at = models.DateTimeField("recebida em", auto_now_add=True)
    processed_at = models.DateTimeField("processada em", null=True, blank=True)

    class Meta:
        verbose_name = "notificação recebida"
        verbose_name_plural = "notificações recebidas"
        ordering = ["-received_at"]

    def __str__(self) -> str:
        return f"{self.acquirer_id} {self.received_at:%Y-%m-%d %H:%M:%S} {self.status}"
