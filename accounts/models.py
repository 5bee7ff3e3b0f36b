"""Accounts (merchants), their API credentials, balance and ledger."""

from __future__ import annotations

import uuid
from typing import ClassVar

from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import F, Q

# The kinds of movement and which may overdraw: a module of their own (this one was full).
from accounts.ledger_kinds import CREDIT_KINDS, DEBIT_KINDS, MAY_GO_NEGATIVE
from accounts.ledger_kinds import LedgerKind as LedgerKind
from accounts.maker_checker import StaffRequest, maker_checker_constraints
from core.money import brl
from core.snapshots import WatchedQuerySet
from core.text import validate_single_line
from core.tokens import new_webhook_secret


class PaymentMethod(models.TextChoices):
    PIX = "pix", "PIX"


def default_payment_methods() -> list[str]:
    return [PaymentMethod.PIX.value]


class Account(models.Model):
    """A merchant. Fees are ``fixed`` centavos plus ``bps`` basis points."""

    class Status(models.TextChoices):
        PENDING = "pending", "Pendente"
        APPROVED = "approved", "Aprovada"
        REJECTED = "rejected", "Rejeitada"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    ref = models.CharField(
        "referência",
        max_length=64,
        unique=True,
        null=True,
        blank=True,
        help_text="Referência do operador (pix_bootstrap).",
    )
    # It greets the merchant in the claim e-mail: one line, nothing a crafted POST could add.
    name = models.CharField("nome", max_length=200, validators=[validate_single_line])
    document = models.CharField("CPF/CNPJ", max_length=14, blank=True, db_index=True)
    # Contact for the back office only: never in the API.
    email = models.EmailField("e-mail de contato", blank=True, help_text="Uso interno da equipe; não aparece na API.")
    status = models.CharField("situação", max_length=16, choices=Status.choices, default=Status.PENDING, db_index=True)
    is_blocked = models.BooleanField("bloqueada", default=False, db_index=True)
    payment_methods = ArrayField(
        models.CharField(max_length=16, choices=PaymentMethod.choices),
        default=default_payment_methods,
        blank=True,
        verbose_name="métodos de pagamento",
    )
    can_select_pix_cash_in_acquirer = models.BooleanField("escolhe o adquirente do cash-in", default=False)

    cashin_fee_fixed = models.BigIntegerField("taxa fixa de cash-in", default=0)
    cashin_fee_bps = models.IntegerField("taxa percentual de cash-in (bps)", default=0)
    withdrawal_fee_fixed = models.BigIntegerField("taxa fixa de saque", default=0)
    withdrawal_fee_bps = models.IntegerField("taxa percentual de saque (bps)", default=0)

    withdrawal_minimum = models.BigIntegerField("saque mínimo", default=1000)
    withdrawal_per_request_limit = models.BigIntegerField("limite por saque", default=500_000)
    withdrawal_daily_limit = models.BigIntegerField("limite diário de saques", default=2_000_000)
    withdrawals_need_approval = models.BooleanField("saques exigem aprovação manual", default=False)
    # Regulation asks it of some businesses (fixed-odds betting prizes go to the
    # bettor's own account): payouts only to keys the account holder owns.
    payouts_same_ownership_only = models.BooleanField(
        "saques só para chaves da própria titularidade",
        default=False,
        db_default=False,
        help_text="O Pix só é enviado se o titular da chave tiver o CPF/CNPJ da conta.",
    )

    charge_expiry_seconds = models.PositiveIntegerField("validade da cobrança (segundos)", default=3600)
    # Signs postback_url deliveries. Shown once, when the account is created
    # or the secret rotated; after a rotation the previous one keeps signing
    # beside it for WEBHOOK_SECRET_ROTATION_HOURS, as for endpoints.
    postback_secret = models.CharField(max_length=64, default=new_webhook_secret, editable=False)
    previous_postback_secret = models.CharField(max_length=64, blank=True, editable=False)
    previous_postback_secret_expires_at = models.DateTimeField(null=True, blank=True, editable=False)

    created_at = models.DateTimeField("criada em", auto_now_add=True)
    updated_at = models.DateTimeField("atualizada em", auto_now=True)

    # Every request reads its account from a snapshot (core.snapshots): writes drop it.
    objects = WatchedQuerySet["Account"].as_manager()

    # DRF treats request.user as authenticated when this is true; the account
    # is the principal of every API request.
    is_authenticated: ClassVar[bool] = True

    class Meta:
        verbose_name = "conta"
        verbose_name_plural = "contas"
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                condition=Q(cashin_fee_fixed__gte=0)
                & Q(withdrawal_fee_fixed__gte=0)
                & Q(cashin_fee_bps__gte=0, cashin_fee_bps__lte=10_000)
                & Q(withdrawal_fee_bps__gte=0, withdrawal_fee_bps__lte=10_000),
                name="account_fees_valid",
            ),
            models.CheckConstraint(
                condition=Q(withdrawal_minimum__gte=0)
                & Q(withdrawal_per_request_limit__gte=0)
                & Q(withdrawal_daily_limit__gte=0),
                name="account_limits_non_negative",
            ),
            models.CheckConstraint(condition=Q(charge_expiry_seconds__gte=60), name="account_expiry_min_60s"),
        ]
        permissions = [
            ("approve_account", "Pode aprovar, rejeitar, bloquear e desbloquear contas"),
            ("manage_credentials", "Pode emitir, rotacionar e revogar credenciais de API"),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def is_approved(self) -> bool:
        return self.status == self.Status.APPROVED


class ApiCredential(models.Model):
    """A key pair. Only the SHA-256 of the secret is stored; it is shown once."""

    class Permission(models.TextChoices):
        CASHIN = "cashin", "Cash-in"
        CASHOUT = "cashout", "Cash-out"
        ALL = "all", "Todas"

    account = models.ForeignKey(Account, on_delete=models.PROTECT, related_name="credentials", verbose_name="conta")
    ref = models.CharField("referência", max_length=64, blank=True, help_text="Referência do operador (pix_bootstrap).")
    label = models.CharField("rótulo", max_length=100, blank=True)
    public_key = models.CharField("chave pública", max_length=64, unique=True)
    # Empty while the credential waits for its claim link (accounts.credential_links):
    # the secret is made when the merchant opens it, never before.
    secret_hash = models.CharField("hash da chave secreta", max_length=64, blank=True)
    secret_hint = models.CharField(
        "final da chave secreta", max_length=16, help_text="Últimos caracteres da chave secreta, para reconhecê-la."
    )
    permission = models.CharField("permissão", max_length=8, choices=Permission.choices, default=Permission.ALL)
    is_active = models.BooleanField("ativa", default=True)
    created_at = models.DateTimeField("criada em", auto_now_add=True)
    last_used_at = models.DateTimeField("último uso em", null=True, blank=True)
    revoked_at = models.DateTimeField("revogada em", null=True, blank=True)

    # Authentication reads credentials from a snapshot (core.snapshots): writes drop it.
    objects = WatchedQuerySet["ApiCredential"].as_manager()

    class Meta:
        verbose_name = "credencial de API"
        verbose_name_plural = "credenciais de API"
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["account", "ref"], condition=~Q(ref=""), name="credential_unique_ref_per_account"
            ),
            # No credential authenticates without a secret (one waiting for its claim has none).
            models.CheckConstraint(
                condition=Q(is_active=False) | ~Q(secret_hash=""), name="credential_active_has_secret"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.public_key} ({self.get_permission_display()})"

    @property
    def awaiting_claim(self) -> bool:
        """Issued by staff, its secret not made yet: it waits for the merchant to open its link."""
        return not self.secret_hash and self.revoked_at is None

    def allows(self, needed: str) -> bool:
        """``needed`` is ``cashin`` or ``cashout``; ``all`` covers both."""
        return self.permission in (needed, self.Permission.ALL)


