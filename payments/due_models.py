"""A due-date charge's terms and what its payment came to (API Pix
``cobv``). The charge itself is a :class:`payments.models.Charge` of kind
``due``: paid, refunded, charged back, MED and reconciliation treat it as
any charge. Imported by ``payments.models``."""

from __future__ import annotations

from django.db import models

from core.money import brl


class DueCharge(models.Model):
    """The ``calendario`` and ``valor`` of a cobv, and its payment's parts.

    ``Charge.amount`` is ``original`` until the charge is paid, then what the
    payer paid (with fine and interest, less rebate and discount): the ledger
    credits that, with the fee on it (``payments.services.charge_transition``).
    """

    charge = models.OneToOneField(
        "payments.Charge", on_delete=models.CASCADE, primary_key=True, related_name="due", verbose_name="cobrança"
    )
    #: ``DueTerms.to_api()``: {"calendario": {...}, "valor": {...}}, API Pix's own shapes.
    terms = models.JSONField("condições (API Pix)")
    original = models.BigIntegerField("valor original", help_text="Centavos: o valor nominal, sem encargos.")
    due_date = models.DateField("vencimento")
    last_payable_date = models.DateField(
        "pagável até", help_text="Vencimento (ajustado ao dia útil) mais os dias de validade após o vencimento."
    )
    description = models.CharField("mensagem ao pagador", max_length=140, blank=True)
    debtor_email = models.EmailField("e-mail do devedor", blank=True)
    paid_amount = models.BigIntegerField("valor pago", null=True, blank=True)
    # Centavos by API Pix name (original, multa, juros, abatimento, desconto), as the acquirer reported them.
    paid_components = models.JSONField("componentes do valor pago", default=dict, blank=True)
    # Our amount due on the day it was paid: when it differs from what the
    # acquirer reported, the acquirer's word is credited and staff see both.
    expected_amount = models.BigIntegerField("valor devido no dia do pagamento", null=True, blank=True)

    class Meta:
        verbose_name = "cobrança com vencimento"
        verbose_name_plural = "cobranças com vencimento"
        indexes = [
            models.Index(fields=["due_date"], name="due_charge_due_date"),
            # GET /api/due-charges?due_date_from=…&overdue=…: the range's
            # charges from the index alone, joined to the account's by key.
            models.Index(fields=["due_date", "charge"], name="due_charge_due_date_charge"),
        ]
        constraints = [
            models.CheckConstraint(condition=models.Q(original__gt=0), name="due_charge_original_positive"),
            models.CheckConstraint(
                condition=models.Q(last_payable_date__gte=models.F("due_date")), name="due_charge_payable_after_due"
            ),
        ]

    def __str__(self) -> str:
        return f"Vencimento {self.due_date:%d/%m/%Y}, {brl(self.original)}"
