"""Back office of Pix Automático: the recurrences with their cycles and the
staff cancel (``recurrences``), the cycles with the failed and missed ones
to act on and the send-now action (``cycles``), and the outcomes per payer
bank and journey (``outcomes``, a page of the recurrences' admin).
Importing registers them."""

from recurrences.admin import cycles, recurrences

__all__ = ["cycles", "recurrences"]