class AccountBalance(models.Model):
    """The account's balance: the row every money movement locks.

    It is a cache of the ledger's sum, changed only by ``ledger_post`` in the
    same transaction as the entry it adds. It also keeps the day's withdrawn
    total the daily limit compares with (withdrawals/limits.py), moved by the
    same statement as the debit or the reversal that changes it: under the
    lock every withdrawal takes anyway, so checking the limit costs no
    statement and no scan of the day's withdrawals.
    """

    account = models.OneToOneField(
        Account, on_delete=models.PROTECT, primary_key=True, related_name="balance", verbose_name="conta"
    )
    available = models.BigIntegerField("disponível", default=0, help_text="Em centavos.")
    updated_at = models.DateTimeField("atualizado em", auto_now=True)
    withdrawn_day = models.DateField(
        "dia dos saques somados", null=True, blank=True, help_text="Dia (America/Sao_Paulo) de “sacado no dia”."
    )
    withdrawn_on_day = models.BigIntegerField(
        "sacado no dia",
        default=0,
        help_text="Em centavos: saques criados nesse dia, exceto falhos e cancelados; o limite diário compara com ele.",
    )
    # MED infractions (infractions app), moved under this row's lock with the
    # entries they come with. ``held``: every open cautionary block, what the
    # merchant reads as its blocked balance. ``hold_uncovered``: the part of
    # those blocks the balance could not cover when they came (the merchant
    # had moved the money on): never debited (a block never takes the balance
    # below zero by itself), it is kept back from withdrawals and refunds
    # instead, until the infraction closes (docs/api/infractions.md).
    held = models.BigIntegerField("bloqueado (MED)", default=0, help_text="Em centavos: bloqueios cautelares abertos.")
    hold_uncovered = models.BigIntegerField(
        "bloqueio a descoberto (MED)",
        default=0,
        help_text="Em centavos: parte dos bloqueios que o saldo não cobria; retida de saques e estornos.",
    )

    class Meta:
        verbose_name = "saldo"
        verbose_name_plural = "saldos"
        constraints = [
            models.CheckConstraint(
                condition=Q(hold_uncovered__gte=0) & Q(held__gte=F("hold_uncovered")), name="balance_holds_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"Saldo de {self.account}: {brl(self.available)}"


class LedgerEntry(models.Model):
    """One signed movement of an account's money and the balance after it.

    ``(kind, reference)`` names the cause (e.g. ``charge_paid`` of
    ``charge:<id>:<n>``) and is unique, so a repeated cause posts nothing.
    """

    Kind = LedgerKind
    MAY_GO_NEGATIVE = MAY_GO_NEGATIVE

    id = models.BigAutoField(primary_key=True)
    account = models.ForeignKey(Account, on_delete=models.PROTECT, related_name="ledger_entries", verbose_name="conta")
    kind = models.CharField("tipo", max_length=32, choices=LedgerKind.choices)
    amount = models.BigIntegerField("valor", help_text="Em centavos, com sinal: positivo é crédito, negativo é débito.")
    balance_after = models.BigIntegerField("saldo após", help_text="Em centavos.")
    reference = models.CharField("referência", max_length=100)
    created_at = models.DateTimeField("criado em", auto_now_add=True)

    class Meta:
        verbose_name = "lançamento"
        verbose_name_plural = "lançamentos"
        ordering = ["-id"]
        indexes = [
            models.Index(fields=["account", "-id"], name="ledger_account_recent"),
            # The statement's period filter (GET /api/statement): its keys from the index alone.
            models.Index(fields=["account", "created_at", "id"], name="ledger_account_created"),
        ]
        constraints = [
            models.UniqueConstraint(fields=["kind", "reference"], name="ledger_unique_cause"),
            models.CheckConstraint(
                condition=(Q(kind__in=sorted(CREDIT_KINDS)) & Q(amount__gt=0))
                | (Q(kind__in=sorted(DEBIT_KINDS)) & Q(amount__lt=0)),
                name="ledger_sign_matches_kind",
            ),
            models.CheckConstraint(
                condition=Q(balance_after__gte=0) | Q(amount__gt=0) | Q(kind__in=sorted(MAY_GO_NEGATIVE)),
                name="ledger_no_overdraft",
            ),
        ]

    def __str__(self) -> str:
        sign = "+" if self.amount > 0 else ""
        return f"{self.get_kind_display()} {sign}{brl(self.amount)} ({self.reference})"


class MoneyActionRequest(StaffRequest):
    """A back-office action that credits an account, asked for by one staff
    member and carried out only when another approves it (maker-checker).

    The target (a charge, a withdrawal) belongs to an app above this one, so
    it is named by type and id; the app registers how to carry the action out
    (``accounts.approvals``).
    """

    class Action(models.TextChoices):
        RESOLVE_CHARGEBACK = "resolve_chargeback", "Resolver contestação a favor da conta"
        MARK_WITHDRAWAL_RETURNED = "mark_withdrawal_returned", "Marcar saque como devolvido pelo destino"
        FAIL_UNDETERMINED_PAYOUT = "fail_undetermined_payout", "Falhar pagamento indeterminado (devolver o saldo)"
        # The actions that debit (reconciliation): a payout the acquirer made although it failed here...
        REDEBIT_SENT_PAYOUT = "redebit_sent_payout", "Debitar de novo saque falho que a adquirente pagou"
        # ...and a refund the acquirer made after a chargeback (MED) had already returned the money.
        REDEBIT_REFUND_AFTER_CHARGEBACK = (
            "redebit_refund_after_chargeback",
            "Debitar estorno que a adquirente fez após a contestação",
        )
        # A Pix received for a charge cancelled here: credit it, or return it
        # to the payer through the acquirer (no balance moves; amount: the Pix).
        CREDIT_LATE_PAYMENT = "credit_late_payment", "Creditar pagamento recebido após o cancelamento"
        RETURN_LATE_PAYMENT = "return_late_payment", "Devolver ao pagador pagamento recebido após o cancelamento"
        # Sends the merchant's money to the payer, whom an insider can be (README, "Money safety").
        REFUND_CHARGE = "refund_charge", "Estornar cobrança paga (devolver ao pagador)"

    class State(models.TextChoices):
        PENDING = "pending", "Aguardando aprovação"
        APPROVED = "approved", "Aprovado e executado"
        REJECTED = "rejected", "Rejeitado"
        FAILED = "failed", "Aprovado, mas não executado"

    id = models.BigAutoField(primary_key=True)
    action = models.CharField("ação", max_length=40, choices=Action.choices)
    target_type = models.CharField("tipo do registro", max_length=40)
    target_id = models.CharField("registro", max_length=64)
    account = models.ForeignKey(
        Account, on_delete=models.PROTECT, related_name="money_action_requests", verbose_name="conta"
    )
    amount = models.BigIntegerField(
        "valor",
        help_text="Em centavos: o que a ação credita, ou debita (redébitos pedidos pela conciliação, estorno).",
    )
    state = models.CharField("situação", max_length=16, choices=State.choices, default=State.PENDING, db_index=True)

    class Meta:
        verbose_name = "pedido de aprovação"
        verbose_name_plural = "pedidos de aprovação"
        ordering = ["-requested_at"]
        constraints = [
            models.CheckConstraint(condition=Q(amount__gt=0), name="money_action_amount_positive"),
            # Maker-checker in the database too: whoever asked never decides.
            *maker_checker_constraints("money_action"),
            # One open request per action and record: approving two would be refused anyway.
            models.UniqueConstraint(
                fields=["action", "target_type", "target_id"],
                condition=Q(state="pending"),
                name="money_action_one_pending_per_target",
            ),
        ]
        permissions = [
            ("approve_chargeback_resolution", "Pode aprovar a resolução de uma contestação a favor da conta"),
            ("approve_withdrawal_return", "Pode aprovar marcar um saque como devolvido pelo destino"),
            (
                "approve_undetermined_payout_failure",
                "Pode aprovar falhar um pagamento indeterminado (o débito é devolvido)",
            ),
            ("approve_sent_payout_redebit", "Pode aprovar debitar de novo um saque falho que a adquirente pagou"),
            (
                "approve_refund_after_chargeback_redebit",
                "Pode aprovar debitar um estorno que a adquirente fez após a contestação",
            ),
            (
                "approve_late_payment_resolution",
                "Pode aprovar creditar ou devolver um pagamento recebido após o cancelamento",
            ),
            ("approve_charge_refund", "Pode aprovar o estorno de uma cobrança paga (o valor volta ao pagador)"),
        ]

    def __str__(self) -> str:
        return f"#{self.pk} {self.get_action_display()}"


# Records of what staff asked for and delivered (claim links, change requests):
# a module of their own, registered with this app's models from here.
from accounts.staff_models import AccountChangeRequest as AccountChangeRequest  # noqa: E402
from accounts.staff_models import CredentialLink as CredentialLink  # noqa: E402
