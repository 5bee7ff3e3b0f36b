"""Back office for withdrawals: the withdrawals (``withdrawals``, with their
columns, queues and history) and the payouts waiting on an acquirer's answer
(``undetermined_payouts``). Importing registers them."""

from withdrawals.admin import undetermined_payouts, withdrawals

__all__ = ["undetermined_payouts", "withdrawals"]
