"""What staff ask for and deliver about an account, kept as evidence and
decided by the rules of ``accounts.credential_links`` and
``accounts.account_changes``: the links that deliver a credential's secret to
the account's contact, and the changes of what decides where its money may go,
which another staff member approves (README, "Money safety").

Registered with the app's models by ``accounts.models``, which imports this
module; the models here name the ones there lazily ("accounts.Account")."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from accounts.maker_checker import StaffRequest, maker_checker_constraints
from core.money import brl


class CredentialLink(models.Model):
    """One e-mailed link that delivers a credential's secret to the account's
    contact e-mail, never to staff. Only the SHA-256 of its token is stored;
    it works once, until ``expires_at``, and only while it is the
    credential's latest (a new link or a revocation replaces it)."""

    id = models.BigAutoField(primary_key=True)
    credential = models.ForeignKey(
        "accounts.ApiCredential", on_delete=models.PROTECT, related_name="claim_links", verbose_name="credencial"
    )
    token_hash = models.CharField("hash do token", max_length=64, unique=True)
    sent_to = models.EmailField("enviado para")
    sent_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+", verbose_name="enviado por"
    )
    created_at = models.DateTimeField("enviado em", auto_now_add=True)
    expires_at = models.DateTimeField("válido até")
    used_at = models.DateTimeField("usado em", null=True, blank=True)
    replaced_at = models.DateTimeField(
        "substituído em",
        null=True,
        blank=True,
        help_text="Por um link mais novo, pela revogação da credencial, pela troca do e-mail de contato da conta "
        "ou pela falha no envio do e-mail.",
    )
    send_failed_at = models.DateTimeField(
        "falha no envio em",
        null=True,
        blank=True,
        help_text="O e-mail não saiu: o link nunca valeu (substituído no mesmo instante).",
    )

    class Meta:
        verbose_name = "link de resgate de credencial"
        verbose_name_plural = "links de resgate de credenciais"
        ordering = ["-created_at"]
        constraints = [
            # One link in force per credential: sending another replaces it in the same transaction.
            models.UniqueConstraint(
                fields=["credential"],
                condition=Q(used_at__isnull=True, replaced_at__isnull=True),
                name="credential_link_one_open",
            ),
        ]
        indexes = [
            # Segregation of duties reads who sent links recently (accounts.segregation).
            models.Index(fields=["sent_by", "created_at"], name="credential_link_sent_by"),
        ]

    def __str__(self) -> str:
        return f"Link de resgate #{self.pk}"


class AccountChangeRequest(StaffRequest):
    """A change of a field that decides where an account's money may go (its
    contact e-mail, manual approval of withdrawals, withdrawal limits, payouts
    only to the holder's own keys and the holder's document they are
    compared with), asked
    for by one staff member and applied only when another approves it."""

    class Field(models.TextChoices):
        EMAIL = "email", "E-mail de contato"
        WITHDRAWALS_NEED_APPROVAL = "withdrawals_need_approval", "Saques exigem aprovação manual"
        WITHDRAWAL_MINIMUM = "withdrawal_minimum", "Saque mínimo"
        WITHDRAWAL_PER_REQUEST_LIMIT = "withdrawal_per_request_limit", "Limite por saque"
        WITHDRAWAL_DAILY_LIMIT = "withdrawal_daily_limit", "Limite diário de saques"
        PAYOUTS_SAME_OWNERSHIP_ONLY = "payouts_same_ownership_only", "Saques só para chaves da própria titularidade"
        # Same ownership only compares payees with it (withdrawals.payee_rules).
        DOCUMENT = "document", "CPF/CNPJ"

    class State(models.TextChoices):
        PENDING = "pending", "Aguardando aprovação"
        APPROVED = "approved", "Aprovado e aplicado"
        REJECTED = "rejected", "Rejeitado"
        FAILED = "failed", "Aprovado, mas não aplicado"

    id = models.BigAutoField(primary_key=True)
    account = models.ForeignKey(
        "accounts.Account", on_delete=models.PROTECT, related_name="change_requests", verbose_name="conta"
    )
    field = models.CharField("campo", max_length=40, choices=Field.choices)
    old_value = models.JSONField("valor atual no pedido")
    new_value = models.JSONField("valor pedido")
    state = models.CharField("situação", max_length=16, choices=State.choices, default=State.PENDING, db_index=True)

    class Meta:
        verbose_name = "pedido de alteração de conta"
        verbose_name_plural = "pedidos de alteração de conta"
        ordering = ["-requested_at"]
        constraints = [
            # Maker-checker in the database too: whoever asked never decides.
            *maker_checker_constraints("account_change"),
            # One open request per account and field: a second would decide against a stale value.
            models.UniqueConstraint(
                fields=["account", "field"], condition=Q(state="pending"), name="account_change_one_pending_per_field"
            ),
        ]
        permissions = [
            (
                "approve_account_change",
                "Pode aprovar alterações do e-mail de contato, da aprovação manual e dos limites de saque",
            ),
        ]

    def __str__(self) -> str:
        return f"#{self.pk} {self.get_field_display()}"

    def shown(self, value: object) -> str:
        """A value of this request's field as staff read it."""
        return shown_value(self.field, value)


def shown_value(field: str, value: object) -> str:
    """``withdrawal_daily_limit`` 200000 → ``R$ 2.000,00``; booleans Sim/Não; an empty e-mail says so."""
    if isinstance(value, bool):
        return "Sim" if value else "Não"
    if isinstance(value, int):
        return brl(value)
    return str(value) if value else "(vazio)"
