"""What staff ask for about MED infractions, decided by a second staff
member (:mod:`infractions.approvals`): registering an infraction an acquirer
without an infractions API reported by other means, accepting a return
without defence, closing one as rejected. Nothing moves before the approval.

Registered with the app's models by ``infractions.models``, which imports
this module; the models there are named lazily ("infractions.Infraction")."""

from __future__ import annotations

from django.db import models
from django.db.models import F, Q

from accounts.maker_checker import StaffRequest, maker_checker_constraints
from core.money import brl


class InfractionRequest(StaffRequest):
    """One maker-checker request about an infraction.

    ``register``: the record staff typed (acquirer, e2e id, external id,
    amounts, the acquirer's reason, deadline), applied on approval as the
    acquirer's record would be (``infraction_apply``, source ``staff``);
    ``infraction`` is set then. ``accept_return``: no defence will be sent
    (``defense_waived_at``); at an acquirer without an infractions API it also
    closes the infraction as accepted with ``returned_amount``.
    ``close_rejected`` (acquirers without that API only): closed as rejected,
    the block released."""

    class Kind(models.TextChoices):
        REGISTER = "register", "Registrar infração informada pela adquirente"
        ACCEPT_RETURN = "accept_return", "Aceitar a devolução sem defesa"
        CLOSE_REJECTED = "close_rejected", "Encerrar como rejeitada (liberar o bloqueio)"

    class State(models.TextChoices):
        PENDING = "pending", "Aguardando aprovação"
        APPROVED = "approved", "Aprovado e aplicado"
        REJECTED = "rejected", "Rejeitado"
        FAILED = "failed", "Aprovado, mas não aplicado"

    id = models.BigAutoField(primary_key=True)
    kind = models.CharField("pedido", max_length=16, choices=Kind.choices)
    state = models.CharField("situação", max_length=16, choices=State.choices, default=State.PENDING, db_index=True)
    acquirer = models.ForeignKey(
        "acquirers.Acquirer", on_delete=models.PROTECT, related_name="+", verbose_name="adquirente"
    )
    # Null for a registration until it is approved (then: the infraction it opened).
    infraction = models.ForeignKey(
        "infractions.Infraction",
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="requests",
        verbose_name="infração",
    )
    # A registration's record, as the acquirer reported it by other means.
    external_id = models.CharField("id na adquirente", max_length=100, blank=True)
    e2e_id = models.CharField("e2e id do Pix contestado", max_length=64, blank=True)
    amount = models.BigIntegerField("valor contestado", null=True, blank=True)
    blocked_amount = models.BigIntegerField("valor bloqueado na adquirente", null=True, blank=True)
    infraction_reason = models.CharField("motivo informado pela adquirente", max_length=500, blank=True)
    defense_deadline = models.DateTimeField("prazo de defesa", null=True, blank=True)
    # An acceptance at an acquirer without an infractions API: what went back to the payer.
    returned_amount = models.BigIntegerField("devolvido ao pagador", null=True, blank=True)

    class Meta:
        verbose_name = "pedido sobre infração MED"
        verbose_name_plural = "pedidos sobre infrações MED"
        ordering = ["-requested_at"]
        constraints = [
            # Maker-checker in the database too: whoever asked never decides.
            *maker_checker_constraints("infraction_request"),
            # A registration carries its record; the other kinds name their infraction.
            models.CheckConstraint(
                condition=(
                    Q(kind="register")
                    & ~Q(external_id="")
                    & ~Q(e2e_id="")
                    & Q(amount__gt=0, blocked_amount__gte=0, blocked_amount__lte=F("amount"))
                )
                | (~Q(kind="register") & Q(infraction__isnull=False)),
                name="infraction_request_complete",
            ),
            models.CheckConstraint(
                condition=Q(returned_amount__isnull=True) | Q(returned_amount__gte=0),
                name="infraction_request_returned_valid",
            ),
            # One open request per infraction: a second would decide on a stale state.
            models.UniqueConstraint(
                fields=["infraction"],
                condition=Q(state="pending") & ~Q(kind="register"),
                name="infraction_request_one_pending",
            ),
            models.UniqueConstraint(
                fields=["acquirer", "external_id"],
                condition=Q(state="pending", kind="register"),
                name="infraction_request_one_pending_register",
            ),
        ]

    def __str__(self) -> str:
        return f"#{self.pk} {self.get_kind_display()}"

    def describe(self) -> str:
        """What is asked, as the queue and the audit log read it."""
        if self.kind == self.Kind.REGISTER:
            return (
                f"{self.get_kind_display()}: {self.external_id} na {self.acquirer}, "
                f"{brl(self.amount or 0)} contestado, {brl(self.blocked_amount or 0)} bloqueado"
            )
        if self.returned_amount is not None:
            return f"{self.get_kind_display()}: {brl(self.returned_amount)} devolvido ao pagador"
        return str(self.get_kind_display())
