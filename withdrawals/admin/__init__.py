"""Back office for withdrawals: the withdrawals (``withdrawals``, with their
columns, queues and history) and the payouts waiting on an acquirer's answer
(``undetermined_payouts``), and payout batches (``batches``). Importing registers them."""

from withdrawals.admin import batches, undetermined_payouts, withdrawals

__all__ = ["batches", "undetermined_payouts", "withdrawals"]
