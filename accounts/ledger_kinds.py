"""The kinds of ledger entry, which credit and which debit, and which may
take the balance below zero (``LedgerEntry``'s constraints are built from
these sets)."""

from __future__ import annotations

from django.db import models


class LedgerKind(models.TextChoices):
    CHARGE_PAID = "charge_paid", "Cobrança paga"
    CHARGE_REFUND = "charge_refund", "Estorno de cobrança"
    CHARGE_CHARGEBACK = "charge_chargeback", "Contestação (MED)"
    CHARGEBACK_REVERSAL = "chargeback_reversal", "Contestação revertida"
    WITHDRAWAL = "withdrawal", "Saque"
    WITHDRAWAL_REVERSAL = "withdrawal_reversal", "Saque devolvido ao saldo"
    WITHDRAWAL_RETURN = "withdrawal_return", "Saque retornado pelo destino"
    # A refund the acquirer is still processing: its amount is reserved at
    # once, released if the refund fails, replaced by the refund when done.
    REFUND_HOLD = "refund_hold", "Reserva de estorno em processamento"
    REFUND_RELEASE = "refund_release", "Reserva de estorno liberada"
    # A Pix received for a charge cancelled (or failed) here, credited once a
    # second staff member approved it: the charge keeps its status (decisions
    # §4 refuses canceled → paid), the money is the account's all the same.
    LATE_PAYMENT_CREDIT = "late_payment_credit", "Pagamento recebido após o cancelamento"
    # MED (infractions app): the part of a cautionary block the balance
    # covered, kept back until the infraction closes; its release; and the
    # money the MED returned to the payer (the merchant's share of it).
    MED_HOLD = "med_hold", "Bloqueio cautelar (MED)"
    MED_HOLD_RELEASE = "med_hold_release", "Bloqueio cautelar liberado (MED)"
    MED_RETURN = "med_return", "Devolução MED ao pagador"


CREDIT_KINDS = frozenset(
    {
        LedgerKind.CHARGE_PAID,
        LedgerKind.CHARGEBACK_REVERSAL,
        LedgerKind.WITHDRAWAL_REVERSAL,
        LedgerKind.WITHDRAWAL_RETURN,
        LedgerKind.REFUND_RELEASE,
        LedgerKind.LATE_PAYMENT_CREDIT,
        LedgerKind.MED_HOLD_RELEASE,
    }
)
DEBIT_KINDS = frozenset(
    {
        LedgerKind.CHARGE_REFUND,
        LedgerKind.CHARGE_CHARGEBACK,
        LedgerKind.WITHDRAWAL,
        LedgerKind.REFUND_HOLD,
        LedgerKind.MED_HOLD,
        LedgerKind.MED_RETURN,
    }
)
# Decisions §4: refunds and chargebacks may take the balance below zero;
# nothing else may. A refund's reservation is the refund, earlier; a MED
# return is a chargeback the acquirer already made. A MED hold never goes
# below zero: it covers only what the balance has.
MAY_GO_NEGATIVE = frozenset(
    {LedgerKind.CHARGE_REFUND, LedgerKind.CHARGE_CHARGEBACK, LedgerKind.REFUND_HOLD, LedgerKind.MED_RETURN}
)
