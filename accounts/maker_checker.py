"""What every request a second staff member decides keeps (maker-checker):
the reason, who asked and when, who decided, when, their note and what
came of it. ``MoneyActionRequest`` (a money action) and
``AccountChangeRequest`` (what decides where an account's money may go)
add what they ask for, their states and their constraints, which include
that whoever asked never decides."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import F, Q


class StaffRequest(models.Model):
    """Abstract: the maker's and the checker's side of one request."""

    reason = models.TextField("motivo")
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+", verbose_name="pedido por"
    )
    requested_at = models.DateTimeField("pedido em", auto_now_add=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.PROTECT,
        related_name="+",
        null=True,
        blank=True,
        verbose_name="decidido por",
    )
    decided_at = models.DateTimeField("decidido em", null=True, blank=True)
    decision_note = models.TextField("observação da decisão", blank=True)
    outcome = models.CharField("resultado", max_length=500, blank=True)

    class Meta:
        abstract = True


def maker_checker_constraints(prefix: str) -> list[models.CheckConstraint]:
    """The constraints every request keeps in the database too, named
    ``<prefix>_decided_by_another`` and ``<prefix>_decision_recorded``:
    whoever asked never decides, and a request is pending exactly while no
    one has decided it (its ``state`` field: ``pending`` or another)."""
    return [
        models.CheckConstraint(
            condition=Q(decided_by__isnull=True) | ~Q(decided_by=F("requested_by")),
            name=f"{prefix}_decided_by_another",
        ),
        models.CheckConstraint(
            condition=Q(state="pending", decided_by__isnull=True, decided_at__isnull=True)
            | (~Q(state="pending") & Q(decided_by__isnull=False, decided_at__isnull=False)),
            name=f"{prefix}_decision_recorded",
        ),
    ]
