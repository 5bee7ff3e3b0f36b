"""Back office of due-date charges and their batches: the due-date charges
with what each owes today (``charges``, over ``payments.DueCharge``) and the
batches with their progress and items (``batches``). Importing registers
them."""

from due_charges.admin import batches, charges

__all__ = ["batches", "charges"]
