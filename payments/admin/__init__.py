"""Back office for charges (``charges``, with the refund action:
``refunds``), the asks to cancel them at the acquirer (``cancellations``)
and the Pix received after a cancel (``late_payments``). Importing
registers them."""

# Reconciliation's report and mismatches: registered with the charges until
# they move to an app of their own (issue 30).
from payments import admin_reconciliation
from payments.admin import cancellations, charges, late_payments

__all__ = ["admin_reconciliation", "cancellations", "charges", "late_payments"]
