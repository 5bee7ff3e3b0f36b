"""Back office for charges (``charges``, with the refund action:
``refunds``), the asks to cancel them at the acquirer (``cancellations``)
and the Pix received after a cancel (``late_payments``). Importing
registers them. Reconciliation's report and items are in
``reconciliation.admin``."""

from payments.admin import cancellations, charges, late_payments

__all__ = ["cancellations", "charges", "late_payments"]
